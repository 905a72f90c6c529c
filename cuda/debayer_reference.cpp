// SPDX-License-Identifier: LGPL-2.1-or-later
// CPU reference of the debayer (the math is documented in debayer.h): written for clarity, the
// oracle of the GPU kernel's tests.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "debayer.h"
#include "debayer_fast.h"

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

int max_adjacent_step(const std::array<uint8_t, kTransferTableSize>& table) {
  int step = 0;
  for (size_t i = 1; i < table.size(); ++i)
    step = std::max(step, std::abs(static_cast<int>(table[i]) - static_cast<int>(table[i - 1])));
  return step;
}

bool fast_gains_in_range(const DebayerParams& p, bool gray_world) {
  const float gains[] = {p.gain, p.wb_red, p.wb_green, p.wb_blue};
  for (float g : gains)
    if (!std::isfinite(g)) return false;
  float largest_wb = std::max({std::fabs(p.wb_red), std::fabs(p.wb_green), std::fabs(p.wb_blue)});
  if (gray_world) largest_wb = std::max(largest_wb, kGrayWorldMaxGain);
  // In double: the product of two large floats must not overflow into a false "in range".
  return static_cast<double>(std::fabs(p.gain)) * largest_wb <= kFastMaxGainProduct;
}

bool fast_debayer_applies(const DebayerParams& p, bool gray_world,
                          const std::array<uint8_t, kTransferTableSize>& table) {
  return fast_gains_in_range(p, gray_world) && max_adjacent_step(table) <= 1;
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

void debayer_fast_model_cpu(const uint8_t* in, size_t in_pitch, uint8_t* out, size_t out_pitch,
                            int width, int height, const DebayerParams& p) {
  if (!in || !out || width < 1 || height < 1) return;
  // A dimension of 1 loses the CFA phase (clamped indexing): the per-colour sums would mix
  // colours, so the GPU runs the exact kernel there, and so does this model.
  if (width < 2 || height < 2) return debayer_cpu(in, in_pitch, out, out_pitch, width, height, p);
  const auto table = make_transfer_table(p.transfer, p.gamma);
  const int black = std::min<int>(p.black_level, 1022);
  const float scale = 1.0f / static_cast<float>(1023 - black);
  const fast::ColorScales k =
      fast::color_scales(p.gain, scale, WbGains{p.wb_red, p.wb_green, p.wb_blue});

  // Black-subtracted raw values, as floats (exact integers).
  const size_t w = static_cast<size_t>(width);
  std::vector<float> u(w * static_cast<size_t>(height));
  for (int r = 0; r < height; ++r) {
    const uint8_t* row = in + static_cast<size_t>(r) * in_pitch;
    for (int c = 0; c < width; ++c)
      u[static_cast<size_t>(r) * w + static_cast<size_t>(c)] =
          static_cast<float>(std::max(raw_sample(row, c, p.alignment) - black, 0));
  }
  auto m = [&](int r, int c) {
    return u[static_cast<size_t>(mirror(r, height)) * w + static_cast<size_t>(mirror(c, width))];
  };

  const bool mhc = p.method == Demosaic::kMhc;
  for (int r = 0; r < height; ++r) {
    uint8_t* row = out + static_cast<size_t>(r) * out_pitch;
    for (int c = 0; c < width; ++c) {
      fast::WindowSums s;
      s.C = m(r, c);
      s.H1 = m(r, c - 1) + m(r, c + 1);
      s.V1 = m(r - 1, c) + m(r + 1, c);
      s.D = m(r - 1, c - 1) + m(r - 1, c + 1) + m(r + 1, c - 1) + m(r + 1, c + 1);
      s.H2 = m(r, c - 2) + m(r, c + 2);
      s.V2 = m(r - 2, c) + m(r + 2, c);
      int index[3];
      const Color here = cfa_color(p.phase, r, c);
      if (here != kGreen) {
        const Color other = here == kRed ? kBlue : kRed;
        if (mhc) {
          fast::chroma_site<true>(s, k.k[here], k.k[kGreen], k.k[other], &index[here],
                                  &index[kGreen], &index[other]);
        } else {
          fast::chroma_site<false>(s, k.k[here], k.k[kGreen], k.k[other], &index[here],
                                   &index[kGreen], &index[other]);
        }
      } else {
        const Color row_color = cfa_color(p.phase, r, c + 1);
        const Color col_color = row_color == kRed ? kBlue : kRed;
        if (mhc) {
          fast::green_site<true>(s, k.k[kGreen], k.k[row_color], k.k[col_color], &index[kGreen],
                                 &index[row_color], &index[col_color]);
        } else {
          fast::green_site<false>(s, k.k[kGreen], k.k[row_color], k.k[col_color], &index[kGreen],
                                  &index[row_color], &index[col_color]);
        }
      }
      uint8_t* px = row + 4 * static_cast<size_t>(c);
      const bool rgba = p.order == PixelOrder::kRgba;
      px[0] = table[static_cast<size_t>(index[rgba ? kRed : kBlue])];
      px[1] = table[static_cast<size_t>(index[kGreen])];
      px[2] = table[static_cast<size_t>(index[rgba ? kBlue : kRed])];
      px[3] = 255;
    }
  }
}

}  // namespace cipc_cuda
