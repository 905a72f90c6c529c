// SPDX-License-Identifier: LGPL-2.1-or-later
// CLOCK_MONOTONIC in nanoseconds and an absolute sleep on it: what the paced benchmarks
// (tests/bench/bench_events.cpp, bench_wakeup.cpp) tick with, so that a late iteration does not
// push back the ones after it.
#pragma once

#include <time.h>

#include <cstdint>

namespace cipc_test {

inline uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

inline void sleep_until_ns(uint64_t due) {
  const timespec ts{time_t(due / 1000000000ull), long(due % 1000000000ull)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
  }
}

}  // namespace cipc_test
