// SPDX-License-Identifier: LGPL-2.1-or-later
// The colour filter array (CFA) of a Bayer sensor: which colour each sample is, and where the
// bits of a sample lie in its 16-bit word. One enum per concept for the whole tree: the V4L2
// capture (v4l2/), the CPU mosaic (mosaic.h), the debayer (cuda/debayer.h) and the elements.
// Plain C++: no CUDA, no GStreamer, no V4L2.
#pragma once

namespace cipc_bayer {

// Colours of the 2x2 tile's top-left, top-right / bottom-left, bottom-right; the tile repeats
// from (0, 0). The values index tables (cfa_color() here, the GPU debayer's specialised
// kernels): do not reorder.
enum class CfaOrder { kRGGB = 0, kBGGR = 1, kGRBG = 2, kGBRG = 3 };
constexpr int kCfaOrderCount = 4;

// Where the significant bits of a sample lie in its 16-bit little-endian word: the low bits
// (V4L2: RG10 has bits 9..0, high bits zero) or the high bits (Jetson VI on Xavier/Orin: a
// 10-bit sample in bits 15..6, the low bits zero or repeated).
enum class BitAlignment { kLsb, kMsb };

// Colour channel of a CFA sample: 0 red, 1 green, 2 blue.
enum CfaColor { kCfaRed = 0, kCfaGreen = 1, kCfaBlue = 2 };

// Colour of the CFA sample at row r, column c (r, c >= 0) for `order`.
inline CfaColor cfa_color(CfaOrder order, int r, int c) {
  static constexpr CfaColor kTiles[kCfaOrderCount][2][2] = {
      {{kCfaRed, kCfaGreen}, {kCfaGreen, kCfaBlue}},  // RGGB
      {{kCfaBlue, kCfaGreen}, {kCfaGreen, kCfaRed}},  // BGGR
      {{kCfaGreen, kCfaRed}, {kCfaBlue, kCfaGreen}},  // GRBG
      {{kCfaGreen, kCfaBlue}, {kCfaRed, kCfaGreen}},  // GBRG
  };
  return kTiles[static_cast<int>(order)][r & 1][c & 1];
}

}  // namespace cipc_bayer
