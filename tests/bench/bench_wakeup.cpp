// SPDX-License-Identifier: LGPL-2.1-or-later
// The floor under a paced frame: one small message over a Unix socket waking an idle process,
// with nothing else done on either side. A parent sends a 64-byte SOCK_SEQPACKET message (about
// a FRAME's size, docs/protocol.md) carrying its CLOCK_MONOTONIC send time, at H Hz; a child
// process blocks in poll() and recv() as cudasrc-ipc's reader does, and takes the difference on
// arrival. Every transport latency tests/bench/run-all reports is compared with this, measured in
// the same run on the same machine (docs/performance.md, "Against the floor").
//
// With --receivers R the parent sends each tick's message to R such processes, one socket each, as
// a producer sends a frame to R consumers: its CPU per tick against R is the floor under a
// producer's CPU per added consumer (the kernel wakes each receiver on the sender's CPU time).
//
//   bench-wakeup [--iterations N] [--hz H] [--receivers R]
//
// Prints one line: FLOOR messages=N p50_us=.. p99_us=.. max_us=.. receiver_cpu_us=..
// (the first receiver's latency and CPU per message, user + system, after the warm-up)
// sender_cpu_us=.. (per tick, all receivers) receivers=R
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "paced_clock.h"
#include "percentile.h"
#include "thread_usage.h"

namespace {

constexpr int kWarmup = 10;
constexpr size_t kMessageBytes = 64;

using cipc_test::monotonic_ns;
using cipc_test::percentile;
using cipc_test::process_cpu_us;
using cipc_test::sleep_until_ns;

// The child: one blocking wait per message, as an idle consumer waits for its next frame.
// Only the first receiver prints its line; the others just wait and read.
int receive(int fd, int iterations, bool report) {
  std::vector<double> latency_us;
  latency_us.reserve(size_t(iterations));
  double cpu_at_warmup = 0;
  for (int i = 0; i < iterations + kWarmup; ++i) {
    if (i == kWarmup) cpu_at_warmup = process_cpu_us();
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) {
      std::fprintf(stderr, "bench-wakeup: no message %d within 5 s\n", i);
      return 1;
    }
    unsigned char msg[kMessageBytes];
    if (recv(fd, msg, sizeof msg, 0) != ssize_t(sizeof msg)) {
      std::fprintf(stderr, "bench-wakeup: short message %d: %s\n", i, std::strerror(errno));
      return 1;
    }
    const uint64_t arrived = monotonic_ns();
    uint64_t sent = 0;
    std::memcpy(&sent, msg, sizeof sent);
    if (i >= kWarmup) latency_us.push_back(double(arrived - sent) / 1000.0);
  }
  const double cpu = (process_cpu_us() - cpu_at_warmup) / iterations;
  if (!report) return 0;
  std::printf("FLOOR messages=%d p50_us=%.1f p99_us=%.1f max_us=%.1f receiver_cpu_us=%.1f",
              iterations, percentile(latency_us, 0.5), percentile(latency_us, 0.99),
              percentile(latency_us, 1.0), cpu);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 600, hz = 60, receivers = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iterations"))
      iterations = std::max(1, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--hz"))
      hz = std::max(1, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--receivers"))
      receivers = std::clamp(std::atoi(argv[i + 1]), 1, 256);
    else {
      std::fprintf(stderr, "usage: bench-wakeup [--iterations N] [--hz H] [--receivers R]\n");
      return 2;
    }
  }
  std::vector<int> senders;
  std::vector<pid_t> children;
  for (int r = 0; r < receivers; ++r) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
      std::perror("bench-wakeup: socketpair");
      return 1;
    }
    const pid_t child = fork();
    if (child < 0) {
      std::perror("bench-wakeup: fork");
      return 1;
    }
    if (child == 0) {
      for (int fd : senders) close(fd);  // only its own socket stays open in a receiver
      close(fds[0]);
      _exit(receive(fds[1], iterations, r == 0));
    }
    close(fds[1]);
    senders.push_back(fds[0]);
    children.push_back(child);
  }
  const uint64_t period = 1000000000ull / uint64_t(hz);
  const uint64_t t0 = monotonic_ns() + period;
  double cpu_at_warmup = 0;
  for (int i = 0; i < iterations + kWarmup; ++i) {
    sleep_until_ns(t0 + uint64_t(i) * period);
    if (i == kWarmup) cpu_at_warmup = process_cpu_us();
    bool failed = false;
    for (int fd : senders) {
      unsigned char msg[kMessageBytes] = {};
      const uint64_t sent = monotonic_ns();
      std::memcpy(msg, &sent, sizeof sent);
      if (send(fd, msg, sizeof msg, MSG_NOSIGNAL) != ssize_t(sizeof msg)) {
        std::perror("bench-wakeup: send");
        failed = true;
        break;
      }
    }
    if (failed) break;
  }
  const double sender_cpu = (process_cpu_us() - cpu_at_warmup) / iterations;
  for (int fd : senders) close(fd);
  int exit_code = 0;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) exit_code = 1;
  }
  std::printf(" sender_cpu_us=%.1f receivers=%d\n", sender_cpu, receivers);
  return exit_code;
}
