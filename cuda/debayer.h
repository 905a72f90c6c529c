// SPDX-License-Identifier: LGPL-2.1-or-later
// Bayer RAW10 -> BGRA8 demosaic ("debayer"; docs/architecture.md, "The camera chain"): the
// parameters and the CPU reference, which is the oracle the GPU kernel is tested against. Plain
// C++, no CUDA. The CFA order and bit alignment are bayer/cfa.h's (cipc_bayer::CfaOrder,
// BitAlignment).
//
// The math, per output pixel (r, c), 0 <= r < height, 0 <= c < width:
//
// 1. Raw value. The input word w(r, c) is the 16-bit little-endian word at
//    in + r * in_pitch + 2 * c. Its 10-bit value is v = w & 0x3FF (BitAlignment::kLsb, V4L2
//    RG10: 6 high bits zero) or v = w >> 6 (kMsb, Jetson VI5: D9..D0 at bits 15..6; the low 6
//    bits, zero or replicated MSBs, are ignored). With b = black_level (clamped to <= 1022):
//        s(r, c) = max(v - b, 0) / (1023 - b)          (float)
// 2. White balance on the mosaic, before demosaic: s(r, c) *= wb_red, wb_green or wb_blue,
//    according to the CFA colour of (r, c), cfa_color(phase, r, c) of cfa.h (`phase`, a
//    CfaOrder, gives the colours of the 2x2 tile: top-left, top-right / bottom-left,
//    bottom-right; the tile repeats from (0, 0)).
// 3. Demosaic of that white-balanced mosaic m. Samples outside the image are read with mirror
//    indexing that does not repeat the edge (reflect-101: -1 -> 1, -2 -> 2, n -> n-2,
//    n+1 -> n-3, repeated as needed, so n = 2 works too); this keeps the CFA phase. For a
//    dimension of 1 the index is clamped instead (0), which does not keep the phase: the output
//    is finite but its colours are meaningless. Notation at (r, c), C = m(r, c):
//        H1 = m(r, c-1) + m(r, c+1)      V1 = m(r-1, c) + m(r+1, c)
//        H2 = m(r, c-2) + m(r, c+2)      V2 = m(r-2, c) + m(r+2, c)
//        D  = m(r-1, c-1) + m(r-1, c+1) + m(r+1, c-1) + m(r+1, c+1)
//    At an R or B site (X its colour, Y the other chroma colour):
//        bilinear:  X = C,  G = (H1 + V1) / 4,                  Y = D / 4
//        MHC:       X = C,  G = (4C + 2(H1 + V1) - (H2 + V2)) / 8,
//                           Y = (6C + 2D - 3/2 (H2 + V2)) / 8
//    At a G site, P the colour of its row neighbours, Q the colour of its column neighbours:
//        bilinear:  G = C,  P = H1 / 2,  Q = V1 / 2
//        MHC:       G = C,  P = (5C + 4 H1 - H2 - D + V2 / 2) / 8,
//                           Q = (5C + 4 V1 - V2 - D + H2 / 2) / 8
//    (Malvar, He, Cutler, "High-quality linear interpolation for demosaicing of
//    Bayer-patterned color images", ICASSP 2004; every kernel's weights sum to 8, so flat
//    fields and linear gradients are reproduced exactly.)
// 4. Each of R, G, B: x = clamp(gain * x, 0, 1) (NaN -> 0), then
//    out = table[lroundf(x * 4095)] with table = make_transfer_table(transfer, gamma);
//    written as bytes B, G, R, 255 (PixelOrder::kBgra) or R, G, B, 255 (kRgba) at
//    out + r * out_pitch + 4 * c. Nothing else is written.
//
// Gray-world white balance (WhiteBalance::kGrayWorld in the GPU debayer): the gains of step 2
// come from the previous frame's statistics, S_X = sum of max(v - b, 0) over the samples of
// colour X and N_X their number: wb_green = 1, wb_red = (S_G / N_G) / (S_R / N_R) and
// wb_blue likewise, each clamped to [1/8, 8], computed in double and rounded to float
// (gray_world_gains). Without statistics (the first frame, or a colour whose sum is 0) the
// fixed gains are used.
//
// Transfer tables: entry i (0..4095), x = i / 4095, y =
//    kLinear: x;   kPower: x^(1/gamma) (gamma <= 0 or not finite: treated as 1);
//    kSrgb (IEC 61966-2-1): x <= 0.0031308 ? 12.92 x : 1.055 x^(1/2.4) - 0.055;
// entry = round(255 * y), computed in double.
//
// Precision (DebayerParams::precision, GPU only; debayer_cpu always computes the above):
//  - kExact: the GPU output equals debayer_cpu's byte for byte (float math in the order above).
//  - kFast (the default): every output byte is within 1 code of debayer_cpu's. The GPU sums
//    the black-subtracted raw values u = max(v - b, 0) of each colour exactly (integers; every
//    MHC weight is a multiple of 1/16) and scales each colour's sum once by
//    k_X = gain * (1 / (1023 - b)) * 4095 * wb_X, so that the table index is
//    round(clamp(k_X * A + k_Y * B, 0, 4095)) with A, B the per-colour sums (debayer_fast.h).
//    The bound: both approximate the same real number. The reference rounds each term at
//    most 9 times (2 in step 1-2, 5 in the demosaic sums, gain, * 4095), the fast path 5 times
//    (3 in k_X, the product, the fused add), each by a relative u = 2^-24, on terms whose
//    magnitudes add up to at most 4095 * 2.5 * G (2.5: the largest sum of |weights|, MHC;
//    G = |gain| * the largest |white-balance gain|). For G <= kFastMaxGainProduct the two
//    indices before rounding differ by at most 14u * 4095 * 2.5 * 64 = 0.55 < 1, hence by at
//    most 1 after rounding, and the output codes by at most the table's largest step between
//    adjacent entries. GpuDebayer therefore runs kFast only where fast_debayer_applies(): the
//    table's adjacent entries differ by at most 1 (sRGB and linear; power only for gamma up
//    to about 1.6 - steeper curves jump several codes near black), G is at most 64 (gray
//    world counts its gains as up to 8) and width and height are at least 2; otherwise it runs
//    the exact kernel.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "cfa.h"

namespace cipc_cuda {

// Bilinear (3x3) or Malvar-He-Cutler (5x5).
enum class Demosaic { kBilinear, kMhc };
enum class Transfer { kSrgb, kLinear, kPower };
// Byte order of the output pixels (the 4th byte is 255 in both).
enum class PixelOrder { kBgra, kRgba };
// GPU arithmetic: within 1 code of debayer_cpu (faster), or bit-exact (see above).
enum class Precision { kFast, kExact };

// The CFA order (`phase`) and the bit alignment are bayer/cfa.h's.
struct DebayerParams {
  cipc_bayer::CfaOrder phase = cipc_bayer::CfaOrder::kRGGB;
  cipc_bayer::BitAlignment alignment = cipc_bayer::BitAlignment::kLsb;
  Demosaic method = Demosaic::kMhc;
  uint16_t black_level = 0;  // 10-bit units, < 1023 (larger values are treated as 1022)
  float wb_red = 1.0f;       // white-balance gains, applied to the mosaic
  float wb_green = 1.0f;
  float wb_blue = 1.0f;
  float gain = 1.0f;  // overall gain after demosaic
  Transfer transfer = Transfer::kSrgb;
  float gamma = 2.2f;  // used by Transfer::kPower: out = x^(1/gamma)
  PixelOrder order = PixelOrder::kBgra;
  Precision precision = Precision::kFast;  // GPU only; debayer_cpu is always exact
};

// Host and device code share this header's inline functions (the GPU computes the gray-world
// gains itself, from statistics it gathered, with exactly the CPU's arithmetic).
#ifdef __CUDACC__
#define CIPC_HOST_DEVICE __host__ __device__
#else
#define CIPC_HOST_DEVICE
#endif

// Samples of each colour in a width x height mosaic: rows and columns of each parity.
CIPC_HOST_DEVICE inline uint64_t cfa_rows_of_parity(int n, int parity) {
  return n <= parity ? 0u : static_cast<uint64_t>((n - parity + 1) / 2);
}

struct WbGains {
  float red = 1.0f, green = 1.0f, blue = 1.0f;
};

constexpr float kGrayWorldMinGain = 0.125f;
constexpr float kGrayWorldMaxGain = 8.0f;

// Gray-world gains from one frame's sums and counts (index kCfaRed/Green/Blue); `fallback` when
// a colour has no signal. See the comment at the top.
CIPC_HOST_DEVICE inline WbGains gray_world_gains(const unsigned long long sum[3],
                                                 const unsigned long long count[3],
                                                 WbGains fallback) {
  for (int k = 0; k < 3; ++k)
    if (sum[k] == 0 || count[k] == 0) return fallback;
  using cipc_bayer::kCfaBlue;
  using cipc_bayer::kCfaGreen;
  using cipc_bayer::kCfaRed;
  const double mean_r = static_cast<double>(sum[kCfaRed]) / static_cast<double>(count[kCfaRed]);
  const double mean_g = static_cast<double>(sum[kCfaGreen]) / static_cast<double>(count[kCfaGreen]);
  const double mean_b = static_cast<double>(sum[kCfaBlue]) / static_cast<double>(count[kCfaBlue]);
  auto clamp_gain = [](double g) {
    return static_cast<float>(g < kGrayWorldMinGain   ? kGrayWorldMinGain
                              : g > kGrayWorldMaxGain ? kGrayWorldMaxGain
                                                      : g);
  };
  WbGains g;
  g.red = clamp_gain(mean_g / mean_r);
  g.green = 1.0f;
  g.blue = clamp_gain(mean_g / mean_b);
  return g;
}

// The statistics gray world needs, for one frame.
struct BayerSums {
  unsigned long long sum[3] = {0, 0, 0};    // of max(v - black, 0), per CFA colour
  unsigned long long count[3] = {0, 0, 0};  // samples per CFA colour
};

// Sample counts per colour of a width x height mosaic of `phase`.
BayerSums cfa_sample_counts(cipc_bayer::CfaOrder phase, int width, int height);

// CPU reference of the statistics (uses phase, alignment and black_level of `p`).
BayerSums bayer_sums_cpu(const uint8_t* in, size_t in_pitch, int width, int height,
                         const DebayerParams& p);

constexpr int kTransferTableSize = 4096;

// Maps round(x * 4095), x in [0, 1], to the 8-bit output code (see above).
std::array<uint8_t, kTransferTableSize> make_transfer_table(Transfer t, float gamma);

// Largest difference between adjacent entries of a table: Precision::kFast's bound is 1 code
// only where this is at most 1.
int max_adjacent_step(const std::array<uint8_t, kTransferTableSize>& table);

// The largest |gain| * |white-balance gain| for which kFast's index stays within 1 of the
// reference's (see above: the two differ by at most 14u * 4095 * 2.5 * G = 8.6e-3 * G table
// indices, 0.55 at the limit).
constexpr float kFastMaxGainProduct = 64.0f;

// Whether kFast keeps every byte within 1 code of debayer_cpu for `p` (its precision field is
// not looked at): finite gains with |gain| * max |wb| <= kFastMaxGainProduct (gray_world: the
// white-balance gains may also be anything up to kGrayWorldMaxGain) and a table whose adjacent
// entries differ by at most 1 (`table`: make_transfer_table(p.transfer, p.gamma)).
bool fast_gains_in_range(const DebayerParams& p, bool gray_world);
bool fast_debayer_applies(const DebayerParams& p, bool gray_world,
                          const std::array<uint8_t, kTransferTableSize>& table);

// in: rows of 16-bit little-endian words, `in_pitch` bytes apart (>= 2 * width);
// out: BGRA8 (A = 255), `out_pitch` bytes apart (>= 4 * width). Padding is neither read nor
// written. Does nothing when a pointer is null or width or height is < 1.
void debayer_cpu(const uint8_t* in, size_t in_pitch, uint8_t* out, size_t out_pitch, int width,
                 int height, const DebayerParams& p);

// A CPU model of the GPU's Precision::kFast arithmetic (debayer_fast.h), same arguments as
// debayer_cpu: the GPU's fast kernel produces exactly this. For tests: it lets the 1-code bound
// be checked against debayer_cpu without a GPU. Gains: p's wb_red/green/blue as given. A
// width or height of 1 (where clamped indexing loses the CFA phase) runs debayer_cpu, as the
// GPU runs its exact kernel there.
void debayer_fast_model_cpu(const uint8_t* in, size_t in_pitch, uint8_t* out, size_t out_pitch,
                            int width, int height, const DebayerParams& p);

}  // namespace cipc_cuda
