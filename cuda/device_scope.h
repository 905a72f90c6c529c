// SPDX-License-Identifier: LGPL-2.1-or-later
// Internal to cuda/: makes a device current for a scope and restores the caller's afterwards.
#pragma once

#include <cuda_runtime_api.h>

namespace cipc_cuda {
namespace detail {

// Makes a device current until the end of the scope, then restores the previous one.
class DeviceScope {
 public:
  DeviceScope() = default;
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  ~DeviceScope() {
    if (restore_ >= 0) (void)cudaSetDevice(restore_);
  }
  // `for_driver`: the driver API calls that follow need the device's primary context current
  // on this thread. cudaGetDevice() reports device 0 on a thread that never made any context
  // current, so for those calls cudaSetDevice runs even when the device already looks current.
  cudaError_t enter(int device, bool for_driver = false) {
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess) current = -1;
    if (current == device && !for_driver) return cudaSuccess;
    const cudaError_t err = cudaSetDevice(device);
    if (err == cudaSuccess && current >= 0 && current != device) restore_ = current;
    return err;
  }

 private:
  int restore_ = -1;
};

}  // namespace detail
}  // namespace cipc_cuda
