// SPDX-License-Identifier: LGPL-2.1-or-later
// One side of a CUDA-memory run across two processes, for tests/gpu and tests/bench.
//
//   cudaipc-cuda-peer produce --socket P [--width W --height H --frames N --fps F
//                             --record FILE --sync-mode gpu-events|cpu --device D]
//   cudaipc-cuda-peer consume --socket P [--frames N --record FILE --io-mode import|copy
//                             --latency FILE --hold-ms M --timeout-s T --device D
//                             --max-in-flight M --cpu-map 1]
//   cudaipc-cuda-peer fake-producer --socket P
//
// --cpu-map 1 makes the consumer read frames with gst_buffer_map() (checksummed on the CPU), as
// an element that knows nothing of CUDA would. fake-producer answers HELLO with a WELCOME for
// CUDA memory on a GPU no machine has, and prints PEER-ERROR <text> for the consumer's answer.
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
#include <gst/app/gstappsink.h>
#include <gst/check/gstharness.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <signal.h>
#include <unistd.h>
#include <stdio.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "channel.h"
#include "cuda_api.h"
#include "cudaipc/gstcudaipcmemory.h"
#include "kernels.h"

namespace {

std::atomic<bool> g_stop{false};

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

struct Options {
  std::string mode, socket, record, latency, io_mode = "import", sync_mode = "gpu-events";
  int width = 1920, height = 1080, fps = 0, device = -1, hold_ms = 0, timeout_s = 60, max_in_flight = 8;
  bool cpu_map = false;  // consume: read frames through gst_buffer_map() (the CPU fallback)
  std::string gpu_uuid = "random";  // fake-producer: the GPU it claims to use
  long frames = 600;
};

Options parse(int argc, char** argv) {
  Options o;
  if (argc > 1) o.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--socket") o.socket = v;
    else if (k == "--width") o.width = std::stoi(v);
    else if (k == "--height") o.height = std::stoi(v);
    else if (k == "--fps") o.fps = std::stoi(v);
    else if (k == "--frames") o.frames = std::stol(v);
    else if (k == "--record") o.record = v;
    else if (k == "--latency") o.latency = v;
    else if (k == "--io-mode") o.io_mode = v;
    else if (k == "--sync-mode") o.sync_mode = v;
    else if (k == "--device") o.device = std::stoi(v);
    else if (k == "--hold-ms") o.hold_ms = std::stoi(v);
    else if (k == "--cpu-map") o.cpu_map = v == "1";
    else if (k == "--timeout-s") o.timeout_s = std::stoi(v);
    else if (k == "--max-in-flight") o.max_in_flight = std::stoi(v);
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

// The first error message left on `bus` as one line, "<text> | <debug>"; empty if none.
std::string pop_error(GstBus* bus) {
  GstMessage* m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
  if (!m) return "";
  GError* err = nullptr;
  gchar* debug = nullptr;
  gst_message_parse_error(m, &err, &debug);
  std::string text = err ? err->message : "(no message)";
  if (debug) text += std::string(" | ") + debug;
  g_clear_error(&err);
  g_free(debug);
  gst_message_unref(m);
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

// Checksums frames on the GPU: two kernels into device scratch, 8 bytes back to the host.
class GpuChecksum {
 public:
  GpuChecksum(int device, size_t max_rows) {
    check(cipc_cuda::DeviceBuffer::create(device, max_rows * 8, &scratch_), "scratch");
    check(cipc_cuda::DeviceBuffer::create(device, 8, &result_), "result");
    check(cipc_cuda::PinnedHostBuffer::create(8, &host_), "pinned");
  }
  uint64_t run(uint64_t ptr, size_t pitch, size_t row_bytes, size_t rows, cipc_cuda::StreamHandle stream) {
    check(cipc_cuda::launch_image_checksum(ptr, pitch, row_bytes, rows, scratch_.ptr(), result_.ptr(), stream),
          "checksum kernel");
    check(cipc_cuda::copy_2d_async(host_.data(), 8, reinterpret_cast<void*>(result_.ptr()), 8, 8, 1, stream),
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

void print_stats(GstElement* e, const char* tag) {
  GstStructure* s = nullptr;
  g_object_get(e, "stats", &s, nullptr);
  gchar* text = gst_structure_to_string(s);
  printf("%s %s\n", tag, text);
  fflush(stdout);
  g_free(text);
  gst_structure_free(s);
}

int produce(const Options& o) {
  GstElement* sink = gst_element_factory_make("cudasink-ipc", nullptr);
  if (!sink) die("cudasink-ipc not found (GST_PLUGIN_PATH?)");
  // max = slots = max-in-flight: the writer waits for a free slot instead of outrunning consumers.
  constexpr guint kSlots = 8;
  gst_util_set_object_arg(G_OBJECT(sink), "sync-mode", o.sync_mode.c_str());
  const gboolean wait_for_consumer = o.frames != 0;
  g_object_set(sink, "socket-path", o.socket.c_str(), "memory", 2 /* cuda */, "cuda-device-id",
               o.device, "sync", FALSE, "async", FALSE, "wait-for-consumer", wait_for_consumer,
               "max-in-flight", kSlots, "pool-size", kSlots, "enable-last-sample", FALSE, nullptr);
  // Started here, before the harness gets it: gst_harness_add_element_full() plays a sink and
  // asserts (aborts) if that fails, and gives it no bus, so the element's error would be lost.
  GstBus* bus = gst_bus_new();
  gst_element_set_bus(sink, bus);
  if (gst_element_set_state(sink, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE ||
      GST_STATE(sink) != GST_STATE_PLAYING) {
    const std::string why = pop_error(bus);
    die("cudasink-ipc did not start" + (why.empty() ? std::string() : ": " + why));
  }
  static GstStaticPadTemplate src = GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
  GstHarness* h = gst_harness_new_empty();
  gst_harness_add_element_full(h, sink, &src, "sink", nullptr, nullptr);
  const std::string caps_str = "video/x-raw(memory:CUDAIPCMemory),format=BGRA,width=" +
                               std::to_string(o.width) + ",height=" + std::to_string(o.height) +
                               ",framerate=" + std::to_string(o.fps) + "/1";
  gst_harness_set_src_caps_str(h, caps_str.c_str());
  GstCaps* caps = gst_caps_from_string(caps_str.c_str());
  GstQuery* q = gst_query_new_allocation(caps, TRUE);
  if (!gst_pad_peer_query(h->srcpad, q) || gst_query_get_n_allocation_pools(q) == 0)
    die("cudasink-ipc offered no CUDA pool");
  GstBufferPool* pool = nullptr;
  guint size = 0;
  gst_query_parse_nth_allocation_pool(q, 0, &pool, &size, nullptr, nullptr);
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, size, kSlots, kSlots);
  gst_buffer_pool_set_config(pool, config);
  if (!gst_buffer_pool_set_active(pool, TRUE)) die("pool activation failed");

  const int device = o.device < 0 ? 0 : o.device;
  cipc_cuda::Stream stream;
  check(cipc_cuda::Stream::create(device, &stream), "stream");
  GpuChecksum checksum(device, o.height);
  FILE* record = o.record.empty() ? nullptr : fopen(o.record.c_str(), "w");
  printf("READY\n");
  fflush(stdout);
  const uint64_t period = o.fps ? 1000000000ull / o.fps : 0;
  const uint64_t t0 = now_ns();
  for (long i = 0; (o.frames == 0 || i < o.frames) && !g_stop; ++i) {
    if (period) {
      const uint64_t due = t0 + i * period;
      const timespec ts{time_t(due / 1000000000ull), long(due % 1000000000ull)};
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
      }
    }
    GstBuffer* b = nullptr;
    if (gst_buffer_pool_acquire_buffer(pool, &b, nullptr) != GST_FLOW_OK) die("acquire");
    GstMemory* mem = gst_buffer_peek_memory(b, 0);
    guint64 ptr = 0;
    gint pitch = 0;
    if (!gst_cuda_ipc_buffer_get_plane(b, 0, &ptr, &pitch)) die("not CUDA slot memory");
    if (!gst_cuda_ipc_memory_begin_write(mem, stream.handle())) die("begin_write");
    check(cipc_cuda::launch_fill_pattern(ptr, pitch, size_t(o.width) * 4, o.height, uint32_t(i), stream.handle()),
          "fill kernel");
    if (!gst_cuda_ipc_memory_end_write(mem, stream.handle())) die("end_write");
    if (record)
      fprintf(record, "%ld %llu\n", i,
              (unsigned long long)checksum.run(ptr, pitch, size_t(o.width) * 4, o.height, stream.handle()));
    GST_BUFFER_PTS(b) = period ? i * period : i * 1000000;
    GST_BUFFER_OFFSET(b) = i;
    if (gst_harness_push(h, b) != GST_FLOW_OK) {
      const std::string why = pop_error(bus);
      die("push" + (why.empty() ? std::string() : ": " + why));
    }
  }
  if (record) fclose(record);
  print_stats(sink, "STATS");
  gst_harness_push_event(h, gst_event_new_eos());
  gst_buffer_pool_set_active(pool, FALSE);
  gst_object_unref(pool);
  gst_query_unref(q);
  gst_caps_unref(caps);
  gst_harness_teardown(h);
  gst_object_unref(bus);
  return 0;
}

struct ConsumerState {
  FILE* record = nullptr;
  std::vector<uint64_t> latency;
  GpuChecksum* checksum = nullptr;
  cipc_cuda::Stream* stream = nullptr;
  long frames = 0;
};

GstPadProbeReturn latency_probe(GstPad*, GstPadProbeInfo* info, gpointer data) {
  auto* st = static_cast<ConsumerState*>(data);
  static GstCaps* send_caps = gst_caps_new_empty_simple("timestamp/x-cudaipc-send-monotonic");
  GstReferenceTimestampMeta* m =
      gst_buffer_get_reference_timestamp_meta(GST_PAD_PROBE_INFO_BUFFER(info), send_caps);
  if (m) st->latency.push_back(now_ns() - m->timestamp);
  return GST_PAD_PROBE_OK;
}

int consume(const Options& o) {
  const std::string launch = "cudasrc-ipc name=src connect-timeout=20000 io-mode=" + o.io_mode +
                             " socket-path=" + o.socket +
                             " max-in-flight=" + std::to_string(o.max_in_flight) +
                             (o.device >= 0 ? " cuda-device-id=" + std::to_string(o.device) : "") +
                             " ! video/x-raw(memory:CUDAIPCMemory) ! appsink name=out sync=false "
                             "max-buffers=4 enable-last-sample=false";
  GError* err = nullptr;
  GstElement* pipeline = gst_parse_launch(launch.c_str(), &err);
  if (!pipeline) die(err->message);
  GstElement* src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  GstElement* out = gst_bin_get_by_name(GST_BIN(pipeline), "out");
  ConsumerState st;
  GstPad* pad = gst_element_get_static_pad(src, "src");
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, latency_probe, &st, nullptr);
  gst_object_unref(pad);
  st.latency.reserve(o.frames ? o.frames : 1024);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  printf("READY\n");
  fflush(stdout);

  cipc_cuda::Stream stream;
  std::unique_ptr<GpuChecksum> checksum;
  st.record = o.record.empty() ? nullptr : fopen(o.record.c_str(), "w");
  GstBus* bus = gst_element_get_bus(pipeline);
  const uint64_t deadline = now_ns() + uint64_t(o.timeout_s) * 1000000000ull;
  int rc = 0;
  uint64_t first_ns = 0, last_ns = 0;
  while (!g_stop && (o.frames == 0 || st.frames < o.frames)) {
    if (GstMessage* m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR)) {
      gst_message_parse_error(m, &err, nullptr);
      printf("ERROR %s\n", err->message);
      gst_message_unref(m);
      rc = 2;
      break;
    }
    GstSample* sample = gst_app_sink_try_pull_sample(GST_APP_SINK(out), 100 * GST_MSECOND);
    if (!sample) {
      if (gst_app_sink_is_eos(GST_APP_SINK(out))) {
        // An error ends the stream too: report it, not the EOS that follows it.
        if (GstMessage* m = gst_bus_timed_pop_filtered(bus, 200 * GST_MSECOND, GST_MESSAGE_ERROR)) {
          gst_message_parse_error(m, &err, nullptr);
          printf("ERROR %s\n", err->message);
          gst_message_unref(m);
          rc = 2;
          break;
        }
        printf("EOS\n");
        break;
      }
      if (now_ns() > deadline) {
        printf("ERROR timeout after %ld frames\n", st.frames);
        rc = 2;
        break;
      }
      continue;
    }
    GstBuffer* b = gst_sample_get_buffer(sample);
    GstMemory* mem = gst_buffer_peek_memory(b, 0);
    const GstCudaIpcMemoryInfo* info = gst_cuda_ipc_memory_get_info(mem);
    if (!info) die("output is not CUDA memory");
    if (!stream.handle()) {
      check(cipc_cuda::Stream::create(info->device, &stream), "stream");
      checksum = std::make_unique<GpuChecksum>(info->device, 8192);
    }
    guint64 ptr = 0;
    gint pitch = 0;
    gst_cuda_ipc_buffer_get_plane(b, 0, &ptr, &pitch);
    GstVideoInfo vi;
    gst_video_info_from_caps(&vi, gst_sample_get_caps(sample));
    if (o.cpu_map) {
      // An element that knows nothing of CUDA: maps the buffer and reads bytes on the CPU.
      GstMapInfo map;
      if (!gst_buffer_map(b, &map, GST_MAP_READ)) die("gst_buffer_map of CUDA memory failed");
      if (st.record)
        fprintf(st.record, "%llu %llu\n", (unsigned long long)GST_BUFFER_OFFSET(b),
                (unsigned long long)cipc_cuda::image_checksum_cpu(
                    map.data + gst_buffer_get_video_meta(b)->offset[0], pitch,
                    size_t(GST_VIDEO_INFO_WIDTH(&vi)) * 4, GST_VIDEO_INFO_HEIGHT(&vi)));
      gst_buffer_unmap(b, &map);
      gst_sample_unref(sample);
      ++st.frames;
      printf("FRAME %ld\n", st.frames);
      continue;
    }
    if (!gst_cuda_ipc_memory_wait_ready(mem, stream.handle())) die("wait_ready");
    if (st.record)
      fprintf(st.record, "%llu %llu\n", (unsigned long long)GST_BUFFER_OFFSET(b),
              (unsigned long long)checksum->run(ptr, pitch, size_t(GST_VIDEO_INFO_WIDTH(&vi)) * 4,
                                                GST_VIDEO_INFO_HEIGHT(&vi), stream.handle()));
    if (!gst_cuda_ipc_memory_record_release(mem, stream.handle())) die("record_release");
    if (o.hold_ms) std::this_thread::sleep_for(std::chrono::milliseconds(o.hold_ms));
    gst_sample_unref(sample);
    ++st.frames;
    if (st.frames == 1) first_ns = now_ns();
    last_ns = now_ns();
    printf("FRAME %ld\n", st.frames);
    if (st.frames % 64 == 0) fflush(stdout);
  }
  fflush(stdout);
  if (st.record) fclose(st.record);
  if (st.frames > 1)
    printf("RATE fps=%.1f frames=%ld\n", (st.frames - 1) * 1e9 / double(last_ns - first_ns), st.frames);
  print_stats(src, "STATS");
  if (!o.latency.empty()) {
    FILE* f = fopen(o.latency.c_str(), "w");
    for (uint64_t v : st.latency) fprintf(f, "%llu\n", (unsigned long long)v);
    fclose(f);
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(src);
  gst_object_unref(out);
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
  signal(SIGINT, [](int) { g_stop = true; });
  signal(SIGTERM, [](int) { g_stop = true; });
  const Options o = parse(argc, argv);
  if (o.socket.empty() || (o.mode != "produce" && o.mode != "consume" && o.mode != "fake-producer")) {
    fprintf(stderr, "usage: %s produce|consume|fake-producer --socket PATH [options]\n", argv[0]);
    return 64;
  }
  if (o.mode == "fake-producer") return fake_producer(o);
  return o.mode == "produce" ? produce(o) : consume(o);
}
