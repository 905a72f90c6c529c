// SPDX-License-Identifier: LGPL-2.1-or-later
// One side of a CUDA-memory run across two processes, for tests/gpu and tests/bench.
//
//   cudaipc-cuda-peer produce --socket P [--width W --height H --frames N --fps F
//                             --record FILE --sync-mode gpu-events|cpu --device D
//                             --source pool|foreign|host|detour|sysmem|sysmem-pool|cudaupload|
//                                      nvh264dec|gst-cudaipc --pool-size S --consumers C
//                             --stamps FILE]
//   cudaipc-cuda-peer consume --socket P [--frames N --record FILE --io-mode import|copy
//                             --arrivals FILE --hold-ms M --timeout-s T --device D
//                             --keep-held K --reread FILE
//                             --max-in-flight M --cpu-map 1
//                             --transport cuda|gst-cuda|gl|host|shm|gst-cudaipc
//                             --width W --height H]
//   cudaipc-cuda-peer display --socket P [--frames N --io-mode import|copy --arrivals FILE]
//   cudaipc-cuda-peer fake-producer --socket P
//
// --source picks how frames reach the transport (tests/bench/run-all compares them):
//   pool     the GPU writer fills cudasink-ipc's own CUDA slots: nothing is copied (default)
//   foreign  it fills CUDA memory of its own (another element's pool), so cudasink-ipc
//            (copy-policy=copy-if-needed) copies each frame device-to-device into a slot
//   host     cudasink-ipc memory=host: the frame is downloaded (D2H) into a host slot; the
//            consumer (host memory) uploads it again (H2D)
//   detour   no cudasink-ipc at all: D2H into shmsink's shared memory, shmsrc in the consumer
//            (--transport shm), H2D there; the consumer of --source host takes --transport host -
//            what stock elements offer
//   sysmem   frames born in system memory (downloaded there first, not timed): upstream's own
//            pageable buffers, one per frame, which cudasink-ipc memory=cuda uploads
//   sysmem-pool  the same into the pool of pinned memory cudasink-ipc offers for system-memory
//            caps (as videotestsrc or a decoder would use it): the upload is an asynchronous DMA
//   cudaupload  appsrc ! cudaupload ! cudasink-ipc: GStreamer's upload into its CUDA memory,
//            which the sink copies on the GPU (stamped at the sink's pad, after the upload)
//   nvh264dec  filesrc location=<--clip> ! h264parse ! nvh264dec ! cudasink-ipc, paced at the
//            clip's 60 fps: the decoder's CUDA memory, which the sink copies on the GPU (stamped at
//            the sink's pad, after the decode); --width/--height must be the clip's. With
//            --decoder-surfaces 1 the decoder copies into the sink's exportable pool instead
//            (GStreamer >= 1.24), and the sink sends that memory as it is
//   gst-cudaipc  GStreamer's own cudaipcsink (1.24 and later) instead of ours, the pool source's
//            frames written into the CUDA pool it proposes; the consumer takes --transport
//            gst-cudaipc (cudaipcsrc, --io-mode import|copy as its own io-mode). Frame numbers
//            cross as a custom meta (gst_cudaipc_peer.h). The benchmark's peer rows.
// --stamps (producer) and --arrivals (consumer) write "frame-number CLOCK_MONOTONIC-ns" lines:
// when a frame entered the producer's sink (just before the push, or before the download where
// there is one), and when it left the consumer's first element (cudasrc-ipc's src pad; after the
// upload for host memory); <arrivals>.send has the producer's send time of each frame
// (cudasrc-ipc's reference timestamp meta), and <arrivals>.gpu when the frame became usable on
// the consumer's GPU (a host function queued right after the consumer's stream waits for the
// frame's readiness; for host memory, when the upload has finished; --gpu-stamp 0 leaves that
// host function out, which wakes a CUDA driver thread per frame). Both processes print `CPU
// us_per_frame=X frames=N`: their own CPU time per frame over the frames after the first 30
// (start-up left out), and a `THREAD name=… cpu_us_per_frame=… wakeups_per_frame=…` line per
// thread; the producer also prints `PUSH cpu_us_per_frame=…`, the sink's share of its own thread
// (the push call), and the consumer `HANDLE cpu_us_per_frame=…`, the harness's own share of the
// thread that handles the frames (its checks, stamps and log lines; not the release). display runs
// `cudasrc-ipc ! ximagesink sync=false` and writes "capture-ns present-ns" per frame to --arrivals:
// the frame's capture time (its PTS on CLOCK_MONOTONIC) and when ximagesink had shown it (its chain
// function returned; with sync=false it draws inside it).
//
// --transport gst-cuda makes the consumer take GStreamer's CUDA memory (memory:CUDAMemory), as an
// nvcodec element downstream would: it orders its work after the memory's stream (GPU-side) and
// checksums the frame where the memory's device pointer says it is; on its first frame it prints
// GSTCUDA readonly=0|1 (whether the memory is marked read-only, as a wrapped slot is).
// --transport gl makes the consumer take GL memory (memory:GLMemory, BGRA), as glimagesink would,
// and read it back with gldownload: the frames are then checksummed as host memory is (uploaded
// here first). GL needs a display or, headless, GST_GL_WINDOW=egl-device GST_GL_PLATFORM=egl.
// --gl-import auto|cuda-interop|memory-object|none sets cudasrc-ipc's gl-import (default auto).
// display --display-sink ximagesink|glimagesink picks the display (default ximagesink).
// --cpu-map 1 makes the consumer read frames with gst_buffer_map() (checksummed on the CPU), as
// an element that knows nothing of CUDA would. --streaming-thread 1 handles each frame in the
// pipeline's streaming thread (appsink's new-sample callback), as an element downstream of
// cudasrc-ipc would, instead of pulling it into the main thread (a hand-off per frame).
// fake-producer answers HELLO with a WELCOME for CUDA memory on a GPU no machine has, and prints
// PEER-ERROR <text> for the consumer's answer.
//
// The producer is a GPU writer as an upstream element would be: it takes buffers from
// cudasink-ipc's proposed pool of CUDA slots, fills each on its own stream with a pattern kernel
// (seed = frame number) between begin_write and end_write, and pushes it - nothing is copied.
// The consumer runs `cudasrc-ipc ! appsink` in memory:CUDAIPCMemory and, per frame, waits for
// readiness on its stream, optionally checksums the frame on the GPU, and records its release.
// --record writes "index checksum" lines (checksums of the visible bytes, computed on the GPU)
// so two records can be compared for bit-exactness. Lines on stdout: READY, FRAME k, EOS,
// ERROR <text>, STATS <structure>. --device sets cuda-device-id on either element; a producer
// whose cudasink-ipc does not start prints the element's error and exits 2.
//
// A producer of N frames holds them back until a consumer attaches, so that consumer gets every
// frame; one that runs until SIGINT (--frames 0) discards frames while none is attached, so that
// SIGINT ends it (stops the loop, prints STATS) even when no consumer is left. The consumer takes
// up to 8 frames in flight by default, as many as the producer has slots: at its limit the
// producer would drop frames for it instead of waiting.
#include <dlfcn.h>
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/check/gstharness.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "channel.h"
#include "cuda_api.h"
#include "cudaipc/gstcudaipcmemory.h"
#include "frame_conformance.h"
#include "gst_pipeline_util.h"
#include "paced_clock.h"
#ifdef CIPC_HAVE_GST_CUDA
#include "common/gstcompat.h"
#include "gst_cudaipc_peer.h"
#endif
#include "test_pattern.h"
#include "thread_usage.h"

namespace {

std::atomic<bool> g_stop{false};

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

struct Options {
  std::string mode, socket, record, io_mode = "import", sync_mode = "gpu-events";
  std::string gl_import = "auto", display_sink = "ximagesink";
  std::string source = "pool", stamps, arrivals, transport = "cuda", clip;
  int width = 1920, height = 1080, fps = 0, device = -1, hold_ms = 0, timeout_s = 60,
      max_in_flight = 8;
  int pool_size = 8, consumers = 1;
  // consume (CUDA transport): keep the last --keep-held frames until the stream has ended, then
  // checksum them again into --reread (as --record writes), e.g. after their producer was killed.
  int keep_held = 0;
  std::string reread;
  // --source nvh264dec: its num-output-surfaces (0: its default). 1 makes it copy each frame into
  // the exportable pool cudasink-ipc proposes (GStreamer >= 1.24) instead of handing out its own
  // output surfaces, which the sink must copy.
  int decoder_surfaces = 0;
  bool cpu_map = false;  // consume: read frames through gst_buffer_map() (the CPU fallback)
  bool streaming_thread = false;  // consume: handle frames in the streaming thread (no appsink hop)
  // consume: with --arrivals, also stamp when each frame is usable on the GPU (--gpu-stamp 0: not)
  bool gpu_stamp = true;
  // consume: try to write into each received frame, which must fail: "1" with a memset (the
  // driver refuses it for this process alone), "kernel" from a kernel (a GPU fault).
  std::string vandal;
  std::string gpu_uuid = "random";  // fake-producer: the GPU it claims to use
  long frames = 600;
};

Options parse(int argc, char** argv) {
  Options o;
  if (argc > 1) o.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    // clang-format off: one option per line reads better as a table
    if (k == "--socket")
      o.socket = v;
    else if (k == "--width")
      o.width = std::stoi(v);
    else if (k == "--height")
      o.height = std::stoi(v);
    else if (k == "--fps")
      o.fps = std::stoi(v);
    else if (k == "--frames")
      o.frames = std::stol(v);
    else if (k == "--record")
      o.record = v;
    else if (k == "--stamps")
      o.stamps = v;
    else if (k == "--arrivals")
      o.arrivals = v;
    else if (k == "--source")
      o.source = v;
    else if (k == "--clip")
      o.clip = v;
    else if (k == "--decoder-surfaces")
      o.decoder_surfaces = std::stoi(v);
    else if (k == "--transport")
      o.transport = v;
    else if (k == "--pool-size")
      o.pool_size = std::stoi(v);
    else if (k == "--consumers")
      o.consumers = std::stoi(v);
    else if (k == "--io-mode")
      o.io_mode = v;
    else if (k == "--gl-import")
      o.gl_import = v;
    else if (k == "--display-sink")
      o.display_sink = v;
    else if (k == "--sync-mode")
      o.sync_mode = v;
    else if (k == "--device")
      o.device = std::stoi(v);
    else if (k == "--hold-ms")
      o.hold_ms = std::stoi(v);
    else if (k == "--keep-held")
      o.keep_held = std::stoi(v);
    else if (k == "--reread")
      o.reread = v;
    else if (k == "--cpu-map")
      o.cpu_map = v == "1";
    else if (k == "--streaming-thread")
      o.streaming_thread = v == "1";
    else if (k == "--gpu-stamp")
      o.gpu_stamp = v == "1";
    else if (k == "--vandal")
      o.vandal = v == "0" ? "" : v;
    else if (k == "--timeout-s")
      o.timeout_s = std::stoi(v);
    else if (k == "--max-in-flight")
      o.max_in_flight = std::stoi(v);
    // clang-format on
  }
  return o;
}

void die(const std::string& what) {
  printf("ERROR %s\n", what.c_str());
  fflush(stdout);
  exit(2);
}

void check(const cipc_cuda::Status& s, const char* what) {
  if (!s) die(std::string(what) + ": " + s.message());
}

// `what`, followed by the first error left on `bus` where there is one: what die() says.
std::string with_error(const std::string& what, GstBus* bus) {
  const std::string why = cipc_test::pop_bus_error(bus);
  return what + (why.empty() ? std::string() : ": " + why);
}

// Checksums frames on the GPU: two kernels into device scratch, 8 bytes back to the host.
class GpuChecksum {
 public:
  GpuChecksum(int device, size_t max_rows) {
    check(cipc_cuda::DeviceBuffer::create(device, max_rows * 8, &scratch_), "scratch");
    check(cipc_cuda::DeviceBuffer::create(device, 8, &result_), "result");
    check(cipc_cuda::PinnedHostBuffer::create(8, &host_), "pinned");
  }
  uint64_t run(uint64_t ptr, size_t pitch, size_t row_bytes, size_t rows,
               cipc_cuda::StreamHandle stream) {
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
  // Loads the kernel (modules load lazily, at the first launch) on a row of the scratch buffer.
  void warm_up(cipc_cuda::StreamHandle stream) { run(scratch_.ptr(), 8, 8, 1, stream); }

 private:
  cipc_cuda::DeviceBuffer scratch_, result_;
  cipc_cuda::PinnedHostBuffer host_;
};

void print_stats(GstElement* e, const char* tag) {
  GstStructure* s = nullptr;
  g_object_get(e, "stats", &s, nullptr);
  gchar* text = gst_structure_to_string(s);
  printf("%s %s\n", tag, text);
  fflush(stdout);
  g_free(text);
  gst_structure_free(s);
}

// Steady-state CPU time of this process per frame: from mark() (taken after the first frames,
// so start-up is left out) to report().
class CpuMeter {
 public:
  void mark(long frame) {
    start_us_ = cpu_us();
    start_frame_ = frame;
  }
  void report(long frames) const {
    if (start_frame_ < 0 || frames <= start_frame_) return;
    printf("CPU us_per_frame=%.2f frames=%ld\n",
           (cpu_us() - start_us_) / double(frames - start_frame_), frames - start_frame_);
  }

 private:
  static double cpu_us() { return cipc_test::process_cpu_us(); }
  double start_us_ = 0;
  long start_frame_ = -1;
};
constexpr long kWarmupFrames = 30;

// Per thread of this process (thread_usage.h), between mark() and report(), per frame: one
// "THREAD name=<comm> cpu_us_per_frame=X wakeups_per_frame=Y runq_us_per_frame=Z" line per
// thread that ran (Z: time runnable but waiting for a CPU, what many consumers woken at once pay).
class ThreadMeter {
 public:
  void mark(long frame) {
    start_ = cipc_test::thread_usage();
    start_frame_ = frame;
  }
  void report(long frames) const {
    if (start_frame_ < 0 || frames <= start_frame_) return;
    const double n = double(frames - start_frame_);
    for (const auto& d : cipc_test::thread_deltas(start_, cipc_test::thread_usage())) {
      if (d.cpu_us < 1.0 && d.wakeups < 1) continue;
      printf("THREAD name=%s cpu_us_per_frame=%.2f wakeups_per_frame=%.3f runq_us_per_frame=%.2f\n",
             d.name.c_str(), d.cpu_us / n, double(d.wakeups) / n, d.runq_us / n);
    }
  }

 private:
  std::map<long, cipc_test::ThreadUsage> start_;
  long start_frame_ = -1;
};

// Tells the copy audit (tests/tools/copy_audit.cpp), when this process runs under it, that
// start-up is over: its CUDA API counts restart here.
void mark_copy_audit() {
  const char* lib = getenv("CUDA_INJECTION64_PATH");
  void* handle = lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  if (!handle) return;
  if (auto mark = reinterpret_cast<void (*)()>(dlsym(handle, "copy_audit_mark"))) mark();
  dlclose(handle);
}

// CPU time of the calling thread, for the share of one call (the producer's push).
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

// What every producer's frame loop measures the same way: CPU and threads from the first frame
// after the warm-up, the pace (frame i is due t0 + i periods), and the sink's share of this
// thread, the push call; report() prints them.
class FrameLoop {
 public:
  explicit FrameLoop(int fps) : period_(fps ? 1000000000ull / uint64_t(fps) : 0), t0_(now_ns()) {}
  // Before frame i: the CPU marks after the warm-up, then a paced frame's wait for its time.
  void begin(long i) {
    if (i == kWarmupFrames) {
      cpu_.mark(i);
      threads_.mark(i);
      mark_copy_audit();
    }
    if (period_) cipc_test::sleep_until_ns(t0_ + uint64_t(i) * period_);
  }
  // Frame i's PTS: its time at the pace, or 1 ms apart unpaced.
  GstClockTime pts(long i) const { return period_ ? i * period_ : i * 1000000; }
  // Runs `push` for frame i, counting its CPU after the warm-up.
  template <typename Push>
  void push(long i, Push&& push) {
    const double start = thread_cpu_us();
    push();
    if (i >= kWarmupFrames) push_cpu_us_ += thread_cpu_us() - start;
  }
  void report(long frames) const {
    cpu_.report(frames);
    threads_.report(frames);
    if (frames > kWarmupFrames)
      printf("PUSH cpu_us_per_frame=%.2f\n", push_cpu_us_ / double(frames - kWarmupFrames));
  }

 private:
  CpuMeter cpu_;
  ThreadMeter threads_;
  double push_cpu_us_ = 0;
  const uint64_t period_, t0_;
};

// "frame-number CLOCK_MONOTONIC-ns" lines, collected in memory and written at the end.
class TimeLog {
 public:
  explicit TimeLog(const std::string& path) : path_(path) {}
  void add(uint64_t frame, uint64_t t) {
    if (!path_.empty()) entries_.emplace_back(frame, t);
  }
  ~TimeLog() {
    if (path_.empty()) return;
    FILE* f = fopen(path_.c_str(), "w");
    if (!f) return;
    for (const auto& e : entries_)
      fprintf(f, "%llu %llu\n", (unsigned long long)e.first, (unsigned long long)e.second);
    fclose(f);
  }

 private:
  std::string path_;
  std::vector<std::pair<uint64_t, uint64_t>> entries_;
};

// A cudasink-ipc driven by this process as an upstream element would drive it: caps set, its
// proposed pool configured with `slots` buffers and active.
struct DrivenSink {
  GstElement* sink = nullptr;
  GstBus* bus = nullptr;
  GstHarness* harness = nullptr;
  GstBufferPool* pool = nullptr;
  guint size = 0;

  ~DrivenSink() {
    if (pool) {
      gst_buffer_pool_set_active(pool, FALSE);
      gst_object_unref(pool);
    }
    if (harness) gst_harness_teardown(harness);
    if (bus) gst_object_unref(bus);
  }
  // `system_caps`: upstream offers system-memory frames (memory=cuda uploads them).
  void start(const Options& o, const std::string& socket, const char* memory, guint slots,
             bool wait_for_consumer, bool system_caps = false) {
    sink = gst_element_factory_make("cudasink-ipc", nullptr);
    if (!sink) die("cudasink-ipc not found (GST_PLUGIN_PATH?)");
    gst_util_set_object_arg(G_OBJECT(sink), "sync-mode", o.sync_mode.c_str());
    gst_util_set_object_arg(G_OBJECT(sink), "memory", memory);
    // max = slots = max-in-flight: the writer waits for a free slot instead of outrunning
    // consumers. The properties stop at 64; the pool itself takes any bound (fan-out runs).
    const guint property_slots = std::min<guint>(slots, 64);
    g_object_set(sink, "socket-path", socket.c_str(), "cuda-device-id", o.device, "sync", FALSE,
                 "async", FALSE, "wait-for-consumer", wait_for_consumer, "max-in-flight",
                 property_slots, "pool-size", property_slots, "enable-last-sample", FALSE, nullptr);
    // A finite run gives every consumer every frame. Frames copied in have no writer that waits
    // for a free slot, and the harness answers latency queries as a live source would (drop):
    // so block, as a file source's auto would.
    if (wait_for_consumer) gst_util_set_object_arg(G_OBJECT(sink), "backpressure", "block");
    // Started here, before the harness gets it: gst_harness_add_element_full() plays a sink and
    // asserts (aborts) if that fails, and gives it no bus, so the element's error would be lost.
    bus = gst_bus_new();
    gst_element_set_bus(sink, bus);
    if (gst_element_set_state(sink, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE ||
        GST_STATE(sink) != GST_STATE_PLAYING) {
      die(with_error("cudasink-ipc did not start", bus));
    }
    static GstStaticPadTemplate src =
        GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
    harness = gst_harness_new_empty();
    gst_harness_add_element_full(harness, sink, &src, "sink", nullptr, nullptr);
    const bool cuda = std::string(memory) == "cuda" && !system_caps;
    const std::string caps_str =
        std::string("video/x-raw") + (cuda ? "(memory:CUDAIPCMemory)" : "") +
        ",format=BGRA,width=" + std::to_string(o.width) + ",height=" + std::to_string(o.height) +
        ",framerate=" + std::to_string(o.fps) + "/1";
    gst_harness_set_src_caps_str(harness, caps_str.c_str());
    GstCaps* caps = gst_caps_from_string(caps_str.c_str());
    GstQuery* q = gst_query_new_allocation(caps, TRUE);
    if (!gst_pad_peer_query(harness->srcpad, q) || gst_query_get_n_allocation_pools(q) == 0)
      die("cudasink-ipc offered no pool");
    gst_query_parse_nth_allocation_pool(q, 0, &pool, &size, nullptr, nullptr);
    GstStructure* config = gst_buffer_pool_get_config(pool);
    gst_buffer_pool_config_set_params(config, caps, size, slots, slots);
    gst_buffer_pool_set_config(pool, config);
    if (!gst_buffer_pool_set_active(pool, TRUE)) die("pool activation failed");
    gst_query_unref(q);
    gst_caps_unref(caps);
  }
  GstBuffer* acquire() {
    GstBuffer* b = nullptr;
    if (gst_buffer_pool_acquire_buffer(pool, &b, nullptr) != GST_FLOW_OK) die("acquire");
    return b;
  }
  void push(GstBuffer* b) {
    if (gst_harness_push(harness, b) != GST_FLOW_OK) die(with_error("push", bus));
  }
  guint consumers() const {
    guint n = 0;
    g_object_get(sink, "num-consumers", &n, nullptr);
    return n;
  }
};

// The host-memory detour a user would build from stock elements: appsrc ! shmsink, fed with
// frames downloaded into shmsink's own shared memory where it lends it (else shmsink copies).
struct ShmDetour {
  GstElement* pipeline = nullptr;
  GstElement* appsrc = nullptr;
  GstAllocator* allocator = nullptr;
  std::atomic<int> clients{0};

  ~ShmDetour() {
    if (allocator) gst_object_unref(allocator);
    if (pipeline) {
      gst_element_set_state(pipeline, GST_STATE_NULL);
      gst_object_unref(appsrc);
      gst_object_unref(pipeline);
    }
  }
  void start(const Options& o, size_t frame_bytes) {
    const std::string caps = "video/x-raw,format=BGRA,width=" + std::to_string(o.width) +
                             ",height=" + std::to_string(o.height) +
                             ",framerate=" + std::to_string(o.fps) + "/1";
    const std::string launch =
        "appsrc name=in format=time block=true max-buffers=2 caps=\"" + caps +
        "\" ! shmsink name=shm wait-for-connection=true sync=false async=false "
        "socket-path=" +
        o.socket + " shm-size=" + std::to_string(frame_bytes * size_t(o.pool_size + 2));
    GError* err = nullptr;
    pipeline = cipc_test::parse_or_null(launch, &err);
    if (!pipeline) die(std::string("shm detour: ") + err->message);
    appsrc = gst_bin_get_by_name(GST_BIN(pipeline), "in");
    GstElement* shm = gst_bin_get_by_name(GST_BIN(pipeline), "shm");
    g_signal_connect(shm, "client-connected", G_CALLBACK(+[](GstElement*, gint, gpointer d) {
                       static_cast<ShmDetour*>(d)->clients++;
                     }),
                     this);
    gst_object_unref(shm);
    if (gst_element_set_state(pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE)
      die("shmsink did not start (is the shm plugin installed?)");
    // shmsink answers the allocation query with its shared-memory allocator: download into it.
    GstCaps* c = gst_caps_from_string(caps.c_str());
    GstQuery* q = gst_query_new_allocation(c, TRUE);
    GstPad* pad = gst_element_get_static_pad(appsrc, "src");
    if (gst_pad_peer_query(pad, q) && gst_query_get_n_allocation_params(q) > 0)
      gst_query_parse_nth_allocation_param(q, 0, &allocator, nullptr);
    gst_object_unref(pad);
    gst_query_unref(q);
    gst_caps_unref(c);
  }
  GstBuffer* allocate(size_t bytes) {
    GstMemory* m = allocator ? gst_allocator_alloc(allocator, bytes, nullptr) : nullptr;
    if (!m) return gst_buffer_new_allocate(nullptr, bytes, nullptr);
    GstBuffer* b = gst_buffer_new();
    gst_buffer_append_memory(b, m);
    return b;
  }
  void push(GstBuffer* b) {
    if (gst_app_src_push_buffer(GST_APP_SRC(appsrc), b) != GST_FLOW_OK)
      die("shm detour: push failed");
  }
  void finish() { cipc_test::end_appsrc_stream(pipeline, appsrc); }
};

// A producer pipeline described as gst-launch text whose last element is cudasink-ipc
// name=sink, fed by another GStreamer element (cudaupload, nvh264dec): owns the pipeline, the sink
// and the bus, and puts a buffer probe on the sink's pad, where those sources stamp their frames.
struct SinkPipeline {
  GstElement* pipeline = nullptr;
  GstElement* sink = nullptr;
  GstBus* bus = nullptr;

  ~SinkPipeline() {
    if (pipeline) {
      gst_element_set_state(pipeline, GST_STATE_NULL);
      gst_object_unref(bus);
      gst_object_unref(sink);
      gst_object_unref(pipeline);
    }
  }
  // cudasink-ipc's properties for the harness's producers: unsynchronised (upstream paces),
  // `slots` in flight and in the pool (at most 64), and the run's socket, sync mode and device.
  static std::string sink_properties(const Options& o, guint slots, bool wait_for_consumer) {
    const std::string n = std::to_string(std::min<guint>(slots, 64));
    return " sync=false async=false enable-last-sample=false socket-path=" + o.socket +
           " sync-mode=" + o.sync_mode +
           " wait-for-consumer=" + (wait_for_consumer ? "true" : "false") + " max-in-flight=" + n +
           " pool-size=" + n + " cuda-device-id=" + std::to_string(o.device);
  }
  void launch(const std::string& description, const std::string& who, GstPadProbeCallback on_buffer,
              gpointer data) {
    GError* err = nullptr;
    pipeline = cipc_test::parse_or_null(description, &err);
    if (!pipeline) die(who + ": " + err->message);
    sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
    bus = gst_element_get_bus(pipeline);
    GstPad* pad = gst_element_get_static_pad(sink, "sink");
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, on_buffer, data, nullptr);
    gst_object_unref(pad);
  }
  guint consumers() const {
    guint n = 0;
    g_object_get(sink, "num-consumers", &n, nullptr);
    return n;
  }
};

// appsrc ! cudaupload ! cudasink-ipc: system-memory frames uploaded by GStreamer's own element
// into GstCudaMemory, which the sink copies into a slot on the GPU. Stamps when each frame enters
// the sink (after the upload), as the other sources stamp just before their push.
struct UploadPipeline : SinkPipeline {
  GstElement* appsrc = nullptr;
  TimeLog* stamps = nullptr;

  ~UploadPipeline() {
    if (appsrc) gst_object_unref(appsrc);
  }
  void start(const Options& o, guint slots, bool wait_for_consumer, TimeLog* stamp_log) {
    stamps = stamp_log;
    const std::string caps = "video/x-raw,format=BGRA,width=" + std::to_string(o.width) +
                             ",height=" + std::to_string(o.height) +
                             ",framerate=" + std::to_string(o.fps) + "/1";
    launch(
        "appsrc name=in format=time block=true max-buffers=2 caps=\"" + caps +
            "\" ! cudaupload ! video/x-raw(memory:CUDAMemory) ! cudasink-ipc name=sink" +
            sink_properties(o, slots, wait_for_consumer),
        "cudaupload producer",
        [](GstPad*, GstPadProbeInfo* info, gpointer d) {
          GstBuffer* b = GST_PAD_PROBE_INFO_BUFFER(info);
          static_cast<UploadPipeline*>(d)->stamps->add(GST_BUFFER_OFFSET(b), now_ns());
          return GST_PAD_PROBE_OK;
        },
        this);
    appsrc = gst_bin_get_by_name(GST_BIN(pipeline), "in");
    if (gst_element_set_state(pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE)
      die(with_error("appsrc ! cudaupload ! cudasink-ipc did not start (nvcodec plugin?)", bus));
  }
  void push(GstBuffer* b) {
    if (gst_app_src_push_buffer(GST_APP_SRC(appsrc), b) != GST_FLOW_OK)
      die(with_error("cudaupload producer: push failed", bus));
  }
  void finish() { cipc_test::end_appsrc_stream(pipeline, appsrc); }
};

// filesrc ! h264parse ! nvh264dec ! identity sync=true ! cudasink-ipc: frames decoded into
// nvcodec's CUDA memory at the clip's pace, which the sink copies into a slot on the GPU. The
// pipeline prerolls (the sink serves from then) and plays once the consumers are there; the pad
// probe numbers each frame, stamps it as it enters the sink, and takes the steady-state CPU marks
// after the first frames, as the frame loop does for the other sources.
struct DecodePipeline : SinkPipeline {
  TimeLog* stamps = nullptr;
  CpuMeter* cpu = nullptr;
  ThreadMeter* threads = nullptr;
  std::atomic<long> frames{0};
  long limit = 0;  // --frames: those after it are dropped before the sink (0: the whole clip)

  void start(const Options& o, guint slots, TimeLog* stamp_log, CpuMeter* cpu_meter,
             ThreadMeter* thread_meter) {
    stamps = stamp_log;
    cpu = cpu_meter;
    threads = thread_meter;
    limit = o.frames;
    if (o.clip.empty()) die("--source nvh264dec needs --clip (tests/gpu/make-h264-clip)");
    launch(
        "filesrc location=\"" + o.clip + "\" ! h264parse ! nvh264dec" +
            (o.decoder_surfaces ? " num-output-surfaces=" + std::to_string(o.decoder_surfaces)
                                : std::string()) +
            " ! video/x-raw(memory:CUDAMemory),width=" + std::to_string(o.width) +
            ",height=" + std::to_string(o.height) +
            " ! identity sync=true ! cudasink-ipc name=sink" + sink_properties(o, slots, true),
        "nvh264dec producer",
        [](GstPad*, GstPadProbeInfo* info, gpointer d) {
          auto* self = static_cast<DecodePipeline*>(d);
          if (self->limit && self->frames.load() >= self->limit) return GST_PAD_PROBE_DROP;
          GstBuffer* b = gst_buffer_make_writable(GST_PAD_PROBE_INFO_BUFFER(info));
          GST_PAD_PROBE_INFO_DATA(info) = b;
          const long i = self->frames++;
          if (i == kWarmupFrames) {
            self->cpu->mark(i);
            self->threads->mark(i);
            mark_copy_audit();
          }
          GST_BUFFER_OFFSET(b) = guint64(i);
          self->stamps->add(uint64_t(i), now_ns());
          return GST_PAD_PROBE_OK;
        },
        this);
    if (gst_element_set_state(pipeline, GST_STATE_PAUSED) == GST_STATE_CHANGE_FAILURE)
      die(with_error("filesrc ! h264parse ! nvh264dec ! cudasink-ipc did not start", bus));
  }
  void play() {
    if (gst_element_set_state(pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE)
      die(with_error("nvh264dec producer did not play", bus));
  }
  // Until the clip's EOS (or an error, which ends the run with it), or SIGINT.
  void wait_end() {
    while (!g_stop) {
      GstMessage* m = gst_bus_timed_pop_filtered(
          bus, 100 * GST_MSECOND, GstMessageType(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
      if (!m) continue;
      const bool error = GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR;
      gst_message_unref(m);
      if (error) die(with_error("nvh264dec producer", bus));
      return;
    }
  }
};

// Waits (up to 30 s) until `count()` reaches n: every consumer of a run gets the whole stream.
template <typename Count>
void wait_for_consumers(int n, Count count) {
  for (int i = 0; i < 3000 && !g_stop && count() < n; ++i) usleep(10000);
  if (count() < n)
    die("only " + std::to_string(count()) + " of " + std::to_string(n) + " consumers came");
}

// --source nvh264dec: the decoder paces the frames; this thread only waits for the consumers,
// plays, and waits for the clip's end.
int produce_decoded(const Options& o) {
  TimeLog stamps(o.stamps);
  CpuMeter cpu;
  ThreadMeter threads;
  DecodePipeline decoder;
  decoder.start(o, guint(o.pool_size), &stamps, &cpu, &threads);
  printf("READY\n");
  fflush(stdout);
  wait_for_consumers(o.consumers, [&] { return int(decoder.consumers()); });
  decoder.play();
  decoder.wait_end();
  const long n = decoder.frames.load();
  cpu.report(n);
  threads.report(n);
  print_stats(decoder.sink, "STATS");
  return 0;
}

#ifdef CIPC_HAVE_GST_CUDA
// --source gst-cudaipc: GStreamer's own cudaipcsink instead of ours (gst_cudaipc_peer.h), fed
// as the pool source feeds ours: each frame written on the GPU into the sink's proposed CUDA
// pool, stamped just before the push. Frame numbers ride in a custom meta.
int produce_peer(const Options& o) {
  GstVideoInfo info;
  gst_video_info_set_format(&info, GST_VIDEO_FORMAT_BGRA, guint(o.width), guint(o.height));
  GST_VIDEO_INFO_FPS_N(&info) = o.fps;
  GST_VIDEO_INFO_FPS_D(&info) = 1;
  const size_t row_bytes = size_t(o.width) * 4;
  TimeLog stamps(o.stamps);
  cipc_bench::PeerIpcSink sink;
  std::string error;
  if (!sink.start(o.socket, info, unsigned(o.pool_size), o.device, &error)) die(error);
  printf("READY\n");
  fflush(stdout);
  if (o.frames != 0) wait_for_consumers(o.consumers, [&] { return sink.consumers(); });
  FrameLoop loop(o.fps);
  long i = 0;
  for (; (o.frames == 0 || i < o.frames) && !g_stop; ++i) {
    loop.begin(i);
    GstBuffer* b = sink.acquire();
    if (!b) die("cudaipcsink's pool gave no buffer");
    GstMemory* mem = gst_buffer_peek_memory(b, 0);
    const GstVideoMeta* meta = gst_buffer_get_video_meta(b);
    const size_t pitch =
        meta ? size_t(meta->stride[0]) : size_t(GST_VIDEO_INFO_PLANE_STRIDE(&info, 0));
    GstMapInfo map;
    if (!gst_memory_map(mem, &map, GstMapFlags(GST_MAP_WRITE | GST_MAP_CUDA)))
      die("could not map cudaipcsink's CUDA memory for writing");
    {
      // In the memory's context, on its stream: ordered before cudaipcsink's own work (1.24+).
      cipc_bench::MemoryContextScope scope(mem);
      if (!scope.entered()) die("could not enter the CUDA context of cudaipcsink's memory");
      const uint64_t ptr = reinterpret_cast<uint64_t>(map.data) + (meta ? meta->offset[0] : 0);
      check(cipc_cuda::launch_fill_pattern(ptr, pitch, row_bytes, o.height, uint32_t(i),
                                           scope.stream()),
            "fill kernel");
      if (!scope.stream()) check(cipc_cuda::synchronize_stream(nullptr), "fill sync");
    }
    gst_memory_unmap(mem, &map);
    cipc_bench::tag_frame(b, uint64_t(i));
    GST_BUFFER_PTS(b) = loop.pts(i);
    GST_BUFFER_OFFSET(b) = i;
    stamps.add(i, now_ns());
    loop.push(i, [&] {
      if (!sink.push(b, &error)) die(error);
    });
  }
  loop.report(i);
  sink.finish();
  fflush(stdout);
  return 0;
}
#endif

int produce(const Options& o) {
#ifdef CIPC_HAVE_GST_CUDA
  if (o.source == "gst-cudaipc") return produce_peer(o);
#endif
  const bool pool = o.source == "pool", foreign = o.source == "foreign", host = o.source == "host",
             detour = o.source == "detour", sysmem = o.source == "sysmem",
             sysmem_pool = o.source == "sysmem-pool", upload = o.source == "cudaupload",
             decode = o.source == "nvh264dec";
  if (!pool && !foreign && !host && !detour && !sysmem && !sysmem_pool && !upload && !decode)
    die("unknown --source " + o.source);
  if (decode) return produce_decoded(o);
  // Frames born in system memory, uploaded on the way into the sink's CUDA slots.
  const bool born_in_host = sysmem || sysmem_pool || upload;
  const guint slots = guint(o.pool_size);
  const bool wait_for_consumer = o.frames != 0;
  const size_t row_bytes = size_t(o.width) * 4, frame_bytes = row_bytes * size_t(o.height);
  TimeLog stamps(o.stamps);  // before `uploader`, whose pad probe writes it
  DrivenSink sink, donor;
  ShmDetour shm;
  UploadPipeline uploader;
  if (detour) {
    shm.start(o, frame_bytes);
  } else if (upload) {
    uploader.start(o, slots, wait_for_consumer, &stamps);
  } else if (born_in_host) {
    sink.start(o, o.socket, "cuda", slots, wait_for_consumer, true);
  } else {
    sink.start(o, o.socket, host ? "host" : "cuda", slots, wait_for_consumer);
    // Another element's CUDA memory: a second sink's slots, which the first one does not own.
    if (foreign) donor.start(o, o.socket + ".foreign", "cuda", slots, false);
  }

  const int device = o.device < 0 ? 0 : o.device;
  cipc_cuda::Stream stream;
  check(cipc_cuda::Stream::create(device, &stream), "stream");
  GpuChecksum checksum(device, o.height);
  // host and detour: the frame is made on the GPU, then downloaded.
  cipc_cuda::DeviceBuffer scratch;
  if (host || detour || born_in_host)
    check(cipc_cuda::DeviceBuffer::create(device, frame_bytes, &scratch), "frame buffer");
  FILE* record = o.record.empty() ? nullptr : fopen(o.record.c_str(), "w");
  printf("READY\n");
  fflush(stdout);
  // A run of N frames starts when its consumers are there, so paced frames keep their pace
  // (wait-for-consumer alone would hold the first frame, and the late ones would follow in a
  // burst).
  if (o.frames != 0) {
    if (detour)
      wait_for_consumers(o.consumers, [&] { return shm.clients.load(); });
    else if (upload)
      wait_for_consumers(o.consumers, [&] { return int(uploader.consumers()); });
    else
      wait_for_consumers(o.consumers, [&] { return int(sink.consumers()); });
  }
  FrameLoop loop(o.fps);
  long i = 0;
  for (; (o.frames == 0 || i < o.frames) && !g_stop; ++i) {
    loop.begin(i);
    GstBuffer* b = nullptr;
    if (pool || foreign) {
      b = foreign ? donor.acquire() : sink.acquire();
      GstMemory* mem = gst_buffer_peek_memory(b, 0);
      guint64 ptr = 0;
      gint pitch = 0;
      if (!gst_cuda_ipc_buffer_get_plane(b, 0, &ptr, &pitch)) die("not CUDA slot memory");
      if (!gst_cuda_ipc_memory_begin_write(mem, stream.handle())) die("begin_write");
      check(cipc_cuda::launch_fill_pattern(ptr, pitch, row_bytes, o.height, uint32_t(i),
                                           stream.handle()),
            "fill kernel");
      if (!gst_cuda_ipc_memory_end_write(mem, stream.handle())) die("end_write");
      if (record)
        fprintf(record, "%ld %llu\n", i,
                (unsigned long long)checksum.run(ptr, pitch, row_bytes, o.height, stream.handle()));
      stamps.add(i, now_ns());
    } else {
      check(cipc_cuda::launch_fill_pattern(scratch.ptr(), row_bytes, row_bytes, o.height,
                                           uint32_t(i), stream.handle()),
            "fill kernel");
      if (record)
        fprintf(record, "%ld %llu\n", i,
                (unsigned long long)checksum.run(scratch.ptr(), row_bytes, row_bytes, o.height,
                                                 stream.handle()));
      // Where the frame crosses in host memory, the download is part of the path: stamped
      // before it. Frames born in host memory are stamped once they are there (the upload
      // source's stamp is the sink's pad probe).
      if (!born_in_host) stamps.add(i, now_ns());
      if (detour)
        b = shm.allocate(frame_bytes);
      else if (sysmem || upload)  // upstream's own pageable memory, a new buffer per frame
        b = gst_buffer_new_allocate(nullptr, frame_bytes, nullptr);
      else
        b = sink.acquire();  // host: a host slot; sysmem-pool: the pinned pool the sink offers
      GstVideoMeta* meta = gst_buffer_get_video_meta(b);
      const size_t dst_pitch = meta ? size_t(meta->stride[0]) : row_bytes;
      GstMapInfo map;
      if (!gst_buffer_map(b, &map, GST_MAP_WRITE)) die("map for download");
      uint8_t* dst = map.data + (meta ? meta->offset[0] : 0);
      check(cipc_cuda::copy_2d_async(dst, dst_pitch, reinterpret_cast<void*>(scratch.ptr()),
                                     row_bytes, row_bytes, o.height, stream.handle()),
            "download");
      check(stream.synchronize(), "download sync");
      // shmsink carries bytes only: the frame number rides in the first pixels.
      if (detour) std::memcpy(dst, &i, sizeof(i));
      gst_buffer_unmap(b, &map);
      if (sysmem || sysmem_pool) stamps.add(i, now_ns());
    }
    GST_BUFFER_PTS(b) = loop.pts(i);
    GST_BUFFER_OFFSET(b) = i;
    loop.push(i, [&] {
      if (detour)
        shm.push(b);
      else if (upload)
        uploader.push(b);
      else
        sink.push(b);
    });
  }
  loop.report(i);
  if (record) fclose(record);
  if (detour) {
    shm.finish();
  } else if (upload) {
    uploader.finish();  // the frames still queued in appsrc reach the sink first
    print_stats(uploader.sink, "STATS");
  } else {
    print_stats(sink.sink, "STATS");
    gst_harness_push_event(sink.harness, gst_event_new_eos());
  }
  fflush(stdout);
  return 0;
}

// When each frame became usable on this process's GPU: a host function queued on the
// consumer's stream right after its wait for the frame's readiness stamps the time it ran (a
// CUDA driver thread calls it, hence the lock).
class GpuReadyLog {
 public:
  explicit GpuReadyLog(const std::string& path) : log_(path) {}
  void stamp_after(cipc_cuda::StreamHandle stream, uint64_t frame) {
    auto* entry = new Entry{this, frame};
    const cudaError_t e = cudaLaunchHostFunc(
        static_cast<cudaStream_t>(stream),
        [](void* p) {
          std::unique_ptr<Entry> entry(static_cast<Entry*>(p));
          entry->log->add(entry->frame, now_ns());
        },
        entry);
    if (e != cudaSuccess) {
      delete entry;
      die(std::string("cudaLaunchHostFunc: ") + cudaGetErrorString(e));
    }
  }
  void add(uint64_t frame, uint64_t t) {
    std::lock_guard<std::mutex> lock(mutex_);
    log_.add(frame, t);
  }

 private:
  struct Entry {
    GpuReadyLog* log;
    uint64_t frame;
  };
  std::mutex mutex_;
  TimeLog log_;
};

struct ConsumerState {
  FILE* record = nullptr;
  TimeLog* arrivals = nullptr;
  TimeLog* sends = nullptr;
  std::atomic<long> frames{0};  // counted in the streaming thread with --streaming-thread 1
};

// A received frame's number: cudasrc-ipc carries the buffer offset; GStreamer's cudaipcsrc
// only the custom meta the producer tagged it with.
uint64_t frame_number(GstBuffer* b) {
#ifdef CIPC_HAVE_GST_CUDA
  uint64_t tagged = 0;
  if (cipc_bench::frame_tag(b, &tagged)) return tagged;
#endif
  return GST_BUFFER_OFFSET(b);
}

// When a frame leaves cudasrc-ipc (its first element), by frame number; and when the producer
// sent it (cudasrc-ipc's reference timestamp meta), which splits the latency into stages.
GstPadProbeReturn arrival_probe(GstPad*, GstPadProbeInfo* info, gpointer data) {
  auto* st = static_cast<ConsumerState*>(data);
  GstBuffer* b = GST_PAD_PROBE_INFO_BUFFER(info);
  st->arrivals->add(frame_number(b), now_ns());
  static GstCaps* send_time = gst_caps_new_empty_simple("timestamp/x-cudaipc-send-monotonic");
  if (GstReferenceTimestampMeta* m = gst_buffer_get_reference_timestamp_meta(b, send_time))
    st->sends->add(GST_BUFFER_OFFSET(b), m->timestamp);
  return GST_PAD_PROBE_OK;
}

// Pops the pipeline's first error, printing it (and the warnings before it: WARNING <text>);
// true if there was one.
bool report_error(GstBus* bus, GstClockTime wait) {
  const auto wanted = static_cast<GstMessageType>(GST_MESSAGE_ERROR | GST_MESSAGE_WARNING);
  for (GstMessage* m; (m = gst_bus_timed_pop_filtered(bus, wait, wanted)) != nullptr; wait = 0) {
    const bool error = GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR;
    GError* err = nullptr;
    if (error)
      gst_message_parse_error(m, &err, nullptr);
    else
      gst_message_parse_warning(m, &err, nullptr);
    printf("%s %s\n", error ? "ERROR" : "WARNING", err->message);
    g_clear_error(&err);
    gst_message_unref(m);
    if (error) return true;
  }
  return false;
}

int consume(const Options& o) {
  // cuda: frames stay in CUDA memory. host: the producer is in host memory (--source host), the
  // frame is uploaded here. shm: the stock-element detour (--source detour), uploaded here too.
  // gst-cudaipc: GStreamer's own cudaipcsrc (the producer ran --source gst-cudaipc), whose
  // GstCudaMemory is handled as gst-cuda's is.
  const bool peer = o.transport == "gst-cudaipc";
  const bool gst_cuda = o.transport == "gst-cuda" || peer, gl = o.transport == "gl";
  const bool cuda = o.transport == "cuda" || gst_cuda, shm = o.transport == "shm";
  if (!cuda && !shm && !gl && o.transport != "host") die("unknown --transport " + o.transport);
#ifndef CIPC_HAVE_GST_CUDA
  if (gst_cuda) die("--transport " + o.transport + " needs a build with GStreamer's CUDA library");
#endif
  if (peer && !o.record.empty()) die("--transport gst-cudaipc does not --record");
  std::string launch;
  if (peer) {
    launch = "cudaipcsrc name=src connection-timeout=20 io-mode=" + o.io_mode +
             " address=" + o.socket +
             (o.device >= 0 ? " cuda-device-id=" + std::to_string(o.device) : "") +
             " ! video/x-raw(memory:CUDAMemory)";
  } else if (shm) {
    launch = "shmsrc name=src is-live=true socket-path=" + o.socket +
             " ! video/x-raw,format=BGRA,width=" + std::to_string(o.width) +
             ",height=" + std::to_string(o.height) + ",framerate=0/1";
  } else {
    launch = "cudasrc-ipc name=src connect-timeout=20000 io-mode=" + o.io_mode +
             " socket-path=" + o.socket + " max-in-flight=" + std::to_string(o.max_in_flight) +
             (o.device >= 0 ? " cuda-device-id=" + std::to_string(o.device) : "") +
             (gst_cuda ? " ! video/x-raw(memory:CUDAMemory)"
              : cuda   ? " ! video/x-raw(memory:CUDAIPCMemory)"
              : gl     ? " gl-import=" + o.gl_import +
                         " ! video/x-raw(memory:GLMemory),format=BGRA ! "
                         "gldownload ! "
                         "video/x-raw,format=BGRA"
                   : " ! video/x-raw");
  }
  launch += " ! appsink name=out sync=false max-buffers=4 enable-last-sample=false";
  GError* err = nullptr;
  GstElement* pipeline = cipc_test::parse_or_null(launch, &err);
  if (!pipeline) die(err->message);
  GstElement* src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  GstElement* out = gst_bin_get_by_name(GST_BIN(pipeline), "out");
  TimeLog arrivals(o.arrivals);
  TimeLog sends(o.arrivals.empty() ? std::string() : o.arrivals + ".send");
  GpuReadyLog gpu_ready(o.arrivals.empty() ? std::string() : o.arrivals + ".gpu");
  const bool stamp_gpu = !o.arrivals.empty() && o.gpu_stamp;
  ConsumerState st;
  st.arrivals = &arrivals;
  st.sends = &sends;
  // GL memory too: its frame's latency ends where the texture leaves cudasrc-ipc, as a display
  // takes it, not after the gldownload this harness adds to read it back.
  if (cuda || gl) {
    GstPad* pad = gst_element_get_static_pad(src, "src");
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, arrival_probe, &st, nullptr);
    gst_object_unref(pad);
  }
  // The application's own CUDA set-up (context, stream, the checksum kernel) is done before it
  // attaches, as applications do at start: with 64 consumers starting together on the H200 it
  // took seconds, and a consumer doing it on its first frame kept that frame past release-timeout
  // and was evicted (docs/reliability.md, "Consumers still starting up").
  cipc_cuda::Stream stream;
  cipc_cuda::Event gst_ready;  // gst-cuda: marks the end of the memory's stream's work
  std::unique_ptr<GpuChecksum> checksum;
  // A --device this machine lacks is the element's error to report (the test of it reads that),
  // so the harness's own set-up then stays on device 0.
  std::string no_device;
  const int devices = cipc_cuda::device_count(&no_device);
  int stream_device = o.device < 0 || o.device >= devices ? 0 : o.device;
  // GStreamer's cudaipcsrc works in a CUDA context of its own, and so does this harness behind it
  // (the memory's): no primary context here, which would count as the peer's GPU memory.
  if (!peer) {
    check(cipc_cuda::Stream::create(stream_device, &stream), "stream");
    checksum = std::make_unique<GpuChecksum>(stream_device, 8192);
    checksum->warm_up(stream.handle());
  }
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  printf("READY\n");
  fflush(stdout);
  cipc_cuda::DeviceBuffer upload;  // host and shm: where each frame is uploaded
  st.record = o.record.empty() ? nullptr : fopen(o.record.c_str(), "w");
  GstBus* bus = gst_element_get_bus(pipeline);
  const uint64_t deadline = now_ns() + uint64_t(o.timeout_s) * 1000000000ull;
  int rc = 0;
  uint64_t first_ns = 0, last_ns = 0;
  CpuMeter cpu;
  ThreadMeter threads;
  std::deque<GstSample*> kept;  // --keep-held
  // One received frame: wait for it on the GPU, optionally checksum it, record the release.
  // The harness's own CPU in process() (checks, stamps, checksums, log lines), after warm-up: what
  // an application would spend, left out of the element's share. The release that the sample's
  // unref sets off is the element's, and is not counted here.
  double handle_cpu_us = 0;
  auto process = [&](GstSample* sample) {
    if (st.frames == kWarmupFrames) {
      cpu.mark(st.frames);
      threads.mark(st.frames);
      mark_copy_audit();
    }
    const bool counted = st.frames >= kWarmupFrames;
    const double handle_start = thread_cpu_us();
    GstBuffer* b = gst_sample_get_buffer(sample);
    GstVideoInfo vi;
    if (!gst_video_info_from_caps(&vi, gst_sample_get_caps(sample)))
      die("received caps that are not raw video");
    // Every buffer agrees with its caps (frame_conformance.h); the fixture fails on the line.
    // Not mapped here: the paths below that read on the CPU map it themselves (and die if they
    // cannot), and a CPU map of CUDA memory would cost a download.
    const std::string nonconformance = cipc_test::frame_nonconformance(vi, b, /*map_frame=*/false);
    if (!nonconformance.empty())
      printf("NONCONFORMING %ld %s\n", st.frames.load() + 1, nonconformance.c_str());
    const size_t row_bytes = size_t(GST_VIDEO_INFO_WIDTH(&vi)) * 4,
                 rows = GST_VIDEO_INFO_HEIGHT(&vi);
    if (!cuda) {
      // Host memory in: one upload into this process's GPU memory, as cudaupload would.
      if (!upload.ptr())
        check(cipc_cuda::DeviceBuffer::create(stream_device, row_bytes * rows, &upload),
              "upload buffer");
      GstVideoFrame frame;
      if (!gst_video_frame_map(&frame, &vi, b, GST_MAP_READ)) die("map of a host frame failed");
      const auto* data = static_cast<const uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&frame, 0));
      uint64_t index = GST_BUFFER_OFFSET(b);
      if (shm) std::memcpy(&index, data, sizeof(index));
      check(cipc_cuda::copy_2d_async(reinterpret_cast<void*>(upload.ptr()), row_bytes, data,
                                     GST_VIDEO_FRAME_PLANE_STRIDE(&frame, 0), row_bytes, rows,
                                     stream.handle()),
            "upload");
      check(stream.synchronize(), "upload sync");
      const uint64_t uploaded = now_ns();
      if (!gl) {  // GL's arrival is stamped as the texture leaves cudasrc-ipc
        arrivals.add(index, uploaded);
        gpu_ready.add(index, uploaded);  // uploaded: on this GPU already
      }
      gst_video_frame_unmap(&frame);
      if (st.record)
        fprintf(st.record, "%llu %llu\n", (unsigned long long)index,
                (unsigned long long)checksum->run(upload.ptr(), row_bytes, row_bytes, rows,
                                                  stream.handle()));
    } else if (gst_cuda) {
#ifdef CIPC_HAVE_GST_CUDA
      GstMemory* mem = gst_buffer_peek_memory(b, 0);
      if (!gst_is_cuda_memory(mem)) die("output is not GStreamer CUDA memory");
      if (st.frames == 0)
        printf("GSTCUDA readonly=%d\n", GST_MEMORY_FLAG_IS_SET(mem, GST_MEMORY_FLAG_READONLY));
      const GstVideoMeta* meta = gst_buffer_get_video_meta(b);
      GstMapInfo map;
      if (!meta || !gst_memory_map(mem, &map, GstMapFlags(GST_MAP_READ | GST_MAP_CUDA)))
        die("could not map GStreamer CUDA memory on the GPU");
      if (peer) {
        // cudaipcsrc's memory lives in a CUDA context of its own: as an nvcodec element
        // downstream would, work on the memory's stream in that context, and be done reading
        // before the buffer goes back (GstCudaMemory has no GPU-side release).
        cipc_bench::MemoryContextScope scope(mem);
        if (!scope.entered()) die("could not enter the CUDA context of cudaipcsrc's memory");
        if (stamp_gpu) gpu_ready.stamp_after(scope.stream(), frame_number(b));
        check(cipc_cuda::synchronize_stream(scope.stream()), "read");
      } else {
        // As an nvcodec element on a stream of its own: order after the memory's stream on the
        // GPU.
        if (void* pending = cipc_gst::gst_cuda_memory_pending_stream(mem)) {
          if (!gst_ready.valid())
            check(cipc_cuda::Event::create_local(stream_device, &gst_ready), "event");
          check(gst_ready.record(pending), "record after the memory's stream");
          check(gst_ready.wait(stream.handle()), "wait for the memory's stream");
        }
        if (stamp_gpu) gpu_ready.stamp_after(stream.handle(), GST_BUFFER_OFFSET(b));
        const uint64_t ptr = reinterpret_cast<uint64_t>(map.data) + meta->offset[0];
        if (st.record)
          fprintf(st.record, "%llu %llu\n", (unsigned long long)GST_BUFFER_OFFSET(b),
                  (unsigned long long)checksum->run(ptr, meta->stride[0], row_bytes, rows,
                                                    stream.handle()));
        else
          check(stream.synchronize(), "read");  // done reading before the memory goes
      }
      gst_memory_unmap(mem, &map);
#endif
    } else {
      GstMemory* mem = gst_buffer_peek_memory(b, 0);
      const GstCudaIpcMemoryInfo* info = gst_cuda_ipc_memory_get_info(mem);
      if (!info) die("output is not CUDA memory");
      if (info->device != stream_device) {  // the producer's GPU, found by UUID
        stream_device = info->device;
        checksum.reset();
        stream = cipc_cuda::Stream();
        check(cipc_cuda::Stream::create(stream_device, &stream), "stream");
        checksum = std::make_unique<GpuChecksum>(stream_device, 8192);
      }
      guint64 ptr = 0;
      gint pitch = 0;
      gst_cuda_ipc_buffer_get_plane(b, 0, &ptr, &pitch);
      if (o.cpu_map) {
        // An element that knows nothing of CUDA: maps the buffer and reads bytes on the CPU.
        GstMapInfo map;
        if (!gst_buffer_map(b, &map, GST_MAP_READ)) die("gst_buffer_map of CUDA memory failed");
        if (st.record)
          fprintf(st.record, "%llu %llu\n", (unsigned long long)GST_BUFFER_OFFSET(b),
                  (unsigned long long)cipc_cuda::image_checksum_cpu(
                      map.data + gst_buffer_get_video_meta(b)->offset[0], pitch, row_bytes, rows));
        gst_buffer_unmap(b, &map);
      } else {
        if (!gst_cuda_ipc_memory_wait_ready(mem, stream.handle())) die("wait_ready");
        if (stamp_gpu) gpu_ready.stamp_after(stream.handle(), GST_BUFFER_OFFSET(b));
        if (!o.vandal.empty()) {
          // A buggy or hostile consumer writing into the producer's frame: the import is mapped
          // read-only, so this must fail here rather than reach the other consumers.
          std::string refused;
          if (o.vandal == "kernel") {
            cipc_cuda::Status k =
                cipc_cuda::launch_fill_pattern(ptr, pitch, row_bytes, rows, 7, stream.handle());
            if (k.is_ok()) k = stream.synchronize();
            if (!k.is_ok()) refused = k.message();
          } else {
            cudaError_t e =
                cudaMemsetAsync(reinterpret_cast<void*>(ptr), 0xde, size_t(pitch) * rows,
                                static_cast<cudaStream_t>(stream.handle()));
            if (e == cudaSuccess)
              e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream.handle()));
            if (e != cudaSuccess) refused = cudaGetErrorString(e);
          }
          if (!refused.empty()) die("vandal write failed: " + refused);
          printf("VANDALISED %ld\n", st.frames.load() + 1);
        }
        if (st.record)
          fprintf(st.record, "%llu %llu\n", (unsigned long long)GST_BUFFER_OFFSET(b),
                  (unsigned long long)checksum->run(ptr, pitch, row_bytes, rows, stream.handle()));
        if (!gst_cuda_ipc_memory_record_release(mem, stream.handle())) die("record_release");
      }
    }
    if (o.hold_ms) std::this_thread::sleep_for(std::chrono::milliseconds(o.hold_ms));
    const double release_start = thread_cpu_us();
    if (o.keep_held > 0 && cuda && !gst_cuda) {
      kept.push_back(sample);
      if (kept.size() > size_t(o.keep_held)) {
        gst_sample_unref(kept.front());
        kept.pop_front();
      }
    } else {
      gst_sample_unref(sample);
    }
    const double release_end = thread_cpu_us();
    ++st.frames;
    if (st.frames == 1) first_ns = now_ns();
    last_ns = now_ns();
    printf("FRAME %ld\n", st.frames.load());
    if (st.frames % 64 == 0) fflush(stdout);
    if (counted) handle_cpu_us += (release_start - handle_start) + (thread_cpu_us() - release_end);
  };
  if (o.streaming_thread) {
    // In the streaming thread, as an element downstream of cudasrc-ipc would: no hand-off to
    // this thread (appsink's queue and a wake-up per frame).
    GstAppSinkCallbacks callbacks{};
    callbacks.new_sample = [](GstAppSink* sink, gpointer data) -> GstFlowReturn {
      GstSample* sample = gst_app_sink_pull_sample(sink);
      if (sample) (*static_cast<decltype(process)*>(data))(sample);
      return GST_FLOW_OK;
    };
    gst_app_sink_set_callbacks(GST_APP_SINK(out), &callbacks, &process, nullptr);
  }
  while (!g_stop && (o.frames == 0 || st.frames < o.frames)) {
    if (report_error(bus, 0)) {
      rc = 2;
      break;
    }
    GstSample* sample = o.streaming_thread
                            ? nullptr
                            : gst_app_sink_try_pull_sample(GST_APP_SINK(out), 100 * GST_MSECOND);
    if (o.streaming_thread && !gst_app_sink_is_eos(GST_APP_SINK(out)) &&
        report_error(bus, 100 * GST_MSECOND)) {
      rc = 2;
      break;
    }
    if (!sample) {
      if (gst_app_sink_is_eos(GST_APP_SINK(out))) {
        // An error ends the stream too: report it, not the EOS that follows it.
        if (report_error(bus, 200 * GST_MSECOND)) {
          rc = 2;
          break;
        }
        printf("EOS\n");
        break;
      }
      if (now_ns() > deadline) {
        printf("ERROR timeout after %ld frames\n", st.frames.load());
        rc = 2;
        break;
      }
      continue;
    }
    process(sample);
  }
  // The frames kept to the end, read again now (their producer may be gone by now).
  if (!kept.empty()) {
    FILE* reread = o.reread.empty() ? nullptr : fopen(o.reread.c_str(), "w");
    for (GstSample* sample : kept) {
      GstBuffer* b = gst_sample_get_buffer(sample);
      guint64 ptr = 0;
      gint pitch = 0;
      gst_cuda_ipc_buffer_get_plane(b, 0, &ptr, &pitch);
      if (reread)
        fprintf(reread, "%llu %llu\n", (unsigned long long)GST_BUFFER_OFFSET(b),
                (unsigned long long)checksum->run(ptr, pitch, size_t(o.width) * 4, o.height,
                                                  stream.handle()));
      gst_sample_unref(sample);
    }
    if (reread) fclose(reread);
    printf("REREAD %zu\n", kept.size());
    kept.clear();
  }
  // Every stamp queued on the stream has run before `gpu_ready` goes.
  if (stream.handle()) check(stream.synchronize(), "final sync");
  cpu.report(st.frames);
  threads.report(st.frames);
  if (st.frames > kWarmupFrames)
    printf("HANDLE cpu_us_per_frame=%.2f\n", handle_cpu_us / double(st.frames - kWarmupFrames));
  fflush(stdout);
  if (st.record) fclose(st.record);
  if (st.frames > 1)
    printf("RATE fps=%.1f frames=%ld\n", (st.frames - 1) * 1e9 / double(last_ns - first_ns),
           st.frames.load());
  if (!shm && !peer) print_stats(src, "STATS");
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(src);
  gst_object_unref(out);
  gst_object_unref(pipeline);
  return rc;
}

// The display end of the camera chain: cudasrc-ipc ! ximagesink sync=false. ximagesink's chain
// function is wrapped so that the time it returns - the frame is on screen, ximagesink draws
// (XPutImage + XSync) inside it when it does not sync to the clock - is logged against the
// frame's capture time (its PTS, which cudasrc-ipc maps to this pipeline's running time).
struct Display {
  GstPadChainFunction chain = nullptr;
  TimeLog* log = nullptr;
  std::atomic<long> shown{0};
};
Display g_display;

GstFlowReturn presenting_chain(GstPad* pad, GstObject* parent, GstBuffer* buffer) {
  const GstClockTime pts = GST_BUFFER_PTS(buffer);
  const GstFlowReturn r = g_display.chain(pad, parent, buffer);
  if (r == GST_FLOW_OK && GST_CLOCK_TIME_IS_VALID(pts)) {
    g_display.log->add(gst_element_get_base_time(GST_ELEMENT(parent)) + pts, now_ns());
    g_display.shown++;
  }
  return r;
}

int display(const Options& o) {
  // ximagesink (system memory: one download per frame), or glimagesink (GL textures, gl-import).
  const bool gl = o.display_sink == "glimagesink";
  if (!gl && o.display_sink != "ximagesink") die("unknown --display-sink " + o.display_sink);
  const std::string launch = "cudasrc-ipc name=src connect-timeout=20000 io-mode=" + o.io_mode +
                             (gl ? " gl-import=" + o.gl_import : std::string()) +
                             " socket-path=" + o.socket + " ! " + o.display_sink +
                             " name=out sync=false";
  GError* err = nullptr;
  GstElement* pipeline = cipc_test::parse_or_null(launch, &err);
  if (!pipeline) die(err->message);
  // The pipeline runs on the system clock (CLOCK_MONOTONIC), as the producer's does.
  GstClock* clock = gst_system_clock_obtain();
  gst_pipeline_use_clock(GST_PIPELINE(pipeline), clock);
  gst_object_unref(clock);
  GstElement* out = gst_bin_get_by_name(GST_BIN(pipeline), "out");
  GstPad* pad = gst_element_get_static_pad(out, "sink");
  TimeLog log(o.arrivals);
  g_display.chain = GST_PAD_CHAINFUNC(pad);
  g_display.log = &log;
  gst_pad_set_chain_function(pad, presenting_chain);
  gst_object_unref(pad);
  gst_object_unref(out);
  CpuMeter cpu;
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  printf("READY\n");
  fflush(stdout);
  GstBus* bus = gst_element_get_bus(pipeline);
  const uint64_t deadline = now_ns() + uint64_t(o.timeout_s) * 1000000000ull;
  int rc = 0;
  bool marked = false;
  while (!g_stop && (o.frames == 0 || g_display.shown < o.frames) && now_ns() < deadline) {
    if (!marked && g_display.shown >= kWarmupFrames) {
      cpu.mark(g_display.shown);
      marked = true;
    }
    GstMessage* m = gst_bus_timed_pop_filtered(bus, 10 * GST_MSECOND,
                                               GstMessageType(GST_MESSAGE_ERROR | GST_MESSAGE_EOS));
    if (!m) continue;
    const bool error = GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR;
    if (error) {
      gst_message_parse_error(m, &err, nullptr);
      printf("ERROR %s\n", err->message);
      g_clear_error(&err);
      rc = 2;
    }
    gst_message_unref(m);
    break;
  }
  cpu.report(g_display.shown);
  printf("SHOWN %ld\n", g_display.shown.load());
  GstElement* src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  print_stats(src, "STATS");
  gst_object_unref(src);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(pipeline);
  return rc;
}

}  // namespace

// A producer that only says WELCOME: CUDA memory on a GPU with the given UUID ("random": one no
// machine has), so a consumer's GPU check can be tested on a one-GPU machine.
int fake_producer(const Options& o) {
  auto listener = cipc::Listener::bind(o.socket, 0600);
  if (!listener) die(listener.error().message);
  printf("READY\n");
  fflush(stdout);
  cipc::Channel channel;
  while (!g_stop && listener->accept(channel) != cipc::IoResult::kOk) usleep(10000);
  cipc::Packet packet;
  while (!g_stop && channel.receive(packet) == cipc::IoResult::kWouldBlock) usleep(1000);
  cipc::Welcome w;
  w.instance_id = 42;
  w.memory_kind = cipc::MemoryKind::kCuda;
  w.sync_mode = cipc::SyncMode::kGpuEvents;
  for (size_t i = 0; i < w.gpu_uuid.size(); ++i) w.gpu_uuid[i] = uint8_t(0xA5 ^ i);
  channel.send(cipc::Message{w});
  // Report what the consumer says before it leaves (an ERROR naming the problem).
  for (int i = 0; i < 500 && !g_stop; ++i) {
    const cipc::IoResult r = channel.receive(packet);
    if (r == cipc::IoResult::kOk) {
      cipc::DecodeResult d = cipc::decode(packet.bytes.data(), packet.bytes.size());
      if (d && d.message().type() == cipc::MessageType::kError)
        printf("PEER-ERROR %s\n", std::get<cipc::ErrorMessage>(d.message().body).text.c_str());
    } else if (r != cipc::IoResult::kWouldBlock) {
      break;
    }
    usleep(10000);
  }
  fflush(stdout);
  return 0;
}

int main(int argc, char** argv) {
  gst_init(nullptr, nullptr);
#ifdef CIPC_HAVE_GST_CUDA
  cipc_bench::register_frame_meta();
#endif
  signal(SIGINT, [](int) { g_stop = true; });
  signal(SIGTERM, [](int) { g_stop = true; });
  const Options o = parse(argc, argv);
  if (o.socket.empty() || (o.mode != "produce" && o.mode != "consume" && o.mode != "display" &&
                           o.mode != "fake-producer")) {
    fprintf(stderr, "usage: %s produce|consume|display|fake-producer --socket PATH [options]\n",
            argv[0]);
    return 64;
  }
  if (o.mode == "fake-producer") return fake_producer(o);
  if (o.mode == "display") return display(o);
  return o.mode == "produce" ? produce(o) : consume(o);
}
