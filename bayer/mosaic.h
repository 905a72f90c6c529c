// SPDX-License-Identifier: LGPL-2.1-or-later
// Colour video -> Bayer RAW10 mosaic ("camera simulator", the inverse of cuda/debayer.h): the
// parameters and the CPU implementation used by the bgratorg10 element. Plain C++: no CUDA, no
// GStreamer.
//
// The math, per output sample (r, c), 0 <= r < height, 0 <= c < width:
//
// 1. Colour. The CFA colour of (r, c) is cfa_color(phase, r, c) of cfa.h (2x2 tile top-left,
//    top-right / bottom-left, bottom-right, repeated from (0, 0)), as in cuda/debayer.h. Its
//    8-bit channel of the input pixel at in + r * in_pitch + bpp * c (bpp = 4 or 3, see
//    MosaicInput) is read and treated as linear: x = channel / 255.
// 2. White balance, the camera's response: s = x / gain, gain = wb_red, wb_green or wb_blue of
//    that colour (a gain <= 0 or not finite is treated as 1), clamped to [0, 1] (NaN -> 0).
//    A debayer applying the same gains (cuda/debayer.h, DebayerParams::wb_*) restores the
//    scene.
// 3. Black level b (10-bit units, clamped to <= 1022): v = b + lroundf(s * (1023 - b)).
// 4. Word: v (BitAlignment::kLsb, V4L2 RG10: bits 9..0) or v << 6 (kMsb, Jetson VI: bits
//    15..6, low 6 bits zero), stored as a 16-bit little-endian word at
//    out + r * out_pitch + 2 * c. Padding is neither read nor written.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cfa.h"

namespace cipc_bayer {

// Byte order of the input pixels: 4 bytes per pixel (the 4th, alpha or padding, is ignored) or
// 3 bytes per pixel.
enum class MosaicInput { kBgra, kRgba, kBgr, kRgb };

struct MosaicParams {
  CfaOrder phase = CfaOrder::kRGGB;
  BitAlignment alignment = BitAlignment::kLsb;
  uint16_t black_level = 0;  // 10-bit units, < 1023 (larger values are treated as 1022)
  float wb_red = 1.0f;       // the camera's white-balance response: samples are divided by it
  float wb_green = 1.0f;
  float wb_blue = 1.0f;
};

// Bytes per input pixel of `f` (4 or 3).
int mosaic_input_bytes_per_pixel(MosaicInput f);

// in: `in_format` pixels, rows `in_pitch` bytes apart (>= bpp * width); out: 16-bit
// little-endian words, rows `out_pitch` bytes apart (>= 2 * width). Does nothing when a pointer
// is null, `in_format` is not a MosaicInput value, or width or height is < 1.
void mosaic_cpu(const uint8_t* in, size_t in_pitch, int in_format, uint8_t* out, size_t out_pitch,
                int width, int height, const MosaicParams& p);

}  // namespace cipc_bayer
