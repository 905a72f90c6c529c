// SPDX-License-Identifier: LGPL-2.1-or-later
// The per-pixel arithmetic of Precision::kFast (debayer.h), shared by the GPU's fast kernel
// (debayer.cu) and its CPU model (debayer_fast_model_cpu), so that the two agree bit for bit.
//
// The inputs are sums of black-subtracted raw values u = max(v - b, 0) around a pixel, held in
// floats: they are integers below 2^24, so every sum and every small-integer multiple of them
// is exact, whatever the order. Each output channel is then at most two colours' sums, A of
// colour X and B of colour Y, each scaled once: index = round(clamp(kX * A + kY * B, 0, 4095)),
// with kX = gain * scale * 4095 * wb_X (ColorScales) times the kernel weight's power of two.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>

#include "debayer.h"

namespace cipc_cuda {
namespace fast {

// Sums of u at and around one pixel, named as in debayer.h's step 3.
struct WindowSums {
  float C, H1, V1, D, H2, V2;
};

// Table index per unit of u, per CFA colour (index kCfaRed/Green/Blue).
struct ColorScales {
  float k[3];
};

CIPC_HOST_DEVICE inline ColorScales color_scales(float gain, float scale, WbGains wb) {
  const float base = gain * scale * 4095.0f;
  return ColorScales{{base * wb.red, base * wb.green, base * wb.blue}};
}

// round(clamp(y, 0, 4095)) for |y| < 2^22 (fast_gains_in_range keeps |y| below 2^20). Adding
// 1.5 * 2^23, where floats are spaced 1 apart, rounds y to an integer (ties to even, where the
// reference rounds away from zero: within the 1-index bound) held in the low bits of the sum;
// the clamp is then one integer add-min-max (a single DPX instruction on sm_90). No
// quarter-rate float-to-int conversion.
constexpr int kRoundingShiftBits = 0x4B400000;  // 1.5 * 2^23 as a float's bits
CIPC_HOST_DEVICE inline int table_index(float y) {
  const float shifted = y + 12582912.0f;
#ifdef __CUDA_ARCH__
  return __viaddmin_s32_relu(__float_as_int(shifted), -kRoundingShiftBits, kTransferTableSize - 1);
#else
  int bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return std::max(std::min(bits - kRoundingShiftBits, kTransferTableSize - 1), 0);
#endif
}

// kX * A + kY * B with one rounding of the product kY * B and one of the fused sum: explicit
// fmaf, so that nvcc's -fmad=false and the host compiler give the same float.
CIPC_HOST_DEVICE inline float mix(float kX, float A, float kY, float B) {
  return fmaf(kX, A, kY * B);
}

// Table indices of the channels at an R or B site: its own colour X (`here`), green, and the
// other chroma colour Y. kMhc: debayer.h's weights times 16,
//   G = [kX (4C - (H2 + V2)) / 8] + [kG (H1 + V1) / 4]
//   Y = [kX (12C - 3 (H2 + V2)) / 16] + [kY D / 4];   bilinear: G = kG (H1 + V1) / 4, Y = kY D / 4.
template <bool kMhc>
CIPC_HOST_DEVICE inline void chroma_site(const WindowSums& s, float kX, float kG, float kY,
                                         int* here, int* green, int* other) {
  *here = table_index(kX * s.C);
  const float HV1 = s.H1 + s.V1;
  if (kMhc) {
    const float HV2 = s.H2 + s.V2;
    // fmaf on integers below 2^24 is exact, like the separate operations, in one instruction.
    *green = table_index(mix(kX * 0.125f, fmaf(4.0f, s.C, -HV2), kG * 0.25f, HV1));
    *other = table_index(mix(kX * 0.0625f, fmaf(-3.0f, HV2, 12.0f * s.C), kY * 0.25f, s.D));
  } else {
    *green = table_index(kG * 0.25f * HV1);
    *other = table_index(kY * 0.25f * s.D);
  }
}

// Table indices at a G site: green, P (the colour of its row neighbours) and Q (its column
// neighbours'). kMhc: P = [kG (10C - 2 (H2 + D) + V2) / 16] + [kP H1 / 2], Q likewise with H and
// V swapped; bilinear: P = kP H1 / 2, Q = kQ V1 / 2.
template <bool kMhc>
CIPC_HOST_DEVICE inline void green_site(const WindowSums& s, float kG, float kP, float kQ,
                                        int* green, int* row, int* column) {
  *green = table_index(kG * s.C);
  if (kMhc) {
    const float tenC_V2 = fmaf(10.0f, s.C, s.V2), tenC_H2 = fmaf(10.0f, s.C, s.H2);  // exact
    *row = table_index(mix(kG * 0.0625f, fmaf(-2.0f, s.H2 + s.D, tenC_V2), kP * 0.5f, s.H1));
    *column = table_index(mix(kG * 0.0625f, fmaf(-2.0f, s.V2 + s.D, tenC_H2), kQ * 0.5f, s.V1));
  } else {
    *row = table_index(kP * 0.5f * s.H1);
    *column = table_index(kQ * 0.5f * s.V1);
  }
}

}  // namespace fast
}  // namespace cipc_cuda
