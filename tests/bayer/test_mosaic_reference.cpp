// SPDX-License-Identifier: LGPL-2.1-or-later
// Tests of the mosaic (bayer/mosaic_reference.cpp, the bgratorg10 camera simulator): sample
// values checked by hand. No CUDA needed; the round trip through the debayer's CPU reference is
// test_mosaic_debayer.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "bayer_test_util.h"
#include "mosaic.h"

namespace cb = cipc_bayer;

namespace {

using cipc_test::flat_bgra;

// Mosaics a single 2x2 BGRA tile of one colour and returns its four words (row-major).
std::vector<uint16_t> tile(uint8_t r, uint8_t g, uint8_t b, const cb::MosaicParams& p,
                           int in_format = static_cast<int>(cb::MosaicInput::kBgra)) {
  std::vector<uint8_t> in = flat_bgra(2, 2, r, g, b);
  if (in_format == static_cast<int>(cb::MosaicInput::kRgba))
    for (size_t i = 0; i < in.size(); i += 4) std::swap(in[i], in[i + 2]);
  std::vector<uint8_t> out(8, 0xEE);
  cb::mosaic_cpu(in.data(), 8, in_format, out.data(), 4, 2, 2, p);
  std::vector<uint16_t> words;
  for (size_t i = 0; i < out.size(); i += 2)
    words.push_back(static_cast<uint16_t>(out[i] | (out[i + 1] << 8)));
  return words;
}

TEST(MosaicReference, HandCheckedSamplesLsbAndMsb) {
  cb::MosaicParams p;  // RGGB, lsb, black 0, gains 1
  // R=255 -> 1023; G=128 -> lround(128/255 * 1023) = lround(513.506) = 514; B=0 -> 0.
  EXPECT_EQ(tile(255, 128, 0, p), (std::vector<uint16_t>{1023, 514, 514, 0}));
  p.alignment = cb::BitAlignment::kMsb;  // bits 15..6, low 6 bits zero
  EXPECT_EQ(tile(255, 128, 0, p), (std::vector<uint16_t>{0xFFC0, 514 << 6, 514 << 6, 0}));
  // Black level 64: v = 64 + lround(x * 959). 128 -> 64 + lround(481.373) = 545; 0 -> 64.
  p.black_level = 64;
  EXPECT_EQ(tile(255, 128, 0, p), (std::vector<uint16_t>{0xFFC0, 545 << 6, 545 << 6, 64 << 6}));
  p.alignment = cb::BitAlignment::kLsb;
  EXPECT_EQ(tile(255, 128, 0, p), (std::vector<uint16_t>{1023, 545, 545, 64}));
}

TEST(MosaicReference, PhasesPickTheirColours) {
  cb::MosaicParams p;
  // R=255 -> 1023, G=0 -> 0, B=51 -> lround(0.2 * 1023) = 205.
  p.phase = cb::CfaOrder::kRGGB;
  EXPECT_EQ(tile(255, 0, 51, p), (std::vector<uint16_t>{1023, 0, 0, 205}));
  p.phase = cb::CfaOrder::kBGGR;
  EXPECT_EQ(tile(255, 0, 51, p), (std::vector<uint16_t>{205, 0, 0, 1023}));
  p.phase = cb::CfaOrder::kGRBG;
  EXPECT_EQ(tile(255, 0, 51, p), (std::vector<uint16_t>{0, 1023, 205, 0}));
  p.phase = cb::CfaOrder::kGBRG;
  EXPECT_EQ(tile(255, 0, 51, p), (std::vector<uint16_t>{0, 205, 1023, 0}));
  // RGBA input reads the same colours from the other byte order.
  p.phase = cb::CfaOrder::kRGGB;
  EXPECT_EQ(tile(255, 0, 51, p, static_cast<int>(cb::MosaicInput::kRgba)),
            (std::vector<uint16_t>{1023, 0, 0, 205}));
}

TEST(MosaicReference, ThreeBytePixels) {
  // 2x1 RGB and BGR rows, RGGB: (0,0) red, (0,1) green.
  const uint8_t rgb[] = {255, 0, 0, 0, 51, 0};
  const uint8_t bgr[] = {0, 0, 255, 0, 51, 0};
  cb::MosaicParams p;
  uint8_t out[4] = {};
  cb::mosaic_cpu(rgb, 6, static_cast<int>(cb::MosaicInput::kRgb), out, 4, 2, 1, p);
  EXPECT_EQ(out[0] | (out[1] << 8), 1023);
  EXPECT_EQ(out[2] | (out[3] << 8), 205);
  uint8_t out2[4] = {};
  cb::mosaic_cpu(bgr, 6, static_cast<int>(cb::MosaicInput::kBgr), out2, 4, 2, 1, p);
  EXPECT_EQ(out2[0] | (out2[1] << 8), 1023);
  EXPECT_EQ(out2[2] | (out2[3] << 8), 205);
}

TEST(MosaicReference, WhiteBalanceGainsDivide) {
  cb::MosaicParams p;
  // G=100: lround(100/255 * 1023) = lround(401.18) = 401; divided by 2: lround(200.59) = 201.
  EXPECT_EQ(tile(0, 100, 0, p)[1], 401);
  p.wb_green = 2.0f;
  EXPECT_EQ(tile(0, 100, 0, p)[1], 201);
  EXPECT_EQ(tile(0, 100, 0, p)[2], 201);
  p.wb_red = 4.0f;  // R=204: lround(0.8 / 4 * 1023) = lround(204.6) = 205
  EXPECT_EQ(tile(204, 100, 0, p)[0], 205);
  p.wb_blue = 0.5f;  // B=51: lround(0.4 * 1023) = 409
  EXPECT_EQ(tile(204, 100, 51, p)[3], 409);
}

TEST(MosaicReference, ClampsAt1023) {
  cb::MosaicParams p;
  p.wb_red = 0.5f;  // 255 / 0.5 would be 2046: clamped to full scale
  p.wb_blue = 0.01f;
  EXPECT_EQ(tile(200, 0, 10, p), (std::vector<uint16_t>{1023, 0, 0, 1023}));
  p.alignment = cb::BitAlignment::kMsb;
  EXPECT_EQ(tile(200, 0, 10, p)[0], 0xFFC0);
  // Black level at its maximum, and beyond (treated as 1022).
  p = cb::MosaicParams{};
  p.black_level = 1022;
  EXPECT_EQ(tile(255, 0, 0, p), (std::vector<uint16_t>{1023, 1022, 1022, 1022}));
  p.black_level = 5000;
  EXPECT_EQ(tile(255, 0, 0, p), (std::vector<uint16_t>{1023, 1022, 1022, 1022}));
}

TEST(MosaicReference, LeavesPaddingAndRejectsBadArguments) {
  const std::vector<uint8_t> in = flat_bgra(3, 2, 255, 255, 255);
  std::vector<uint8_t> out(2 * 8, 0xA5);  // pitch 8 bytes for 3 words: 2 bytes padding per row
  cb::MosaicParams p;
  cb::mosaic_cpu(in.data(), 12, static_cast<int>(cb::MosaicInput::kBgra), out.data(), 8, 3, 2, p);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(out[r * 8 + 6], 0xA5);
    EXPECT_EQ(out[r * 8 + 7], 0xA5);
  }
  std::vector<uint8_t> untouched(16, 0xA5);
  cb::mosaic_cpu(in.data(), 12, 99, untouched.data(), 8, 3, 2, p);
  cb::mosaic_cpu(nullptr, 12, 0, untouched.data(), 8, 3, 2, p);
  cb::mosaic_cpu(in.data(), 12, 0, untouched.data(), 8, 0, 2, p);
  EXPECT_EQ(untouched, std::vector<uint8_t>(16, 0xA5));
}

}  // namespace
