// SPDX-License-Identifier: LGPL-2.1-or-later
// GPU memory as nvidia-smi reports it, for tests that check it stays flat across processes
// (tests/gpu, tests/soak). Header-only; no CUDA needed: without nvidia-smi the answers are
// nullopt, and the tests say why they skip.
#pragma once

#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

namespace cipc_test {

struct CommandResult {
  int status = -1;   // exit status; -1 when it did not run or did not exit normally
  std::string text;  // stdout and stderr
};

inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[512];
  while (fgets(buf, sizeof(buf), p)) r.text += buf;
  const int status = ::pclose(p);
  if (status != -1 && WIFEXITED(status)) r.status = WEXITSTATUS(status);
  return r;
}

// GPU memory in use on all GPUs (MiB); nullopt if it cannot be read. The lowest of a few samples
// taken after a pause: memory of processes that just exited takes a moment to be freed.
inline std::optional<uint64_t> gpu_memory_used_mib(
    std::chrono::milliseconds pause = std::chrono::milliseconds(300)) {
  std::optional<uint64_t> lowest;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::this_thread::sleep_for(pause);
    const CommandResult r =
        run_command("nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits");
    if (r.status != 0) return std::nullopt;
    std::istringstream in(r.text);
    uint64_t total = 0, value = 0;
    size_t gpus = 0;
    while (in >> value) {
      total += value;
      ++gpus;
    }
    if (gpus == 0) return std::nullopt;
    if (!lowest || total < *lowest) lowest = total;
  }
  return lowest;
}

}  // namespace cipc_test
