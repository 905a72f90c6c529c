// SPDX-License-Identifier: LGPL-2.1-or-later
// cudaipc-e2e-peer: the other process in the two-process end-to-end tests
// (test_two_process.cpp). One binary, several roles chosen by the first argument:
//
//   produce       videotestsrc ! capsfilter ! cudasink-ipc memory=host (--memory cuda: the sink
//                 uploads each frame into exportable CUDA slots)
//   consume       cudasrc-ipc ! appsink (any memory: a CUDA producer's slots themselves, mapped
//                 for the CPU through a download; --system-memory: one DtoH copy per frame)
//   launch        any pipeline description, run as gst-launch-1.0 runs it (in this binary, so
//                 that it is built with the tests' sanitizers)
//   raw-hello     a consumer speaking the raw protocol (ipc/), HELLO at any version
//   fake-producer a raw listener that answers HELLO with a WELCOME at any version
//
// Everything a test needs to observe goes to stdout, one event per line, line buffered:
//
//   LISTENING                 producer: the socket exists (pipeline is PAUSED)
//   CONSUMERS <n>             producer: --min-consumers reached
//   READY                     producer: pipeline is PLAYING
//   STARTED                   consumer: pipeline is PLAYING
//   FRAME <k> <W>x<H>         consumer: k-th frame received (1-based)
//   LAYOUT offsets <o,..> strides <s,..>
//                             consumer: plane layout of the first frame after each format
//                             change, from the received buffer's GstVideoMeta
//   CHANGED <k>               consumer: a held frame's pixels changed while it was held
//                             (--hold-ms; only meaningful while the frame is the producer's slot)
//   NONCONFORMING <k> <why>   consumer: frame k disagrees with its caps (frame_conformance.h:
//                             the video meta's format, size or planes, or it does not map)
//   UNMAPPABLE <k>            consumer: a held frame could not be mapped again at its release
//                             (so CHANGED could not be checked)
//   STATS-TICK <structure>    periodic element `stats` (--stats-every-ms)
//   STATS <structure>         final element `stats`, printed while the element still runs
//   WARNING <text> | <debug>  a warning message from the pipeline
//   ERROR <text> | <debug>    an error message from the pipeline (exit code 2)
//   EOS                       the pipeline ended by end-of-stream
//   SWAPPED <n>               producer (--swap-uv): frames sent with V stored before U
//   DONE                      consumer: --frames reached
//   TIMEOUT                   --timeout-s ran out (exit code 3)
//
// The raw peers print what crosses the socket: `SENT <TYPE> version <v>`, then per message
// received `ERROR <text>`, `WELCOME version <v> ...`, `GOT <TYPE> version <v>`,
// `UNDECODABLE <TYPE> version <v>: <why>` or `CLOSED ...` (fake-producer prefixes what the
// consumer says after WELCOME with `PEER `).
//
// --flags-record FILE (consume) writes one line per buffer: `offset flags`, flags being the
// letters of DISCONT (D), DELTA_UNIT (U) and GAP (G) set on it, or "-". produce --mark-flags sets
// DELTA_UNIT on every frame whose index is not a multiple of 3 and GAP on every 7th from index 3.
//
// --record FILE writes one line per buffer: `index pts duration offset crc32`, where pts and
// duration are nanoseconds ("none" when unset) and crc32 covers only the visible bytes of every
// plane, row by row (so padding and plane placement do not matter). The producer records at
// the sink's pad (what the sink was given), the consumer what it received.
//
// Exit codes: 0 success, 1 usage or setup failure, 2 pipeline error, 3 timeout, 4 a frame that
// did not conform to its caps (consume; after everything else went well).
#include <glib-unix.h>
#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "channel.h"
#include "crc32.h"
#include "frame_conformance.h"
#include "protocol.h"
#include "waker.h"

namespace {

enum ExitCode {
  kExitOk = 0,
  kExitUsage = 1,
  kExitPipelineError = 2,
  kExitTimeout = 3,
  kExitNonconforming = 4
};

// ---------------------------------------------------------------------------------------------
// Output

std::mutex g_out_mutex;

void out_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_out_mutex);
  fputs(line.c_str(), stdout);
  fputc('\n', stdout);
  fflush(stdout);
}

// One line of text: newlines inside GStreamer messages would break the line protocol.
std::string one_line(const std::string& text) {
  std::string s = text;
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string structure_line(const char* prefix, const GstStructure* s) {
  gchar* text = gst_structure_to_string(s);
  std::string line = std::string(prefix) + " " + text;
  g_free(text);
  return line;
}

// ---------------------------------------------------------------------------------------------
// Arguments: --name value and --flag, after the mode.

class Args {
 public:
  Args(int argc, char** argv, const std::vector<std::string>& flags) {
    for (int i = 2; i < argc; ++i) {
      std::string a = argv[i];
      if (a.rfind("--", 0) != 0) {
        bad_ = "unexpected argument '" + a + "'";
        return;
      }
      a = a.substr(2);
      bool is_flag = false;
      for (const auto& f : flags) is_flag = is_flag || f == a;
      if (is_flag) {
        values_[a] = "1";
      } else if (i + 1 < argc) {
        values_[a] = argv[++i];
      } else {
        bad_ = "--" + a + " needs a value";
        return;
      }
    }
  }
  const std::string& bad() const { return bad_; }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string str(const std::string& name, const std::string& fallback = "") const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }
  long num(const std::string& name, long fallback) const {
    auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    char* end = nullptr;
    const long v = strtol(it->second.c_str(), &end, 10);
    if (end == it->second.c_str() || *end != '\0') {
      fprintf(stderr, "--%s: '%s' is not a number\n", name.c_str(), it->second.c_str());
      exit(kExitUsage);
    }
    return v;
  }
  // Every option must be one the mode knows.
  bool only(const std::vector<std::string>& known, std::string* unknown) const {
    for (const auto& entry : values_) {
      bool ok = false;
      for (const auto& k : known) ok = ok || k == entry.first;
      if (!ok) {
        *unknown = entry.first;
        return false;
      }
    }
    return true;
  }

 private:
  std::map<std::string, std::string> values_;
  std::string bad_;
};

// ---------------------------------------------------------------------------------------------
// Checksums over visible pixels

using cipc_test::crc32_update;

// CRC-32 of the visible bytes of every plane, row by row, in plane order. Offsets and strides
// come from the buffer's GstVideoMeta when it has one (gst_video_frame_map), so two buffers that
// hold the same picture in different layouts checksum the same.
bool visible_crc(const GstVideoInfo* info, GstBuffer* buffer, uint32_t* out) {
  GstVideoFrame frame;
  if (!gst_video_frame_map(&frame, info, buffer, GST_MAP_READ)) return false;
  uint32_t crc = 0;
  const GstVideoFormatInfo* finfo = frame.info.finfo;
  for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES(&frame); ++p) {
    gint comp[GST_VIDEO_MAX_COMPONENTS];
    gst_video_format_info_component(finfo, p, comp);
    const gint c = comp[0] >= 0 ? comp[0] : 0;
    const gint stride = GST_VIDEO_FRAME_PLANE_STRIDE(&frame, p);
    const gint pstride = GST_VIDEO_FRAME_COMP_PSTRIDE(&frame, c);
    size_t row_bytes = pstride > 0 ? size_t(GST_VIDEO_FRAME_COMP_WIDTH(&frame, c)) * pstride
                                   : size_t(stride);  // complex packings: whole rows
    if (row_bytes > size_t(stride)) row_bytes = size_t(stride);
    const gint rows = GST_VIDEO_FRAME_COMP_HEIGHT(&frame, c);
    const auto* base = static_cast<const uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&frame, p));
    for (gint y = 0; y < rows; ++y) crc = crc32_update(crc, base + size_t(y) * stride, row_bytes);
  }
  gst_video_frame_unmap(&frame);
  *out = crc;
  return true;
}

std::string time_field(GstClockTime t) {
  return GST_CLOCK_TIME_IS_VALID(t) ? std::to_string(t) : std::string("none");
}

std::string record_line(uint64_t index, GstBuffer* buffer, uint32_t crc) {
  char crc_text[16];
  snprintf(crc_text, sizeof(crc_text), "%08x", crc);
  const std::string offset = GST_BUFFER_OFFSET_IS_VALID(buffer)
                                 ? std::to_string(GST_BUFFER_OFFSET(buffer))
                                 : std::string("none");
  return std::to_string(index) + " " + time_field(GST_BUFFER_PTS(buffer)) + " " +
         time_field(GST_BUFFER_DURATION(buffer)) + " " + offset + " " + crc_text;
}

class Recorder {
 public:
  bool open(const std::string& path) {
    if (path.empty()) return true;
    file_ = fopen(path.c_str(), "w");
    if (!file_) {
      fprintf(stderr, "cannot write '%s': %s\n", path.c_str(), strerror(errno));
      return false;
    }
    setvbuf(file_, nullptr, _IOLBF, 0);
    return true;
  }
  ~Recorder() {
    if (file_) fclose(file_);
  }
  bool enabled() const { return file_ != nullptr; }
  void write(const std::string& line) {
    if (!file_) return;
    fputs(line.c_str(), file_);
    fputc('\n', file_);
  }

 private:
  FILE* file_ = nullptr;
};

// The message of an ERROR/WARNING bus message as one line: "<text> | <debug>".
std::string bus_text(GstMessage* msg) {
  GError* err = nullptr;
  gchar* debug = nullptr;
  if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR)
    gst_message_parse_error(msg, &err, &debug);
  else
    gst_message_parse_warning(msg, &err, &debug);
  std::string text = err ? err->message : "(no message)";
  if (debug) text += std::string(" | ") + debug;
  g_clear_error(&err);
  g_free(debug);
  return one_line(text);
}

uint64_t stat_u64(GstElement* element, const char* field) {
  GstStructure* s = nullptr;
  g_object_get(element, "stats", &s, nullptr);
  guint64 v = 0;
  if (s) {
    gst_structure_get_uint64(s, field, &v);
    gst_structure_free(s);
  }
  return v;
}

void print_stats(GstElement* element, const char* prefix) {
  GstStructure* s = nullptr;
  g_object_get(element, "stats", &s, nullptr);
  if (s) {
    out_line(structure_line(prefix, s));
    gst_structure_free(s);
  }
}

// ---------------------------------------------------------------------------------------------
// produce

// One entry of --formats/--sizes: the caps the producer switches to.
struct CapsStep {
  std::string format;
  long width = 0;
  long height = 0;
};

struct Producer {
  GstElement* pipeline = nullptr;
  GstElement* sink = nullptr;
  GstElement* filter = nullptr;  // the capsfilter --change-every rewrites
  std::vector<CapsStep> steps;   // --formats x --sizes, cycled through
  long change_every = 0;         // frames between caps changes (0: never)
  long fps = 30, fps_d = 1;
  GMainLoop* loop = nullptr;
  Recorder recorder;
  GstVideoInfo info;
  bool have_info = false;
  uint64_t index = 0;
  bool lockstep = false;
  bool mark_flags = false;  // --mark-flags
  bool swap_uv = false;
  uint64_t swapped = 0;  // frames sent with the V plane before the U plane
  uint64_t max_in_flight = 4;
  long min_consumers = 0;
  bool live = false;
  std::atomic<bool> stopping{false};
  bool signalled = false;
  bool printed_stats = false;
  int exit_code = kExitOk;
  guint stop_timer = 0;
  long stop_grace_ms = 5000;
  uint64_t deadline_ns = 0;
};

// Rewrites an I420 frame so that its V plane comes before its U plane in memory, with the
// GstVideoMeta saying so: the picture is unchanged, the layout is not the default one. Only a
// consumer that honours the offsets sent with each frame sees the same picture.
bool swap_chroma_planes(GstBuffer* buffer) {
  GstVideoMeta* meta = gst_buffer_get_video_meta(buffer);
  if (!meta || meta->format != GST_VIDEO_FORMAT_I420 || meta->n_planes != 3) return false;
  if (meta->offset[1] > meta->offset[2]) return true;  // already swapped: upstream honoured it
  GstMapInfo map;
  if (!gst_buffer_map(buffer, &map, GST_MAP_READWRITE)) return false;
  bool ok = false;
  const gsize u = meta->offset[1], v = meta->offset[2];
  const gsize n = v - u;  // U plane size (U and V are the same size, V follows U)
  if (meta->stride[1] == meta->stride[2] && v + n <= map.size) {
    std::vector<uint8_t> tmp(map.data + u, map.data + u + n);
    memmove(map.data + u, map.data + v, n);
    memcpy(map.data + v, tmp.data(), n);
    meta->offset[1] = v;
    meta->offset[2] = u;
    ok = true;
  }
  gst_buffer_unmap(buffer, &map);
  return ok;
}

GstCaps* step_caps(const Producer& p, const CapsStep& step) {
  return gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, step.format.c_str(), "width",
                             G_TYPE_INT, int(step.width), "height", G_TYPE_INT, int(step.height),
                             "framerate", GST_TYPE_FRACTION, int(p.fps), int(p.fps_d), nullptr);
}

// --change-every K: after every K frames the capsfilter asks for the next format and size, so
// videotestsrc renegotiates and cudasink-ipc sends new caps (a new generation of slots).
void maybe_change_caps(Producer* p) {
  if (p->change_every <= 0 || p->steps.empty() || (p->index + 1) % p->change_every != 0) return;
  const CapsStep& step = p->steps[((p->index + 1) / p->change_every) % p->steps.size()];
  GstCaps* caps = step_caps(*p, step);
  g_object_set(p->filter, "caps", caps, nullptr);
  gst_caps_unref(caps);
}

GstPadProbeReturn producer_probe(GstPad*, GstPadProbeInfo* info, gpointer data) {
  auto* p = static_cast<Producer*>(data);
  if (info->type & GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM) {
    GstEvent* event = GST_PAD_PROBE_INFO_EVENT(info);
    if (GST_EVENT_TYPE(event) == GST_EVENT_CAPS) {
      GstCaps* caps = nullptr;
      gst_event_parse_caps(event, &caps);
      p->have_info = gst_video_info_from_caps(&p->info, caps);
    }
    return GST_PAD_PROBE_OK;
  }
  GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
  if (p->mark_flags) {
    buffer = gst_buffer_make_writable(buffer);
    GST_PAD_PROBE_INFO_DATA(info) = buffer;
    if (p->index % 3 != 0) GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT);
    if (p->index % 7 == 3) GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_GAP);
  }
  if (p->swap_uv && swap_chroma_planes(buffer)) ++p->swapped;
  // Lockstep: never hand the sink a frame while any consumer could be at max-in-flight, so
  // that no consumer misses a frame (the producer never waits for consumers by itself).
  if (p->lockstep) {
    while (!p->stopping && stat_u64(p->sink, "claims-outstanding") >= p->max_in_flight)
      g_usleep(200);
  }
  if (p->recorder.enabled() && p->have_info) {
    uint32_t crc = 0;
    if (!visible_crc(&p->info, buffer, &crc))
      out_line("WARNING could not map a frame to record it");
    p->recorder.write(record_line(p->index, buffer, crc));
  }
  maybe_change_caps(p);
  ++p->index;
  return GST_PAD_PROBE_OK;
}

void producer_finish(Producer* p) {
  if (!p->printed_stats) {
    p->printed_stats = true;
    if (p->swap_uv) out_line("SWAPPED " + std::to_string(p->swapped));
    print_stats(p->sink, "STATS");
  }
  p->stopping = true;
  g_main_loop_quit(p->loop);
}

gboolean producer_bus(GstBus*, GstMessage* msg, gpointer data) {
  auto* p = static_cast<Producer*>(data);
  switch (GST_MESSAGE_TYPE(msg)) {
    case GST_MESSAGE_EOS:
      out_line("EOS");
      producer_finish(p);
      break;
    case GST_MESSAGE_ERROR:
      out_line("ERROR " + bus_text(msg));
      p->exit_code = kExitPipelineError;
      producer_finish(p);
      break;
    case GST_MESSAGE_WARNING: out_line("WARNING " + bus_text(msg)); break;
    case GST_MESSAGE_STATE_CHANGED:
      if (GST_MESSAGE_SRC(msg) == GST_OBJECT(p->pipeline)) {
        GstState old_state, new_state;
        gst_message_parse_state_changed(msg, &old_state, &new_state, nullptr);
        if (new_state == GST_STATE_PLAYING && old_state != GST_STATE_PLAYING) out_line("READY");
      }
      break;
    default: break;
  }
  return G_SOURCE_CONTINUE;
}

gboolean producer_stop_timeout(gpointer data) {
  auto* p = static_cast<Producer*>(data);
  p->stop_timer = 0;
  out_line("WARNING no EOS within the stop grace period; stopping anyway");
  producer_finish(p);
  return G_SOURCE_REMOVE;
}

// SIGINT/SIGTERM: end the stream with EOS (consumers see EOS), then stop. A second signal, or
// no EOS within the grace period, stops at once.
gboolean producer_signal(gpointer data) {
  auto* p = static_cast<Producer*>(data);
  if (p->signalled) {
    producer_finish(p);
    return G_SOURCE_CONTINUE;
  }
  p->signalled = true;
  p->stopping = true;  // unblocks the lockstep wait
  GstState state = GST_STATE_NULL;
  gst_element_get_state(p->pipeline, &state, nullptr, 0);
  if (state != GST_STATE_PLAYING) {
    producer_finish(p);  // not streaming (e.g. waiting for consumers): nothing to end
    return G_SOURCE_CONTINUE;
  }
  gst_element_send_event(p->pipeline, gst_event_new_eos());
  p->stop_timer = g_timeout_add(static_cast<guint>(p->stop_grace_ms), producer_stop_timeout, p);
  return G_SOURCE_CONTINUE;
}

// SIGUSR1: PLAYING -> PAUSED, or back (prints PAUSED / PLAYING once the change is asked for).
gboolean producer_toggle_pause(gpointer data) {
  auto* p = static_cast<Producer*>(data);
  GstState state = GST_STATE_NULL, pending = GST_STATE_VOID_PENDING;
  gst_element_get_state(p->pipeline, &state, &pending, 0);
  const GstState target = (pending != GST_STATE_VOID_PENDING ? pending : state) == GST_STATE_PLAYING
                              ? GST_STATE_PAUSED
                              : GST_STATE_PLAYING;
  gst_element_set_state(p->pipeline, target);
  out_line(target == GST_STATE_PAUSED ? "PAUSED" : "PLAYING");
  return G_SOURCE_CONTINUE;
}

gboolean producer_tick(gpointer data) {
  print_stats(static_cast<Producer*>(data)->sink, "STATS-TICK");
  return G_SOURCE_CONTINUE;
}

gboolean producer_wait_consumers(gpointer data) {
  auto* p = static_cast<Producer*>(data);
  guint n = 0;
  g_object_get(p->sink, "num-consumers", &n, nullptr);
  if (long(n) >= p->min_consumers) {
    out_line("CONSUMERS " + std::to_string(n));
    if (gst_element_set_state(p->pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
      out_line("ERROR could not set the pipeline to PLAYING");
      p->exit_code = kExitPipelineError;
      producer_finish(p);
    }
    return G_SOURCE_REMOVE;
  }
  if (p->deadline_ns && cipc::monotonic_ns() > p->deadline_ns) {
    out_line("TIMEOUT waiting for " + std::to_string(p->min_consumers) + " consumer(s)");
    p->exit_code = kExitTimeout;
    producer_finish(p);
    return G_SOURCE_REMOVE;
  }
  return G_SOURCE_CONTINUE;
}

gboolean producer_deadline(gpointer data) {
  auto* p = static_cast<Producer*>(data);
  out_line("TIMEOUT");
  p->exit_code = kExitTimeout;
  producer_finish(p);
  return G_SOURCE_REMOVE;
}

// The pipeline `description` describes, or nullptr after printing why it cannot be built.
GstElement* parse_pipeline(const char* description) {
  GError* error = nullptr;
  GstElement* pipeline = gst_parse_launch(description, &error);
  if (pipeline && !error) return pipeline;
  out_line(std::string("ERROR cannot build the pipeline: ") +
           (error ? error->message : "unknown reason"));
  g_clear_error(&error);
  if (pipeline) gst_object_unref(pipeline);
  return nullptr;
}

// Pops the error messages a failed state change left on the bus.
void drain_errors(GstElement* pipeline) {
  GstBus* bus = gst_element_get_bus(pipeline);
  while (GstMessage* msg = gst_bus_pop_filtered(
             bus, static_cast<GstMessageType>(GST_MESSAGE_ERROR | GST_MESSAGE_WARNING))) {
    out_line(std::string(GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR ? "ERROR " : "WARNING ") +
             bus_text(msg));
    gst_message_unref(msg);
  }
  gst_object_unref(bus);
}

int run_produce(const Args& a) {
  std::string unknown;
  if (!a.only({"socket",
               "frames",
               "width",
               "height",
               "format",
               "fps",
               "pattern",
               "wait-for-consumer",
               "record",
               "min-consumers",
               "lockstep",
               "max-in-flight",
               "release-timeout",
               "stats-every-ms",
               "swap-uv",
               "timeout-s",
               "stop-grace-ms",
               "pool-size",
               "memory",
               "backpressure",
               "address-space-mb",
               "change-every",
               "formats",
               "sizes",
               "mark-flags"},
              &unknown)) {
    fprintf(stderr, "produce: unknown option --%s\n", unknown.c_str());
    return kExitUsage;
  }
  if (!a.has("socket")) {
    fprintf(stderr, "produce: --socket is required\n");
    return kExitUsage;
  }
  const std::string memory = a.str("memory", "host");
  if (memory != "host" && memory != "cuda") {
    fprintf(stderr, "produce: --memory must be host or cuda\n");
    return kExitUsage;
  }
  if (a.has("address-space-mb")) {  // as `ulimit -v` would: makes slot allocations fail
    rlimit limit{};
    limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(a.num("address-space-mb", 0)) << 20;
    if (::setrlimit(RLIMIT_AS, &limit) != 0) {
      perror("setrlimit(RLIMIT_AS)");
      return kExitUsage;
    }
  }
  Producer p;
  const long frames = a.num("frames", 0);
  // --fps N or N/D (a slow camera: 1/5 is one frame every 5 s).
  const std::string fps_text = a.str("fps", "30");
  const size_t slash = fps_text.find('/');
  const long fps = strtol(fps_text.c_str(), nullptr, 10);
  const long fps_d =
      slash == std::string::npos ? 1 : strtol(fps_text.c_str() + slash + 1, nullptr, 10);
  if (fps < 0 || fps_d <= 0) {
    fprintf(stderr, "produce: --fps takes N or N/D\n");
    return kExitUsage;
  }
  p.live = fps > 0;
  p.fps = p.live ? fps : 30L;
  p.fps_d = p.live ? fps_d : 1L;
  p.change_every = a.num("change-every", 0);
  if (p.change_every > 0) {
    // Every format with every size, in turn: --formats I420,BGRA --sizes 320x240,161x97.
    gchar** formats = g_strsplit(a.str("formats", a.str("format", "I420")).c_str(), ",", -1);
    gchar** sizes = g_strsplit(a.str("sizes", "").c_str(), ",", -1);
    for (gchar** f = formats; *f; ++f) {
      if (!sizes[0]) p.steps.push_back({*f, a.num("width", 320), a.num("height", 240)});
      for (gchar** sz = sizes; *sz; ++sz) {
        CapsStep step{*f, 0, 0};
        if (sscanf(*sz, "%ldx%ld", &step.width, &step.height) != 2) {
          fprintf(stderr, "produce: --sizes takes WxH,WxH,...\n");
          g_strfreev(formats);
          g_strfreev(sizes);
          return kExitUsage;
        }
        p.steps.push_back(step);
      }
    }
    g_strfreev(formats);
    g_strfreev(sizes);
  }
  p.lockstep = a.has("lockstep");
  p.mark_flags = a.has("mark-flags");
  p.swap_uv = a.has("swap-uv");
  p.max_in_flight = static_cast<uint64_t>(a.num("max-in-flight", 4));
  p.min_consumers = a.num("min-consumers", 0);
  p.stop_grace_ms = a.num("stop-grace-ms", 5000);
  if (!p.recorder.open(a.str("record"))) return kExitUsage;

  // Unpaced: non-live and unsynchronised, so frames go out as fast as the sink takes them; the
  // nominal 30/1 rate still gives every buffer a duration. memory=cuda: videotestsrc writes
  // system memory, which the sink uploads into its CUDA slots (one copy per frame); the record
  // is still taken at the sink's pad, from the system-memory frame.
  gchar* description = g_strdup_printf(
      "videotestsrc name=src is-live=%s pattern=%s num-buffers=%ld ! "
      "capsfilter name=filter "
      "caps=\"video/x-raw,format=%s,width=%ld,height=%ld,framerate=%ld/%ld\" ! "
      "cudasink-ipc name=sink memory=%s socket-path=\"%s\" sync=%s max-in-flight=%lu "
      "release-timeout=%ld wait-for-consumer=%s pool-size=%ld backpressure=%s",
      p.live ? "true" : "false", a.str("pattern", "snow").c_str(), frames > 0 ? frames : -1,
      a.str("format", "I420").c_str(), a.num("width", 320), a.num("height", 240),
      p.live ? fps : 30L, p.live ? fps_d : 1L, memory.c_str(), a.str("socket").c_str(),
      p.live ? "true" : "false", static_cast<unsigned long>(p.max_in_flight),
      a.num("release-timeout", 2000), a.has("wait-for-consumer") ? "true" : "false",
      a.num("pool-size", 6), a.str("backpressure", "auto").c_str());
  p.pipeline = parse_pipeline(description);
  g_free(description);
  if (!p.pipeline) return kExitUsage;
  p.sink = gst_bin_get_by_name(GST_BIN(p.pipeline), "sink");
  p.filter = gst_bin_get_by_name(GST_BIN(p.pipeline), "filter");
  if (!p.steps.empty()) {  // the first step is where the stream starts
    GstCaps* caps = step_caps(p, p.steps[0]);
    g_object_set(p.filter, "caps", caps, nullptr);
    gst_caps_unref(caps);
  }
  GstPad* pad = gst_element_get_static_pad(p.sink, "sink");
  gst_pad_add_probe(
      pad,
      static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM),
      producer_probe, &p, nullptr);
  gst_object_unref(pad);

  p.loop = g_main_loop_new(nullptr, FALSE);
  GstBus* bus = gst_element_get_bus(p.pipeline);
  gst_bus_add_watch(bus, producer_bus, &p);
  gst_object_unref(bus);
  g_unix_signal_add(SIGINT, producer_signal, &p);
  g_unix_signal_add(SIGTERM, producer_signal, &p);
  g_unix_signal_add(SIGUSR1, producer_toggle_pause, &p);
  if (a.has("stats-every-ms")) {
    g_timeout_add(static_cast<guint>(a.num("stats-every-ms", 200)), producer_tick, &p);
  }
  if (a.has("timeout-s")) {
    p.deadline_ns = cipc::monotonic_ns() + uint64_t(a.num("timeout-s", 60)) * 1000000000ull;
    g_timeout_add_seconds(static_cast<guint>(a.num("timeout-s", 60)), producer_deadline, &p);
  }

  // The sink creates its socket in READY->PAUSED. With --min-consumers the pipeline waits in
  // PAUSED (a non-live source prerolls one frame, which is only sent in PLAYING) until enough
  // consumers have attached, so that all of them see every frame.
  if (gst_element_set_state(p.pipeline, GST_STATE_PAUSED) == GST_STATE_CHANGE_FAILURE) {
    drain_errors(p.pipeline);
    gst_element_set_state(p.pipeline, GST_STATE_NULL);
    gst_object_unref(p.filter);
    gst_object_unref(p.sink);
    gst_object_unref(p.pipeline);
    g_main_loop_unref(p.loop);
    return kExitPipelineError;
  }
  out_line("LISTENING");
  if (p.min_consumers > 0) {
    g_timeout_add(10, producer_wait_consumers, &p);
  } else if (gst_element_set_state(p.pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    drain_errors(p.pipeline);
    p.exit_code = kExitPipelineError;
    p.printed_stats = true;
    p.stopping = true;
  }
  if (!p.stopping) g_main_loop_run(p.loop);

  p.stopping = true;
  gst_element_set_state(p.pipeline, GST_STATE_NULL);
  if (p.stop_timer) g_source_remove(p.stop_timer);
  gst_object_unref(p.filter);
  gst_object_unref(p.sink);
  gst_object_unref(p.pipeline);
  g_main_loop_unref(p.loop);
  return p.exit_code;
}

// ---------------------------------------------------------------------------------------------
// consume

std::atomic<bool> g_consumer_signalled{false};

void consumer_signal(int) {
  g_consumer_signalled = true;
}

// "LAYOUT offsets a,b,c strides x,y,z": the plane layout a received buffer's GstVideoMeta gives.
std::string layout_line(GstBuffer* buffer) {
  const GstVideoMeta* meta = gst_buffer_get_video_meta(buffer);
  if (!meta) return "LAYOUT none";
  std::string offsets, strides;
  for (guint i = 0; i < meta->n_planes; ++i) {
    offsets += (i ? "," : "") + std::to_string(meta->offset[i]);
    strides += (i ? "," : "") + std::to_string(meta->stride[i]);
  }
  return "LAYOUT offsets " + offsets + " strides " + strides;
}

struct Held {
  GstSample* sample;
  uint64_t index;
  uint64_t release_ns;
  uint32_t crc;
  GstVideoInfo info;
};

int run_consume(const Args& a) {
  std::string unknown;
  if (!a.only({"socket", "frames", "reconnect", "record", "hold-ms", "timeout-s", "max-in-flight",
               "connect-timeout", "reconnect-interval", "stats-every-ms", "system-memory",
               "sleep-us", "downstream", "io-mode", "flags-record"},
              &unknown)) {
    fprintf(stderr, "consume: unknown option --%s\n", unknown.c_str());
    return kExitUsage;
  }
  if (!a.has("socket")) {
    fprintf(stderr, "consume: --socket is required\n");
    return kExitUsage;
  }
  const long frames = a.num("frames", 0);
  const uint64_t hold_ns = uint64_t(a.num("hold-ms", 0)) * 1000000ull;
  const long timeout_s = a.num("timeout-s", 60);
  const long tick_ms = a.num("stats-every-ms", 0);
  Recorder recorder;
  if (!recorder.open(a.str("record"))) return kExitUsage;
  Recorder flags_recorder;
  if (!flags_recorder.open(a.str("flags-record"))) return kExitUsage;

  struct sigaction sa {};
  sa.sa_handler = consumer_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  // appsink takes any caps: a host producer's slots, or a CUDA producer's slots themselves
  // (memory:CUDAIPCMemory, io-mode=import), which a CPU map reads through a fresh download.
  // --system-memory asks for plain video/x-raw instead: cudasrc-ipc then downloads every CUDA
  // frame into a buffer of its own (one DtoH copy) and releases the slot at once.
  // --downstream puts elements between cudasrc-ipc and appsink, to reach its other outputs:
  // "video/x-raw(memory:CUDAMemory) ! cudadownload" (GStreamer's CUDA memory, nvcodec) or
  // "video/x-raw(memory:GLMemory),format=BGRA ! gldownload" (GL textures).
  const std::string downstream = a.str("downstream");
  gchar* description = g_strdup_printf(
      "cudasrc-ipc name=src socket-path=\"%s\" reconnect=%s max-in-flight=%ld "
      "connect-timeout=%ld reconnect-interval=%ld io-mode=%s ! %s%sidentity sleep-time=%ld ! "
      "appsink name=sink sync=false enable-last-sample=false max-buffers=0%s",
      a.str("socket").c_str(), a.has("reconnect") ? "true" : "false", a.num("max-in-flight", 4),
      a.num("connect-timeout", 5000), a.num("reconnect-interval", 50),
      a.str("io-mode", "import").c_str(), downstream.c_str(), downstream.empty() ? "" : " ! ",
      a.num("sleep-us", 0), a.has("system-memory") ? " caps=video/x-raw" : "");
  GstElement* pipeline = parse_pipeline(description);
  g_free(description);
  if (!pipeline) return kExitUsage;
  GstElement* src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  GstElement* sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  GstBus* bus = gst_element_get_bus(pipeline);

  int code = kExitOk;
  bool done = false;
  if (gst_element_set_state(pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    drain_errors(pipeline);
    code = kExitPipelineError;
    done = true;
  } else {
    out_line("STARTED");
  }

  std::deque<Held> held;
  uint64_t received = 0;
  uint64_t nonconforming = 0;
  GstCaps* last_caps = nullptr;
  bool print_layout = false;
  GstVideoInfo info;
  gst_video_info_init(&info);
  const uint64_t deadline = cipc::monotonic_ns() + uint64_t(timeout_s) * 1000000000ull;
  uint64_t next_tick = tick_ms > 0 ? cipc::monotonic_ns() + uint64_t(tick_ms) * 1000000 : 0;

  // Releases held frames whose time is up (all of them with `all`), checking that the pixels
  // did not change while we held them: the producer must never write a slot we still hold.
  // Host slots are mapped directly. A CUDA slot (any caps) is downloaded afresh by each map
  // (slots/staging.cpp), so the check reads the slot itself again at release.
  // A --system-memory frame is our own downloaded copy and can never change: there this check
  // proves nothing about the producer; only the CRC compared with the producer's record shows
  // that the slot still held that frame when it was copied.
  auto release_held = [&](bool all) {
    const uint64_t now = cipc::monotonic_ns();
    while (!held.empty() && (all || held.front().release_ns <= now)) {
      Held& h = held.front();
      uint32_t crc = 0;
      if (!visible_crc(&h.info, gst_sample_get_buffer(h.sample), &crc))
        out_line("UNMAPPABLE " + std::to_string(h.index + 1));
      else if (crc != h.crc)
        out_line("CHANGED " + std::to_string(h.index + 1));
      gst_sample_unref(h.sample);
      held.pop_front();
    }
  };

  while (!done) {
    if (g_consumer_signalled) break;
    if (cipc::monotonic_ns() > deadline) {
      out_line("TIMEOUT");
      code = kExitTimeout;
      break;
    }
    if (next_tick && cipc::monotonic_ns() >= next_tick) {
      print_stats(src, "STATS-TICK");
      next_tick += uint64_t(tick_ms) * 1000000;
    }
    release_held(false);
    GstSample* sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 20 * GST_MSECOND);
    if (sample) {
      GstCaps* caps = gst_sample_get_caps(sample);
      if (caps && caps != last_caps) {
        if (!gst_video_info_from_caps(&info, caps)) {
          out_line("ERROR received caps that are not raw video");
          gst_sample_unref(sample);
          code = kExitPipelineError;
          break;
        }
        gst_caps_replace(&last_caps, caps);
        print_layout = true;
      }
      GstBuffer* buffer = gst_sample_get_buffer(sample);
      if (print_layout) {
        print_layout = false;
        out_line(layout_line(buffer));
      }
      ++received;
      // The checksum maps the frame (a CPU map of a CUDA slot downloads it): the conformance
      // check leaves that map to it rather than pay for two.
      std::string why = cipc_test::frame_nonconformance(info, buffer, /*map_frame=*/false);
      uint32_t crc = 0;
      if (why.empty() && !visible_crc(&info, buffer, &crc))
        why = "gst_video_frame_map() refuses it";
      if (!why.empty()) {
        ++nonconforming;
        out_line("NONCONFORMING " + std::to_string(received) + " " + why);
      }
      recorder.write(record_line(received - 1, buffer, crc));
      if (flags_recorder.enabled()) {
        std::string flags;
        if (GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DISCONT)) flags += 'D';
        if (GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT)) flags += 'U';
        if (GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_GAP)) flags += 'G';
        const std::string offset = GST_BUFFER_OFFSET_IS_VALID(buffer)
                                       ? std::to_string(GST_BUFFER_OFFSET(buffer))
                                       : std::string("none");
        flags_recorder.write(offset + " " + (flags.empty() ? "-" : flags));
      }
      out_line("FRAME " + std::to_string(received) + " " +
               std::to_string(GST_VIDEO_INFO_WIDTH(&info)) + "x" +
               std::to_string(GST_VIDEO_INFO_HEIGHT(&info)));
      if (hold_ns > 0) {
        held.push_back(Held{sample, received - 1, cipc::monotonic_ns() + hold_ns, crc, info});
      } else {
        gst_sample_unref(sample);
      }
      if (frames > 0 && received >= uint64_t(frames)) {
        out_line("DONE");
        break;
      }
    }
    while (GstMessage* msg = gst_bus_pop(bus)) {
      switch (GST_MESSAGE_TYPE(msg)) {
        case GST_MESSAGE_EOS:
          out_line("EOS");
          done = true;
          break;
        case GST_MESSAGE_ERROR:
          out_line("ERROR " + bus_text(msg));
          code = kExitPipelineError;
          done = true;
          break;
        case GST_MESSAGE_WARNING: out_line("WARNING " + bus_text(msg)); break;
        default: break;
      }
      gst_message_unref(msg);
      if (done) break;
    }
  }
  // Frames still held are checked and let go before the source stops.
  release_held(true);
  print_stats(src, "STATS");
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_caps_replace(&last_caps, nullptr);
  gst_object_unref(bus);
  gst_object_unref(sink);
  gst_object_unref(src);
  gst_object_unref(pipeline);
  return code == kExitOk && nonconforming ? kExitNonconforming : code;
}

// ---------------------------------------------------------------------------------------------
// launch: a pipeline description run as gst-launch-1.0 runs it, inside this (possibly
// sanitizer-instrumented) binary, so that a test can use any sink exactly as a user would.

int usage();

std::atomic<int> g_launch_signals{0};

void launch_signal(int) {
  g_launch_signals.fetch_add(1);
}

// `launch [-e] DESCRIPTION...`. With -e, as gst-launch-1.0 -e: the first SIGINT/SIGTERM sends
// EOS into the pipeline and waits for it to come out (printing SENT-EOS); a second one stops.
int run_launch(int argc, char** argv) {
  int first = 2;
  const bool eos_on_signal = argc > 2 && std::string(argv[2]) == "-e";
  if (eos_on_signal) ++first;
  std::string description;
  for (int i = first; i < argc; ++i)
    description += std::string(description.empty() ? "" : " ") + argv[i];
  if (description.empty()) return usage();
  struct sigaction sa {};
  sa.sa_handler = launch_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  GstElement* pipeline = parse_pipeline(description.c_str());
  if (!pipeline) return kExitUsage;
  int code = kExitOk;
  if (gst_element_set_state(pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    drain_errors(pipeline);
    code = kExitPipelineError;
  } else {
    out_line("STARTED");
    GstBus* bus = gst_element_get_bus(pipeline);
    bool eos_sent = false;
    for (;;) {
      const int signals = g_launch_signals.load();
      if (signals > (eos_on_signal ? 1 : 0)) break;
      if (signals == 1 && !eos_sent) {
        eos_sent = true;
        // From this thread, as gst-launch-1.0 does from its main loop; it may block until the
        // streaming thread lets the source take the EOS.
        gst_element_send_event(pipeline, gst_event_new_eos());
        out_line("SENT-EOS");
      }
      GstMessage* msg = gst_bus_timed_pop_filtered(
          bus, 100 * GST_MSECOND,
          static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR | GST_MESSAGE_WARNING));
      if (!msg) continue;
      const GstMessageType type = GST_MESSAGE_TYPE(msg);
      if (type == GST_MESSAGE_EOS)
        out_line("EOS");
      else
        out_line(std::string(type == GST_MESSAGE_ERROR ? "ERROR " : "WARNING ") + bus_text(msg));
      gst_message_unref(msg);
      if (type == GST_MESSAGE_ERROR) code = kExitPipelineError;
      if (type != GST_MESSAGE_WARNING) break;
    }
    gst_object_unref(bus);
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
  return code;
}

// ---------------------------------------------------------------------------------------------
// Raw protocol peers

const char* type_name(const std::vector<uint8_t>& bytes) {
  if (bytes.size() < cipc::kHeaderSize) return "(short)";
  const uint16_t type = uint16_t(bytes[6] | (bytes[7] << 8));
  return cipc::to_string(static_cast<cipc::MessageType>(type));
}

uint16_t header_version(const std::vector<uint8_t>& bytes) {
  return bytes.size() >= 6 ? uint16_t(bytes[4] | (bytes[5] << 8)) : 0;
}

// Waits for one packet; prints what it was. Returns false when nothing came (closed, timeout).
bool receive_and_print(cipc::Channel& channel, int timeout_ms, const char* prefix) {
  const uint64_t deadline = cipc::monotonic_ns() + uint64_t(timeout_ms) * 1000000;
  for (;;) {
    const uint64_t now = cipc::monotonic_ns();
    if (now >= deadline) {
      out_line(std::string(prefix) + "TIMEOUT");
      return false;
    }
    channel.wait_readable(int((deadline - now) / 1000000) + 1);
    cipc::Packet packet;
    std::string error;
    const cipc::IoResult r = channel.receive(packet, &error);
    if (r == cipc::IoResult::kWouldBlock) continue;
    if (r != cipc::IoResult::kOk) {
      out_line(std::string(prefix) + "CLOSED " + error);
      return false;
    }
    cipc::DecodeResult decoded = cipc::decode(packet.bytes.data(), packet.bytes.size());
    if (!decoded) {
      out_line(std::string(prefix) + "UNDECODABLE " + type_name(packet.bytes) + " version " +
               std::to_string(header_version(packet.bytes)) + ": " +
               one_line(cipc::describe(decoded.error())));
      return true;
    }
    cipc::Message& m = decoded.message();
    if (m.type() == cipc::MessageType::kError) {
      out_line(std::string(prefix) + "ERROR " +
               one_line(std::get<cipc::ErrorMessage>(m.body).text));
    } else if (m.type() == cipc::MessageType::kWelcome) {
      const auto& w = std::get<cipc::Welcome>(m.body);
      out_line(std::string(prefix) + "WELCOME version " +
               std::to_string(header_version(packet.bytes)) + " memory " +
               cipc::to_string(w.memory_kind) + " max-in-flight " +
               std::to_string(w.max_in_flight));
    } else {
      out_line(std::string(prefix) + "GOT " + cipc::to_string(m.type()) + " version " +
               std::to_string(header_version(packet.bytes)));
    }
    return true;
  }
}

// A consumer that says HELLO at --version and prints the answer.
int run_raw_hello(const Args& a) {
  std::string unknown;
  if (!a.only({"socket", "version", "timeout-ms"}, &unknown) || !a.has("socket")) {
    fprintf(stderr, "raw-hello: usage: --socket PATH [--version V] [--timeout-ms T]\n");
    return kExitUsage;
  }
  auto channel = cipc::Channel::connect(a.str("socket"));
  if (!channel) {
    out_line("CONNECT-FAILED " + channel.error().message);
    return kExitPipelineError;
  }
  cipc::Hello hello;
  hello.memory_kind = cipc::MemoryKind::kHost;
  hello.pid = static_cast<uint32_t>(getpid());
  const auto version = static_cast<uint16_t>(a.num("version", cipc::kProtocolVersion));
  std::string error;
  if (channel->send(cipc::encode(cipc::Message{hello}, version), nullptr, 0, &error) !=
      cipc::IoResult::kOk) {
    out_line("SEND-FAILED " + error);
    return kExitPipelineError;
  }
  out_line("SENT HELLO version " + std::to_string(version));
  receive_and_print(channel.value(), int(a.num("timeout-ms", 5000)), "");
  return kExitOk;
}

// A producer that answers any HELLO with a WELCOME encoded at --version, then reports what the
// consumer does about it (a message, or just hanging up).
int run_fake_producer(const Args& a) {
  std::string unknown;
  if (!a.only({"socket", "version", "timeout-ms"}, &unknown) || !a.has("socket")) {
    fprintf(stderr, "fake-producer: usage: --socket PATH [--version V] [--timeout-ms T]\n");
    return kExitUsage;
  }
  auto listener = cipc::Listener::bind(a.str("socket"), 0600);
  if (!listener) {
    out_line("ERROR " + listener.error().message);
    return kExitPipelineError;
  }
  out_line("LISTENING");
  const int timeout_ms = int(a.num("timeout-ms", 10000));
  const auto version = static_cast<uint16_t>(a.num("version", cipc::kProtocolVersion));
  pollfd pfd{listener->fd(), POLLIN, 0};
  if (::poll(&pfd, 1, timeout_ms) <= 0) {
    out_line("TIMEOUT waiting for a consumer");
    return kExitTimeout;
  }
  cipc::Channel channel;
  std::string error;
  if (listener->accept(channel, &error) != cipc::IoResult::kOk) {
    out_line("ERROR accept: " + error);
    return kExitPipelineError;
  }
  // The HELLO, read raw: its header tells the consumer's version whatever ours is.
  channel.wait_readable(timeout_ms);
  cipc::Packet packet;
  if (channel.receive(packet, &error) != cipc::IoResult::kOk) {
    out_line("CLOSED before HELLO " + error);
    return kExitPipelineError;
  }
  out_line(std::string("GOT ") + type_name(packet.bytes) + " version " +
           std::to_string(header_version(packet.bytes)));
  cipc::Welcome welcome;
  welcome.instance_id = 0x1234;
  welcome.memory_kind = cipc::MemoryKind::kHost;
  welcome.max_in_flight = 4;
  if (channel.send(cipc::encode(cipc::Message{welcome}, version), nullptr, 0, &error) !=
      cipc::IoResult::kOk) {
    out_line("SEND-FAILED " + error);
    return kExitPipelineError;
  }
  out_line("SENT WELCOME version " + std::to_string(version));
  // Everything the consumer says until it hangs up.
  while (receive_and_print(channel, timeout_ms, "PEER ")) {
  }
  return kExitOk;
}

int usage() {
  fprintf(stderr,
          "usage: cudaipc-e2e-peer MODE [options]\n"
          "  produce --socket PATH [--frames N (0: forever)] [--width W] [--height H]\n"
          "          [--format FMT] [--fps F or N/D (0: unpaced)] [--pattern snow|ball|...]\n"
          "          [--wait-for-consumer] [--record FILE] [--min-consumers K] [--lockstep]\n"
          "          [--max-in-flight M] [--release-timeout MS] [--pool-size N]\n"
          "          [--stats-every-ms MS] [--swap-uv] [--timeout-s T] [--stop-grace-ms MS]\n"
          "          [--memory host|cuda] [--backpressure auto|block|drop]\n"
          "          [--address-space-mb MB (ulimit -v)]\n"
          "          [--mark-flags (DELTA_UNIT, GAP on a fixed rule)]\n"
          "          [--change-every K --formats F,F.. --sizes WxH,WxH.. (new caps every K\n"
          "          frames, each format with each size in turn)]\n"
          "  consume --socket PATH [--frames N (0: until EOS)] [--reconnect] [--record FILE]\n"
          "          [--hold-ms M] [--timeout-s T] [--max-in-flight M] [--connect-timeout MS]\n"
          "          [--reconnect-interval MS] [--stats-every-ms MS] [--system-memory]\n"
          "          [--sleep-us US (identity sleep-time: a slow consumer)]\n"
          "          [--io-mode import|copy] [--downstream 'ELEMENTS' (before appsink)]\n"
          "          [--flags-record FILE (offset and D/U/G flags per buffer)]\n"
          "  launch [-e] PIPELINE-DESCRIPTION (as gst-launch-1.0; prints STARTED, SENT-EOS, EOS, "
          "ERROR,\n"
          "         WARNING)\n"
          "  raw-hello --socket PATH [--version V] [--timeout-ms T]\n"
          "  fake-producer --socket PATH [--version V] [--timeout-ms T]\n");
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN);
  if (argc < 2) return usage();
  const std::string mode = argv[1];
  if (mode == "launch") {
    gst_init(&argc, &argv);
    const int code = run_launch(argc, argv);
    gst_deinit();
    return code;
  }
  const Args args(
      argc, argv,
      {"wait-for-consumer", "lockstep", "swap-uv", "reconnect", "system-memory", "mark-flags"});
  if (!args.bad().empty()) {
    fprintf(stderr, "%s\n", args.bad().c_str());
    return usage();
  }
  if (mode == "raw-hello") return run_raw_hello(args);
  if (mode == "fake-producer") return run_fake_producer(args);
  if (mode != "produce" && mode != "consume") return usage();
  gst_init(&argc, &argv);
  const int code = mode == "produce" ? run_produce(args) : run_consume(args);
  gst_deinit();
  return code;
}
