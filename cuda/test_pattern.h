// SPDX-License-Identifier: LGPL-2.1-or-later
// Test-pattern kernels - a deterministic frame fill and an exact image checksum - behind plain
// host launchers, each with a CPU reference of exactly the same math. Tests, the copy audit and
// the benchmarks write and verify frames with them; no element uses them. Pitches are in bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda_api.h"

namespace cipc_cuda {

// A 64-bit checksum of a pitched image of `rows` x `row_bytes` bytes, padding excluded:
//   sum over r < rows, c < row_bytes of  byte(r, c) * (c + 1) * ((r + 1) * 0x9E3779B97F4A7C15)
// in uint64 arithmetic (mod 2^64): exact, order-sensitive, independent of how the GPU splits the
// work. `scratch` (device, >= rows * 8 bytes) holds per-row partials; the result lands in
// *dev_result (device, 8 bytes). Two kernels, no memset, nothing copied.
Status launch_image_checksum(DevicePtr image, size_t pitch, size_t row_bytes, size_t rows,
                             DevicePtr scratch, DevicePtr dev_result, StreamHandle stream);
uint64_t image_checksum_cpu(const uint8_t* image, size_t pitch, size_t row_bytes, size_t rows);

// Fills a pitched image with a deterministic pattern, as a GPU writer would produce frames:
//   byte(r, c) = (uint8_t)(((uint32_t)c * 2654435761u ^ (uint32_t)r * 40503u ^ seed * 2246822519u)
//   >> 13)
// (uint32 arithmetic). Padding bytes are left untouched.
Status launch_fill_pattern(DevicePtr image, size_t pitch, size_t row_bytes, size_t rows,
                           uint32_t seed, StreamHandle stream);
void fill_pattern_cpu(uint8_t* image, size_t pitch, size_t row_bytes, size_t rows, uint32_t seed);

}  // namespace cipc_cuda
