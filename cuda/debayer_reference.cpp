// SPDX-License-Identifier: LGPL-2.1-or-later
// CPU reference of the debayer (the math is documented in debayer.h): written for clarity, the
// oracle of the GPU kernel's tests.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "debayer.h"

namespace cipc_cuda {

namespace {

using cipc_bayer::BitAlignment;
using cipc_bayer::cfa_color;
using Color = cipc_bayer::CfaColor;
constexpr Color kRed = cipc_bayer::kCfaRed, kGreen = cipc_bayer::kCfaGreen,
                kBlue = cipc_bayer::kCfaBlue;

// Reflect-101 index into [0, n): -1 -> 1, n -> n - 2, periodic with period 2(n - 1), which
// is even, so the parity (the CFA phase) is kept. n == 1: clamp to 0.
int mirror(int i, int n) {
  if (n <= 1) return 0;
  const int period = 2 * (n - 1);
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - i;
}

// Step 1's 10-bit value of sample c of a row.
int raw_sample(const uint8_t* row, int c, BitAlignment alignment) {
  const uint32_t word =
      static_cast<uint32_t>(row[2 * c]) | (static_cast<uint32_t>(row[2 * c + 1]) << 8);
  return static_cast<int>(alignment == BitAlignment::kLsb ? (word & 0x3FFu) : (word >> 6));
}

float clamp01(float x) {
  return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f;
}  // NaN -> 0

}  // namespace

std::array<uint8_t, kTransferTableSize> make_transfer_table(Transfer t, float gamma) {
  std::array<uint8_t, kTransferTableSize> table{};
  const double g = (std::isfinite(gamma) && gamma > 0.0f) ? static_cast<double>(gamma) : 1.0;
  for (int i = 0; i < kTransferTableSize; ++i) {
    const double x = static_cast<double>(i) / (kTransferTableSize - 1);
    double y = x;
    switch (t) {
      case Transfer::kLinear: y = x; break;
      case Transfer::kPower: y = std::pow(x, 1.0 / g); break;
      case Transfer::kSrgb:
        y = x <= 0.0031308 ? 12.92 * x : 1.055 * std::pow(x, 1.0 / 2.4) - 0.055;
        break;
    }
    const long code = std::lround(255.0 * y);
    table[i] = static_cast<uint8_t>(std::clamp(code, 0l, 255l));
  }
  return table;
}

BayerSums cfa_sample_counts(cipc_bayer::CfaOrder phase, int width, int height) {
  BayerSums sums;
  if (width < 1 || height < 1) return sums;
  for (int row_parity = 0; row_parity < 2; ++row_parity) {
    for (int col_parity = 0; col_parity < 2; ++col_parity) {
      sums.count[cfa_color(phase, row_parity, col_parity)] +=
          cfa_rows_of_parity(height, row_parity) * cfa_rows_of_parity(width, col_parity);
    }
  }
  return sums;
}

BayerSums bayer_sums_cpu(const uint8_t* in, size_t in_pitch, int width, int height,
                         const DebayerParams& p) {
  BayerSums sums = cfa_sample_counts(p.phase, width, height);
  if (!in || width < 1 || height < 1) return sums;
  const int black = std::min<int>(p.black_level, 1022);
  for (int r = 0; r < height; ++r) {
    const uint8_t* row = in + static_cast<size_t>(r) * in_pitch;
    for (int c = 0; c < width; ++c) {
      const int v = raw_sample(row, c, p.alignment);
      sums.sum[cfa_color(p.phase, r, c)] += static_cast<unsigned long long>(std::max(v - black, 0));
    }
  }
  return sums;
}

void debayer_cpu(const uint8_t* in, size_t in_pitch, uint8_t* out, size_t out_pitch, int width,
                 int height, const DebayerParams& p) {
  if (!in || !out || width < 1 || height < 1) return;
  const auto table = make_transfer_table(p.transfer, p.gamma);
  const int black = std::min<int>(p.black_level, 1022);
  const float scale = 1.0f / static_cast<float>(1023 - black);
  const float wb[3] = {p.wb_red, p.wb_green, p.wb_blue};

  // Steps 1 and 2: the white-balanced linear mosaic.
  const size_t w = static_cast<size_t>(width);
  std::vector<float> mosaic(w * static_cast<size_t>(height));
  for (int r = 0; r < height; ++r) {
    const uint8_t* row = in + static_cast<size_t>(r) * in_pitch;
    for (int c = 0; c < width; ++c) {
      const int v = raw_sample(row, c, p.alignment);
      const float s = static_cast<float>(std::max(v - black, 0)) * scale;
      mosaic[static_cast<size_t>(r) * w + static_cast<size_t>(c)] =
          s * wb[cfa_color(p.phase, r, c)];
    }
  }
  auto m = [&](int r, int c) {
    return mosaic[static_cast<size_t>(mirror(r, height)) * w +
                  static_cast<size_t>(mirror(c, width))];
  };

  // Step 3: demosaic; step 4: gain, clamp, transfer, BGRA. (Multiplying by 1/8, 1/4 and 1/2
  // is exactly dividing by 8, 4 and 2: the reciprocals are exact powers of two.)
  const bool mhc = p.method == Demosaic::kMhc;
  for (int r = 0; r < height; ++r) {
    uint8_t* row = out + static_cast<size_t>(r) * out_pitch;
    for (int c = 0; c < width; ++c) {
      const float C = m(r, c);
      const float H1 = m(r, c - 1) + m(r, c + 1);
      const float V1 = m(r - 1, c) + m(r + 1, c);
      const float D = m(r - 1, c - 1) + m(r - 1, c + 1) + m(r + 1, c - 1) + m(r + 1, c + 1);
      float H2 = 0.0f;
      float V2 = 0.0f;
      if (mhc) {
        H2 = m(r, c - 2) + m(r, c + 2);
        V2 = m(r - 2, c) + m(r + 2, c);
      }
      float rgb[3];
      const Color here = cfa_color(p.phase, r, c);
      if (here != kGreen) {
        const Color other = here == kRed ? kBlue : kRed;
        rgb[here] = C;
        if (mhc) {
          rgb[kGreen] = (4.0f * C + 2.0f * (H1 + V1) - (H2 + V2)) * 0.125f;
          rgb[other] = (6.0f * C + 2.0f * D - 1.5f * (H2 + V2)) * 0.125f;
        } else {
          rgb[kGreen] = (H1 + V1) * 0.25f;
          rgb[other] = D * 0.25f;
        }
      } else {
        const Color row_color = cfa_color(p.phase, r, c + 1);  // colour of the row neighbours
        const Color col_color = row_color == kRed ? kBlue : kRed;
        rgb[kGreen] = C;
        if (mhc) {
          rgb[row_color] = (5.0f * C + 4.0f * H1 - H2 - D + 0.5f * V2) * 0.125f;
          rgb[col_color] = (5.0f * C + 4.0f * V1 - V2 - D + 0.5f * H2) * 0.125f;
        } else {
          rgb[row_color] = H1 * 0.5f;
          rgb[col_color] = V1 * 0.5f;
        }
      }
      uint8_t code[3];
      for (int k = 0; k < 3; ++k) {
        const float x = clamp01(p.gain * rgb[k]);
        code[k] = table[static_cast<size_t>(std::lroundf(x * 4095.0f))];
      }
      uint8_t* px = row + 4 * static_cast<size_t>(c);
      const bool rgba = p.order == PixelOrder::kRgba;
      px[0] = code[rgba ? kRed : kBlue];
      px[1] = code[kGreen];
      px[2] = code[rgba ? kBlue : kRed];
      px[3] = 255;
    }
  }
}

}  // namespace cipc_cuda
