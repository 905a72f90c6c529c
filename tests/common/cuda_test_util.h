// SPDX-License-Identifier: LGPL-2.1-or-later
// Helpers shared by the tests that use the CUDA layer (cuda/cuda_api.h): why a GPU test has to
// skip, Status assertions and device-pointer casts. Header-only.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "cuda_api.h"

namespace cipc_test {

// Why CUDA device 0 cannot be used here ("no CUDA driver is installed ..."), or "" when it can.
// Asked once per process.
inline const std::string& cuda_missing_reason() {
  static const std::string reason = [] {
    std::string why;
    if (cipc_cuda::device_count(&why) > 0) return std::string();
    return why.empty() ? std::string("device_count() returned 0") : why;
  }();
  return reason;
}

inline void* as_ptr(cipc_cuda::DevicePtr p) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
}

}  // namespace cipc_test

// Asserts that a cipc_cuda::Status expression succeeded, printing its message otherwise.
#define ASSERT_OK(expr)                                         \
  do {                                                          \
    const ::cipc_cuda::Status st_ = (expr);                     \
    ASSERT_TRUE(st_.is_ok()) << #expr << ": " << st_.message(); \
  } while (0)
