// SPDX-License-Identifier: LGPL-2.1-or-later
#include "draw_gradient.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace {

// One thread per pixel: B and G follow x and y, R moves with the frame number.
__global__ void draw_gradient(uint8_t* pixels, size_t pitch, int width, int height,
                              unsigned frame) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= width || y >= height) return;
  uint8_t* p = pixels + size_t(y) * pitch + size_t(x) * 4;
  p[0] = uint8_t(x * 255 / (width > 1 ? width - 1 : 1));
  p[1] = uint8_t(y * 255 / (height > 1 ? height - 1 : 1));
  p[2] = uint8_t(frame * 4 + x / 8);
  p[3] = 255;
}

}  // namespace

extern "C" int queue_draw_gradient(unsigned long long pixels, size_t pitch, int width, int height,
                                   unsigned frame, void* stream) {
  const dim3 block(32, 8);
  const dim3 grid((width + block.x - 1) / block.x, (height + block.y - 1) / block.y);
  draw_gradient<<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<uint8_t*>(pixels), pitch, width, height, frame);
  return static_cast<int>(cudaGetLastError());
}
