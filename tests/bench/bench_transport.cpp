// SPDX-License-Identifier: LGPL-2.1-or-later
// Transport benchmark, one side of a two-process run (tests/bench/run-transport starts both).
//
//   bench-transport produce --socket PATH --width W --height H --frames N [--fps F]
//                           [--consumers C]
//   bench-transport consume --socket PATH --frames N [--json FILE]
//
// The producer drives cudasink-ipc directly through its pool (as an upstream element that
// honours the allocation query would), writing only a 16-byte stamp per frame, so the numbers
// are the transport's own and not a test pattern's rendering. The consumer runs
// `cudasrc-ipc ! fakesink` and measures, per frame, the time from the producer's push into the
// sink to the moment the frame leaves cudasrc-ipc (both read CLOCK_MONOTONIC). The producer also
// prints a `THREAD name=… cpu_us_per_frame=… wakeups_per_frame=…` line per thread: the pushing
// (streaming) thread and cudasink-ipc's I/O thread (cipc-producer). With --consumers C the
// producer starts only once C consumers are attached (a fan-out run), and its pool has 2 slots
// per consumer beyond the 8 of one: each consumer is granted 2 frames in flight.
#include <gst/check/gstharness.h>
#include <gst/gst.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <errno.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "thread_usage.h"

namespace {

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct Options {
  std::string mode, socket, json;
  int width = 1920, height = 1080, fps = 0, consumers = 1;
  long frames = 2000;
};

Options parse(int argc, char** argv) {
  Options o;
  if (argc > 1) o.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
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
    else if (k == "--consumers")
      o.consumers = std::max(1, std::stoi(v));
    else if (k == "--json")
      o.json = v;
  }
  return o;
}

// Waits (up to a minute) until `count` consumers are attached to `sink`.
bool wait_for_consumers(GstElement* sink, int count) {
  for (int tries = 0; tries < 6000; ++tries) {
    GstStructure* stats = nullptr;
    g_object_get(sink, "stats", &stats, nullptr);
    guint64 attached = 0;
    gst_structure_get_uint64(stats, "consumers", &attached);
    gst_structure_free(stats);
    if (attached >= guint64(count)) return true;
    g_usleep(10000);
  }
  fprintf(stderr, "bench-transport: fewer than %d consumers attached within a minute\n", count);
  return false;
}

int produce(const Options& o) {
  GstElement* sink = gst_element_factory_make("cudasink-ipc", nullptr);
  if (!sink) {
    fprintf(stderr, "cudasink-ipc not found (set GST_PLUGIN_PATH)\n");
    return 1;
  }
  // A bounded pool (max = max-in-flight) makes an unpaced producer wait for a free slot, as a
  // real writer would, instead of outrunning the consumer and counting drops. The sink admits a
  // consumer only while its pool has slots for it (2 each here) beyond the writer's.
  const guint kSlots = o.consumers == 1 ? 8 : 8 + 2 * guint(o.consumers);
  const guint in_flight = o.consumers == 1 ? 8 : 2;
  g_object_set(sink, "socket-path", o.socket.c_str(), "memory", 1 /* host */, "sync", FALSE,
               "async", FALSE, "wait-for-consumer", TRUE, "max-in-flight", in_flight, "pool-size",
               std::min(kSlots, 64u), "enable-last-sample", FALSE, nullptr);
  static GstStaticPadTemplate src =
      GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
  GstHarness* h = gst_harness_new_empty();
  gst_harness_add_element_full(h, sink, &src, "sink", nullptr, nullptr);
  gst_harness_play(h);
  const std::string caps_str = "video/x-raw,format=BGRA,width=" + std::to_string(o.width) +
                               ",height=" + std::to_string(o.height) +
                               ",framerate=" + std::to_string(o.fps ? o.fps : 0) + "/1";
  gst_harness_set_src_caps_str(h, caps_str.c_str());
  GstCaps* caps = gst_caps_from_string(caps_str.c_str());
  GstQuery* q = gst_query_new_allocation(caps, TRUE);
  if (!gst_pad_peer_query(h->srcpad, q) || gst_query_get_n_allocation_pools(q) == 0) {
    fprintf(stderr, "cudasink-ipc offered no pool\n");
    return 1;
  }
  GstBufferPool* pool = nullptr;
  guint size = 0, min = 0, max = 0;
  gst_query_parse_nth_allocation_pool(q, 0, &pool, &size, &min, &max);
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, size, kSlots, kSlots);
  gst_buffer_pool_set_config(pool, config);
  gst_buffer_pool_set_active(pool, TRUE);
  if (o.consumers > 1 && !wait_for_consumers(sink, o.consumers)) return 1;

  const uint64_t t0 = now_ns();
  uint64_t t_first = t0;
  double cpu_first = cpu_seconds();
  auto threads_first = cipc_test::thread_usage();
  const uint64_t period = o.fps ? 1000000000ull / o.fps : 0;
  for (long i = 0; i < o.frames; ++i) {
    if (period) {
      const uint64_t due = t0 + i * period;
      const timespec ts{time_t(due / 1000000000ull), long(due % 1000000000ull)};
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
      }
    }
    GstBuffer* b = nullptr;
    if (gst_buffer_pool_acquire_buffer(pool, &b, nullptr) != GST_FLOW_OK) return 1;
    uint64_t stamp[2] = {now_ns(), uint64_t(i)};
    gst_buffer_fill(b, 0, stamp, sizeof(stamp));
    GST_BUFFER_PTS(b) = i * (period ? period : 1000000);
    if (gst_harness_push(h, b) != GST_FLOW_OK) return 1;
    if (i == 0 && !period) {
      // The first push waited for the consumer to attach: time the rest.
      t_first = now_ns();
      cpu_first = cpu_seconds();
      threads_first = cipc_test::thread_usage();
    }
  }
  const auto threads_last = cipc_test::thread_usage();
  const long timed = period ? o.frames : o.frames - 1;
  const double seconds = (now_ns() - t_first) / 1e9;
  const double cpu = cpu_seconds() - cpu_first;
  GstStructure* stats = nullptr;
  g_object_get(sink, "stats", &stats, nullptr);
  guint64 sent = 0, dropped = 0, copies = 0, exported = 0;
  gst_structure_get_uint64(stats, "frames-sent", &sent);
  gst_structure_get_uint64(stats, "frames-dropped", &dropped);
  gst_structure_get_uint64(stats, "copies", &copies);
  gst_structure_get_uint64(stats, "slots-exported", &exported);
  printf("PRODUCER frames=%ld seconds=%.3f fps=%.1f cpu_us_per_frame=%.2f sent=%" G_GUINT64_FORMAT
         " dropped=%" G_GUINT64_FORMAT " copies=%" G_GUINT64_FORMAT
         " slots_exported=%" G_GUINT64_FORMAT "\n",
         o.frames, seconds, timed / seconds, cpu / timed * 1e6, sent, dropped, copies, exported);
  // Per thread: the pushing (streaming) thread and cudasink-ipc's own (cipc-producer).
  for (const auto& d : cipc_test::thread_deltas(threads_first, threads_last))
    if (d.cpu_us > 0)
      printf("THREAD name=%s cpu_us_per_frame=%.2f wakeups_per_frame=%.3f\n", d.name.c_str(),
             d.cpu_us / timed, double(d.wakeups) / timed);
  fflush(stdout);
  gst_structure_free(stats);
  gst_harness_push_event(h, gst_event_new_eos());
  gst_buffer_pool_set_active(pool, FALSE);
  gst_object_unref(pool);
  gst_query_unref(q);
  gst_caps_unref(caps);
  gst_harness_teardown(h);
  return 0;
}

struct ConsumerState {
  std::vector<uint64_t> latency;
  uint64_t first = 0, last = 0;
  long frames = 0, expected = 0;
  uint64_t last_index = 0;
  long gaps = 0;
  GMainLoop* loop = nullptr;
};

GstPadProbeReturn on_buffer(GstPad*, GstPadProbeInfo* info, gpointer data) {
  auto* st = static_cast<ConsumerState*>(data);
  GstBuffer* b = GST_PAD_PROBE_INFO_BUFFER(info);
  uint64_t stamp[2] = {0, 0};
  gst_buffer_extract(b, 0, stamp, sizeof(stamp));
  const uint64_t t = now_ns();
  st->latency.push_back(t - stamp[0]);
  if (st->frames == 0)
    st->first = t;
  else if (stamp[1] != st->last_index + 1)
    ++st->gaps;
  st->last_index = stamp[1];
  st->last = t;
  ++st->frames;
  return GST_PAD_PROBE_OK;
}

int consume(const Options& o) {
  const std::string launch =
      "cudasrc-ipc name=src reconnect=false connect-timeout=60000 max-in-flight=8 socket-path=" +
      o.socket + " ! fakesink sync=false enable-last-sample=false";
  GError* err = nullptr;
  GstElement* pipeline = gst_parse_launch(launch.c_str(), &err);
  if (!pipeline) {
    fprintf(stderr, "%s\n", err->message);
    return 1;
  }
  GstElement* src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  GstPad* pad = gst_element_get_static_pad(src, "src");
  ConsumerState st;
  st.latency.reserve(o.frames);
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, on_buffer, &st, nullptr);
  const double cpu0 = cpu_seconds();
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstBus* bus = gst_element_get_bus(pipeline);
  GstMessage* m = gst_bus_timed_pop_filtered(bus, GST_CLOCK_TIME_NONE,
                                             GstMessageType(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  const double cpu = cpu_seconds() - cpu0;
  if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR) {
    gst_message_parse_error(m, &err, nullptr);
    fprintf(stderr, "consumer error: %s\n", err->message);
  }
  gst_message_unref(m);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  std::sort(st.latency.begin(), st.latency.end());
  auto pct = [&](double p) {
    return st.latency.empty()
               ? 0.0
               : st.latency[std::min(st.latency.size() - 1, size_t(p * st.latency.size()))] /
                     1000.0;
  };
  const double seconds = (st.last - st.first) / 1e9;
  char line[512];
  snprintf(line, sizeof(line),
           "{\"frames\": %ld, \"fps\": %.1f, \"latency_us\": {\"p50\": %.1f, \"p99\": %.1f, "
           "\"max\": %.1f}, "
           "\"cpu_us_per_frame\": %.2f, \"gaps\": %ld}",
           st.frames, seconds > 0 ? (st.frames - 1) / seconds : 0.0, pct(0.5), pct(0.99),
           st.latency.empty() ? 0.0 : st.latency.back() / 1000.0,
           st.frames ? cpu / st.frames * 1e6 : 0.0, st.gaps);
  printf("CONSUMER %s\n", line);
  if (!o.json.empty()) {
    FILE* f = fopen(o.json.c_str(), "w");
    if (f) {
      fprintf(f, "%s\n", line);
      fclose(f);
    }
  }
  gst_object_unref(bus);
  gst_object_unref(pad);
  gst_object_unref(src);
  gst_object_unref(pipeline);
  return st.frames > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  gst_init(nullptr, nullptr);
  const Options o = parse(argc, argv);
  if (o.socket.empty() || (o.mode != "produce" && o.mode != "consume")) {
    fprintf(stderr,
            "usage: %s produce|consume --socket PATH [--width W --height H --frames N --fps F "
            "--consumers C --json FILE]\n",
            argv[0]);
    return 2;
  }
  return o.mode == "produce" ? produce(o) : consume(o);
}
