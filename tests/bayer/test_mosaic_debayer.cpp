// SPDX-License-Identifier: LGPL-2.1-or-later
// The mosaic (bayer/mosaic.h) followed by the debayer's CPU reference (cuda/debayer.h) restores
// the scene: built with the CUDA layer, run without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "bayer_test_util.h"
#include "debayer.h"
#include "mosaic.h"

namespace cb = cipc_bayer;
namespace cc = cipc_cuda;

namespace {

using cipc_test::flat_bgra;

constexpr auto& kPhases = cipc_test::kCfaOrders;
constexpr auto& kAlignments = cipc_test::kBitAlignments;
constexpr cc::Demosaic kMethods[] = {cc::Demosaic::kBilinear, cc::Demosaic::kMhc};

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
    for (cb::CfaOrder phase : kPhases)
      for (cb::BitAlignment alignment : kAlignments)
        for (cc::Demosaic method : kMethods) {
          const std::string what = "phase " + std::to_string(static_cast<int>(phase)) +
                                   " alignment " + std::to_string(static_cast<int>(alignment)) +
                                   " method " + std::to_string(static_cast<int>(method)) +
                                   " black " + std::to_string(s.black);
          cb::MosaicParams mp;
          mp.phase = phase;
          mp.alignment = alignment;
          mp.black_level = s.black;
          mp.wb_red = s.r;
          mp.wb_green = s.g;
          mp.wb_blue = s.b;
          const size_t raw_pitch = 2 * kW + 6;
          std::vector<uint8_t> raw(raw_pitch * kH, 0);
          cb::mosaic_cpu(in.data(), 4 * kW, static_cast<int>(cb::MosaicInput::kBgra), raw.data(),
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
