// SPDX-License-Identifier: LGPL-2.1-or-later
// Internal to cuda/: the one way our .cu files launch kernels, returning the launch's Status.
#pragma once

#include <cuda_runtime.h>

#include "check.h"

namespace cipc_cuda {
namespace detail {

// Launches through cudaLaunchKernelEx, which returns the launch error (bad configuration, no
// kernel image for this GPU, a sticky error from earlier work, ...) directly - the same error a
// <<<>>> launch would leave for cudaGetLastError. We deliberately do not ask cudaPeekAtLastError
// after a successful launch: it could return a stale error of some unrelated earlier call on
// this thread and blame this launch for it. A failed launch's error is then taken off the
// thread's last-error slot (cudaGetLastError) so that it is not reported a second time by
// whatever <<<>>> launch checks next. Faults while the kernel runs surface asynchronously, at the
// next synchronising call on the stream.
template <typename... Params, typename... Args>
Status launch(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
              cudaStream_t stream, const char* file, int line, Args... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = nullptr;
  config.numAttrs = 0;
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return make_error(name, err, file, line);
  }
  return Status::ok();
}

}  // namespace detail
}  // namespace cipc_cuda
