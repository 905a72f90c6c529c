// SPDX-License-Identifier: LGPL-2.1-or-later
// Where a process's CPU time and wake-ups go, per thread, from /proc: CPU time and the time spent
// runnable but waiting for a CPU (the run queue) from /proc/self/task/<tid>/schedstat
// (nanoseconds, its first two fields), and voluntary context switches (the
// thread slept and was woken) from .../status. Take a snapshot before and after, then the
// difference per thread. For the benchmarks' per-thread breakdown (tests/gpu/cuda_peer.cpp,
// tests/bench/bench_events.cpp); process_cpu_us() is the whole process's total, from getrusage
// (cuda_peer.cpp, bench_wakeup.cpp).
#pragma once

#include <dirent.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace cipc_test {

struct ThreadUsage {
  std::string name;  // the thread's comm, blanks as '_' so that it stays one word in a line
  uint64_t cpu_ns = 0, runq_ns = 0, wakeups = 0;
};

// Every thread of this process, by thread id.
inline std::map<long, ThreadUsage> thread_usage() {
  std::map<long, ThreadUsage> out;
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return out;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const std::string base = std::string("/proc/self/task/") + e->d_name;
    ThreadUsage u;
    if (FILE* f = std::fopen((base + "/schedstat").c_str(), "r")) {
      unsigned long long ns = 0, waited = 0;
      if (std::fscanf(f, "%llu %llu", &ns, &waited) == 2) {
        u.cpu_ns = ns;
        u.runq_ns = waited;
      }
      std::fclose(f);
    }
    if (FILE* f = std::fopen((base + "/status").c_str(), "r")) {
      char line[256], name[64];
      unsigned long long v = 0;
      while (std::fgets(line, sizeof line, f)) {
        if (std::sscanf(line, "Name:\t%63[^\n]", name) == 1) u.name = name;
        if (std::sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1) u.wakeups = v;
      }
      std::fclose(f);
    }
    for (char& c : u.name)
      if (c == ' ') c = '_';
    out[std::atol(e->d_name)] = u;
  }
  closedir(dir);
  return out;
}

// What each thread of `after` used since `before` (a thread started since: all of it).
struct ThreadDelta {
  std::string name;
  double cpu_us = 0;
  double runq_us = 0;  // runnable, waiting for a CPU
  uint64_t wakeups = 0;
};
inline std::vector<ThreadDelta> thread_deltas(const std::map<long, ThreadUsage>& before,
                                              const std::map<long, ThreadUsage>& after) {
  std::vector<ThreadDelta> out;
  for (const auto& [tid, now] : after) {
    const auto was = before.find(tid);
    const ThreadUsage base = was == before.end() ? ThreadUsage{} : was->second;
    out.push_back({now.name, double(now.cpu_ns - base.cpu_ns) / 1000.0,
                   double(now.runq_ns - base.runq_ns) / 1000.0, now.wakeups - base.wakeups});
  }
  return out;
}

// The whole process's CPU time so far (user + system, every thread), in microseconds.
inline double process_cpu_us() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec +
         ru.ru_stime.tv_usec;
}

}  // namespace cipc_test
