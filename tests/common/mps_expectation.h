// SPDX-License-Identifier: LGPL-2.1-or-later
// Whether the GPU tests run as clients of a CUDA MPS server: tests/gpu/run-on-gpu's `mps` step
// starts a private daemon and sets CIPC_EXPECT_MPS=1; everywhere else the tests expect no MPS,
// so a stats field that claimed MPS without it (or missed it under it) fails either way.
#pragma once

#include <cstdlib>
#include <cstring>

namespace cipc_test {

inline bool mps_expected() {
  const char* v = std::getenv("CIPC_EXPECT_MPS");
  return v && std::strcmp(v, "1") == 0;
}

}  // namespace cipc_test
