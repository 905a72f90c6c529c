// SPDX-License-Identifier: LGPL-2.1-or-later
// The floor under an upload of a frame from system memory: one host-to-device copy of a
// width x height BGRA frame, paced (60 Hz by default, as a camera's frames come), timed from the
// call to the end of a stream synchronisation. Four ways, interleaved so that each sees the same
// machine: from pageable memory as one 1D copy (what cudasink-ipc does where the layouts agree),
// from pageable memory as a 2D copy (what it did before, row by row in the driver's staging),
// from pinned memory (an asynchronous DMA), and as one 1D copy from a pageable buffer made for
// that frame - allocated, written by a download from the GPU and freed after, untimed - as
// run-all's pageable source makes each of its frames (an appsrc with a buffer per frame).
// run-all's `inputs` step sets the pageable row of docs/performance.md against the first and the
// last.
//
//   bench-upload [--width W] [--height H] [--iterations N] [--hz H] [--device D]
//
// Prints one line per way: "UPLOAD way=<pageable-1d|pageable-2d|pinned|pageable-per-frame>
// bytes=B p50_us=X p99_us=Y", and exits non-zero when a CUDA call fails.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "paced_clock.h"
#include "percentile.h"

namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  fprintf(stderr, "bench-upload: %s: %s\n", what, cudaGetErrorString(e));
  exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  int width = 1920, height = 1080, iterations = 120, hz = 60, device = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = atoi(argv[i + 1]);
    if (k == "--width")
      width = v;
    else if (k == "--height")
      height = v;
    else if (k == "--iterations")
      iterations = v;
    else if (k == "--hz")
      hz = v;
    else if (k == "--device")
      device = v;
    else {
      fprintf(stderr, "usage: bench-upload [--width W] [--height H] [--iterations N] [--hz H]\n");
      return 64;
    }
  }
  if (width <= 0 || height <= 0 || iterations <= 0 || hz <= 0) {
    fprintf(stderr, "bench-upload: width, height, iterations and hz must be positive\n");
    return 64;
  }
  check(cudaSetDevice(device), "cudaSetDevice");
  const size_t row = size_t(width) * 4, bytes = row * size_t(height);
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  void* dev = nullptr;
  check(cudaMalloc(&dev, bytes), "cudaMalloc");
  // Pageable memory as upstream's own buffers are: allocated once and written (faulted in).
  std::vector<uint8_t> pageable(bytes);
  std::memset(pageable.data(), 0x5a, bytes);
  void* pinned = nullptr;
  check(cudaMallocHost(&pinned, bytes), "cudaMallocHost");
  std::memset(pinned, 0x5a, bytes);

  constexpr int kWays = 4;
  const char* ways[kWays] = {"pageable-1d", "pageable-2d", "pinned", "pageable-per-frame"};
  std::vector<double> took[kWays];
  const uint64_t period = 1000000000ull / uint64_t(hz);
  uint64_t due = cipc_test::monotonic_ns();
  for (int i = 0; i < iterations + 3; ++i) {  // the first round of each way warms up
    for (int w = 0; w < kWays; ++w) {
      due += period;
      cipc_test::sleep_until_ns(due);
      // The per-frame buffer, as run-all's pageable source makes one (a GstBuffer's g_malloc):
      // allocated and filled by a 2D download before the clock starts.
      void* fresh = nullptr;
      if (w == 3) {
        fresh = std::malloc(bytes);
        if (fresh == nullptr) {
          fprintf(stderr, "bench-upload: out of memory\n");
          return 1;
        }
        check(cudaMemcpy2DAsync(fresh, row, dev, row, row, size_t(height), cudaMemcpyDeviceToHost,
                                stream),
              "download");
        check(cudaStreamSynchronize(stream), "download sync");
        due = cipc_test::monotonic_ns();  // paced from here: the download is not the copy's
      }
      const uint64_t t0 = cipc_test::monotonic_ns();
      if (w == 3)
        check(cudaMemcpyAsync(dev, fresh, bytes, cudaMemcpyHostToDevice, stream), "per-frame 1D");
      else if (w == 0)
        check(cudaMemcpyAsync(dev, pageable.data(), bytes, cudaMemcpyHostToDevice, stream), "1D");
      else if (w == 1)
        check(cudaMemcpy2DAsync(dev, row, pageable.data(), row, row, size_t(height),
                                cudaMemcpyHostToDevice, stream),
              "2D");
      else
        check(cudaMemcpyAsync(dev, pinned, bytes, cudaMemcpyHostToDevice, stream), "pinned");
      check(cudaStreamSynchronize(stream), "sync");
      if (i >= 3) took[w].push_back(double(cipc_test::monotonic_ns() - t0) / 1000.0);
      std::free(fresh);
    }
  }
  for (int w = 0; w < kWays; ++w)
    printf("UPLOAD way=%s bytes=%zu p50_us=%.1f p99_us=%.1f\n", ways[w], bytes,
           cipc_test::percentile(took[w], 0.5), cipc_test::percentile(took[w], 0.99));
  cudaFreeHost(pinned);
  cudaFree(dev);
  cudaStreamDestroy(stream);
  return 0;
}
