// SPDX-License-Identifier: LGPL-2.1-or-later
// The example kernel of embed_cuda_kernel.cpp, compiled by nvcc (channel_sums.cu) and called from
// C++ compiled by the ordinary compiler: only CUDA runtime types cross this header.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

// Queues on `stream` a kernel that adds up each of the four 8-bit channels of a `width` x
// `height` image of 4-byte pixels (BGRA, BGRx, RGBA, ...) whose rows are `pitch` bytes apart, and
// adds the four totals to `sums[0..3]` (device memory; zero it first). `pixels` is only read, in
// place: it may be another process's frame. Returns the launch's error; the kernel's own errors
// surface on the stream later, as for any kernel.
cudaError_t queue_channel_sums(const void* pixels, size_t pitch, int width, int height,
                               unsigned long long* sums, cudaStream_t stream);
