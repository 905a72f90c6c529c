// SPDX-License-Identifier: LGPL-2.1-or-later
// cudaipc-writer-peer: libcudaipc's writer and reader on a GPU, for tests/gpu/run-on-gpu's
// `writer` step (bit-exactness, copy audit, latency and rate against cudasink-ipc).
//
//   cudaipc-writer-peer write --socket P [--width W --height H --frames N --fps F
//                             --memory cuda|host --copy --record FILE --stamps FILE
//                             --consumers C --pool-size S --backpressure block|drop
//                             --no-draw]
//   cudaipc-writer-peer read --socket P [--frames N --record FILE --memory cuda|host]
//
// write: a GPU writer as an application would be: frame n (BGRx) is drawn by the test-pattern
// kernel (seed frame_seed(n)) on the peer's own stream straight into an acquired slot, which is
// published with that stream - nothing is copied, the CPU does not wait. --copy draws into a buffer
// of the peer's own instead and publishes it with cudaipc_writer_publish_copy (one device-to-device
// copy per frame). --memory host draws on the CPU (fill_pattern_cpu). It waits for --consumers
// consumers first, then publishes N frames (--fps 0: unpaced) and ends the stream.
// read: the C reader; per frame waits for readiness on its stream, checksums on the GPU and
// releases after the checksum.
// --record writes "offset checksum" (the visible bytes, cipc_cuda::image_checksum) per frame;
// writing it costs the writer a CPU wait per frame, so timing runs leave it out. --stamps
// writes "offset CLOCK_MONOTONIC-ns" just before each publish, as cudaipc-cuda-peer produce
// stamps a frame before its push. Both roles print `CPU us_per_frame=X frames=N` (after the
// first 30 frames), THREAD lines, RATE frames_per_s=X, and the writer STATS ... at the end.
// --no-draw publishes the slots as they are (no kernel, no CPU fill): what the transport alone
// costs, for the unpaced rates (tests/bench/python_writer_rate.py does the same in Python).
// Exit: 0 done, 1 usage, 2 failure.
#include <cudaipc/cudaipc.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cuda_api.h"
#include "test_pattern.h"
#include "thread_usage.h"

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stdout, "ERROR %s\n", what.c_str());
  std::fflush(stdout);
  std::exit(2);
}

void check(const cipc_cuda::Status& s, const char* what) {
  if (!s) die(std::string(what) + ": " + s.message());
}

void check_api(int status, const char* what) {
  if (status != CUDAIPC_OK)
    die(std::string(what) + ": " + cudaipc_status_name(status) + ": " + cudaipc_last_error());
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

struct Options {
  std::string socket, memory = "cuda", record, stamps, backpressure = "block";
  long width = 1920, height = 1080, frames = 600, fps = 0, consumers = 1, pool_size = 6;
  bool copy = false;
  bool draw = true;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 2; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--copy") {
      o.copy = true;
      continue;
    }
    if (k == "--no-draw") {
      o.draw = false;
      continue;
    }
    if (i + 1 >= argc) die(k + " needs a value");
    const std::string v = argv[++i];
    if (k == "--socket")
      o.socket = v;
    else if (k == "--memory")
      o.memory = v;
    else if (k == "--record")
      o.record = v;
    else if (k == "--stamps")
      o.stamps = v;
    else if (k == "--backpressure")
      o.backpressure = v;
    else if (k == "--width")
      o.width = std::atol(v.c_str());
    else if (k == "--height")
      o.height = std::atol(v.c_str());
    else if (k == "--frames")
      o.frames = std::atol(v.c_str());
    else if (k == "--fps")
      o.fps = std::atol(v.c_str());
    else if (k == "--consumers")
      o.consumers = std::atol(v.c_str());
    else if (k == "--pool-size")
      o.pool_size = std::atol(v.c_str());
    else
      die("unknown option " + k);
  }
  if (o.socket.empty()) die("--socket is required");
  return o;
}

// GPU checksums: two kernels into scratch, 8 bytes back (a CPU wait: records only).
class GpuChecksum {
 public:
  explicit GpuChecksum(size_t max_rows) {
    check(cipc_cuda::DeviceBuffer::create(0, max_rows * 8, &scratch_), "scratch");
    check(cipc_cuda::DeviceBuffer::create(0, 8, &result_), "result");
    check(cipc_cuda::PinnedHostBuffer::create(8, &host_), "pinned");
  }
  uint64_t run(uint64_t ptr, size_t pitch, size_t row_bytes, size_t rows, void* stream) {
    check(cipc_cuda::launch_image_checksum(ptr, pitch, row_bytes, rows, scratch_.ptr(),
                                           result_.ptr(), stream),
          "checksum kernel");
    check(cipc_cuda::copy_2d_async(host_.data(), 8, reinterpret_cast<void*>(result_.ptr()), 8, 8, 1,
                                   stream),
          "checksum download");
    check(cipc_cuda::synchronize_stream(stream), "checksum sync");
    uint64_t v;
    std::memcpy(&v, host_.data(), 8);
    return v;
  }

 private:
  cipc_cuda::DeviceBuffer scratch_, result_;
  cipc_cuda::PinnedHostBuffer host_;
};

constexpr long kWarmupFrames = 30;

// The test pattern's seed for frame n: the kernel uses bits 13-20 of seed * 2246822519, so
// seeds are chosen to put n there - any 256 consecutive frames then all differ, and a frame
// left from an earlier use of its slot shows.
uint32_t frame_seed(long n) {
  const uint32_t k = 2246822519u;
  uint32_t inverse = k;  // Newton's iteration for k's inverse modulo 2^32 (k is odd)
  for (int i = 0; i < 5; ++i) inverse *= 2u - k * inverse;
  return (uint32_t(n) << 13) * inverse;
}

// Process CPU and per-thread usage per frame after the warm-up, as cudaipc-cuda-peer prints it.
class Meter {
 public:
  void mark() {
    cpu_us_ = cipc_test::process_cpu_us();
    threads_ = cipc_test::thread_usage();
    start_ = std::chrono::steady_clock::now();
  }
  void report(long frames) const {
    if (frames <= 0) return;
    const double n = double(frames);
    std::printf("CPU us_per_frame=%.2f frames=%ld\n", (cipc_test::process_cpu_us() - cpu_us_) / n,
                frames);
    for (const auto& d : cipc_test::thread_deltas(threads_, cipc_test::thread_usage())) {
      if (d.cpu_us < 1.0 && d.wakeups < 1) continue;
      std::printf("THREAD name=%s cpu_us_per_frame=%.2f wakeups_per_frame=%.3f\n", d.name.c_str(),
                  d.cpu_us / n, double(d.wakeups) / n);
    }
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::printf("RATE frames_per_s=%.1f frames=%ld\n", n / s, frames);
  }

 private:
  double cpu_us_ = 0;
  std::map<long, cipc_test::ThreadUsage> threads_;
  std::chrono::steady_clock::time_point start_;
};

int run_write(const Options& o) {
  const bool cuda = o.memory == "cuda";
  cudaipc_writer_options wo;
  cudaipc_writer_options_init(&wo);
  wo.socket_path = o.socket.c_str();
  wo.format = "BGRx";
  wo.width = uint32_t(o.width);
  wo.height = uint32_t(o.height);
  wo.framerate_num = uint32_t(o.fps);
  wo.memory = cuda ? CUDAIPC_MEMORY_CUDA : CUDAIPC_MEMORY_HOST;
  wo.pool_size = uint32_t(o.pool_size);
  wo.backpressure =
      o.backpressure == "drop" ? CUDAIPC_BACKPRESSURE_DROP : CUDAIPC_BACKPRESSURE_BLOCK;
  wo.live = o.fps > 0;
  cudaipc_writer* w = nullptr;
  check_api(cudaipc_writer_open(&wo, &w), "open");
  std::printf("LISTENING\n");
  std::fflush(stdout);
  cipc_cuda::Stream stream;
  const size_t row_bytes = size_t(o.width) * 4, rows = size_t(o.height);
  cipc_cuda::DeviceBuffer source;  // --copy: the application's own frame
  std::vector<uint8_t> host_source;
  std::unique_ptr<GpuChecksum> checksum;
  if (cuda) {
    check(cipc_cuda::Stream::create(0, &stream), "stream");
    if (o.copy) check(cipc_cuda::DeviceBuffer::create(0, row_bytes * rows, &source), "source");
    if (!o.record.empty()) checksum = std::make_unique<GpuChecksum>(rows);
  } else if (o.copy) {
    host_source.resize(row_bytes * rows);
  }
  FILE* record = o.record.empty() ? nullptr : std::fopen(o.record.c_str(), "w");
  FILE* stamps = o.stamps.empty() ? nullptr : std::fopen(o.stamps.c_str(), "w");
  for (long attached = 0; attached < o.consumers;) {
    check_api(cudaipc_writer_wait_for_consumer(w, 60000), "waiting for consumers");
    cudaipc_writer_stats s;
    cudaipc_writer_get_stats(w, &s);
    attached = long(s.consumers);
    if (attached < o.consumers) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::printf("CONSUMERS %ld\n", o.consumers);
  std::fflush(stdout);
  Meter meter;
  const uint64_t period = o.fps > 0 ? 1000000000ull / uint64_t(o.fps) : 0;
  const uint64_t start = now_ns();
  for (long n = 0; n < o.frames; ++n) {
    if (n == kWarmupFrames) meter.mark();
    if (period) {
      const uint64_t due = start + uint64_t(n) * period;
      timespec ts{time_t(due / 1000000000ull), long(due % 1000000000ull)};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
    }
    const uint32_t seed = frame_seed(n);
    uint64_t sum = 0;
    if (o.copy) {
      if (cuda) {
        check(cipc_cuda::launch_fill_pattern(source.ptr(), row_bytes, row_bytes, rows, seed,
                                             stream.handle()),
              "fill");
        if (checksum)
          sum = checksum->run(source.ptr(), row_bytes, row_bytes, rows, stream.handle());
        if (stamps) std::fprintf(stamps, "%ld %llu\n", n, (unsigned long long)now_ns());
        check_api(cudaipc_writer_publish_copy(w, reinterpret_cast<void*>(source.ptr()), row_bytes,
                                              stream.handle(), CUDAIPC_NO_TIMESTAMP,
                                              CUDAIPC_NO_TIMESTAMP, 10000),
                  "publish_copy");
      } else {
        cipc_cuda::fill_pattern_cpu(host_source.data(), row_bytes, row_bytes, rows, seed);
        if (record)
          sum = cipc_cuda::image_checksum_cpu(host_source.data(), row_bytes, row_bytes, rows);
        if (stamps) std::fprintf(stamps, "%ld %llu\n", n, (unsigned long long)now_ns());
        check_api(cudaipc_writer_publish_copy(w, host_source.data(), row_bytes, nullptr,
                                              CUDAIPC_NO_TIMESTAMP, CUDAIPC_NO_TIMESTAMP, 10000),
                  "publish_copy");
      }
    } else {
      cudaipc_slot* slot = nullptr;
      check_api(cudaipc_writer_acquire(w, 10000, &slot), "acquire");
      cudaipc_slot_info info;
      cudaipc_slot_get_info(slot, &info);
      const size_t pitch = size_t(info.plane_stride[0]);
      if (!o.draw) {
        // The transport alone: the slot goes out as it is.
      } else if (cuda) {
        check(cipc_cuda::launch_fill_pattern(info.data, pitch, row_bytes, rows, seed,
                                             stream.handle()),
              "fill");
        if (checksum) sum = checksum->run(info.data, pitch, row_bytes, rows, stream.handle());
      } else {
        auto* p = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(info.data));
        cipc_cuda::fill_pattern_cpu(p, pitch, row_bytes, rows, seed);
        if (record) sum = cipc_cuda::image_checksum_cpu(p, pitch, row_bytes, rows);
      }
      if (stamps) std::fprintf(stamps, "%ld %llu\n", n, (unsigned long long)now_ns());
      check_api(cudaipc_slot_publish(slot, cuda ? stream.handle() : nullptr, CUDAIPC_NO_TIMESTAMP,
                                     period ? period : CUDAIPC_NO_TIMESTAMP),
                "publish");
    }
    if (record) std::fprintf(record, "%ld %llu\n", n, (unsigned long long)sum);
  }
  meter.report(o.frames - kWarmupFrames);
  cudaipc_writer_stats s;
  cudaipc_writer_get_stats(w, &s);
  std::printf(
      "STATS published=%llu sent=%llu dropped=%llu abandoned=%llu copies=%llu "
      "consumers_total=%llu evicted=%llu slots=%llu mps=%u\n",
      (unsigned long long)s.frames_published, (unsigned long long)s.frames_sent,
      (unsigned long long)s.frames_dropped, (unsigned long long)s.frames_abandoned,
      (unsigned long long)s.copies, (unsigned long long)s.consumers_total,
      (unsigned long long)s.consumers_evicted, (unsigned long long)s.slots_allocated, s.cuda_mps);
  if (cuda) check(stream.synchronize(), "final sync");
  check_api(cudaipc_writer_end_stream(w), "end_stream");
  // Consumers read the last frames before the writer goes (its BYE would cut them off).
  for (int i = 0; i < 500; ++i) {
    cudaipc_writer_stats now;
    cudaipc_writer_get_stats(w, &now);
    if (now.consumers == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  cudaipc_writer_close(w);
  if (record) std::fclose(record);
  if (stamps) std::fclose(stamps);
  std::printf("DONE\n");
  return 0;
}

int run_read(const Options& o) {
  cudaipc_reader_options ro;
  cudaipc_reader_options_init(&ro);
  ro.socket_path = o.socket.c_str();
  ro.connect_timeout_ms = 60000;
  cudaipc_reader* r = nullptr;
  check_api(cudaipc_reader_open(&ro, &r), "reader open");
  std::printf("ATTACHED\n");
  std::fflush(stdout);
  FILE* record = o.record.empty() ? nullptr : std::fopen(o.record.c_str(), "w");
  cipc_cuda::Stream stream;
  std::unique_ptr<GpuChecksum> checksum;
  Meter meter;
  long n = 0;
  for (; o.frames == 0 || n < o.frames; ++n) {
    if (n == kWarmupFrames) meter.mark();
    cudaipc_frame* f = nullptr;
    const int s = cudaipc_reader_next(r, 30000, &f);
    if (s == CUDAIPC_END) break;
    check_api(s, "next");
    cudaipc_frame_info info;
    cudaipc_frame_get_info(f, &info);
    const size_t row_bytes = size_t(info.width) * 4, rows = info.height;
    uint64_t sum = 0;
    if (info.memory == CUDAIPC_MEMORY_CUDA) {
      if (!stream.handle()) check(cipc_cuda::Stream::create(info.device, &stream), "stream");
      check_api(cudaipc_frame_wait_ready(f, stream.handle()), "wait_ready");
      if (record) {
        if (!checksum) checksum = std::make_unique<GpuChecksum>(rows);
        sum = checksum->run(info.data, size_t(info.plane_stride[0]), row_bytes, rows,
                            stream.handle());
      }
      check_api(cudaipc_frame_release(f, stream.handle()), "release");
    } else {
      if (record)
        sum = cipc_cuda::image_checksum_cpu(
            reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(info.data)),
            size_t(info.plane_stride[0]), row_bytes, rows);
      check_api(cudaipc_frame_release(f, nullptr), "release");
    }
    if (record)
      std::fprintf(record, "%llu %llu\n", (unsigned long long)info.offset, (unsigned long long)sum);
  }
  meter.report(n - kWarmupFrames);
  if (record) std::fclose(record);
  cudaipc_reader_close(r);
  std::printf("DONE frames=%ld\n", n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s write|read --socket PATH [options]\n", argv[0]);
    return 1;
  }
  const std::string role = argv[1];
  const Options o = parse(argc, argv);
  if (role == "write") return run_write(o);
  if (role == "read") return run_read(o);
  std::fprintf(stderr, "unknown role %s\n", role.c_str());
  return 1;
}
