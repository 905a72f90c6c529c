// SPDX-License-Identifier: LGPL-2.1-or-later
// Tests of the debayer's CPU reference (cuda/debayer_reference.cpp), the oracle of the GPU
// kernel's tests. No GPU needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bayer_test_util.h"
#include "debayer.h"

namespace cb = cipc_bayer;
namespace cc = cipc_cuda;

namespace {

constexpr auto& kPhases = cipc_test::kCfaOrders;
constexpr auto& kAlignments = cipc_test::kBitAlignments;
constexpr cc::Demosaic kMethods[] = {cc::Demosaic::kBilinear, cc::Demosaic::kMhc};

// The 16-bit word holding the 10-bit value v. MSB-aligned words get the replicated MSBs in
// bits 5..0 (as Xavier's VI writes them), which the debayer must ignore.
uint16_t encode(int v, cb::BitAlignment a) {
  return a == cb::BitAlignment::kLsb ? static_cast<uint16_t>(v)
                                     : static_cast<uint16_t>((v << 6) | (v >> 4));
}

// A raw image of 10-bit values, row-major.
struct Raw {
  int width = 0;
  int height = 0;
  std::vector<int> v;
  int& at(int r, int c) { return v[static_cast<size_t>(r * width + c)]; }
};

Raw flat(int width, int height, int value) {
  return Raw{width, height, std::vector<int>(static_cast<size_t>(width * height), value)};
}

Raw pseudo_random(int width, int height, uint32_t seed) {
  Raw raw = flat(width, height, 0);
  uint32_t x = seed * 2654435761u + 1u;
  for (int& v : raw.v) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<int>((x >> 12) % 1024u);
  }
  return raw;
}

// Runs debayer_cpu on `raw` packed at the given pitches (input padding words 0xFFFF, output
// prefilled with `canary`) and returns the output buffer, padding included.
std::vector<uint8_t> run_padded(const Raw& raw, const cc::DebayerParams& p, size_t in_pitch,
                                size_t out_pitch, uint8_t canary = 0xA5) {
  std::vector<uint8_t> in(in_pitch * static_cast<size_t>(raw.height), 0xFF);
  for (int r = 0; r < raw.height; ++r)
    for (int c = 0; c < raw.width; ++c) {
      const uint16_t w = encode(raw.v[static_cast<size_t>(r * raw.width + c)], p.alignment);
      in[r * in_pitch + 2 * c] = static_cast<uint8_t>(w & 0xFF);
      in[r * in_pitch + 2 * c + 1] = static_cast<uint8_t>(w >> 8);
    }
  std::vector<uint8_t> out(out_pitch * static_cast<size_t>(raw.height), canary);
  cc::debayer_cpu(in.data(), in_pitch, out.data(), out_pitch, raw.width, raw.height, p);
  return out;
}

// Tight pitches: 4 * width bytes a row of BGRA.
std::vector<uint8_t> run(const Raw& raw, const cc::DebayerParams& p) {
  return run_padded(raw, p, 2 * static_cast<size_t>(raw.width), 4 * static_cast<size_t>(raw.width));
}

struct Bgr {
  int b, g, r;
};
Bgr pixel(const std::vector<uint8_t>& out, int width, int r, int c) {
  const size_t i = 4 * static_cast<size_t>(r * width + c);
  return Bgr{out[i], out[i + 1], out[i + 2]};
}

// Linear transfer, black 0, gains 1: the 8-bit code of a 10-bit level v (double arithmetic,
// independent of the implementation): round(255 * round(v / 1023 * 4095) / 4095).
int lin8(double v10) {
  const double index = std::round(v10 / 1023.0 * 4095.0);
  return static_cast<int>(std::lround(255.0 * index / 4095.0));
}

std::string describe(cb::CfaOrder ph, cb::BitAlignment a, cc::Demosaic m) {
  static const char* phases[] = {"RGGB", "BGGR", "GRBG", "GBRG"};
  return std::string(phases[static_cast<int>(ph)]) +
         (a == cb::BitAlignment::kLsb ? " lsb " : " msb ") +
         (m == cc::Demosaic::kBilinear ? "bilinear" : "mhc");
}

// ---------------------------------------------------------------------------------------------
// Transfer tables

TEST(DebayerTransfer, Linear) {
  const auto t = cc::make_transfer_table(cc::Transfer::kLinear, 2.2f);
  EXPECT_EQ(t[0], 0);
  EXPECT_EQ(t[4095], 255);
  EXPECT_EQ(t[2048], 128);  // 255 * 2048 / 4095 = 127.53
  EXPECT_EQ(t[2047], 127);  // 127.47
  for (int i = 1; i < 4096; ++i) ASSERT_GE(t[i], t[i - 1]) << i;
}

TEST(DebayerTransfer, Srgb) {
  const auto t = cc::make_transfer_table(cc::Transfer::kSrgb, 1.0f);  // gamma unused
  EXPECT_EQ(t[0], 0);
  EXPECT_EQ(t[4095], 255);
  EXPECT_NEAR(t[2048], 188, 1);  // sRGB(0.5) = 0.7354 -> 187.5
  // 0.18 -> 0.4614 -> 117.6 (research notes 6.3): index round(0.18 * 4095) = 737.
  EXPECT_NEAR(t[737], 118, 1);
  // Linear segment: index 12 -> x = 0.00293 <= 0.0031308 -> 12.92 x * 255 = 9.65 -> 10.
  EXPECT_EQ(t[12], 10);
  for (int i = 1; i < 4096; ++i) ASSERT_GE(t[i], t[i - 1]) << i;
}

TEST(DebayerTransfer, Power) {
  const auto t = cc::make_transfer_table(cc::Transfer::kPower, 2.2f);
  EXPECT_EQ(t[0], 0);
  EXPECT_EQ(t[4095], 255);
  // x = 0.5 is looked up at lroundf(0.5 * 4095) = 2048.
  EXPECT_EQ(t[2048], std::lround(255.0 * std::pow(0.5, 1.0 / 2.2)));  // 186
  EXPECT_EQ(t[2048], 186);
  // Gamma 1 is the linear curve; an invalid gamma is treated as 1.
  EXPECT_EQ(cc::make_transfer_table(cc::Transfer::kPower, 1.0f),
            cc::make_transfer_table(cc::Transfer::kLinear, 1.0f));
  EXPECT_EQ(cc::make_transfer_table(cc::Transfer::kPower, 0.0f),
            cc::make_transfer_table(cc::Transfer::kLinear, 1.0f));
}

// ---------------------------------------------------------------------------------------------
// Bilinear by hand, every phase, both alignments.
//
// The 4x4 raw image below; the interior pixels (1,1), (1,2), (2,1), (2,2) cover the four CFA
// sites of every phase and need no mirroring. Neighbour averages at each of them:
//   (1,1): centre 128; horizontal (300+700)/2 = 500; vertical (512+256)/2 = 384;
//          cross (300+700+512+256)/4 = 442; diagonal (16+64+800+32)/4 = 228
//   (1,2): centre 700; horizontal (128+40)/2 = 84; vertical (64+32)/2 = 48;
//          cross (128+40+64+32)/4 = 66; diagonal (512+900+256+600)/4 = 567
//   (2,1): centre 256; horizontal (800+32)/2 = 416; vertical (128+1000)/2 = 564;
//          cross (800+32+128+1000)/4 = 490; diagonal (300+700+200+400)/4 = 400
//   (2,2): centre 32; horizontal (256+600)/2 = 428; vertical (700+400)/2 = 550;
//          cross (256+600+700+400)/4 = 489; diagonal (128+40+1000+80)/4 = 312
// At an R/B site: own colour = centre, G = cross, other chroma = diagonal. At a G site:
// G = centre, the colour of its row neighbours = horizontal, of its column ones = vertical.

struct HandCase {
  cb::CfaOrder phase;
  int r, c;
  int red, green, blue;  // 10-bit levels
};

constexpr HandCase kHandCases[] = {
    // RGGB: R G / G B
    {cb::CfaOrder::kRGGB, 1, 1, 228, 442, 128},  // B site
    {cb::CfaOrder::kRGGB, 1, 2, 48, 700, 84},    // G in a B row: B horizontal, R vertical
    {cb::CfaOrder::kRGGB, 2, 1, 416, 256, 564},  // G in an R row: R horizontal, B vertical
    {cb::CfaOrder::kRGGB, 2, 2, 32, 489, 312},   // R site
    // BGGR: B G / G R
    {cb::CfaOrder::kBGGR, 1, 1, 128, 442, 228},  // R site
    {cb::CfaOrder::kBGGR, 1, 2, 84, 700, 48},    // G in an R row
    {cb::CfaOrder::kBGGR, 2, 1, 564, 256, 416},  // G in a B row
    {cb::CfaOrder::kBGGR, 2, 2, 312, 489, 32},   // B site
    // GRBG: G R / B G
    {cb::CfaOrder::kGRBG, 1, 1, 384, 128, 500},  // G in a B row
    {cb::CfaOrder::kGRBG, 1, 2, 567, 66, 700},   // B site
    {cb::CfaOrder::kGRBG, 2, 1, 256, 490, 400},  // R site
    {cb::CfaOrder::kGRBG, 2, 2, 428, 32, 550},   // G in an R row
    // GBRG: G B / R G
    {cb::CfaOrder::kGBRG, 1, 1, 500, 128, 384},  // G in an R row
    {cb::CfaOrder::kGBRG, 1, 2, 700, 66, 567},   // R site
    {cb::CfaOrder::kGBRG, 2, 1, 400, 490, 256},  // B site
    {cb::CfaOrder::kGBRG, 2, 2, 550, 32, 428},   // G in a B row
};

TEST(DebayerCpu, BilinearByHand) {
  const Raw raw{4,
                4,
                {16, 512, 64, 900,   //
                 300, 128, 700, 40,  //
                 800, 256, 32, 600,  //
                 200, 1000, 400, 80}};
  for (cb::BitAlignment a : kAlignments)
    for (const HandCase& hc : kHandCases) {
      cc::DebayerParams p;
      p.phase = hc.phase;
      p.alignment = a;
      p.method = cc::Demosaic::kBilinear;
      p.transfer = cc::Transfer::kLinear;
      const auto out = run(raw, p);
      const Bgr px = pixel(out, 4, hc.r, hc.c);
      SCOPED_TRACE(describe(hc.phase, a, p.method) + " at (" + std::to_string(hc.r) + "," +
                   std::to_string(hc.c) + ")");
      EXPECT_EQ(px.b, lin8(hc.blue));
      EXPECT_EQ(px.g, lin8(hc.green));
      EXPECT_EQ(px.r, lin8(hc.red));
      EXPECT_EQ(out[4 * (hc.r * 4 + hc.c) + 3], 255);
    }
  // Spot-check the helper itself: 442 -> index round(1769.30) = 1769 -> 255 * 1769 / 4095 =
  // 110.16 -> 110; 1023 -> 255; 0 -> 0.
  EXPECT_EQ(lin8(442), 110);
  EXPECT_EQ(lin8(1023), 255);
  EXPECT_EQ(lin8(0), 0);
}

// ---------------------------------------------------------------------------------------------
// MHC coefficients by impulse response (RGGB, 9x9, linear transfer).
// Background 400 and one sample at 720 (delta 320, i.e. 40 per 1/8 of a weight): the response
// of each output at each position is 400 + 40 * (the weight that output's kernel gives the
// impulse's position).

TEST(DebayerCpu, MhcImpulseAtRedSite) {
  Raw raw = flat(9, 9, 400);
  raw.at(4, 4) = 720;  // (even, even) = R in RGGB
  cc::DebayerParams p;
  p.method = cc::Demosaic::kMhc;
  p.transfer = cc::Transfer::kLinear;
  const auto out = run(raw, p);
  auto px = [&](int r, int c) { return pixel(out, 9, r, c); };
  // At the R site itself: R = centre; G at R: centre weight 4; B at R: centre weight 6.
  EXPECT_EQ(px(4, 4).r, lin8(720));
  EXPECT_EQ(px(4, 4).g, lin8(560));
  EXPECT_EQ(px(4, 4).b, lin8(640));
  // R at the G sites next to it (R row: horizontal, B row: vertical): weight 4.
  for (auto [r, c] : {std::pair{4, 3}, {4, 5}, {3, 4}, {5, 4}}) EXPECT_EQ(px(r, c).r, lin8(560));
  // ...whose G and B do not see an R sample.
  EXPECT_EQ(px(4, 5).g, lin8(400));
  EXPECT_EQ(px(4, 5).b, lin8(400));
  // R at the diagonal B sites: weight 2.
  for (auto [r, c] : {std::pair{3, 3}, {3, 5}, {5, 3}, {5, 5}}) EXPECT_EQ(px(r, c).r, lin8(480));
  // At the R sites two away: R = their own centre, G weight -1, B weight -3/2.
  for (auto [r, c] : {std::pair{4, 2}, {4, 6}, {2, 4}, {6, 4}}) {
    EXPECT_EQ(px(r, c).r, lin8(400));
    EXPECT_EQ(px(r, c).g, lin8(360));
    EXPECT_EQ(px(r, c).b, lin8(340));
  }
}

TEST(DebayerCpu, MhcImpulseAtGreenSite) {
  Raw raw = flat(9, 9, 400);
  raw.at(4, 5) = 720;  // (even, odd) = G in an R row in RGGB
  cc::DebayerParams p;
  p.method = cc::Demosaic::kMhc;
  p.transfer = cc::Transfer::kLinear;
  const auto out = run(raw, p);
  auto px = [&](int r, int c) { return pixel(out, 9, r, c); };
  // The G site itself: G = centre; R (row colour) and B (column colour): centre weight 5.
  EXPECT_EQ(px(4, 5).g, lin8(720));
  EXPECT_EQ(px(4, 5).r, lin8(600));
  EXPECT_EQ(px(4, 5).b, lin8(600));
  // G at the R/B sites next to it: weight 2.
  for (auto [r, c] : {std::pair{4, 4}, {4, 6}, {3, 5}, {5, 5}}) EXPECT_EQ(px(r, c).g, lin8(480));
  // ...whose R and B do not see a G sample at distance 1.
  EXPECT_EQ(px(4, 4).r, lin8(400));
  EXPECT_EQ(px(4, 4).b, lin8(400));
  // Diagonal G sites (in B rows): R (column colour) and B (row colour): weight -1.
  for (auto [r, c] : {std::pair{3, 4}, {3, 6}, {5, 4}, {5, 6}}) {
    EXPECT_EQ(px(r, c).g, lin8(400));
    EXPECT_EQ(px(r, c).r, lin8(360));
    EXPECT_EQ(px(r, c).b, lin8(360));
  }
  // G sites two away in the same row (R rows): R along the row weight -1, B across +1/2.
  for (auto [r, c] : {std::pair{4, 3}, {4, 7}}) {
    EXPECT_EQ(px(r, c).r, lin8(360));
    EXPECT_EQ(px(r, c).b, lin8(420));
  }
  // G sites two away in the same column (R rows): R across +1/2, B along the column -1.
  for (auto [r, c] : {std::pair{2, 5}, {6, 5}}) {
    EXPECT_EQ(px(r, c).r, lin8(420));
    EXPECT_EQ(px(r, c).b, lin8(360));
  }
}

TEST(DebayerCpu, MhcDiffersFromBilinear) {
  const Raw raw = pseudo_random(16, 12, 7);
  cc::DebayerParams p;
  p.transfer = cc::Transfer::kLinear;
  p.method = cc::Demosaic::kBilinear;
  const auto bilinear = run(raw, p);
  p.method = cc::Demosaic::kMhc;
  const auto mhc = run(raw, p);
  int differing = 0;
  for (size_t i = 0; i < mhc.size(); ++i) differing += mhc[i] != bilinear[i];
  EXPECT_GT(differing, static_cast<int>(mhc.size() / 4));
  // The impulse at a G site: bilinear G at the R site two away stays 400, MHC gives 360.
  Raw impulse = flat(9, 9, 400);
  impulse.at(4, 5) = 720;
  const auto mi = run(impulse, p);
  p.method = cc::Demosaic::kBilinear;
  const auto bi = run(impulse, p);
  EXPECT_EQ(pixel(bi, 9, 4, 4).g, lin8(480));  // (720 + 3 * 400) / 4
  EXPECT_EQ(pixel(mi, 9, 4, 4).g, lin8(480));  // weight 2: also 480
  EXPECT_EQ(pixel(bi, 9, 4, 3).r, lin8(400));  // bilinear R at G: only R samples
  EXPECT_EQ(pixel(mi, 9, 4, 3).r, lin8(360));  // MHC: Laplacian of G, weight -1
}

// ---------------------------------------------------------------------------------------------
// Flat fields, gradients, black level, gains

TEST(DebayerCpu, FlatFieldStaysFlat) {
  const Raw raw = flat(37, 29, 512);
  for (cc::Transfer t : {cc::Transfer::kLinear, cc::Transfer::kSrgb}) {
    const auto table = cc::make_transfer_table(t, 2.2f);
    const uint8_t expected = table[static_cast<size_t>(std::lroundf(512.0f / 1023.0f * 4095.0f))];
    for (cb::CfaOrder ph : kPhases)
      for (cb::BitAlignment a : kAlignments)
        for (cc::Demosaic m : kMethods) {
          SCOPED_TRACE(describe(ph, a, m));
          cc::DebayerParams p;
          p.phase = ph;
          p.alignment = a;
          p.method = m;
          p.transfer = t;
          const auto out = run(raw, p);
          for (size_t i = 0; i < out.size(); i += 4) {
            ASSERT_EQ(out[i], expected) << i / 4;
            ASSERT_EQ(out[i + 1], expected) << i / 4;
            ASSERT_EQ(out[i + 2], expected) << i / 4;
            ASSERT_EQ(out[i + 3], 255) << i / 4;
          }
        }
  }
}

TEST(DebayerCpu, BlackLevelGivesZero) {
  for (int value : {50, 20, 0}) {  // at and below black
    const Raw raw = flat(10, 8, value);
    for (cc::Demosaic m : kMethods)
      for (cb::BitAlignment a : kAlignments) {
        cc::DebayerParams p;
        p.black_level = 50;
        p.method = m;
        p.alignment = a;
        p.gain = 4.0f;
        p.wb_red = 2.0f;
        const auto out = run(raw, p);
        for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], i % 4 == 3 ? 255 : 0) << i;
      }
  }
}

TEST(DebayerCpu, GainClampsToWhite) {
  for (int value : {1023, 700}) {  // 700 / 1023 * 2 > 1 too
    const Raw raw = flat(10, 8, value);
    for (cc::Demosaic m : kMethods) {
      cc::DebayerParams p;
      p.method = m;
      p.gain = 2.0f;
      const auto out = run(raw, p);
      for (uint8_t b : out) ASSERT_EQ(b, 255);
    }
  }
}

TEST(DebayerCpu, WhiteBalanceScalesChannels) {
  // A gray field; each channel = table[lroundf(clamp(gain * wb_c * (400 - 50) / 973) * 4095)].
  const Raw raw = flat(13, 11, 400);
  cc::DebayerParams p;
  p.black_level = 50;
  p.wb_red = 1.5f;
  p.wb_green = 0.75f;
  p.wb_blue = 1.75f;
  p.gain = 1.25f;
  auto expect = [&](float wb) {
    const auto table = cc::make_transfer_table(p.transfer, p.gamma);
    float x = p.gain * (static_cast<float>(400 - 50) / 973.0f * wb);
    x = std::min(std::max(x, 0.0f), 1.0f);
    return static_cast<int>(table[static_cast<size_t>(std::lroundf(x * 4095.0f))]);
  };
  for (cc::Transfer t : {cc::Transfer::kLinear, cc::Transfer::kSrgb, cc::Transfer::kPower})
    for (cb::CfaOrder ph : kPhases)
      for (cc::Demosaic m : kMethods) {
        SCOPED_TRACE(describe(ph, cb::BitAlignment::kLsb, m));
        p.transfer = t;
        p.phase = ph;
        p.method = m;
        const auto out = run(raw, p);
        const int b = expect(p.wb_blue), g = expect(p.wb_green), r = expect(p.wb_red);
        EXPECT_LT(b, 255);  // not clipped: the scaling is visible
        EXPECT_NE(b, g);
        EXPECT_NE(g, r);
        for (int y = 0; y < raw.height; ++y)
          for (int x = 0; x < raw.width; ++x) {
            const Bgr px = pixel(out, raw.width, y, x);
            ASSERT_EQ(px.b, b) << y << "," << x;
            ASSERT_EQ(px.g, g) << y << "," << x;
            ASSERT_EQ(px.r, r) << y << "," << x;
          }
      }
}

TEST(DebayerCpu, HorizontalGradientReproduced) {
  Raw raw = flat(64, 16, 0);
  for (int r = 0; r < raw.height; ++r)
    for (int c = 0; c < raw.width; ++c) raw.at(r, c) = 8 + 15 * c;  // 8 .. 953
  for (cb::CfaOrder ph : kPhases)
    for (cc::Demosaic m : kMethods) {
      SCOPED_TRACE(describe(ph, cb::BitAlignment::kLsb, m));
      cc::DebayerParams p;
      p.phase = ph;
      p.method = m;
      p.transfer = cc::Transfer::kLinear;
      const auto out = run(raw, p);
      for (int r = 2; r < raw.height - 2; ++r)
        for (int c = 2; c < raw.width - 2; ++c) {
          const int want = lin8(8 + 15 * c);
          const Bgr px = pixel(out, raw.width, r, c);
          ASSERT_NEAR(px.b, want, 1) << r << "," << c;
          ASSERT_NEAR(px.g, want, 1) << r << "," << c;
          ASSERT_NEAR(px.r, want, 1) << r << "," << c;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Pitches and small sizes

TEST(DebayerCpu, PaddingNeitherReadNorWritten) {
  const Raw raw = pseudo_random(11, 7, 3);
  for (cb::BitAlignment a : kAlignments)
    for (cc::Demosaic m : kMethods) {
      SCOPED_TRACE(describe(cb::CfaOrder::kGRBG, a, m));
      cc::DebayerParams p;
      p.phase = cb::CfaOrder::kGRBG;
      p.alignment = a;
      p.method = m;
      const auto tight = run(raw, p);
      const size_t in_pitch = 2 * 11 + 10, out_pitch = 4 * 11 + 12;
      const auto padded = run_padded(raw, p, in_pitch, out_pitch, 0xA5);
      for (int r = 0; r < raw.height; ++r) {
        EXPECT_EQ(0, std::memcmp(&padded[r * out_pitch], &tight[r * 4 * 11], 4 * 11)) << r;
        for (size_t i = 4 * 11; i < out_pitch; ++i) EXPECT_EQ(padded[r * out_pitch + i], 0xA5);
      }
    }
}

TEST(DebayerCpu, TinyImages) {
  for (int w : {1, 2, 3})
    for (int h : {1, 2, 3})
      for (cc::Demosaic m : kMethods)
        for (cb::CfaOrder ph : kPhases) {
          SCOPED_TRACE(describe(ph, cb::BitAlignment::kLsb, m) + " " + std::to_string(w) + "x" +
                       std::to_string(h));
          cc::DebayerParams p;
          p.phase = ph;
          p.method = m;
          p.transfer = cc::Transfer::kLinear;
          // Arbitrary content: runs, writes every pixel (alpha), leaves padding alone.
          const size_t out_pitch = 4 * static_cast<size_t>(w) + 4;
          const auto out = run_padded(pseudo_random(w, h, 11), p, 2 * w, out_pitch, 0x5A);
          for (int r = 0; r < h; ++r) {
            for (int c = 0; c < w; ++c) EXPECT_EQ(out[r * out_pitch + 4 * c + 3], 255);
            for (size_t i = 4 * w; i < out_pitch; ++i) EXPECT_EQ(out[r * out_pitch + i], 0x5A);
          }
          // A flat field stays flat even with clamped (size 1) indexing.
          const auto fl = run(flat(w, h, 300), p);
          for (size_t i = 0; i < fl.size(); ++i)
            EXPECT_EQ(fl[i], i % 4 == 3 ? 255 : lin8(300)) << i;
        }
}

TEST(DebayerCpu, NullOrEmptyDoesNothing) {
  uint8_t out[16];
  std::memset(out, 0x77, sizeof out);
  const uint8_t in[8] = {};
  cc::DebayerParams p;
  cc::debayer_cpu(nullptr, 4, out, 8, 2, 2, p);
  cc::debayer_cpu(in, 4, out, 8, 0, 2, p);
  cc::debayer_cpu(in, 4, out, 8, 2, 0, p);
  for (uint8_t b : out) EXPECT_EQ(b, 0x77);
}

// ---------------------------------------------------------------------------------------------
// Output order and gray-world statistics

TEST(DebayerCpu, RgbaOrderSwapsRedAndBlueOnly) {
  const Raw raw = pseudo_random(9, 7, 3);
  cc::DebayerParams bgra;
  cc::DebayerParams rgba;
  rgba.order = cc::PixelOrder::kRgba;
  const auto a = run(raw, bgra);
  const auto b = run(raw, rgba);
  for (size_t i = 0; i < a.size(); i += 4) {
    EXPECT_EQ(a[i], b[i + 2]);
    EXPECT_EQ(a[i + 1], b[i + 1]);
    EXPECT_EQ(a[i + 2], b[i]);
    EXPECT_EQ(b[i + 3], 255);
  }
}

TEST(DebayerStats, SampleCountsPerColour) {
  // 5 x 3 RGGB: rows 0, 2 are R G R G R (3 R, 2 G each), row 1 is G B G B G (3 G, 2 B).
  const cc::BayerSums rggb = cc::cfa_sample_counts(cb::CfaOrder::kRGGB, 5, 3);
  EXPECT_EQ(rggb.count[cb::kCfaRed], 6u);
  EXPECT_EQ(rggb.count[cb::kCfaGreen], 7u);
  EXPECT_EQ(rggb.count[cb::kCfaBlue], 2u);
  const cc::BayerSums gbrg = cc::cfa_sample_counts(cb::CfaOrder::kGBRG, 5, 3);
  EXPECT_EQ(gbrg.count[cb::kCfaBlue], 4u);  // rows 0, 2 at odd columns
  EXPECT_EQ(gbrg.count[cb::kCfaGreen], 8u);
  EXPECT_EQ(gbrg.count[cb::kCfaRed], 3u);  // row 1 at even columns
  const cc::BayerSums one = cc::cfa_sample_counts(cb::CfaOrder::kBGGR, 1, 1);
  EXPECT_EQ(one.count[cb::kCfaBlue], 1u);
  EXPECT_EQ(one.count[cb::kCfaRed] + one.count[cb::kCfaGreen], 0u);
  for (cb::CfaOrder ph : kPhases) {
    const cc::BayerSums s = cc::cfa_sample_counts(ph, 333, 211);
    EXPECT_EQ(s.count[0] + s.count[1] + s.count[2], 333u * 211u);
  }
}

TEST(DebayerStats, SumsSubtractBlackAndIgnoreUnusedBits) {
  for (cb::BitAlignment a : kAlignments) {
    Raw raw = flat(6, 4, 100);
    for (int c = 0; c < 6; ++c) raw.at(1, c) = 10;  // below black: counts as 0
    std::vector<uint8_t> in(2 * 6 * 4);
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 6; ++c) {
        const uint16_t w = encode(raw.at(r, c), a);
        in[static_cast<size_t>(r * 12 + 2 * c)] = static_cast<uint8_t>(w & 0xFF);
        in[static_cast<size_t>(r * 12 + 2 * c + 1)] = static_cast<uint8_t>(w >> 8);
      }
    cc::DebayerParams p;
    p.alignment = a;
    p.black_level = 20;
    const cc::BayerSums s = cc::bayer_sums_cpu(in.data(), 12, 6, 4, p);
    // RGGB: R on rows 0, 2 (6 samples of 80); B on rows 1, 3 (row 1 is 10 -> 0; row 3: 3 x 80);
    // G: rows 0, 2 give 6 x 80, row 1 gives 0, row 3 gives 3 x 80.
    EXPECT_EQ(s.sum[cb::kCfaRed], 6u * 80u);
    EXPECT_EQ(s.sum[cb::kCfaBlue], 3u * 80u);
    EXPECT_EQ(s.sum[cb::kCfaGreen], 9u * 80u);
  }
}

TEST(DebayerStats, GrayWorldGains) {
  const cc::WbGains fallback{1.5f, 1.0f, 2.0f};
  unsigned long long count[3] = {10, 20, 10};
  unsigned long long sum[3] = {1000, 4000, 500};  // means 100, 200, 50
  cc::WbGains g = cc::gray_world_gains(sum, count, fallback);
  EXPECT_EQ(g.red, 2.0f);
  EXPECT_EQ(g.green, 1.0f);
  EXPECT_EQ(g.blue, 4.0f);
  unsigned long long extreme[3] = {1, 200000, 2000000};  // red far too dark, blue too bright
  g = cc::gray_world_gains(extreme, count, fallback);
  EXPECT_EQ(g.red, cc::kGrayWorldMaxGain);
  EXPECT_EQ(g.blue, cc::kGrayWorldMinGain);
  unsigned long long dark_blue[3] = {1000, 4000, 0};  // no signal in one colour: fixed gains
  g = cc::gray_world_gains(dark_blue, count, fallback);
  EXPECT_EQ(g.red, fallback.red);
  EXPECT_EQ(g.blue, fallback.blue);
}

// ---- Precision::kFast: the host-side decision and the CPU model of the GPU's fast arithmetic

// Random RAW10 words (a quarter of the samples forced to 0 or 1023), packed at `in_pitch`.
std::vector<uint8_t> random_words(int width, int height, size_t in_pitch, cb::BitAlignment a,
                                  uint32_t seed) {
  std::vector<uint8_t> in(in_pitch * static_cast<size_t>(height), 0xFF);
  uint32_t x = seed * 2654435761u + 7u;
  for (int r = 0; r < height; ++r) {
    for (int c = 0; c < width; ++c) {
      x = x * 1664525u + 1013904223u;
      int v = static_cast<int>((x >> 12) % 1024u);
      if ((x >> 4) % 8 == 0) v = 0;
      if ((x >> 4) % 8 == 1) v = 1023;
      const uint16_t w = encode(v, a);
      in[r * in_pitch + 2 * c] = static_cast<uint8_t>(w & 0xFF);
      in[r * in_pitch + 2 * c + 1] = static_cast<uint8_t>(w >> 8);
    }
  }
  return in;
}

// The 1-code bound holds only for tables whose adjacent entries differ by at most 1: every
// adjacent pair of every table the fast path may use, and where power curves stop qualifying.
TEST(DebayerFast, TableStepsDecideWhichCurvesQualify) {
  EXPECT_EQ(cc::max_adjacent_step(cc::make_transfer_table(cc::Transfer::kSrgb, 2.2f)), 1);
  EXPECT_EQ(cc::max_adjacent_step(cc::make_transfer_table(cc::Transfer::kLinear, 2.2f)), 1);
  // x^(1/gamma) is steep near black for gamma > 1: 2.2 jumps from code 0 to 6 at index 1.
  const auto power22 = cc::make_transfer_table(cc::Transfer::kPower, 2.2f);
  EXPECT_GT(cc::max_adjacent_step(power22), 1);
  cc::DebayerParams p;
  p.transfer = cc::Transfer::kPower;
  p.gamma = 2.2f;
  EXPECT_FALSE(cc::fast_debayer_applies(p, false, power22));
  // Every gamma rg10tobgra accepts (0.1 to 10), in steps of 0.01: qualifies exactly when the
  // step is at most 1, and the qualifying ones are those up to a threshold near 1.6.
  float largest_qualifying = 0.0f;
  for (int hundredths = 10; hundredths <= 1000; ++hundredths) {
    p.gamma = static_cast<float>(hundredths) / 100.0f;
    const auto table = cc::make_transfer_table(cc::Transfer::kPower, p.gamma);
    const bool small_steps = cc::max_adjacent_step(table) <= 1;
    EXPECT_EQ(cc::fast_debayer_applies(p, false, table), small_steps) << p.gamma;
    if (small_steps) {
      EXPECT_EQ(largest_qualifying, p.gamma <= 1.0f ? 0.0f : largest_qualifying) << p.gamma;
      if (p.gamma > 1.0f) largest_qualifying = p.gamma;
    }
  }
  EXPECT_GT(largest_qualifying, 1.4f);
  EXPECT_LT(largest_qualifying, 1.8f);
  std::printf("[ info     ] power curves qualify for the fast path up to gamma %.2f\n",
              largest_qualifying);
  p.transfer = cc::Transfer::kSrgb;
  EXPECT_TRUE(
      cc::fast_debayer_applies(p, true, cc::make_transfer_table(cc::Transfer::kSrgb, 2.2f)));
}

TEST(DebayerFast, GainsInRange) {
  cc::DebayerParams p;
  EXPECT_TRUE(cc::fast_gains_in_range(p, false));
  EXPECT_TRUE(cc::fast_gains_in_range(p, true));
  p.gain = 8.0f;  // gray world may use white-balance gains up to 8: 8 x 8 = 64
  EXPECT_TRUE(cc::fast_gains_in_range(p, true));
  p.gain = 8.5f;
  EXPECT_FALSE(cc::fast_gains_in_range(p, true));
  EXPECT_TRUE(cc::fast_gains_in_range(p, false));
  p.gain = 4.0f;
  p.wb_blue = 16.0f;
  EXPECT_TRUE(cc::fast_gains_in_range(p, false));
  p.wb_blue = 16.5f;
  EXPECT_FALSE(cc::fast_gains_in_range(p, false));
  p.wb_blue = 1.0f;
  for (float bad : {std::nanf(""), INFINITY, -INFINITY, 3e38f}) {
    cc::DebayerParams q = p;
    q.gain = bad;
    EXPECT_FALSE(cc::fast_gains_in_range(q, false)) << bad;
    q = p;
    q.wb_red = bad;
    EXPECT_FALSE(cc::fast_gains_in_range(q, false)) << bad;
  }
}

// The model of the GPU's fast arithmetic against the reference: every byte within 1 code, over
// every phase, alignment and method, odd sizes, padded pitches, black levels, and the largest
// gains the fast path accepts. Padding is left alone and alpha is 255.
TEST(DebayerFast, ModelWithinOneCodeOfReference) {
  struct Size {
    int w, h, extra_in, extra_out;
  };
  const Size sizes[] = {{2, 2, 2, 4},   {3, 5, 0, 0}, {5, 3, 6, 12},
                        {67, 45, 2, 8}, {1, 7, 0, 0}, {128, 66, 0, 0}};
  struct Gains {
    float gain, red, green, blue;
  };
  const Gains gains[] = {{1.0f, 1.0f, 1.0f, 1.0f},
                         {1.25f, 1.9f, 1.0f, 1.4f},
                         {8.0f, 8.0f, 0.125f, 7.99f},  // |gain| x |wb| = 64, the limit
                         {64.0f, 0.2f, 1.0f, 0.01f},   // gain at its limit
                         {0.37f, 3.3f, 2.1f, 0.7f}};
  size_t compared = 0, differing = 0;
  uint32_t seed = 99;
  for (const Size& s : sizes) {
    for (cb::CfaOrder phase : kPhases) {
      for (cb::BitAlignment align : kAlignments) {
        for (cc::Demosaic method : kMethods) {
          for (const Gains& g : gains) {
            for (cc::Transfer transfer : {cc::Transfer::kSrgb, cc::Transfer::kLinear}) {
              cc::DebayerParams p;
              p.phase = phase;
              p.alignment = align;
              p.method = method;
              p.black_level = static_cast<uint16_t>(seed % 3 == 0 ? 0 : seed % 3 == 1 ? 50 : 1000);
              p.gain = g.gain;
              p.wb_red = g.red;
              p.wb_green = g.green;
              p.wb_blue = g.blue;
              p.transfer = transfer;
              p.order = seed % 2 ? cc::PixelOrder::kRgba : cc::PixelOrder::kBgra;
              ASSERT_TRUE(
                  cc::fast_debayer_applies(p, false, cc::make_transfer_table(transfer, p.gamma)));
              const size_t in_pitch = 2 * static_cast<size_t>(s.w) + s.extra_in;
              const size_t out_pitch = 4 * static_cast<size_t>(s.w) + s.extra_out;
              const auto in = random_words(s.w, s.h, in_pitch, align, seed++);
              std::vector<uint8_t> exact(out_pitch * s.h, 0xA5), fast(out_pitch * s.h, 0xA5);
              cc::debayer_cpu(in.data(), in_pitch, exact.data(), out_pitch, s.w, s.h, p);
              cc::debayer_fast_model_cpu(in.data(), in_pitch, fast.data(), out_pitch, s.w, s.h, p);
              for (int r = 0; r < s.h; ++r) {
                for (size_t i = 0; i < out_pitch; ++i) {
                  const size_t at = r * out_pitch + i;
                  const int delta = std::abs(exact[at] - fast[at]);
                  differing += delta != 0;
                  ASSERT_LE(delta, 1) << s.w << "x" << s.h << " " << describe(phase, align, method)
                                      << " gain " << g.gain << " at row " << r << " byte " << i;
                  if (i >= 4 * static_cast<size_t>(s.w)) {
                    ASSERT_EQ(fast[at], 0xA5) << "padding written";
                  } else if (i % 4 == 3) {
                    ASSERT_EQ(fast[at], 255) << "alpha";
                  }
                }
              }
              compared += exact.size();
            }
          }
        }
      }
    }
  }
  std::printf("[ info     ] %zu bytes compared, %zu differ by 1\n", compared, differing);
}

}  // namespace
