// SPDX-License-Identifier: LGPL-2.1-or-later
// CPU mosaic (the math is documented in mosaic.h): the bgratorg10 element's implementation and
// the oracle of its tests.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "mosaic.h"

namespace cipc_bayer {

namespace {

using Color = CfaColor;
constexpr Color kRed = kCfaRed, kGreen = kCfaGreen, kBlue = kCfaBlue;

float sane_gain(float g) {
  return std::isfinite(g) && g > 0.0f ? g : 1.0f;
}

}  // namespace

int mosaic_input_bytes_per_pixel(MosaicInput f) {
  return f == MosaicInput::kBgr || f == MosaicInput::kRgb ? 3 : 4;
}

void mosaic_cpu(const uint8_t* in, size_t in_pitch, int in_format, uint8_t* out, size_t out_pitch,
                int width, int height, const MosaicParams& p) {
  if (!in || !out || width < 1 || height < 1) return;
  if (in_format < static_cast<int>(MosaicInput::kBgra) ||
      in_format > static_cast<int>(MosaicInput::kRgb))
    return;
  const auto fmt = static_cast<MosaicInput>(in_format);
  const int bpp = mosaic_input_bytes_per_pixel(fmt);
  const bool rgb_order = fmt == MosaicInput::kRgba || fmt == MosaicInput::kRgb;
  // Byte offset of each colour inside a pixel.
  int offset[3];
  offset[kRed] = rgb_order ? 0 : 2;
  offset[kGreen] = 1;
  offset[kBlue] = rgb_order ? 2 : 0;

  // The output word depends only on the CFA colour and the 8-bit input channel, so the per-
  // sample arithmetic (step 2-4 of mosaic.h) is done once per frame into three 256-entry
  // tables: a 4K frame is then one lookup per sample, fast enough for a 60 fps simulator.
  const float inv_gain[3] = {1.0f / sane_gain(p.wb_red), 1.0f / sane_gain(p.wb_green),
                             1.0f / sane_gain(p.wb_blue)};
  const int black = std::min<int>(p.black_level, 1022);
  const float range = static_cast<float>(1023 - black);
  uint16_t word_of[3][256];
  for (int color = 0; color < 3; ++color) {
    for (int code = 0; code < 256; ++code) {
      const float x = code / 255.0f;
      float s = x * inv_gain[color];
      s = s > 0.0f ? std::min(s, 1.0f) : 0.0f;  // NaN -> 0
      const int v = black + static_cast<int>(lroundf(s * range));
      word_of[color][code] = p.alignment == BitAlignment::kLsb ? static_cast<uint16_t>(v)
                                                               : static_cast<uint16_t>(v << 6);
    }
  }

  for (int r = 0; r < height; ++r) {
    const uint8_t* src = in + static_cast<size_t>(r) * in_pitch;
    uint8_t* dst = out + static_cast<size_t>(r) * out_pitch;
    // Along a row the colours alternate between two: even and odd columns.
    const Color even = cfa_color(p.phase, r, 0), odd = cfa_color(p.phase, r, 1);
    const uint16_t* even_words = word_of[even];
    const uint16_t* odd_words = word_of[odd];
    const int even_offset = offset[even], odd_offset = offset[odd];
    for (int c = 0; c < width; ++c) {
      const bool is_even = (c & 1) == 0;
      const uint16_t word =
          (is_even ? even_words : odd_words)[src[static_cast<size_t>(c) * bpp +
                                                 (is_even ? even_offset : odd_offset)]];
      dst[2 * c] = static_cast<uint8_t>(word & 0xFF);
      dst[2 * c + 1] = static_cast<uint8_t>(word >> 8);
    }
  }
}

}  // namespace cipc_bayer
