// SPDX-License-Identifier: LGPL-2.1-or-later
// The debayer kernels and GpuDebayer (debayer_gpu.h). Two kernels:
//  - exact_kernel (Precision::kExact): the per-pixel arithmetic is written in the same order as
//    debayer_reference.cpp, and this file is compiled with -fmad=false so that no multiply-add
//    is fused: the GPU then produces the CPU reference's floats exactly.
//  - fast_kernel (Precision::kFast): exact integer sums per colour and one scaling per colour
//    (debayer_fast.h; its fused multiply-adds are explicit fmaf calls), within 1 code of the
//    reference. About half the instructions per pixel: its tile holds black-subtracted raw
//    values (no per-sample scaling and white balance), and each thread slides one window down
//    four quads instead of loading a window per quad.
#include <cuda_runtime.h>

#include <array>
#include <cstring>
#include <string>

#include "check.h"
#include "debayer_fast.h"
#include "debayer_gpu.h"
#include "device_scope.h"
#include "launch.cuh"

namespace cipc_cuda {

namespace {

constexpr int kQuadsX = 32;  // threads per block in x and y; each thread makes a 2x2 quad
constexpr int kQuadsY = 8;
constexpr int kTileW = 2 * kQuadsX;  // output pixels per block: 64 x 32
constexpr int kQuadRows = 2;  // quads per thread, stacked: fewer blocks share the fixed costs
constexpr int kTileH = 2 * kQuadsY * kQuadRows;
constexpr int kHalo = 2;  // MHC reads two samples away
constexpr int kSharedW = kTileW + 2 * kHalo;
constexpr int kSharedH = kTileH + 2 * kHalo;
constexpr int kStatsSlots = 3;
constexpr int kStatsCopies = 16;  // partial sums per slot, to spread the atomics
static_assert(kStatsCopies <= 32, "warp 0 reads the copies, one per lane");

using cipc_bayer::kCfaBlue;
using cipc_bayer::kCfaGreen;
using cipc_bayer::kCfaRed;

// cfa_color() of cfa.h packed per CfaOrder (its values index this): 2 bits per position
// (r & 1) * 2 + (c & 1). RGGB = R G / G B = 0,1,1,2; BGGR = 2,1,1,0; GRBG = 1,0,2,1;
// GBRG = 1,2,0,1.
constexpr unsigned pack_tile(unsigned tl, unsigned tr, unsigned bl, unsigned br) {
  return tl | (tr << 2) | (bl << 4) | (br << 6);
}
constexpr unsigned kPackedTiles[cipc_bayer::kCfaOrderCount] = {
    pack_tile(0, 1, 1, 2), pack_tile(2, 1, 1, 0), pack_tile(1, 0, 2, 1), pack_tile(1, 2, 0, 1)};
static_assert(static_cast<int>(cipc_bayer::CfaOrder::kRGGB) == 0 &&
                  static_cast<int>(cipc_bayer::CfaOrder::kBGGR) == 1 &&
                  static_cast<int>(cipc_bayer::CfaOrder::kGRBG) == 2 &&
                  static_cast<int>(cipc_bayer::CfaOrder::kGBRG) == 3,
              "kPackedTiles and the kernel tables are indexed by CfaOrder");

__host__ __device__ constexpr int color_at(unsigned packed, int r, int c) {
  return static_cast<int>((packed >> (2 * (((r & 1) << 1) | (c & 1)))) & 3u);
}

// Reflect-101 as in the reference.
__device__ __forceinline__ int mirror(int i, int n) {
  if (n <= 1) return 0;
  const int period = 2 * (n - 1);
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - i;
}

// lroundf for 0 <= y < 2^23, in 32 bits (lroundf converts to a 64-bit integer, which is slow):
// the fraction y - trunc(y) is exact, so comparing it with 0.5 rounds halves away from zero.
__device__ __forceinline__ int round_half_up(float y) {
  const float whole = truncf(y);
  return static_cast<int>(whole) + (y - whole >= 0.5f ? 1 : 0);
}

__device__ __forceinline__ float clamp01(float x) {
  return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f;
}

struct KernelArgs {
  const uint8_t* in;
  size_t in_pitch;
  uint8_t* out;
  size_t out_pitch;
  int width, height;
  bool msb;
  bool rgba;
  bool pairs_aligned8;  // every pixel pair (even column) is 8-byte aligned
  bool in_aligned4;     // every input sample pair (even column) is 4-byte aligned
  bool in_aligned16;    // every input row starts 16-byte aligned
  int black;
  float scale;
  float gain;
  WbGains fixed;
  const uint8_t* table;
  // Gray world: gains from slot_read, sums added into slot_add. The rotation (zeroing
  // slot_clear) runs in fixed mode too, so a switch to gray world finds zeroed slots.
  unsigned long long* stats;  // [kStatsSlots][kStatsCopies][3]
  int slot_add, slot_read, slot_clear;
  unsigned long long count[3];
  WbGains* gains_out;  // mapped host memory, written by block (0, 0)
};

// Per block, before its first __syncthreads(): the first block zeroes the statistics slot
// nobody uses this frame (see debayer_gpu.h); warp 0 computes the white-balance gains (from
// the previous frame's sums, kStatsCopies partial copies of them, in gray world), and its lane 0
// zeroes block_sums and returns them (the first block also publishes them in gains_out).
// Returns the gains in lane 0 of warp 0 only.
template <bool kGrayWorld>
__device__ __forceinline__ WbGains block_start(const KernelArgs& a, int tid,
                                               unsigned block_sums[3]) {
  const bool first_block = blockIdx.x == 0 && blockIdx.y == 0;
  if (first_block && tid < kStatsCopies * 3) a.stats[a.slot_clear * kStatsCopies * 3 + tid] = 0;
  WbGains g = a.fixed;
  if (tid < 32) {
    unsigned long long sums[3] = {0, 0, 0};
    if (kGrayWorld && tid < kStatsCopies) {
      const unsigned long long* copy = a.stats + (a.slot_read * kStatsCopies + tid) * 3;
      sums[0] = copy[0];
      sums[1] = copy[1];
      sums[2] = copy[2];
    }
    for (int k = 0; k < 3; ++k)
      for (int offset = 16; offset > 0; offset >>= 1)
        sums[k] += __shfl_down_sync(0xffffffffu, sums[k], offset);
    if (tid == 0) {
      if (kGrayWorld) g = gray_world_gains(sums, a.count, a.fixed);
      block_sums[0] = block_sums[1] = block_sums[2] = 0;
      if (first_block && a.gains_out) *a.gains_out = g;
    }
  }
  return g;
}

// After the block's last __syncthreads(): its statistics into one of kStatsCopies partial
// copies (thousands of atomics on three addresses would serialise).
__device__ __forceinline__ void block_end(const KernelArgs& a, int tid,
                                          const unsigned block_sums[3]) {
  const int copy = (blockIdx.y * gridDim.x + blockIdx.x) % kStatsCopies;
  if (tid < 3 && block_sums[tid] != 0)
    atomicAdd(a.stats + (a.slot_add * kStatsCopies + copy) * 3 + tid,
              static_cast<unsigned long long>(block_sums[tid]));
}

// Each warp's per-thread sums into block_sums.
__device__ __forceinline__ void add_warp_sums(int tid, unsigned sum_red, unsigned sum_green,
                                              unsigned sum_blue, unsigned block_sums[3]) {
  const unsigned local_sums[3] = {sum_red, sum_green, sum_blue};
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    unsigned v = local_sums[k];
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    if ((tid & 31) == 0 && v != 0) atomicAdd(&block_sums[k], v);
  }
}

// Specialised for the phase, the method and gray world: colours are then known at compile time
// for each position of a quad, and no per-pixel branch remains.
template <int kPhase, bool kMhc, bool kGrayWorld>
__global__ void __launch_bounds__(kQuadsX* kQuadsY) exact_kernel(const KernelArgs a) {
  constexpr unsigned kPacked = kPackedTiles[kPhase];
  __shared__ __align__(16) float tile[kSharedH][kSharedW];  // rows 272 bytes: 8-byte aligned
  __shared__ float wb[3];
  __shared__ unsigned block_sums[3];  // at most 64 x 32 x 1023: fits 32 bits
  const int tid = threadIdx.y * kQuadsX + threadIdx.x;
  const int tile_r0 = blockIdx.y * kTileH;
  const int tile_c0 = blockIdx.x * kTileW;

  // The transfer table, into shared memory: per-pixel lookups at scattered addresses are far
  // cheaper there than in global memory.
  __shared__ uint4 table[kTransferTableSize / 16];
  for (int i = tid; i < kTransferTableSize / 16; i += kQuadsX * kQuadsY)
    table[i] = __ldg(reinterpret_cast<const uint4*>(a.table) + i);

  const WbGains gains = block_start<kGrayWorld>(a, tid, block_sums);
  if (tid == 0) {
    wb[0] = gains.red;
    wb[1] = gains.green;
    wb[2] = gains.blue;
  }
  __syncthreads();

  // Steps 1 and 2 for the tile and its halo; statistics from the tile's own samples.
  // White balance per CFA position, in registers.
  const float wb00 = wb[color_at(kPacked, 0, 0)], wb01 = wb[color_at(kPacked, 0, 1)];
  const float wb10 = wb[color_at(kPacked, 1, 0)], wb11 = wb[color_at(kPacked, 1, 1)];
  unsigned sum_red = 0, sum_green = 0, sum_blue = 0;  // 32 bits suffice within a block
  // One sample read from image position (gr, gc): black level, scale, white balance of its
  // colour; returns the tile value.
  auto convert = [&](int gr, int gc, unsigned word, bool in_tile) {
    const int v = a.msb ? static_cast<int>((word & 0xFFFFu) >> 6) : static_cast<int>(word & 0x3FFu);
    const int above_black = max(v - a.black, 0);
    const bool odd_row = gr & 1, odd_col = gc & 1;
    if (kGrayWorld && in_tile) {
      const int color = color_at(kPacked, gr, gc);
      const auto x = static_cast<unsigned>(above_black);
      sum_red += color == kCfaRed ? x : 0u;
      sum_green += color == kCfaGreen ? x : 0u;
      sum_blue += color == kCfaBlue ? x : 0u;
    }
    const float gain = odd_row ? (odd_col ? wb11 : wb10) : (odd_col ? wb01 : wb00);
    return static_cast<float>(above_black) * a.scale * gain;
  };
  const bool interior = tile_r0 >= kHalo && tile_c0 >= kHalo &&
                        tile_r0 + kTileH + kHalo <= a.height && tile_c0 + kTileW + kHalo <= a.width;
  constexpr int kWordsPerRow = kSharedW / 2;
  // Most blocks lie inside the image and need no mirroring. With 16-byte aligned rows they read
  // whole 16-byte chunks (8 samples) from 8 samples left of the halo to 8 right of the tile -
  // fewer, larger requests, which matters most when the input is host memory read over the bus.
  constexpr int kChunkLead = 8;  // samples loaded left of the tile (the halo needs 2)
  constexpr int kChunksPerRow = (kTileW + 2 * kChunkLead) / 8;
  const bool interior16 = a.in_aligned16 && tile_r0 >= kHalo && tile_c0 >= kChunkLead &&
                          tile_r0 + kTileH + kHalo <= a.height &&
                          tile_c0 + kTileW + kChunkLead <= a.width;
  if (interior16) {
    const uint8_t* origin = a.in + static_cast<size_t>(tile_r0 - kHalo) * a.in_pitch +
                            2 * static_cast<size_t>(tile_c0 - kChunkLead);
    for (int i = tid; i < kSharedH * kChunksPerRow; i += kQuadsX * kQuadsY) {
      const int tr = i / kChunksPerRow, q = i - tr * kChunksPerRow;
      const uint4 chunk =
          __ldg(reinterpret_cast<const uint4*>(origin + static_cast<size_t>(tr) * a.in_pitch) + q);
      const uint32_t words[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
      const bool tile_row = tr >= kHalo && tr < kHalo + kTileH;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        // Samples 2k and 2k + 1 of the chunk; tile column of the first (even: pairs never
        // straddle the tile's edge).
        const int tc = 8 * q + 2 * k - (kChunkLead - kHalo);
        if (tc < 0 || tc >= kSharedW) continue;
        const bool counted = tile_row && tc >= kHalo && tc < kHalo + kTileW;
        *reinterpret_cast<float2*>(&tile[tr][tc]) =
            make_float2(convert(tr, 0, words[k], counted), convert(tr, 1, words[k] >> 16, counted));
      }
    }
  } else if (interior && a.in_aligned4) {
    // Two samples per 4-byte load, one flat loop over the words.
    const uint8_t* origin = a.in + static_cast<size_t>(tile_r0 - kHalo) * a.in_pitch +
                            2 * static_cast<size_t>(tile_c0 - kHalo);
    for (int i = tid; i < kSharedH * kWordsPerRow; i += kQuadsX * kQuadsY) {
      const int tr = i / kWordsPerRow, w = i - tr * kWordsPerRow;
      const uint32_t pair = __ldg(
          reinterpret_cast<const uint32_t*>(origin + static_cast<size_t>(tr) * a.in_pitch) + w);
      // Tile origins are even, so tile and image positions have the same parity.
      const bool counted =
          tr >= kHalo && tr < kHalo + kTileH && w >= kHalo / 2 && w < (kHalo + kTileW) / 2;
      *reinterpret_cast<float2*>(&tile[tr][2 * w]) =
          make_float2(convert(tr, 0, pair, counted), convert(tr, 1, pair >> 16, counted));
    }
  } else {
    for (int i = tid; i < kSharedH * kSharedW; i += kQuadsX * kQuadsY) {
      const int tr = i / kSharedW, tc = i - tr * kSharedW;
      const int r = tile_r0 - kHalo + tr, gr = mirror(r, a.height);
      const int c = tile_c0 - kHalo + tc, gc = mirror(c, a.width);
      const unsigned short* row =
          reinterpret_cast<const unsigned short*>(a.in + static_cast<size_t>(gr) * a.in_pitch);
      const bool counted = tr >= kHalo && tr < kHalo + kTileH && r < a.height && tc >= kHalo &&
                           tc < kHalo + kTileW && c < a.width;
      tile[tr][tc] = convert(gr, gc, __ldg(row + gc), counted);
    }
  }
  __syncthreads();

  if (kGrayWorld) add_warp_sums(tid, sum_red, sum_green, sum_blue, block_sums);

    // Steps 3 and 4 for this thread's 2x2 quads (kQuadRows of them, kQuadsY quad rows apart),
    // each from a 6x6 window of the tile in registers. 8-byte loads: conflict-free, where
    // 4-byte ones at a 2-float stride conflict two ways.
#pragma unroll
  for (int q = 0; q < kQuadRows; ++q) {
    const int quad_y = threadIdx.y + q * kQuadsY;
    float win[6][6];
#pragma unroll
    for (int i = 0; i < 6; ++i) {
#pragma unroll
      for (int j = 0; j < 6; j += 2) {
        const float2 v =
            *reinterpret_cast<const float2*>(&tile[2 * quad_y + i][2 * threadIdx.x + j]);
        win[i][j] = v.x;
        win[i][j + 1] = v.y;
      }
    }
    uint32_t pixels[2][2];
#pragma unroll
    for (int dy = 0; dy < 2; ++dy) {
#pragma unroll
      for (int dx = 0; dx < 2; ++dx) {
        const int y = dy + kHalo, x = dx + kHalo;  // the pixel in the window
        const float C = win[y][x];
        const float H1 = win[y][x - 1] + win[y][x + 1];
        const float V1 = win[y - 1][x] + win[y + 1][x];
        const float D =
            win[y - 1][x - 1] + win[y - 1][x + 1] + win[y + 1][x - 1] + win[y + 1][x + 1];
        float H2 = 0.0f, V2 = 0.0f;
        if (kMhc) {
          H2 = win[y][x - 2] + win[y][x + 2];
          V2 = win[y - 2][x] + win[y + 2][x];
        }
        // Named values, not an array indexed by colour: that would live in local memory.
        float red, green, blue;
        const int here = color_at(kPacked, dy, dx);  // quads start at even rows and columns
        if (here != kCfaGreen) {
          float G, Y;  // green and the other chroma colour at a red or blue site
          if (kMhc) {
            G = (4.0f * C + 2.0f * (H1 + V1) - (H2 + V2)) * 0.125f;
            Y = (6.0f * C + 2.0f * D - 1.5f * (H2 + V2)) * 0.125f;
          } else {
            G = (H1 + V1) * 0.25f;
            Y = D * 0.25f;
          }
          green = G;
          red = here == kCfaRed ? C : Y;
          blue = here == kCfaRed ? Y : C;
        } else {
          float P, Q;  // the colours of the row neighbours and of the column neighbours
          if (kMhc) {
            P = (5.0f * C + 4.0f * H1 - H2 - D + 0.5f * V2) * 0.125f;
            Q = (5.0f * C + 4.0f * V1 - V2 - D + 0.5f * H2) * 0.125f;
          } else {
            P = H1 * 0.5f;
            Q = V1 * 0.5f;
          }
          const bool red_in_row = color_at(kPacked, dy, dx + 1) == kCfaRed;
          green = C;
          red = red_in_row ? P : Q;
          blue = red_in_row ? Q : P;
        }
        auto code = [&](float value) {
          const float x = clamp01(a.gain * value);
          return static_cast<uint32_t>(
              reinterpret_cast<const uint8_t*>(table)[round_half_up(x * 4095.0f)]);
        };
        const uint32_t code_r = code(red), code_g = code(green), code_b = code(blue);
        const uint32_t first = a.rgba ? code_r : code_b;
        const uint32_t third = a.rgba ? code_b : code_r;
        pixels[dy][dx] = first | (code_g << 8) | (third << 16) | 0xFF000000u;
      }
    }
#pragma unroll
    for (int dy = 0; dy < 2; ++dy) {
      const int r = tile_r0 + 2 * quad_y + dy, c = tile_c0 + 2 * threadIdx.x;
      if (r >= a.height || c >= a.width) continue;
      uint32_t* row = reinterpret_cast<uint32_t*>(a.out + static_cast<size_t>(r) * a.out_pitch);
      if (c + 1 < a.width && a.pairs_aligned8) {
        reinterpret_cast<uint2*>(row + c)[0] = make_uint2(pixels[dy][0], pixels[dy][1]);
      } else {
        row[c] = pixels[dy][0];
        if (c + 1 < a.width) row[c + 1] = pixels[dy][1];
      }
    }
  }

  if (kGrayWorld) {
    __syncthreads();  // every warp has added into block_sums
    block_end(a, tid, block_sums);
  }
}

// ---- Precision::kFast ----
// Each thread makes a column of kFastQuadRows 2x2 quads, sliding one 6-wide window down them:
// a block of 32 x 8 threads covers a 64 x 64 tile (halo overhead 13%, against 27% for 64 x 32).
constexpr int kFastThreadsX = 32;
constexpr int kFastThreadsY = 8;
constexpr int kFastThreads = kFastThreadsX * kFastThreadsY;
constexpr int kFastQuadRows = 4;
constexpr int kFastTileW = 2 * kFastThreadsX;
constexpr int kFastTileH = 2 * kFastQuadRows * kFastThreadsY;
constexpr int kFastWindowRows = 2 * kFastQuadRows + 2 * kHalo;
// Shared columns: the tile starts at column kFastLead, 16-byte aligned, so that 8 samples are
// stored with two 16-byte stores; the left halo is columns kFastLead - 2 and - 1.
constexpr int kFastLead = 4;
constexpr int kFastSharedW = kFastLead + kFastTileW + kHalo + 2;  // rows stay 16-byte aligned
constexpr int kFastSharedH = kFastTileH + 2 * kHalo;
constexpr int kFastChunksPerRow = kFastTileW / 8;  // 16-byte loads of 8 samples
static_assert(kFastSharedW % 4 == 0 && kFastLead % 4 == 0, "16-byte aligned chunk stores");

// Reflect-101 (mirror()) with the common case, an index inside the image, first.
__device__ __forceinline__ int mirror_if_outside(int i, int n) {
  return static_cast<unsigned>(i) < static_cast<unsigned>(n) ? i : mirror(i, n);
}

// u = max(v - black, 0) as a float, from a word whose bits `shift`.. hold the 10-bit v: the
// value is OR-ed into the mantissa of 2^23 (an exact float for integers below 2^23), compared
// there with the black level, and 2^23 + black subtracted in float: four full-rate
// instructions, no int-to-float conversion.
struct SampleDecoder {
  static constexpr unsigned kTwo23 = 0x4B000000u;  // 2^23's bits
  int shift_lo;           // of the sample in a word's low half: 0 (kLsb) or 6 (kMsb)
  unsigned black_biased;  // kTwo23 | black
  float black_offset;     // 2^23 + black

  __device__ __forceinline__ float operator()(uint32_t word, int shift) const {
    const unsigned biased = ((word >> shift) & 0x3FFu) | kTwo23;
    return __uint_as_float(max(biased, black_biased)) - black_offset;
  }
};

// At least 6 blocks per SM (at most 40 registers): MHC otherwise takes 48 and fits 5 (H200, 4K:
// 26.3 -> 24.1 us; 7 or 8 blocks, 128 or 512 threads and 64x32 tiles were all slower). Turing
// (sm_75) runs at most 1024 threads per SM, 4 such blocks.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
constexpr int kFastMinBlocksPerSm = 4;
#else
constexpr int kFastMinBlocksPerSm = 6;
#endif
template <int kPhase, bool kMhc, bool kGrayWorld>
__global__ void __launch_bounds__(kFastThreads, kFastMinBlocksPerSm)
    fast_kernel(const KernelArgs a) {
  constexpr unsigned kPacked = kPackedTiles[kPhase];
  __shared__ __align__(16) float tile[kFastSharedH][kFastSharedW];
  __shared__ fast::ColorScales scales;
  __shared__ unsigned block_sums[3];  // at most 64 x 64 x 1023: fits 32 bits
  __shared__ uint4 table[kTransferTableSize / 16];
  const int tid = threadIdx.y * kFastThreadsX + threadIdx.x;
  const int tile_r0 = blockIdx.y * kFastTileH;
  const int tile_c0 = blockIdx.x * kFastTileW;

  for (int i = tid; i < kTransferTableSize / 16; i += kFastThreads)
    table[i] = __ldg(reinterpret_cast<const uint4*>(a.table) + i);
  const WbGains gains = block_start<kGrayWorld>(a, tid, block_sums);
  if (tid == 0) scales = fast::color_scales(a.gain, a.scale, gains);

  const SampleDecoder decode{a.msb ? 6 : 0, SampleDecoder::kTwo23 | static_cast<unsigned>(a.black),
                             8388608.0f + static_cast<float>(a.black)};
  // Gray world: sums of u per CFA position (row parity * 2 + column parity), exact in float
  // (a thread adds at most a few dozen samples of <= 1023).
  float position_sums[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const uint8_t* in_row0 = a.in + 2 * static_cast<size_t>(tile_c0);
  if (a.in_aligned16 && tile_c0 + kFastTileW <= a.width) {
    // The tile's columns lie inside the image: 16-byte loads of 8 samples; rows outside (above,
    // below) are mirrored whole.
    for (int i = tid; i < kFastSharedH * kFastChunksPerRow; i += kFastThreads) {
      const int tr = i / kFastChunksPerRow, q = i - tr * kFastChunksPerRow;
      const int r = tile_r0 - kHalo + tr;
      const uint4 chunk =
          __ldg(reinterpret_cast<const uint4*>(
                    in_row0 + static_cast<size_t>(mirror_if_outside(r, a.height)) * a.in_pitch) +
                q);
      const uint32_t words[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
      float u[8];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        u[2 * k] = decode(words[k], decode.shift_lo);
        u[2 * k + 1] = decode(words[k], decode.shift_lo + 16);
      }
      float4* dst = reinterpret_cast<float4*>(&tile[tr][kFastLead + 8 * q]);
      dst[0] = make_float4(u[0], u[1], u[2], u[3]);
      dst[1] = make_float4(u[4], u[5], u[6], u[7]);
      if (kGrayWorld && tr >= kHalo && tr < kHalo + kFastTileH && r < a.height) {
        const float even = (u[0] + u[2]) + (u[4] + u[6]), odd = (u[1] + u[3]) + (u[5] + u[7]);
        const int parity = 2 * (tr & 1);  // tile_r0 - kHalo is even
        position_sums[parity] += even;
        position_sums[parity + 1] += odd;
      }
    }
  } else {
    // Unaligned rows or the right edge: one sample at a time, mirrored.
    for (int i = tid; i < kFastSharedH * kFastTileW; i += kFastThreads) {
      const int tr = i / kFastTileW, tc = i - tr * kFastTileW;
      const int r = tile_r0 - kHalo + tr, c = tile_c0 + tc;
      const unsigned short* row = reinterpret_cast<const unsigned short*>(
          a.in + static_cast<size_t>(mirror_if_outside(r, a.height)) * a.in_pitch);
      const float u = decode(__ldg(row + mirror_if_outside(c, a.width)), decode.shift_lo);
      tile[tr][kFastLead + tc] = u;
      if (kGrayWorld && tr >= kHalo && tr < kHalo + kFastTileH && r < a.height && c < a.width)
        position_sums[2 * (tr & 1) + (tc & 1)] += u;
    }
  }
  // The halo columns, two samples each side of every row (never counted in the statistics).
  for (int i = tid; i < kFastSharedH * 2; i += kFastThreads) {
    const int tr = i >> 1, right = i & 1;
    const unsigned short* row = reinterpret_cast<const unsigned short*>(
        a.in + static_cast<size_t>(mirror_if_outside(tile_r0 - kHalo + tr, a.height)) * a.in_pitch);
    const int c = right ? tile_c0 + kFastTileW : tile_c0 - kHalo;
    const float u0 = decode(__ldg(row + mirror_if_outside(c, a.width)), decode.shift_lo);
    const float u1 = decode(__ldg(row + mirror_if_outside(c + 1, a.width)), decode.shift_lo);
    *reinterpret_cast<float2*>(&tile[tr][right ? kFastLead + kFastTileW : kFastLead - kHalo]) =
        make_float2(u0, u1);
  }
  __syncthreads();

  if (kGrayWorld) {
    float color_sums[3] = {0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < 4; ++k) color_sums[color_at(kPacked, k >> 1, k & 1)] += position_sums[k];
    add_warp_sums(tid, __float2uint_rn(color_sums[kCfaRed]), __float2uint_rn(color_sums[kCfaGreen]),
                  __float2uint_rn(color_sums[kCfaBlue]), block_sums);
  }

  const float k_red = scales.k[kCfaRed], k_green = scales.k[kCfaGreen], k_blue = scales.k[kCfaBlue];
  const uint8_t* table_bytes = reinterpret_cast<const uint8_t*>(table);
  // Byte order by permutation: BGRA from (blue, green, red) packed low to high, RGBA swaps
  // bytes 0 and 2; byte 3 (selector 7) is the 0xFF of the second operand.
  const unsigned order_selector = a.rgba ? 0x7012u : 0x7210u;
  // Output: this thread's two columns, rows from first_row on. Inside the image (nearly every
  // thread) each row is one 8-byte store and a pointer step; at the edges, checked pixels.
  const int c = tile_c0 + 2 * threadIdx.x;
  const int first_row = tile_r0 + 2 * kFastQuadRows * threadIdx.y;
  const int rows_inside = a.height - first_row;
  const bool whole_column = c + 1 < a.width && a.pairs_aligned8 && rows_inside >= 2 * kFastQuadRows;
  uint8_t* out_row =
      a.out + static_cast<size_t>(first_row) * a.out_pitch + 4 * static_cast<size_t>(c);

  // The window: rows of 6 samples, from shared row 2 * kFastQuadRows * threadIdx.y, columns
  // 2 * threadIdx.x - kHalo .. + 3 around the thread's two columns. Loaded as the quads need it.
  float win[kFastWindowRows][6];
  const int win_r0 = 2 * kFastQuadRows * threadIdx.y;
  const int win_c0 = kFastLead - kHalo + 2 * threadIdx.x;
  auto load_row = [&](int i) {
#pragma unroll
    for (int j = 0; j < 6; j += 2) {
      const float2 v = *reinterpret_cast<const float2*>(&tile[win_r0 + i][win_c0 + j]);
      win[i][j] = v.x;
      win[i][j + 1] = v.y;
    }
  };
#pragma unroll
  for (int i = 0; i < 2 * kHalo; ++i) load_row(i);
#pragma unroll
  for (int q = 0; q < kFastQuadRows; ++q) {
    load_row(2 * q + 2 * kHalo);
    load_row(2 * q + 2 * kHalo + 1);
    // Vertical pair sums around rows y of the quad, per window column: V1 at that column, and
    // half of D one column left or right (exact in float: any order gives the same sums).
    uint32_t pixels[2][2];
#pragma unroll
    for (int dy = 0; dy < 2; ++dy) {
      const int y = 2 * q + kHalo + dy;
      float vertical[6];
#pragma unroll
      for (int j = 1; j < 5; ++j) vertical[j] = win[y - 1][j] + win[y + 1][j];
#pragma unroll
      for (int dx = 0; dx < 2; ++dx) {
        const int x = kHalo + dx;
        fast::WindowSums s;
        s.C = win[y][x];
        s.H1 = win[y][x - 1] + win[y][x + 1];
        s.V1 = vertical[x];
        s.D = vertical[x - 1] + vertical[x + 1];
        s.H2 = kMhc ? win[y][x - 2] + win[y][x + 2] : 0.0f;
        s.V2 = kMhc ? win[y - 2][x] + win[y + 2][x] : 0.0f;
        // Quads start at even rows and columns: the colours are compile-time constants.
        constexpr int kNone = -1;
        const int here = color_at(kPacked, dy, dx);
        int red = kNone, green = kNone, blue = kNone;
        if (here != kCfaGreen) {
          const float k_here = here == kCfaRed ? k_red : k_blue;
          const float k_other = here == kCfaRed ? k_blue : k_red;
          int own, other;
          fast::chroma_site<kMhc>(s, k_here, k_green, k_other, &own, &green, &other);
          red = here == kCfaRed ? own : other;
          blue = here == kCfaRed ? other : own;
        } else {
          const bool red_in_row = color_at(kPacked, dy, dx + 1) == kCfaRed;
          int row, column;
          fast::green_site<kMhc>(s, k_green, red_in_row ? k_red : k_blue,
                                 red_in_row ? k_blue : k_red, &green, &row, &column);
          red = red_in_row ? row : column;
          blue = red_in_row ? column : row;
        }
        const uint32_t bgr = static_cast<uint32_t>(table_bytes[blue]) |
                             (static_cast<uint32_t>(table_bytes[green]) << 8) |
                             (static_cast<uint32_t>(table_bytes[red]) << 16);
        pixels[dy][dx] = __byte_perm(bgr, 0xFF000000u, order_selector);
      }
    }
#pragma unroll
    for (int dy = 0; dy < 2; ++dy) {
      uint32_t* px = reinterpret_cast<uint32_t*>(out_row);
      if (whole_column) {
        // Streaming store: the output is not read again here, so it should not push the input
        // tiles (re-read for halos) out of L2 (4K: 24.1 -> 21.0 us MHC, 22.3 -> 19.3 bilinear).
        __stcs(reinterpret_cast<uint2*>(px), make_uint2(pixels[dy][0], pixels[dy][1]));
      } else if (2 * q + dy < rows_inside && c < a.width) {
        if (c + 1 < a.width && a.pairs_aligned8) {
          *reinterpret_cast<uint2*>(px) = make_uint2(pixels[dy][0], pixels[dy][1]);
        } else {
          px[0] = pixels[dy][0];
          if (c + 1 < a.width) px[1] = pixels[dy][1];
        }
      }
      out_row += a.out_pitch;
    }
  }

  if (kGrayWorld) {
    __syncthreads();  // every warp has added into block_sums
    block_end(a, tid, block_sums);
  }
}

// Every specialisation of both kernels, indexed by phase * 4 + mhc * 2 + gray_world.
using KernelFn = void (*)(KernelArgs);
template <bool kFast, int kPhase>
constexpr KernelFn kernel_for(int i) {
  if (kFast) {
    return i == 0   ? fast_kernel<kPhase, false, false>
           : i == 1 ? fast_kernel<kPhase, false, true>
           : i == 2 ? fast_kernel<kPhase, true, false>
                    : fast_kernel<kPhase, true, true>;
  }
  return i == 0   ? exact_kernel<kPhase, false, false>
         : i == 1 ? exact_kernel<kPhase, false, true>
         : i == 2 ? exact_kernel<kPhase, true, false>
                  : exact_kernel<kPhase, true, true>;
}
template <bool kFast>
constexpr std::array<KernelFn, 16> kernels() {
  return {kernel_for<kFast, 0>(0), kernel_for<kFast, 0>(1), kernel_for<kFast, 0>(2),
          kernel_for<kFast, 0>(3), kernel_for<kFast, 1>(0), kernel_for<kFast, 1>(1),
          kernel_for<kFast, 1>(2), kernel_for<kFast, 1>(3), kernel_for<kFast, 2>(0),
          kernel_for<kFast, 2>(1), kernel_for<kFast, 2>(2), kernel_for<kFast, 2>(3),
          kernel_for<kFast, 3>(0), kernel_for<kFast, 3>(1), kernel_for<kFast, 3>(2),
          kernel_for<kFast, 3>(3)};
}
const std::array<KernelFn, 16> kExactKernels = kernels<false>();
const std::array<KernelFn, 16> kFastKernels = kernels<true>();

Status invalid(const std::string& what) {
  return Status::failure("GpuDebayer: " + what);
}

}  // namespace

Status GpuDebayer::create(int device, GpuDebayer* out) {
  if (!out) return invalid("null output");
  detail::DeviceScope scope;
  CIPC_CUDA_TRY(scope.enter(device));
  GpuDebayer made;
  made.device_ = device;
  const size_t stats_bytes = kStatsSlots * kStatsCopies * 3 * sizeof(unsigned long long);
  CIPC_RETURN_IF_ERROR(DeviceBuffer::create(device, kTransferTableSize, &made.table_));
  CIPC_RETURN_IF_ERROR(DeviceBuffer::create(device, stats_bytes, &made.stats_));
  CIPC_RETURN_IF_ERROR(PinnedHostBuffer::create(kTransferTableSize, &made.table_staging_));
  CIPC_RETURN_IF_ERROR(PinnedHostBuffer::create(sizeof(WbGains), &made.gains_out_));
  // The only memset: the statistics start at zero once; the kernel keeps them so afterwards.
  CIPC_CUDA_TRY(cudaMemset(reinterpret_cast<void*>(static_cast<uintptr_t>(made.stats_.ptr())), 0,
                           stats_bytes));
  *static_cast<WbGains*>(made.gains_out_.data()) = WbGains{};
  CIPC_RETURN_IF_ERROR(mapped_device_pointer(made.gains_out_.data(), &made.gains_out_device_));
  *out = std::move(made);
  return Status::ok();
}

Status GpuDebayer::configure(const DebayerParams& params, WhiteBalance wb, StreamHandle stream) {
  if (!valid()) return invalid("not created");
  const bool table_changed = !table_uploaded_ || params.transfer != table_transfer_ ||
                             (params.transfer == Transfer::kPower && params.gamma != table_gamma_);
  params_ = params;
  wb_ = wb;
  if (!table_changed) {
    fast_ = params.precision == Precision::kFast && table_steps_at_most_one_ &&
            fast_gains_in_range(params, wb == WhiteBalance::kGrayWorld);
    return Status::ok();
  }
  // The staging buffer may still be read by the previous upload: wait for it (rare: only when
  // the curve changes, never per frame).
  if (table_uploaded_) CIPC_RETURN_IF_ERROR(synchronize_stream(stream));
  const auto table = make_transfer_table(params.transfer, params.gamma);
  table_steps_at_most_one_ = max_adjacent_step(table) <= 1;
  fast_ = params.precision == Precision::kFast &&
          fast_debayer_applies(params, wb == WhiteBalance::kGrayWorld, table);
  std::memcpy(table_staging_.data(), table.data(), table.size());
  CIPC_RETURN_IF_ERROR(copy_2d_async(reinterpret_cast<void*>(static_cast<uintptr_t>(table_.ptr())),
                                     table.size(), table_staging_.data(), table.size(),
                                     table.size(), 1, stream));
  table_uploaded_ = true;
  table_transfer_ = params.transfer;
  table_gamma_ = params.gamma;
  return Status::ok();
}

Status GpuDebayer::run(DevicePtr in, size_t in_pitch, DevicePtr out, size_t out_pitch, int width,
                       int height, StreamHandle stream) {
  if (!valid() || !table_uploaded_) return invalid("run() before create() and configure()");
  if (width < 1 || height < 1)
    return invalid("bad size " + std::to_string(width) + "x" + std::to_string(height));
  if (in == 0 || out == 0) return invalid("null frame pointer");
  if (in % 2 != 0 || in_pitch % 2 != 0 || in_pitch < 2 * static_cast<size_t>(width))
    return invalid("input rows must be 2-byte aligned and at least 2 * width bytes apart");
  if (out % 4 != 0 || out_pitch % 4 != 0 || out_pitch < 4 * static_cast<size_t>(width))
    return invalid("output rows must be 4-byte aligned and at least 4 * width bytes apart");

  KernelArgs a = {};
  a.in = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(in));
  a.in_pitch = in_pitch;
  a.out = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(out));
  a.out_pitch = out_pitch;
  a.width = width;
  a.height = height;
  a.msb = params_.alignment == cipc_bayer::BitAlignment::kMsb;
  a.rgba = params_.order == PixelOrder::kRgba;
  a.pairs_aligned8 = out % 8 == 0 && out_pitch % 8 == 0;
  a.in_aligned4 = in % 4 == 0 && in_pitch % 4 == 0;
  a.in_aligned16 = in % 16 == 0 && in_pitch % 16 == 0;
  a.black = params_.black_level < 1022 ? params_.black_level : 1022;
  a.scale = 1.0f / static_cast<float>(1023 - a.black);
  a.gain = params_.gain;
  a.fixed = WbGains{params_.wb_red, params_.wb_green, params_.wb_blue};
  a.table = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(table_.ptr()));
  const bool gray_world = wb_ == WhiteBalance::kGrayWorld;
  a.stats = reinterpret_cast<unsigned long long*>(static_cast<uintptr_t>(stats_.ptr()));
  if (gray_world) {
    const BayerSums counts = cfa_sample_counts(params_.phase, width, height);
    for (int k = 0; k < 3; ++k) a.count[k] = counts.count[k];
  }
  a.slot_add = static_cast<int>(frames_ % kStatsSlots);
  a.slot_read = static_cast<int>((frames_ + kStatsSlots - 1) % kStatsSlots);
  a.slot_clear = static_cast<int>((frames_ + 1) % kStatsSlots);
  a.gains_out = reinterpret_cast<WbGains*>(static_cast<uintptr_t>(gains_out_device_));

  // A dimension of 1 loses the CFA phase, which the fast kernel's per-colour sums rely on.
  const bool fast = fast_ && width >= 2 && height >= 2;
  const int tile_w = fast ? kFastTileW : kTileW, tile_h = fast ? kFastTileH : kTileH;
  const dim3 grid((width + tile_w - 1) / tile_w, (height + tile_h - 1) / tile_h);
  if (grid.y > 65535) return invalid("image too tall (" + std::to_string(height) + " rows)");
  detail::DeviceScope scope;
  CIPC_CUDA_TRY(scope.enter(device_));
  const int variant = static_cast<int>(params_.phase) * 4 +
                      (params_.method == Demosaic::kMhc ? 2 : 0) + (gray_world ? 1 : 0);
  if (fast) {
    CIPC_RETURN_IF_ERROR(detail::launch("debayer fast_kernel<<<>>>", kFastKernels[variant], grid,
                                        dim3(kFastThreadsX, kFastThreadsY),
                                        static_cast<cudaStream_t>(stream), __FILE__, __LINE__, a));
  } else {
    CIPC_RETURN_IF_ERROR(detail::launch("debayer exact_kernel<<<>>>", kExactKernels[variant], grid,
                                        dim3(kQuadsX, kQuadsY), static_cast<cudaStream_t>(stream),
                                        __FILE__, __LINE__, a));
  }
  last_precision_ = fast ? Precision::kFast : Precision::kExact;
  ++frames_;
  return Status::ok();
}

WbGains GpuDebayer::last_gains() const {
  if (!gains_out_.data()) return WbGains{};
  WbGains g;
  std::memcpy(&g, gains_out_.data(), sizeof g);  // racy by design: a snapshot for statistics
  return g;
}

}  // namespace cipc_cuda
