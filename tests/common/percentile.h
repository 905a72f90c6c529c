// SPDX-License-Identifier: LGPL-2.1-or-later
// The percentile the benchmarks report (tests/bench/bench_wakeup.cpp, bench_upload.cpp): the
// nearest rank, rounded, of a copy of the samples; 0 for none.
#pragma once

#include <algorithm>
#include <vector>

namespace cipc_test {

inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))];
}

}  // namespace cipc_test
