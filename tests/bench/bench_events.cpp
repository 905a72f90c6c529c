// SPDX-License-Identifier: LGPL-2.1-or-later
// What CUDA events cost the CPU at camera rates: per paced iteration (60 Hz by default), a tiny
// memset on a stream followed by one event operation, for each kind of event the transport uses.
// Reported per iteration: CPU time and voluntary context switches (wake-ups) of the calling
// thread and of the CUDA driver's own threads (cuda-EvtHandlr and others, from
// /proc/self/task/<tid>/{schedstat,status}). Answers "which event operations wake a driver
// thread": the producer records an interprocess readiness event per frame, each consumer waits
// for it and records a release event.
//
// The last rows run two processes, as the transport does: this one records an interprocess event
// per iteration and a child process (this program, re-executed) opens it with its IPC handle and
// waits for it on its own stream (then records and polls a release event of its own); each prints
// its threads' figures.
//
// The bystander rows ask whether a process's driver threads wake for work it never submitted:
// this process holds a context and does nothing while a child process (re-executed, its own
// context) submits a memset and polls an event per iteration. A cuda-EvtHandlr wake-up here is
// triggered by the other context's work on the GPU, not by any call this process makes.
//
//   bench-events [--iterations N] [--hz H] [--device D]
#include <cuda_runtime_api.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "paced_clock.h"
#include "thread_usage.h"

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "bench-events: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

using cipc_test::monotonic_ns;
using cipc_test::sleep_until_ns;

// Runs `step` once per period and prints the per-iteration CPU and wake-ups of each thread.
void measure(const char* label, int iterations, int hz, const std::function<void()>& step) {
  for (int i = 0; i < 5; ++i) step();  // warm-up: lazy driver set-up is not the steady state
  check(cudaDeviceSynchronize(), "warm-up sync");
  const uint64_t period = 1000000000ull / uint64_t(hz);
  const auto before = cipc_test::thread_usage();
  const uint64_t t0 = monotonic_ns() + period;
  for (int i = 0; i < iterations; ++i) {
    sleep_until_ns(t0 + uint64_t(i) * period);
    step();
  }
  sleep_until_ns(t0 + uint64_t(iterations) * period);  // the last iteration's GPU work is done
  const auto used = cipc_test::thread_deltas(before, cipc_test::thread_usage());
  std::printf("%-44s", label);
  for (const auto& d : used) {
    const double cpu = d.cpu_us / iterations, wakes = double(d.wakeups) / iterations;
    if (cpu < 0.5 && wakes < 0.02) continue;
    std::printf("  %s %.1f us / %.2f", d.name.c_str(), cpu, wakes);
  }
  std::printf("\n");
  std::fflush(stdout);
}

// What the child of a two-process row does per iteration, after the parent's tick. The transport's
// consumer does `wait+blocking-record`: a GPU-side wait for the producer's interprocess readiness
// event, then a release event of its own (cudaEventBlockingSync, as cuda::Event::create_local makes
// it) recorded and polled. The other modes take that apart, to name the call that wakes
// cuda-EvtHandlr.
enum class ChildMode { kWaitRecord, kWaitBlockingRecord, kBlockingRecord, kWaitOnly };
constexpr ChildMode kChildModes[] = {ChildMode::kWaitRecord, ChildMode::kWaitBlockingRecord,
                                     ChildMode::kBlockingRecord, ChildMode::kWaitOnly};

const char* child_role(ChildMode mode) {
  switch (mode) {
    case ChildMode::kWaitRecord: return "--child-wait+record";
    case ChildMode::kWaitBlockingRecord: return "--child-wait+blocking-record";
    case ChildMode::kBlockingRecord: return "--child-blocking-record";
    case ChildMode::kWaitOnly: return "--child-wait";
  }
  return "";
}

// The child of the two-process rows: reads the event handle and one byte per iteration from
// `in_fd`, then does what `mode` says.
int waiter(ChildMode mode, int device, int iterations, int hz, int in_fd) {
  check(cudaSetDevice(device), "child: cudaSetDevice");
  cudaIpcEventHandle_t handle;
  for (size_t i = 0; i < sizeof handle; ++i) {
    unsigned char byte = 0;
    if (read(in_fd, &byte, 1) != 1) return 1;
    reinterpret_cast<unsigned char*>(&handle)[i] = byte;
  }
  const bool blocking =
      mode == ChildMode::kWaitBlockingRecord || mode == ChildMode::kBlockingRecord;
  const bool waits = mode != ChildMode::kBlockingRecord;
  const bool records = mode != ChildMode::kWaitOnly;
  cudaEvent_t ready, release;
  check(cudaIpcOpenEventHandle(&ready, handle), "child: cudaIpcOpenEventHandle");
  check(cudaEventCreateWithFlags(&release,
                                 cudaEventDisableTiming | (blocking ? cudaEventBlockingSync : 0)),
        "child: release event");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "child: stream");
  int left = iterations + 5;
  const std::string label = "child " + std::string(child_role(mode)).substr(8);
  measure(label.c_str(), iterations, hz, [&] {
    if (left-- <= 0) return;
    char tick = 0;
    if (read(in_fd, &tick, 1) != 1) return;
    if (waits) check(cudaStreamWaitEvent(stream, ready, 0), "child: wait");
    if (!records) return;
    check(cudaEventRecord(release, stream), "child: record");
    while (cudaEventQuery(release) == cudaErrorNotReady) {
    }
  });
  return 0;
}

// The child of the bystander rows: writes a byte to `ready_fd` once its context is up, then per
// period submits a memset and polls a plain event (no interrupt asked for), `periods` times.
int busy(int device, int periods, int hz, int ready_fd) {
  check(cudaSetDevice(device), "busy: cudaSetDevice");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "busy: stream");
  void* scratch = nullptr;
  check(cudaMalloc(&scratch, 256), "busy: cudaMalloc");
  cudaEvent_t done;
  check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "busy: event");
  check(cudaDeviceSynchronize(), "busy: sync");
  const char ready = 1;
  if (write(ready_fd, &ready, 1) != 1) return 1;
  close(ready_fd);
  const uint64_t period = 1000000000ull / uint64_t(hz), t0 = monotonic_ns();
  for (int i = 0; i < periods; ++i) {
    sleep_until_ns(t0 + uint64_t(i) * period);
    check(cudaMemsetAsync(scratch, 0, 256, stream), "busy: memset");
    check(cudaEventRecord(done, stream), "busy: record");
    while (cudaEventQuery(done) == cudaErrorNotReady) {
    }
  }
  return 0;
}

// This program again, as `self role device count hz fd` (a child of the two-process rows).
pid_t spawn_self(const char* self, const char* role, int device, int count, int hz, int fd) {
  std::vector<std::string> words{self,
                                 role,
                                 std::to_string(device),
                                 std::to_string(count),
                                 std::to_string(hz),
                                 std::to_string(fd)};
  std::vector<char*> args;
  for (std::string& w : words) args.push_back(w.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, args.data(), environ) != 0) return -1;
  return pid;
}

// Starts `children` busy processes and returns once each has its context up.
std::vector<pid_t> start_busy(const char* self, int children, int device, int periods, int hz) {
  std::vector<pid_t> pids;
  for (int c = 0; c < children; ++c) {
    int fds[2];
    if (pipe(fds) != 0) std::exit(1);
    const pid_t pid = spawn_self(self, "--busy", device, periods, hz, fds[1]);
    if (pid <= 0) std::exit(1);
    close(fds[1]);
    char byte = 0;
    if (read(fds[0], &byte, 1) != 1) std::exit(1);  // the child failed: it said why
    close(fds[0]);
    pids.push_back(pid);
  }
  return pids;
}

// One two-process row: a child in `mode`, paced by a byte per iteration through a pipe after
// `produce` (a memset and a record of our interprocess event `ipc`).
bool two_process_row(const char* self, ChildMode mode, int device, int iterations, int hz,
                     cudaEvent_t ipc, const std::function<void()>& produce) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return false;
  // Paced by the pipe, not by its own clock.
  const pid_t child = spawn_self(self, child_role(mode), device, iterations, 1000000, pipe_fds[0]);
  close(pipe_fds[0]);
  if (child <= 0) return false;
  cudaIpcEventHandle_t handle;
  check(cudaIpcGetEventHandle(&handle, ipc), "cudaIpcGetEventHandle");
  bool ok = write(pipe_fds[1], &handle, sizeof handle) == sizeof handle;
  const std::string label = "parent of " + std::string(child_role(mode)).substr(8);
  if (ok)
    measure(label.c_str(), iterations, hz, [&] {
      produce();
      const char tick = 1;
      if (write(pipe_fds[1], &tick, 1) != 1) std::exit(1);
    });
  close(pipe_fds[1]);
  int status = 0;
  waitpid(child, &status, 0);
  return ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (ChildMode mode : kChildModes)
    if (argc == 6 && !std::strcmp(argv[1], child_role(mode)))
      return waiter(mode, std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]),
                    std::atoi(argv[5]));
  if (argc == 6 && !std::strcmp(argv[1], "--busy"))
    return busy(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]));
  int iterations = 120, hz = 60, device = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iterations")) iterations = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--hz")) hz = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--device")) device = std::atoi(argv[i + 1]);
  }
  if (iterations < 1 || hz < 1) return 2;
  if (cudaSetDevice(device) != cudaSuccess) {
    std::printf("SKIP: no CUDA device %d\n", device);
    return 77;
  }
  cudaStream_t stream, other;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  check(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), "stream");
  void* scratch = nullptr;
  check(cudaMalloc(&scratch, 256), "cudaMalloc");
  cudaEvent_t plain, blocking, ipc;
  check(cudaEventCreateWithFlags(&plain, cudaEventDisableTiming), "plain event");
  check(cudaEventCreateWithFlags(&blocking, cudaEventDisableTiming | cudaEventBlockingSync),
        "blocking-sync event");
  check(cudaEventCreateWithFlags(&ipc, cudaEventDisableTiming | cudaEventInterprocess),
        "interprocess event");
  auto work = [&] { check(cudaMemsetAsync(scratch, 0, 256, stream), "memset"); };

  std::printf("per iteration at %d Hz, %d iterations: thread CPU / voluntary switches\n", hz,
              iterations);
  measure("memset only", iterations, hz, work);
  measure("memset + record plain", iterations, hz, [&] {
    work();
    check(cudaEventRecord(plain, stream), "record");
  });
  measure("memset + record blocking-sync", iterations, hz, [&] {
    work();
    check(cudaEventRecord(blocking, stream), "record");
  });
  measure("memset + record interprocess", iterations, hz, [&] {
    work();
    check(cudaEventRecord(ipc, stream), "record");
  });
  measure("... + wait interprocess on another stream", iterations, hz, [&] {
    work();
    check(cudaEventRecord(ipc, stream), "record");
    check(cudaStreamWaitEvent(other, ipc, 0), "wait");
  });
  measure("memset + record plain + poll query", iterations, hz, [&] {
    work();
    check(cudaEventRecord(plain, stream), "record");
    while (cudaEventQuery(plain) == cudaErrorNotReady) {
    }
  });
  measure("memset + record blocking + synchronize", iterations, hz, [&] {
    work();
    check(cudaEventRecord(blocking, stream), "record");
    check(cudaEventSynchronize(blocking), "synchronize");
  });
  measure("memset + record interprocess + synchronize", iterations, hz, [&] {
    work();
    check(cudaEventRecord(ipc, stream), "record");
    check(cudaEventSynchronize(ipc), "synchronize");
  });

  // Bystander: this process idles while 0, 1 and 4 other processes work on the GPU.
  for (int children : {0, 1, 4}) {
    const int periods = iterations + iterations / 2 + 2 * hz;  // outlasts the measurement
    auto pids = start_busy(argv[0], children, device, periods, hz);
    const std::string label = "idle bystander, " + std::to_string(children) + " busy process(es)";
    measure(label.c_str(), iterations, hz, [] {});
    for (pid_t pid : pids) kill(pid, SIGTERM);
    for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  }

  // Two processes: the child does its part of the transport's sync after each of our records,
  // which follow a frame-sized write (1080p BGRA), as the producer's do.
  void* frame = nullptr;
  const size_t frame_bytes = size_t(1920) * 1080 * 4;
  check(cudaMalloc(&frame, frame_bytes), "cudaMalloc frame");
  for (ChildMode mode : kChildModes) {
    if (!two_process_row(argv[0], mode, device, iterations, hz, ipc, [&] {
          check(cudaMemsetAsync(frame, 1, frame_bytes, stream), "frame memset");
          check(cudaEventRecord(ipc, stream), "record");
        }))
      return 1;
  }
  check(cudaDeviceSynchronize(), "final sync");
  return 0;
}
