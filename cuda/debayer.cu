// SPDX-License-Identifier: LGPL-2.1-or-later
// The debayer kernel and GpuDebayer (debayer_gpu.h). The per-pixel arithmetic is written in the
// same order as debayer_reference.cpp, and this file is compiled with -fmad=false so that no
// multiply-add is fused: the GPU then produces the CPU reference's floats exactly.
#include <cuda_runtime.h>

#include <cstring>
#include <string>

#include "check.h"
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
              "kPackedTiles and kKernels are indexed by CfaOrder");

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

// Specialised for the phase, the method and gray world: colours are then known at compile time
// for each position of a quad, and no per-pixel branch remains.
template <int kPhase, bool kMhc, bool kGrayWorld>
__global__ void __launch_bounds__(kQuadsX* kQuadsY) debayer_kernel(const KernelArgs a) {
  constexpr unsigned kPacked = kPackedTiles[kPhase];
  __shared__ __align__(16) float tile[kSharedH][kSharedW];  // rows 272 bytes: 8-byte aligned
  __shared__ float wb[3];
  __shared__ unsigned block_sums[3];  // at most 64 x 32 x 1023: fits 32 bits
  const int tid = threadIdx.y * kQuadsX + threadIdx.x;
  const int tile_r0 = blockIdx.y * kTileH;
  const int tile_c0 = blockIdx.x * kTileW;
  const bool first_block = blockIdx.x == 0 && blockIdx.y == 0;

  // The transfer table, into shared memory: per-pixel lookups at scattered addresses are far
  // cheaper there than in global memory.
  __shared__ uint4 table[kTransferTableSize / 16];
  for (int i = tid; i < kTransferTableSize / 16; i += kQuadsX * kQuadsY)
    table[i] = __ldg(reinterpret_cast<const uint4*>(a.table) + i);

  // Nobody reads or adds to slot_clear during this frame (see debayer_gpu.h).
  if (first_block && tid < kStatsCopies * 3) a.stats[a.slot_clear * kStatsCopies * 3 + tid] = 0;

  // Warp 0: the gains, from the previous frame's sums (kStatsCopies partial copies of them).
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
      const WbGains g = kGrayWorld ? gray_world_gains(sums, a.count, a.fixed) : a.fixed;
      block_sums[0] = block_sums[1] = block_sums[2] = 0;
      if (first_block && a.gains_out) *a.gains_out = g;
      wb[0] = g.red;
      wb[1] = g.green;
      wb[2] = g.blue;
    }
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

  if (kGrayWorld) {
    const unsigned local_sums[3] = {sum_red, sum_green, sum_blue};
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      unsigned v = local_sums[k];
      for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
      if ((tid & 31) == 0 && v != 0) atomicAdd(&block_sums[k], v);
    }
  }

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
    // Blocks spread their additions over kStatsCopies copies: thousands of atomics on three
    // addresses would serialise.
    const int copy = (blockIdx.y * gridDim.x + blockIdx.x) % kStatsCopies;
    if (tid < 3 && block_sums[tid] != 0)
      atomicAdd(a.stats + (a.slot_add * kStatsCopies + copy) * 3 + tid,
                static_cast<unsigned long long>(block_sums[tid]));
  }
}

// Every specialisation, indexed by phase * 4 + mhc * 2 + gray_world.
using KernelFn = void (*)(KernelArgs);
template <int kPhase>
constexpr KernelFn kernels_for_phase(int i) {
  return i == 0   ? debayer_kernel<kPhase, false, false>
         : i == 1 ? debayer_kernel<kPhase, false, true>
         : i == 2 ? debayer_kernel<kPhase, true, false>
                  : debayer_kernel<kPhase, true, true>;
}
const KernelFn kKernels[16] = {
    kernels_for_phase<0>(0), kernels_for_phase<0>(1), kernels_for_phase<0>(2),
    kernels_for_phase<0>(3), kernels_for_phase<1>(0), kernels_for_phase<1>(1),
    kernels_for_phase<1>(2), kernels_for_phase<1>(3), kernels_for_phase<2>(0),
    kernels_for_phase<2>(1), kernels_for_phase<2>(2), kernels_for_phase<2>(3),
    kernels_for_phase<3>(0), kernels_for_phase<3>(1), kernels_for_phase<3>(2),
    kernels_for_phase<3>(3)};

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
  if (!table_changed) return Status::ok();
  // The staging buffer may still be read by the previous upload: wait for it (rare: only when
  // the curve changes, never per frame).
  if (table_uploaded_) CIPC_RETURN_IF_ERROR(synchronize_stream(stream));
  const auto table = make_transfer_table(params.transfer, params.gamma);
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

  const dim3 grid((width + kTileW - 1) / kTileW, (height + kTileH - 1) / kTileH);
  if (grid.y > 65535) return invalid("image too tall (" + std::to_string(height) + " rows)");
  detail::DeviceScope scope;
  CIPC_CUDA_TRY(scope.enter(device_));
  const int variant = static_cast<int>(params_.phase) * 4 +
                      (params_.method == Demosaic::kMhc ? 2 : 0) + (gray_world ? 1 : 0);
  CIPC_RETURN_IF_ERROR(detail::launch("debayer_kernel<<<>>>", kKernels[variant], grid,
                                      dim3(kQuadsX, kQuadsY), static_cast<cudaStream_t>(stream),
                                      __FILE__, __LINE__, a));
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
