// SPDX-License-Identifier: LGPL-2.1-or-later
// Tests of the mosaic (cuda/mosaic_reference.cpp, the bgratorg10 camera simulator): sample
// values checked by hand, and the round trip through the debayer's CPU reference. No GPU needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "debayer.h"
#include "mosaic.h"

namespace cc = cipc_cuda;

namespace {

constexpr cc::BayerPhase kPhases[] = {cc::BayerPhase::kRGGB, cc::BayerPhase::kBGGR,
                                      cc::BayerPhase::kGRBG, cc::BayerPhase::kGBRG};
constexpr cc::BitAlignment kAlignments[] = {cc::BitAlignment::kLsb, cc::BitAlignment::kMsb};
constexpr cc::Demosaic kMethods[] = {cc::Demosaic::kBilinear, cc::Demosaic::kMhc};

// A flat BGRA field of the colour (r, g, b), rows `4 * width` bytes apart.
std::vector<uint8_t> flat_bgra(int width, int height, uint8_t r, uint8_t g, uint8_t b) {
  std::vector<uint8_t> in(static_cast<size_t>(width * height) * 4);
  for (size_t i = 0; i < in.size(); i += 4) {
    in[i] = b;
    in[i + 1] = g;
    in[i + 2] = r;
    in[i + 3] = 255;
  }
  return in;
}

// Mosaics a single 2x2 BGRA tile of one colour and returns its four words (row-major).
std::vector<uint16_t> tile(uint8_t r, uint8_t g, uint8_t b, const cc::MosaicParams& p,
                           int in_format = static_cast<int>(cc::MosaicInput::kBgra)) {
  std::vector<uint8_t> in = flat_bgra(2, 2, r, g, b);
  if (in_format == static_cast<int>(cc::MosaicInput::kRgba))
    for (size_t i = 0; i < in.size(); i += 4) std::swap(in[i], in[i + 2]);
  std::vector<uint8_t> out(8, 0xEE);
  cc::mosaic_cpu(in.data(), 8, in_format, out.data(), 4, 2, 2, p);
  std::vector<uint16_t> words;
  for (size_t i = 0; i < out.size(); i += 2)
    words.push_back(static_cast<uint16_t>(out[i] | (out[i + 1] << 8)));
  return words;
}

TEST(MosaicReference, HandCheckedSamplesLsbAndMsb) {
  cc::MosaicParams p;  // RGGB, lsb, black 0, gains 1
  // R=255 -> 1023; G=128 -> lround(128/255 * 1023) = lround(513.506) = 514; B=0 -> 0.
  EXPECT_EQ(tile(255, 128, 0, p), (std::vector<uint16_t>{1023, 514, 514, 0}));
  p.alignment = cc::BitAlignment::kMsb;  // bits 15..6, low 6 bits zero
  EXPECT_EQ(tile(255, 128, 0, p), (std::vector<uint16_t>{0xFFC0, 514 << 6, 514 << 6, 0}));
  // Black level 64: v = 64 + lround(x * 959). 128 -> 64 + lround(481.373) = 545; 0 -> 64.
  p.black_level = 64;
  EXPECT_EQ(tile(255, 128, 0, p), (std::vector<uint16_t>{0xFFC0, 545 << 6, 545 << 6, 64 << 6}));
  p.alignment = cc::BitAlignment::kLsb;
  EXPECT_EQ(tile(255, 128, 0, p), (std::vector<uint16_t>{1023, 545, 545, 64}));
}

TEST(MosaicReference, PhasesPickTheirColours) {
  cc::MosaicParams p;
  // R=255 -> 1023, G=0 -> 0, B=51 -> lround(0.2 * 1023) = 205.
  p.phase = cc::BayerPhase::kRGGB;
  EXPECT_EQ(tile(255, 0, 51, p), (std::vector<uint16_t>{1023, 0, 0, 205}));
  p.phase = cc::BayerPhase::kBGGR;
  EXPECT_EQ(tile(255, 0, 51, p), (std::vector<uint16_t>{205, 0, 0, 1023}));
  p.phase = cc::BayerPhase::kGRBG;
  EXPECT_EQ(tile(255, 0, 51, p), (std::vector<uint16_t>{0, 1023, 205, 0}));
  p.phase = cc::BayerPhase::kGBRG;
  EXPECT_EQ(tile(255, 0, 51, p), (std::vector<uint16_t>{0, 205, 1023, 0}));
  // RGBA input reads the same colours from the other byte order.
  p.phase = cc::BayerPhase::kRGGB;
  EXPECT_EQ(tile(255, 0, 51, p, static_cast<int>(cc::MosaicInput::kRgba)),
            (std::vector<uint16_t>{1023, 0, 0, 205}));
}

TEST(MosaicReference, ThreeBytePixels) {
  // 2x1 RGB and BGR rows, RGGB: (0,0) red, (0,1) green.
  const uint8_t rgb[] = {255, 0, 0, 0, 51, 0};
  const uint8_t bgr[] = {0, 0, 255, 0, 51, 0};
  cc::MosaicParams p;
  uint8_t out[4] = {};
  cc::mosaic_cpu(rgb, 6, static_cast<int>(cc::MosaicInput::kRgb), out, 4, 2, 1, p);
  EXPECT_EQ(out[0] | (out[1] << 8), 1023);
  EXPECT_EQ(out[2] | (out[3] << 8), 205);
  uint8_t out2[4] = {};
  cc::mosaic_cpu(bgr, 6, static_cast<int>(cc::MosaicInput::kBgr), out2, 4, 2, 1, p);
  EXPECT_EQ(out2[0] | (out2[1] << 8), 1023);
  EXPECT_EQ(out2[2] | (out2[3] << 8), 205);
}

TEST(MosaicReference, WhiteBalanceGainsDivide) {
  cc::MosaicParams p;
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
  cc::MosaicParams p;
  p.wb_red = 0.5f;  // 255 / 0.5 would be 2046: clamped to full scale
  p.wb_blue = 0.01f;
  EXPECT_EQ(tile(200, 0, 10, p), (std::vector<uint16_t>{1023, 0, 0, 1023}));
  p.alignment = cc::BitAlignment::kMsb;
  EXPECT_EQ(tile(200, 0, 10, p)[0], 0xFFC0);
  // Black level at its maximum, and beyond (treated as 1022).
  p = cc::MosaicParams{};
  p.black_level = 1022;
  EXPECT_EQ(tile(255, 0, 0, p), (std::vector<uint16_t>{1023, 1022, 1022, 1022}));
  p.black_level = 5000;
  EXPECT_EQ(tile(255, 0, 0, p), (std::vector<uint16_t>{1023, 1022, 1022, 1022}));
}

TEST(MosaicReference, LeavesPaddingAndRejectsBadArguments) {
  const std::vector<uint8_t> in = flat_bgra(3, 2, 255, 255, 255);
  std::vector<uint8_t> out(2 * 8, 0xA5);  // pitch 8 bytes for 3 words: 2 bytes padding per row
  cc::MosaicParams p;
  cc::mosaic_cpu(in.data(), 12, static_cast<int>(cc::MosaicInput::kBgra), out.data(), 8, 3, 2, p);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(out[r * 8 + 6], 0xA5);
    EXPECT_EQ(out[r * 8 + 7], 0xA5);
  }
  std::vector<uint8_t> untouched(16, 0xA5);
  cc::mosaic_cpu(in.data(), 12, 99, untouched.data(), 8, 3, 2, p);
  cc::mosaic_cpu(nullptr, 12, 0, untouched.data(), 8, 3, 2, p);
  cc::mosaic_cpu(in.data(), 12, 0, untouched.data(), 8, 0, 2, p);
  EXPECT_EQ(untouched, std::vector<uint8_t>(16, 0xA5));
}

// mosaic then debayer (linear, same phase, alignment, black level and gains) restores a flat
// colour field within one code value, for every phase, alignment and method.
TEST(MosaicReference, RoundTripThroughDebayer) {
  constexpr int kW = 33, kH = 17;
  const std::vector<uint8_t> in = flat_bgra(kW, kH, 200, 100, 50);
  struct Setting {
    uint16_t black;
    float r, g, b;
  };
  const Setting settings[] = {
      {0, 1.0f, 1.0f, 1.0f}, {64, 1.0f, 1.0f, 1.0f}, {32, 1.9f, 1.0f, 1.6f}};
  for (const Setting& s : settings)
    for (cc::BayerPhase phase : kPhases)
      for (cc::BitAlignment alignment : kAlignments)
        for (cc::Demosaic method : kMethods) {
          const std::string what = "phase " + std::to_string(static_cast<int>(phase)) +
                                   " alignment " + std::to_string(static_cast<int>(alignment)) +
                                   " method " + std::to_string(static_cast<int>(method)) +
                                   " black " + std::to_string(s.black);
          cc::MosaicParams mp;
          mp.phase = phase;
          mp.alignment = alignment;
          mp.black_level = s.black;
          mp.wb_red = s.r;
          mp.wb_green = s.g;
          mp.wb_blue = s.b;
          const size_t raw_pitch = 2 * kW + 6;
          std::vector<uint8_t> raw(raw_pitch * kH, 0);
          cc::mosaic_cpu(in.data(), 4 * kW, static_cast<int>(cc::MosaicInput::kBgra), raw.data(),
                         raw_pitch, kW, kH, mp);

          cc::DebayerParams dp;
          dp.phase = phase;
          dp.alignment = alignment;
          dp.method = method;
          dp.black_level = s.black;
          dp.wb_red = s.r;
          dp.wb_green = s.g;
          dp.wb_blue = s.b;
          dp.transfer = cc::Transfer::kLinear;
          std::vector<uint8_t> out(static_cast<size_t>(4 * kW * kH), 0);
          cc::debayer_cpu(raw.data(), raw_pitch, out.data(), 4 * kW, kW, kH, dp);
          int worst = 0;
          for (size_t i = 0; i < out.size(); i += 4) {
            worst = std::max(worst, std::abs(out[i] - 50));
            worst = std::max(worst, std::abs(out[i + 1] - 100));
            worst = std::max(worst, std::abs(out[i + 2] - 200));
            ASSERT_EQ(out[i + 3], 255) << what;
          }
          EXPECT_LE(worst, 1) << what;
        }
}

}  // namespace
