// SPDX-License-Identifier: LGPL-2.1-or-later
// The test-pattern kernels of test_pattern.h and their host launchers. The math is the same as
// in test_pattern_reference.cpp (the oracle of the GPU tests); see there for why the checksum can
// be split per row.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "check.h"
#include "launch.cuh"
#include "test_pattern.h"

namespace cipc_cuda {

namespace {

constexpr uint64_t kRowWeight = 0x9E3779B97F4A7C15ull;
constexpr unsigned kThreads = 256;        // per block, both kernels
constexpr unsigned kMaxGridX = 1u << 20;  // blocks beyond this loop (grid-stride)
constexpr unsigned kMaxGridY = 65535;     // hardware limit of gridDim.y

__device__ __forceinline__ uint8_t pattern_byte(uint32_t c, uint32_t r, uint32_t seed_term) {
  return static_cast<uint8_t>(((c * 2654435761u) ^ (r * 40503u) ^ seed_term) >> 13);
}

// Sum over a 256-thread block; the result is valid in thread 0.
__device__ __forceinline__ uint64_t block_sum(uint64_t v) {
  __shared__ uint64_t warp_sums[kThreads / 32];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = 0;
  if (warp == 0) {
    v = lane < kThreads / 32 ? warp_sums[lane] : 0;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  __syncthreads();  // warp_sums may be reused by the caller's next iteration
  return v;
}

// Pass 1: one block per row (grid-stride over rows). scratch[r] =
//   ((r + 1) * K) * sum_c byte(r, c) * (c + 1)            (mod 2^64)
// Every scratch entry is written whole: nothing needs zeroing beforehand.
// `vec16`: every row starts 16-byte aligned, so bytes can be read 16 at a time.
__global__ void __launch_bounds__(kThreads)
    row_checksum_kernel(const uint8_t* __restrict__ image, size_t pitch, size_t row_bytes,
                        size_t rows, bool vec16, uint64_t* __restrict__ scratch) {
  for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const uint8_t* row = image + r * pitch;
    uint64_t acc = 0;
    size_t tail_begin = 0;
    if (vec16) {
      const size_t chunks = row_bytes / 16;
      const uint4* row16 = reinterpret_cast<const uint4*>(row);
      for (size_t k = threadIdx.x; k < chunks; k += blockDim.x) {
        const uint4 v = row16[k];
        const uint32_t words[4] = {v.x, v.y, v.z, v.w};
        uint64_t weight = k * 16 + 1;  // (c + 1) for the chunk's first byte
#pragma unroll
        for (int w = 0; w < 4; ++w) {
#pragma unroll
          for (int b = 0; b < 4; ++b) {  // little endian: byte b of word w is column 4w + b
            acc += static_cast<uint64_t>((words[w] >> (8 * b)) & 0xffu) * weight;
            ++weight;
          }
        }
      }
      tail_begin = chunks * 16;
    }
    for (size_t c = tail_begin + threadIdx.x; c < row_bytes; c += blockDim.x)
      acc += static_cast<uint64_t>(__ldg(row + c)) * static_cast<uint64_t>(c + 1);
    acc = block_sum(acc);
    if (threadIdx.x == 0) scratch[r] = acc * (static_cast<uint64_t>(r + 1) * kRowWeight);
  }
}

// Pass 2: a single block adds the per-row partials and writes (not adds) the result, so
// *result needs no memset either. rows == 0 writes 0.
__global__ void __launch_bounds__(kThreads)
    sum_rows_kernel(const uint64_t* __restrict__ scratch, size_t rows, uint64_t* result) {
  uint64_t acc = 0;
  for (size_t r = threadIdx.x; r < rows; r += blockDim.x) acc += scratch[r];
  acc = block_sum(acc);
  if (threadIdx.x == 0) *result = acc;
}

// One thread per 16 bytes (vec16) or per byte of a row; blockIdx.y walks rows (grid-stride),
// blockIdx.x/threadIdx.x walk the row. Only bytes c < row_bytes are written.
__global__ void __launch_bounds__(kThreads)
    fill_pattern_kernel(uint8_t* __restrict__ image, size_t pitch, size_t row_bytes, size_t rows,
                        uint32_t seed, bool vec16) {
  const uint32_t seed_term = seed * 2246822519u;
  const size_t stride_x = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t r = blockIdx.y; r < rows; r += gridDim.y) {
    uint8_t* row = image + r * pitch;
    const uint32_t r32 = static_cast<uint32_t>(r);
    if (vec16) {
      const size_t chunks = row_bytes / 16;
      for (size_t k = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < chunks;
           k += stride_x) {
        uint32_t words[4];
        const uint32_t c0 = static_cast<uint32_t>(k * 16);
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          uint32_t word = 0;
#pragma unroll
          for (int b = 0; b < 4; ++b)
            word |= static_cast<uint32_t>(pattern_byte(c0 + 4 * w + b, r32, seed_term)) << (8 * b);
          words[w] = word;
        }
        reinterpret_cast<uint4*>(row)[k] = make_uint4(words[0], words[1], words[2], words[3]);
      }
      for (size_t c = chunks * 16 + static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
           c < row_bytes; c += stride_x)
        row[c] = pattern_byte(static_cast<uint32_t>(c), r32, seed_term);
    } else {
      for (size_t c = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < row_bytes;
           c += stride_x)
        row[c] = pattern_byte(static_cast<uint32_t>(c), r32, seed_term);
    }
  }
}

inline unsigned clamp_grid(size_t want, unsigned limit) {
  if (want == 0) return 1;
  return want > limit ? limit : static_cast<unsigned>(want);
}

// Rows all start on a 16-byte boundary.
inline bool rows_aligned16(DevicePtr image, size_t pitch, size_t rows) {
  return image % 16 == 0 && (rows <= 1 || pitch % 16 == 0);
}

Status invalid(const std::string& what) {
  return Status::failure(what);
}

}  // namespace

Status launch_image_checksum(DevicePtr image, size_t pitch, size_t row_bytes, size_t rows,
                             DevicePtr scratch, DevicePtr dev_result, StreamHandle stream) {
  if (dev_result == 0 || dev_result % 8 != 0)
    return invalid("launch_image_checksum: dev_result must be an 8-byte aligned device pointer");
  // An empty image (no rows or no columns) has checksum 0: pass 2 alone writes it.
  const size_t live_rows = row_bytes == 0 ? 0 : rows;
  if (live_rows > 0) {
    if (image == 0) return invalid("launch_image_checksum: null image");
    if (scratch == 0 || scratch % 8 != 0)
      return invalid("launch_image_checksum: scratch must be an 8-byte aligned device pointer");
    if (live_rows > 1 && pitch < row_bytes) {
      return invalid("launch_image_checksum: pitch " + std::to_string(pitch) +
                     " is smaller than the row (" + std::to_string(row_bytes) + " bytes)");
    }
  }
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  uint64_t* partials = reinterpret_cast<uint64_t*>(static_cast<uintptr_t>(scratch));
  if (live_rows > 0) {
    CIPC_RETURN_IF_ERROR(detail::launch(
        "row_checksum_kernel<<<>>>", row_checksum_kernel, dim3(clamp_grid(live_rows, kMaxGridX)),
        dim3(kThreads), s, __FILE__, __LINE__,
        reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(image)), pitch, row_bytes,
        live_rows, rows_aligned16(image, pitch, live_rows), partials));
  }
  CIPC_RETURN_IF_ERROR(
      detail::launch("sum_rows_kernel<<<>>>", sum_rows_kernel, dim3(1), dim3(kThreads), s, __FILE__,
                     __LINE__, static_cast<const uint64_t*>(partials), live_rows,
                     reinterpret_cast<uint64_t*>(static_cast<uintptr_t>(dev_result))));
  return Status::ok();
}

Status launch_fill_pattern(DevicePtr image, size_t pitch, size_t row_bytes, size_t rows,
                           uint32_t seed, StreamHandle stream) {
  if (rows == 0 || row_bytes == 0) return Status::ok();
  if (image == 0) return invalid("launch_fill_pattern: null image");
  if (rows > 1 && pitch < row_bytes) {
    return invalid("launch_fill_pattern: pitch " + std::to_string(pitch) +
                   " is smaller than the row (" + std::to_string(row_bytes) + " bytes)");
  }
  const bool vec16 = rows_aligned16(image, pitch, rows);
  const size_t units = vec16 ? (row_bytes + 15) / 16 : row_bytes;  // per row
  const dim3 grid(clamp_grid((units + kThreads - 1) / kThreads, kMaxGridX),
                  clamp_grid(rows, kMaxGridY));
  return detail::launch("fill_pattern_kernel<<<>>>", fill_pattern_kernel, grid, dim3(kThreads),
                        static_cast<cudaStream_t>(stream), __FILE__, __LINE__,
                        reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(image)), pitch, row_bytes,
                        rows, seed, vec16);
}

}  // namespace cipc_cuda
