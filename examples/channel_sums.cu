// SPDX-License-Identifier: LGPL-2.1-or-later
// Per-channel sums of a 4-byte-pixel frame, read where it lies (embed_cuda_kernel.cpp).
#include "channel_sums.h"

#include <cstdint>

namespace {

constexpr int kThreadsPerBlock = 256;
constexpr int kWarpsPerBlock = kThreadsPerBlock / 32;
constexpr int kMaxBlocks = 2048;  // rows are shared out among at most this many blocks

// One block per row (looping when rows outnumber blocks), threads across the row. Each thread
// keeps its own totals, a warp adds them with shuffles, and each block adds its totals to `sums`
// with one atomic per channel: few atomics, and nothing but loads on the frame itself.
__global__ void channel_sums_kernel(const uint8_t* __restrict__ pixels, size_t pitch, int width,
                                    int height, unsigned long long* __restrict__ sums) {
  unsigned long long total[4] = {0, 0, 0, 0};
  for (int y = blockIdx.x; y < height; y += gridDim.x) {
    const uchar4* row = reinterpret_cast<const uchar4*>(pixels + static_cast<size_t>(y) * pitch);
    for (int x = threadIdx.x; x < width; x += blockDim.x) {
      const uchar4 p = row[x];
      total[0] += p.x;
      total[1] += p.y;
      total[2] += p.z;
      total[3] += p.w;
    }
  }
  for (int c = 0; c < 4; ++c)
    for (int offset = 16; offset > 0; offset /= 2)
      total[c] += __shfl_down_sync(0xffffffffu, total[c], offset);

  __shared__ unsigned long long warp_totals[kWarpsPerBlock][4];
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0)
    for (int c = 0; c < 4; ++c) warp_totals[warp][c] = total[c];
  __syncthreads();
  if (threadIdx.x < 4) {
    unsigned long long block_total = 0;
    for (int w = 0; w < kWarpsPerBlock; ++w) block_total += warp_totals[w][threadIdx.x];
    atomicAdd(&sums[threadIdx.x], block_total);
  }
}

}  // namespace

cudaError_t queue_channel_sums(const void* pixels, size_t pitch, int width, int height,
                               unsigned long long* sums, cudaStream_t stream) {
  if (width <= 0 || height <= 0) return cudaErrorInvalidValue;
  const int blocks = height < kMaxBlocks ? height : kMaxBlocks;
  channel_sums_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(static_cast<const uint8_t*>(pixels),
                                                               pitch, width, height, sums);
  return cudaGetLastError();
}
