// SPDX-License-Identifier: LGPL-2.1-or-later
// Shared by the Bayer tests (tests/bayer, tests/cuda): every CFA order and bit alignment, and a
// flat colour field to mosaic. Header-only; bayer/ only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cfa.h"

namespace cipc_test {

constexpr cipc_bayer::CfaOrder kCfaOrders[] = {
    cipc_bayer::CfaOrder::kRGGB, cipc_bayer::CfaOrder::kBGGR, cipc_bayer::CfaOrder::kGRBG,
    cipc_bayer::CfaOrder::kGBRG};
constexpr cipc_bayer::BitAlignment kBitAlignments[] = {cipc_bayer::BitAlignment::kLsb,
                                                       cipc_bayer::BitAlignment::kMsb};

// A flat BGRA field of the colour (r, g, b), rows `4 * width` bytes apart.
inline std::vector<uint8_t> flat_bgra(int width, int height, uint8_t r, uint8_t g, uint8_t b) {
  std::vector<uint8_t> in(static_cast<size_t>(width * height) * 4);
  for (size_t i = 0; i < in.size(); i += 4) {
    in[i] = b;
    in[i + 1] = g;
    in[i + 2] = r;
    in[i + 3] = 255;
  }
  return in;
}

}  // namespace cipc_test
