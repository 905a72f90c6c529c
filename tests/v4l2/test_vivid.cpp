// SPDX-License-Identifier: LGPL-2.1-or-later
// cudav4l2src against a real V4L2 driver: the kernel's vivid test driver, in a virtual machine
// that tests/v4l2/run-vivid-suite boots (vivid needs a kernel module, so it cannot run on the
// build host). Outside that machine every test skips.
//
// Devices (vivid n_devs=2 node_types=0x21,0x1): VIVID_DEVICE (/dev/video0) for capture and
// error injection, VIVID_DISCONNECT_DEVICE (/dev/video1) for the one-way "disconnect" test,
// VIVID_SDR_DEVICE (/dev/swradio0) as a V4L2 node that is not a video capture device.
//
// Every frame is compared sample by sample with vivid's colour bars (colour_bars.h), with the
// on-screen text switched off.
#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>
#include <linux/videodev2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "colour_bars.h"
#include "v4l2capture.h"

namespace cb = cipc_bayer;
namespace cv = cipc_v4l2;
using Clock = std::chrono::steady_clock;

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

const std::string kDevice = env_or("VIVID_DEVICE", "/dev/video0");
const std::string kDisconnectDevice = env_or("VIVID_DISCONNECT_DEVICE", "/dev/video1");
const std::string kSdrDevice = env_or("VIVID_SDR_DEVICE", "/dev/swradio0");

bool is_vivid(const std::string& path) {
  cv::Error e;
  auto d = cv::Device::open(path, &e);
  return d && d->driver() == "vivid";
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Sets a vivid control on `path` through a second file handle, as another application would.
void vivid_control(const std::string& path, const char* name, int value) {
  cv::Error e;
  auto d = cv::Device::open(path, &e);
  ASSERT_TRUE(d) << e.message;
  ASSERT_TRUE(d->set_control(name, value, &e)) << e.message << " " << e.detail;
}

// ---- Running a pipeline ---------------------------------------------------------------------

struct FrameRecord {
  GstClockTime pts = GST_CLOCK_TIME_NONE;
  guint64 offset = 0;
  bool discont = false;
  bool corrupted = false;
  size_t size = 0;
  bool has_meta = false;
  gint meta_stride = 0;
  GstVideoFormat meta_format = GST_VIDEO_FORMAT_UNKNOWN;
  bool from_offered_pool = false;
  cipc_test::BarCheck bars;
};

struct Run {
  std::vector<FrameRecord> frames;
  std::string error;  // first error: message, then debug
  std::string error_debug;
  GQuark error_domain = 0;
  gint error_code = 0;
  std::vector<std::string> warnings;
  Clock::time_point error_time;
  bool eos = false;
  bool timed_out = false;
  double seconds = 0;       // PLAYING to the end
  double stop_seconds = 0;  // set_state(NULL)
  GstStructure* stats = nullptr;

  Run() = default;
  Run(const Run&) = delete;
  ~Run() {
    if (stats) gst_structure_free(stats);
  }
  guint64 stat(const char* name) const {
    guint64 v = G_MAXUINT64;
    if (stats) gst_structure_get_uint64(stats, name, &v);
    return v;
  }
  std::string stat_string(const char* name) const {
    const char* v = stats ? gst_structure_get_string(stats, name) : nullptr;
    return v ? v : "";
  }
  bool stat_bool(const char* name) const {
    gboolean v = FALSE;
    if (stats) gst_structure_get_boolean(stats, name, &v);
    return v;
  }
  // Sequence gaps seen in buffer offsets (the driver's 32-bit sequence numbers), counted as the
  // element counts them: a repeated or backward number is a restart, not a drop.
  guint64 offset_gaps() const {
    guint64 gaps = 0;
    for (size_t i = 1; i < frames.size(); ++i) {
      const auto gap = static_cast<guint32>(frames[i].offset - frames[i - 1].offset - 1);
      if (gap < 0x80000000u) gaps += gap;
    }
    return gaps;
  }
};

struct Options {
  std::string launch;  // must name the source "src" and end in "appsink name=sink"
  const cb::BayerFormat* format = nullptr;  // for the colour-bar check; null: none
  uint32_t width = 0, height = 0;
  int timeout_ms = 60000;
  // Answer the ALLOCATION query ourselves (instead of appsink) with this pool and/or meta.
  bool answer_allocation = false;
  GstBufferPool* offer_pool = nullptr;
  guint offer_pool_size = 0;
  bool offer_meta = false;
  // Called with each frame's index; may return false to stop (pipeline to NULL at once).
  std::function<bool(size_t, GstElement* src)> on_frame;
  // Called when PLAYING was reached, before the first frame.
  std::function<void(GstElement* src)> on_playing;
};

GstPadProbeReturn answer_allocation(GstPad*, GstPadProbeInfo* info, gpointer data) {
  GstQuery* query = GST_PAD_PROBE_INFO_QUERY(info);
  if (GST_QUERY_TYPE(query) != GST_QUERY_ALLOCATION) return GST_PAD_PROBE_OK;
  const auto* o = static_cast<const Options*>(data);
  if (o->offer_pool) gst_query_add_allocation_pool(query, o->offer_pool, o->offer_pool_size, 2, 0);
  if (o->offer_meta) gst_query_add_allocation_meta(query, GST_VIDEO_META_API_TYPE, nullptr);
  return GST_PAD_PROBE_HANDLED;
}

void record(const Options& o, GstBuffer* buffer, FrameRecord* r) {
  r->pts = GST_BUFFER_PTS(buffer);
  r->offset = GST_BUFFER_OFFSET(buffer);
  r->discont = GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DISCONT);
  r->corrupted = GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_CORRUPTED);
  r->size = gst_buffer_get_size(buffer);
  r->from_offered_pool = o.offer_pool && buffer->pool == o.offer_pool;
  GstVideoMeta* meta = gst_buffer_get_video_meta(buffer);
  size_t stride = o.format ? cb::implicit_stride(*o.format, o.width) : 0;
  if (meta) {
    r->has_meta = true;
    r->meta_stride = meta->stride[0];
    r->meta_format = meta->format;
    stride = static_cast<size_t>(meta->stride[0]);
  }
  if (!o.format) return;
  GstMapInfo map;
  if (!gst_buffer_map(buffer, &map, GST_MAP_READ)) return;
  r->bars = cipc_test::check_colour_bars(map.data, map.size, stride, *o.format, o.width, o.height);
  gst_buffer_unmap(buffer, &map);
}

std::unique_ptr<Run> run_pipeline(Options o) {
  auto run = std::make_unique<Run>();
  GError* parse_error = nullptr;
  GstElement* pipeline = gst_parse_launch(o.launch.c_str(), &parse_error);
  if (!pipeline) {
    run->error = std::string("parse: ") + (parse_error ? parse_error->message : "?");
    g_clear_error(&parse_error);
    return run;
  }
  GstElement* src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  GstElement* sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  g_object_set(sink, "sync", FALSE, nullptr);
  if (o.answer_allocation || o.offer_pool || o.offer_meta) {
    GstPad* pad = gst_element_get_static_pad(sink, "sink");
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM, answer_allocation, &o, nullptr);
    gst_object_unref(pad);
  }
  GstBus* bus = gst_element_get_bus(pipeline);
  const auto start = Clock::now();
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  bool playing_seen = false;
  bool stop = false;
  // Takes what is on the bus; true once an error is there.
  auto read_bus = [&](GstClockTime wait) {
    while (GstMessage* msg = gst_bus_timed_pop(bus, wait)) {
      if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR && run->error.empty()) {
        GError* err = nullptr;
        gchar* debug = nullptr;
        gst_message_parse_error(msg, &err, &debug);
        run->error = err->message;
        run->error_domain = err->domain;
        run->error_code = err->code;
        run->error_debug = debug ? debug : "";
        run->error_time = Clock::now();
        g_error_free(err);
        g_free(debug);
        stop = true;
      } else if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_WARNING) {
        GError* err = nullptr;
        gst_message_parse_warning(msg, &err, nullptr);
        run->warnings.push_back(err->message);
        g_error_free(err);
      } else if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_STATE_CHANGED &&
                 GST_MESSAGE_SRC(msg) == GST_OBJECT(pipeline)) {
        GstState state;
        gst_message_parse_state_changed(msg, nullptr, &state, nullptr);
        if (state == GST_STATE_PLAYING && !playing_seen) {
          playing_seen = true;
          if (o.on_playing) o.on_playing(src);
        }
      }
      gst_message_unref(msg);
      wait = 0;
    }
    return stop;
  };
  while (!read_bus(0)) {
    if (seconds_since(start) * 1000 > o.timeout_ms) {
      run->timed_out = true;
      break;
    }
    GstSample* sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 20 * GST_MSECOND);
    if (!sample) {
      if (gst_app_sink_is_eos(GST_APP_SINK(sink))) {
        run->eos = true;
        break;
      }
      continue;
    }
    run->frames.emplace_back();
    record(o, gst_sample_get_buffer(sample), &run->frames.back());
    gst_sample_unref(sample);
    if (o.on_frame && !o.on_frame(run->frames.size() - 1, src)) break;
  }
  // basesrc posts a streaming error and then sends EOS, which appsink may report first.
  if (run->eos) read_bus(100 * GST_MSECOND);
  run->seconds = seconds_since(start);
  g_object_get(src, "stats", &run->stats, nullptr);
  const auto stop_start = Clock::now();
  gst_element_set_state(pipeline, GST_STATE_NULL);
  run->stop_seconds = seconds_since(stop_start);
  gst_object_unref(bus);
  gst_object_unref(src);
  gst_object_unref(sink);
  gst_object_unref(pipeline);
  return run;
}

std::string caps_string(const char* format, uint32_t w, uint32_t h, int fps) {
  std::string caps = std::string("video/x-bayer,format=") + format + ",width=" + std::to_string(w) +
                     ",height=" + std::to_string(h);
  if (fps > 0) caps += ",framerate=" + std::to_string(fps) + "/1";
  return caps;
}

// ---- Fixture --------------------------------------------------------------------------------

class Vivid : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }
  void SetUp() override {
    if (!is_vivid(kDevice))
      GTEST_SKIP() << kDevice << " is not a vivid device: run tests/v4l2/run-vivid-suite";
    // The colour bars without vivid's on-screen text; no injected drops left from a test.
    vivid_control(kDevice, "osd_text_mode", 2);
    vivid_control(kDevice, "percentage_of_dropped_buffers", 0);
  }
  void TearDown() override {
    if (!IsSkipped()) vivid_control(kDevice, "percentage_of_dropped_buffers", 0);
  }

  static std::string launch(const std::string& src_props, const std::string& caps) {
    return "cudav4l2src name=src device=" + kDevice + " " + src_props + " ! " + caps +
           " ! appsink name=sink";
  }
};

// Every frame arrived intact, with the colour bars, and the statistics agree.
void expect_frames_hold_bars(const Run& run, size_t expected_frames) {
  EXPECT_TRUE(run.error.empty()) << run.error << "\n" << run.error_debug;
  EXPECT_FALSE(run.timed_out);
  EXPECT_TRUE(run.eos);
  ASSERT_EQ(run.frames.size(), expected_frames);
  for (size_t i = 0; i < run.frames.size(); ++i) {
    const FrameRecord& f = run.frames[i];
    SCOPED_TRACE("frame " + std::to_string(i));
    EXPECT_GT(f.bars.checked, 0u);
    EXPECT_EQ(f.bars.mismatches, 0u) << f.bars.first_mismatch;
    EXPECT_FALSE(f.corrupted);
    EXPECT_TRUE(GST_CLOCK_TIME_IS_VALID(f.pts));
  }
  EXPECT_EQ(run.stat("frames"), expected_frames);
  EXPECT_EQ(run.stat("drops"), run.offset_gaps());  // drops are exactly the sequence gaps
  EXPECT_EQ(run.stat("corrupted"), 0u);
}

// As above, and sequence numbers and timestamps grow, DISCONT exactly after gaps, no copies.
void expect_clean_frames(const Run& run, size_t expected_frames) {
  expect_frames_hold_bars(run, expected_frames);
  if (run.frames.size() != expected_frames) return;
  for (size_t i = 0; i < run.frames.size(); ++i) {
    const FrameRecord& f = run.frames[i];
    SCOPED_TRACE("frame " + std::to_string(i));
    if (i > 0) {
      EXPECT_GT(f.offset, run.frames[i - 1].offset);  // sequence numbers grow
      EXPECT_GT(f.pts, run.frames[i - 1].pts);
      EXPECT_EQ(f.discont, f.offset != run.frames[i - 1].offset + 1);
    } else {
      EXPECT_TRUE(f.discont);
    }
  }
  EXPECT_EQ(run.stat("copies"), 0u);
}

// ---- Caps -----------------------------------------------------------------------------------

TEST_F(Vivid, DeviceModesBecomeCaps) {
  GstElement* src = gst_element_factory_make("cudav4l2src", nullptr);
  ASSERT_NE(src, nullptr);
  g_object_set(src, "device", kDevice.c_str(), nullptr);
  ASSERT_EQ(gst_element_set_state(src, GST_STATE_READY), GST_STATE_CHANGE_SUCCESS);
  GstPad* pad = gst_element_get_static_pad(src, "src");
  GstCaps* caps = gst_pad_query_caps(pad, nullptr);
  std::printf("vivid modes as caps: %u structures; the RG10 ones:\n", gst_caps_get_size(caps));
  for (guint i = 0; i < gst_caps_get_size(caps); ++i) {
    const GstStructure* s = gst_caps_get_structure(caps, i);
    if (g_strcmp0(gst_structure_get_string(s, "format"), "rggb10le") != 0) continue;
    gchar* text = gst_structure_to_string(s);
    std::printf("  %s\n", text);
    g_free(text);
  }
  struct Mode {
    const char* format;
    int w, h, fps;
  };
  for (const Mode m :
       {Mode{"rggb10le", 640, 480, 25}, Mode{"rggb10le", 1280, 720, 10},
        Mode{"rggb10le", 1920, 1080, 5}, Mode{"grbg10le", 640, 480, 25},
        Mode{"gbrg10le", 640, 480, 25}, Mode{"bggr10le", 640, 480, 25},
        Mode{"rggb12le", 1280, 720, 10}, Mode{"rggb", 320, 180, 60}, Mode{"bggr", 3840, 2160, 2}}) {
    GstCaps* one = gst_caps_from_string(caps_string(m.format, m.w, m.h, m.fps).c_str());
    EXPECT_TRUE(gst_caps_can_intersect(one, caps)) << gst_caps_to_string(one);
    gst_caps_unref(one);
  }
  // vivid's webcam input cannot do 1080p at 25 fps; the caps must say so.
  GstCaps* too_fast = gst_caps_from_string(caps_string("rggb10le", 1920, 1080, 25).c_str());
  EXPECT_FALSE(gst_caps_can_intersect(too_fast, caps));
  gst_caps_unref(too_fast);
  // No YUV or other non-Bayer structure leaks in.
  for (guint i = 0; i < gst_caps_get_size(caps); ++i)
    EXPECT_TRUE(gst_structure_has_name(gst_caps_get_structure(caps, i), "video/x-bayer"));
  gst_caps_unref(caps);
  gst_object_unref(pad);
  gst_element_set_state(src, GST_STATE_NULL);
  gst_object_unref(src);
}

TEST_F(Vivid, ClassEnumeratesRg10SizesAndRates) {
  cv::Error e;
  auto d = cv::Device::open(kDevice, &e);
  ASSERT_TRUE(d) << e.message;
  std::vector<cv::FormatDescription> formats;
  ASSERT_TRUE(d->enumerate_formats(&formats, &e)) << e.message;
  const cv::FormatDescription* rg10 = nullptr;
  for (const auto& f : formats)
    if (f.fourcc == V4L2_PIX_FMT_SRGGB10) rg10 = &f;
  ASSERT_NE(rg10, nullptr) << "vivid offers no RG10";
  std::printf("RG10 (%s):", rg10->description.c_str());
  bool has_1080p = false;
  for (const cv::FrameSize& s : rg10->sizes) {
    std::printf(" %ux%u@%u/%u", s.max_width, s.max_height,
                s.rates.discrete.empty() ? 0 : s.rates.discrete[0].num,
                s.rates.discrete.empty() ? 1 : s.rates.discrete[0].den);
    if (s.max_width == 1920 && s.max_height == 1080) {
      has_1080p = true;
      EXPECT_EQ(s.rates.kind, cv::FrameRates::Kind::kDiscrete);
      ASSERT_FALSE(s.rates.discrete.empty());
      EXPECT_EQ(s.rates.discrete.front(), (cv::Fraction{5, 1}));  // fastest first
      EXPECT_EQ(s.rates.discrete.back(), (cv::Fraction{1, 1}));
    }
  }
  std::printf("\n");
  EXPECT_TRUE(has_1080p);
  // Sizes are listed largest first.
  for (size_t i = 1; i < rg10->sizes.size(); ++i)
    EXPECT_GE(rg10->sizes[i - 1].max_width * rg10->sizes[i - 1].max_height,
              rg10->sizes[i].max_width * rg10->sizes[i].max_height);
}

// ---- Capture --------------------------------------------------------------------------------

struct Mode {
  const char* io;
  const char* format;
  uint32_t width, height;
  int fps;
  int frames;
};

class VividCapture : public Vivid, public ::testing::WithParamInterface<Mode> {};

TEST_P(VividCapture, FramesHoldTheColourBars) {
  const Mode m = GetParam();
  Options o;
  o.launch = launch(std::string("io-mode=") + m.io + " num-buffers=" + std::to_string(m.frames),
                    caps_string(m.format, m.width, m.height, m.fps));
  o.format = cb::bayer_format_from_caps_name(m.format);
  o.width = m.width;
  o.height = m.height;
  auto run = run_pipeline(o);
  expect_clean_frames(*run, static_cast<size_t>(m.frames));
  EXPECT_EQ(run->stat_string("io-mode"), m.io);
  EXPECT_FALSE(run->stat_bool("downstream-pool"));  // appsink offers no pool
  for (const FrameRecord& f : run->frames)
    EXPECT_EQ(f.size, cb::tight_stride(*o.format, m.width) * m.height);
  // Timestamps are the driver's: one frame time apart, give or take.
  if (run->frames.size() >= 3) {
    const double span = static_cast<double>(run->frames.back().pts - run->frames.front().pts);
    const double per_frame =
        span / static_cast<double>(run->frames.back().offset - run->frames.front().offset);
    EXPECT_NEAR(per_frame, 1e9 / m.fps, 0.25 * 1e9 / m.fps);
  }
  std::printf("%s %s %ux%u@%d: %zu frames, %" G_GUINT64_FORMAT " drops, %.2f s, stop %.3f s\n",
              m.io, m.format, m.width, m.height, m.fps, run->frames.size(), run->stat("drops"),
              run->seconds, run->stop_seconds);
}

std::string mode_name(const ::testing::TestParamInfo<Mode>& info) {
  const Mode& m = info.param;
  return std::string(m.io) + "_" + m.format + "_" + std::to_string(m.width) + "x" +
         std::to_string(m.height) + "_" + std::to_string(m.fps) + "fps";
}

INSTANTIATE_TEST_SUITE_P(Sizes, VividCapture,
                         ::testing::Values(Mode{"userptr", "rggb10le", 640, 480, 25, 20},
                                           Mode{"userptr", "rggb10le", 1280, 720, 10, 10},
                                           Mode{"userptr", "rggb10le", 1920, 1080, 5, 6},
                                           Mode{"mmap", "rggb10le", 640, 480, 25, 20},
                                           Mode{"mmap", "rggb10le", 1280, 720, 10, 10},
                                           Mode{"mmap", "rggb10le", 1920, 1080, 5, 6}),
                         mode_name);

INSTANTIATE_TEST_SUITE_P(Formats, VividCapture,
                         ::testing::Values(Mode{"userptr", "grbg10le", 640, 480, 25, 8},
                                           Mode{"userptr", "gbrg10le", 640, 480, 25, 8},
                                           Mode{"userptr", "bggr10le", 640, 480, 25, 8},
                                           Mode{"userptr", "rggb12le", 640, 480, 25, 8},
                                           Mode{"mmap", "rggb", 640, 480, 25, 8},
                                           Mode{"userptr", "bggr", 320, 180, 30, 8}),
                         mode_name);

// The path the debayer uses: downstream offers a pool, the driver writes into its buffers.
TEST_F(Vivid, UserptrWritesIntoDownstreamsPool) {
  const cb::BayerFormat& rg10 = *cb::bayer_format_from_caps_name("rggb10le");
  GstBufferPool* pool = gst_buffer_pool_new();
  const guint size = 640 * 480 * 2;
  GstStructure* config = gst_buffer_pool_get_config(pool);
  GstCaps* caps = gst_caps_from_string(caps_string("rggb10le", 640, 480, 25).c_str());
  gst_buffer_pool_config_set_params(config, caps, size, 2, 0);
  GstAllocationParams params;
  gst_allocation_params_init(&params);
  params.align = static_cast<gsize>(sysconf(_SC_PAGESIZE)) - 1;  // page-aligned: suitable
  gst_buffer_pool_config_set_allocator(config, nullptr, &params);
  ASSERT_TRUE(gst_buffer_pool_set_config(pool, config));

  Options o;
  o.launch = launch("num-buffers=12", caps_string("rggb10le", 640, 480, 25));
  o.format = &rg10;
  o.width = 640;
  o.height = 480;
  o.offer_pool = pool;
  o.offer_pool_size = size;
  o.offer_meta = true;
  auto run = run_pipeline(o);
  expect_clean_frames(*run, 12);
  EXPECT_EQ(run->stat_string("io-mode"), "userptr");
  EXPECT_TRUE(run->stat_bool("downstream-pool"));
  for (const FrameRecord& f : run->frames) {
    EXPECT_TRUE(f.from_offered_pool);  // no copy: the frame is downstream's own buffer
    EXPECT_TRUE(f.has_meta);
    EXPECT_EQ(f.meta_stride, 1280);  // vivid's bytesperline
    EXPECT_EQ(f.meta_format, GST_VIDEO_FORMAT_GRAY16_LE);
  }
  gst_caps_unref(caps);
  gst_object_unref(pool);
}

TEST_F(Vivid, UnsuitableDownstreamPoolIsNotUsed) {
  const cb::BayerFormat& rg10 = *cb::bayer_format_from_caps_name("rggb10le");
  GstBufferPool* pool = gst_buffer_pool_new();
  const guint size = 640 * 480 * 2;
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, nullptr, size, 2, 0);
  GstAllocationParams params;
  gst_allocation_params_init(&params);
  params.prefix = 16;  // data starts 16 bytes into the allocation: not page-aligned
  gst_buffer_pool_config_set_allocator(config, nullptr, &params);
  ASSERT_TRUE(gst_buffer_pool_set_config(pool, config));

  Options o;
  o.launch = launch("num-buffers=6", caps_string("rggb10le", 640, 480, 25));
  o.format = &rg10;
  o.width = 640;
  o.height = 480;
  o.offer_pool = pool;
  o.offer_pool_size = size;
  auto run = run_pipeline(o);
  expect_clean_frames(*run, 6);
  EXPECT_EQ(run->stat_string("io-mode"), "userptr");
  EXPECT_FALSE(run->stat_bool("downstream-pool"));
  for (const FrameRecord& f : run->frames) EXPECT_FALSE(f.from_offered_pool);
  gst_object_unref(pool);
}

TEST_F(Vivid, DropsAreCountedFromSequenceGaps) {
  vivid_control(kDevice, "percentage_of_dropped_buffers", 50);
  const cb::BayerFormat& rggb = *cb::bayer_format_from_caps_name("rggb");
  Options o;
  o.launch = launch("num-buffers=16", caps_string("rggb", 320, 180, 30));
  o.format = &rggb;
  o.width = 320;
  o.height = 180;
  auto run = run_pipeline(o);
  ASSERT_TRUE(run->error.empty()) << run->error;
  ASSERT_EQ(run->frames.size(), 16u);
  EXPECT_GT(run->stat("drops"), 0u);
  EXPECT_EQ(run->stat("drops"), run->offset_gaps());
  size_t discont = 0;
  for (size_t i = 1; i < run->frames.size(); ++i) {
    const bool gap = run->frames[i].offset != run->frames[i - 1].offset + 1;
    EXPECT_EQ(run->frames[i].discont, gap) << "frame " << i;
    discont += gap;
  }
  std::printf("16 frames over %" G_GUINT64_FORMAT " sequence numbers: %" G_GUINT64_FORMAT
              " drops counted, %zu gaps flagged DISCONT\n",
              run->frames.back().offset - run->frames.front().offset + 1, run->stat("drops"),
              discont);
}

TEST_F(Vivid, LatencyIsOneFrame) {
  GstClockTime min = 0, max = 0;
  gboolean live = FALSE;
  bool answered = false;
  Options o;
  o.launch = launch("num-buffers=3", caps_string("rggb10le", 640, 480, 25));
  o.on_frame = [&](size_t, GstElement* src) {
    if (answered) return true;
    GstQuery* q = gst_query_new_latency();
    answered = gst_element_query(src, q);
    gst_query_parse_latency(q, &live, &min, &max);
    gst_query_unref(q);
    return true;
  };
  auto run = run_pipeline(o);
  EXPECT_TRUE(run->error.empty()) << run->error;
  ASSERT_TRUE(answered);
  EXPECT_TRUE(live);
  EXPECT_EQ(min, 40 * GST_MSECOND);      // one frame at 25 fps
  EXPECT_EQ(max, 4 * 40 * GST_MSECOND);  // the driver's four buffers
}

// vivid's HDMI input scales to any even size: at 642x480 the driver's rows are 1284 bytes,
// GStreamer's implicit Bayer stride is GST_ROUND_UP_4 (642) * 2 = 1288.
class VividOddWidth : public Vivid {
 protected:
  void SetUp() override {
    Vivid::SetUp();
    if (IsSkipped()) return;
    select_input(kHdmiInput);
  }
  void TearDown() override {
    if (!IsSkipped()) select_input(0);  // back to the webcam input for the other tests
    Vivid::TearDown();
  }
  static void select_input(int index) {
    cv::Error e;
    auto d = cv::Device::open(kDevice, &e);
    ASSERT_TRUE(d) << e.message;
    ASSERT_TRUE(d->set_input(static_cast<uint32_t>(index), &e)) << e.message << " " << e.detail;
  }
  static constexpr int kHdmiInput = 3;
  static Options odd_width_options(const char* io, int frames) {
    Options o;
    o.launch = launch(std::string("io-mode=") + io + " num-buffers=" + std::to_string(frames),
                      caps_string("rggb10le", 642, 480, 0));
    o.format = cb::bayer_format_from_caps_name("rggb10le");
    o.width = 642;
    o.height = 480;
    o.answer_allocation = true;
    return o;
  }
};

TEST_F(VividOddWidth, StrideGoesIntoVideoMetaWithoutACopy) {
  for (const char* io : {"userptr", "mmap"}) {
    SCOPED_TRACE(io);
    Options o = odd_width_options(io, 6);
    o.offer_meta = true;
    auto run = run_pipeline(o);
    // At 60 fps under load vivid has been seen to repeat a sequence number: not checked here.
    expect_frames_hold_bars(*run, 6);
    EXPECT_EQ(run->stat("copies"), 0u);
    for (const FrameRecord& f : run->frames) {
      EXPECT_TRUE(f.has_meta);
      EXPECT_EQ(f.meta_stride, 1284);
      EXPECT_EQ(f.size, 1284u * 480);
    }
  }
}

TEST_F(VividOddWidth, WithoutVideoMetaFramesAreRepackedAndCounted) {
  for (const char* io : {"userptr", "mmap"}) {
    SCOPED_TRACE(io);
    Options o = odd_width_options(io, 6);  // downstream offers neither pool nor meta
    auto run = run_pipeline(o);
    ASSERT_TRUE(run->error.empty()) << run->error;
    ASSERT_EQ(run->frames.size(), 6u);
    for (const FrameRecord& f : run->frames) {
      EXPECT_FALSE(f.has_meta);
      EXPECT_EQ(f.size, 1288u * 480);  // rows at the stride GStreamer assumes
      EXPECT_EQ(f.bars.mismatches, 0u) << f.bars.first_mismatch;
      EXPECT_GT(f.bars.checked, 0u);
    }
    EXPECT_EQ(run->stat("copies"), 6u);  // never silent
  }
}

// ---- The V4L2 class alone -------------------------------------------------------------------

void direct_capture(cv::Memory memory) {
  const cb::BayerFormat& rg10 = *cb::bayer_format_from_caps_name("rggb10le");
  cv::Error e;
  auto d = cv::Device::open(kDevice, &e);
  ASSERT_TRUE(d) << e.message;
  cv::Format f;
  ASSERT_TRUE(d->set_format(V4L2_PIX_FMT_SRGGB10, 640, 480, &f, &e)) << e.message;
  EXPECT_EQ(f.bytes_per_line, 1280u);
  EXPECT_GE(f.size_image, 1280u * 480);
  cv::Fraction rate;
  ASSERT_TRUE(d->set_framerate({25, 1}, &rate, &e)) << e.message;
  EXPECT_EQ(rate, (cv::Fraction{25, 1}));
  uint32_t count = 3;
  ASSERT_TRUE(d->request_buffers(memory, &count, &e)) << e.message;
  std::vector<void*> userptrs;
  std::vector<std::unique_ptr<cv::Mapping>> maps;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t length = (f.size_image + page - 1) / page * page;
  for (uint32_t i = 0; i < count; ++i) {
    if (memory == cv::Memory::kUserptr) {
      void* p = nullptr;
      ASSERT_EQ(posix_memalign(&p, page, length), 0);
      std::memset(p, 0, length);
      userptrs.push_back(p);
      ASSERT_TRUE(d->queue_userptr(i, p, length, &e)) << e.message;
    } else {
      maps.push_back(d->map_buffer(i, &e));
      ASSERT_TRUE(maps.back()) << e.message;
      ASSERT_TRUE(d->queue_mmap(i, &e)) << e.message;
    }
  }
  ASSERT_TRUE(d->stream_on(&e)) << e.message;
  uint32_t last = 0;
  for (int n = 0; n < 6; ++n) {
    ASSERT_EQ(d->wait_for_frame(5000, &e), cv::WaitResult::kReady) << e.message;
    cv::Frame frame;
    ASSERT_TRUE(d->dequeue(memory, &frame, &e)) << e.message;
    EXPECT_TRUE(frame.monotonic_timestamp);
    EXPECT_EQ(frame.bytes_used, 1280u * 480);
    if (n > 0) {
      EXPECT_GT(frame.sequence, last);
    }
    last = frame.sequence;
    const uint8_t* data = memory == cv::Memory::kUserptr
                              ? static_cast<const uint8_t*>(userptrs[frame.index])
                              : static_cast<const uint8_t*>(maps[frame.index]->data());
    const auto bars = cipc_test::check_colour_bars(data, 1280u * 480, 1280, rg10, 640, 480);
    EXPECT_EQ(bars.mismatches, 0u) << bars.first_mismatch;
    if (memory == cv::Memory::kUserptr)
      ASSERT_TRUE(d->queue_userptr(frame.index, userptrs[frame.index], length, &e));
    else
      ASSERT_TRUE(d->queue_mmap(frame.index, &e));
  }
  // interrupt() wakes a waiter at once.
  d->interrupt();
  EXPECT_EQ(d->wait_for_frame(5000, &e), cv::WaitResult::kInterrupted);
  d->clear_interrupt();
  EXPECT_TRUE(d->stream_off(&e));
  EXPECT_TRUE(d->release_buffers(memory, &e));
  maps.clear();
  for (void* p : userptrs) free(p);
}

TEST_F(Vivid, ClassCapturesIntoUserPointers) {
  direct_capture(cv::Memory::kUserptr);
}
TEST_F(Vivid, ClassCapturesIntoMappedDriverBuffers) {
  direct_capture(cv::Memory::kMmap);
}

// ---- Failures: clear errors, never a hang ---------------------------------------------------

void expect_error(const Run& run, const std::vector<std::string>& phrases) {
  EXPECT_FALSE(run.timed_out) << "no error within the timeout";
  ASSERT_FALSE(run.error.empty()) << "expected an error";
  for (const std::string& p : phrases)
    EXPECT_NE(run.error.find(p), std::string::npos) << "'" << p << "' not in: " << run.error;
  EXPECT_LT(run.stop_seconds, 5.0);
  std::printf("error: %s\n  debug: %s\n", run.error.c_str(), run.error_debug.c_str());
}

TEST_F(Vivid, UnplugIsAClearErrorNotAHang) {
  if (!is_vivid(kDisconnectDevice)) GTEST_SKIP() << "no second vivid device";
  vivid_control(kDisconnectDevice, "osd_text_mode", 2);
  cv::Error e;
  // The control handle stays open across the disconnect, as an unplugged camera's users would.
  auto control = cv::Device::open(kDisconnectDevice, &e);
  ASSERT_TRUE(control) << e.message;
  Options o;
  o.launch = "cudav4l2src name=src device=" + kDisconnectDevice + " ! " +
             caps_string("rggb10le", 640, 480, 25) + " ! appsink name=sink";
  o.timeout_ms = 20000;
  Clock::time_point pressed;
  o.on_frame = [&](size_t index, GstElement*) {
    if (index == 2) {
      cv::Error ce;
      EXPECT_TRUE(control->set_control("disconnect", 1, &ce)) << ce.message;
      pressed = Clock::now();
    }
    return true;
  };
  auto run = run_pipeline(o);
  expect_error(*run, {"'" + kDisconnectDevice + "'", "disconnected"});
  EXPECT_EQ(run->error_domain, GST_RESOURCE_ERROR);
  EXPECT_EQ(run->error_code, GST_RESOURCE_ERROR_READ);
  EXPECT_GE(run->frames.size(), 3u);
  const double reaction = std::chrono::duration<double>(run->error_time - pressed).count();
  EXPECT_LT(reaction, 5.0);
  std::printf("error %.3f s after the disconnect\n", reaction);
}

TEST_F(Vivid, FatalStreamingErrorIsAClearError) {
  Options o;
  o.launch = launch("", caps_string("rggb10le", 640, 480, 25));
  o.timeout_ms = 20000;
  o.on_frame = [&](size_t index, GstElement*) {
    if (index == 2) vivid_control(kDevice, "inject_fatal_streaming_error", 1);
    return true;
  };
  auto run = run_pipeline(o);
  expect_error(*run, {"'" + kDevice + "'", "stopped capturing with an error"});
  EXPECT_EQ(run->error_code, GST_RESOURCE_ERROR_READ);
}

TEST_F(Vivid, BusyDeviceIsAClearError) {
  cv::Error e;
  auto holder = cv::Device::open(kDevice, &e);
  ASSERT_TRUE(holder) << e.message;
  cv::Format f;
  ASSERT_TRUE(holder->set_format(V4L2_PIX_FMT_SRGGB10, 640, 480, &f, &e)) << e.message;
  uint32_t count = 2;
  ASSERT_TRUE(holder->request_buffers(cv::Memory::kMmap, &count, &e)) << e.message;
  Options o;
  o.launch = launch("", caps_string("rggb10le", 1280, 720, 10));
  o.timeout_ms = 20000;
  auto run = run_pipeline(o);
  expect_error(*run, {"'" + kDevice + "'", "busy"});
  EXPECT_EQ(run->error_code, GST_RESOURCE_ERROR_BUSY);
  holder->release_buffers(cv::Memory::kMmap, &e);
}

TEST_F(Vivid, StreamonFailureIsAClearError) {
  vivid_control(kDevice, "inject_vidioc_streamon_error", 1);
  Options o;
  o.launch = launch("", caps_string("rggb10le", 640, 480, 25));
  o.timeout_ms = 20000;
  auto run = run_pipeline(o);
  expect_error(*run, {"'" + kDevice + "'", "could not start streaming"});
}

TEST_F(Vivid, RefusedBufferIsAClearError) {
  vivid_control(kDevice, "inject_vidioc_qbuf_error", 1);
  Options o;
  o.launch = launch("io-mode=mmap", caps_string("rggb10le", 640, 480, 25));
  o.timeout_ms = 20000;
  auto run = run_pipeline(o);
  expect_error(*run, {"'" + kDevice + "'", "refused a capture buffer"});
}

// vivid's REQBUFS error injection stands in for a driver without USERPTR support.
TEST_F(Vivid, AutoFallsBackToMmapWithOneWarning) {
  vivid_control(kDevice, "inject_vidioc_reqbufs_error", 1);
  const cb::BayerFormat& rg10 = *cb::bayer_format_from_caps_name("rggb10le");
  Options o;
  o.launch = launch("io-mode=auto num-buffers=6", caps_string("rggb10le", 640, 480, 25));
  o.format = &rg10;
  o.width = 640;
  o.height = 480;
  auto run = run_pipeline(o);
  expect_clean_frames(*run, 6);
  EXPECT_EQ(run->stat_string("io-mode"), "mmap");
  ASSERT_EQ(run->warnings.size(), 1u);
  EXPECT_NE(run->warnings[0].find("does not accept user-pointer buffers"), std::string::npos)
      << run->warnings[0];
}

TEST_F(Vivid, ExplicitUserptrDoesNotFallBack) {
  vivid_control(kDevice, "inject_vidioc_reqbufs_error", 1);
  Options o;
  o.launch = launch("io-mode=userptr num-buffers=3", caps_string("rggb10le", 640, 480, 25));
  o.timeout_ms = 20000;
  auto run = run_pipeline(o);
  expect_error(*run, {"'" + kDevice + "'", "USERPTR"});
}

TEST_F(Vivid, SilentDeviceTimesOut) {
  vivid_control(kDevice, "percentage_of_dropped_buffers", 100);  // no frame ever completes
  Options o;
  o.launch = launch("frame-timeout=1000", caps_string("rggb10le", 640, 480, 25));
  o.timeout_ms = 20000;
  auto run = run_pipeline(o);
  expect_error(*run, {"'" + kDevice + "'", "delivered no frame for 1000 ms"});
  EXPECT_LT(run->seconds, 10.0);
}

// unlock(): stopping a pipeline whose source waits for a frame that never comes returns at once.
TEST_F(Vivid, StopWhileWaitingForAFrameReturnsPromptly) {
  vivid_control(kDevice, "percentage_of_dropped_buffers", 100);
  Options o;
  o.launch = launch("frame-timeout=0", caps_string("rggb10le", 640, 480, 25));
  o.timeout_ms = 2000;  // then set_state(NULL) while create() waits in poll()
  auto run = run_pipeline(o);
  EXPECT_TRUE(run->timed_out);
  EXPECT_TRUE(run->frames.empty());
  EXPECT_TRUE(run->error.empty()) << run->error;
  EXPECT_LT(run->stop_seconds, 2.0);
  std::printf("stopped in %.3f s while waiting\n", run->stop_seconds);
}

TEST_F(Vivid, MissingDeviceNodeIsAClearError) {
  Options o;
  o.launch = "cudav4l2src name=src device=/dev/video-cudaipc-missing ! appsink name=sink";
  o.timeout_ms = 10000;
  auto run = run_pipeline(o);
  expect_error(*run, {"'/dev/video-cudaipc-missing'", "does not exist"});
  EXPECT_EQ(run->error_code, GST_RESOURCE_ERROR_NOT_FOUND);
}

TEST_F(Vivid, NonCaptureV4l2NodeIsAClearError) {
  struct stat st {};
  if (stat(kSdrDevice.c_str(), &st) != 0) GTEST_SKIP() << "no " << kSdrDevice;
  Options o;
  o.launch = "cudav4l2src name=src device=" + kSdrDevice + " ! appsink name=sink";
  o.timeout_ms = 10000;
  auto run = run_pipeline(o);
  expect_error(*run,
               {"'" + kSdrDevice + "'", "is not a video capture device", "software-defined-radio"});
}

TEST_F(Vivid, UnsupportedModeNamesTheDevice) {
  Options o;
  o.launch = launch("", caps_string("rggb10le", 1000, 500, 0));  // not a vivid webcam size
  o.timeout_ms = 10000;
  auto run = run_pipeline(o);
  expect_error(*run, {"'" + kDevice + "'", "cannot deliver a format"});
  EXPECT_EQ(run->error_domain, GST_STREAM_ERROR);
}

// ---- gst-launch, as a user runs it on a machine without a GPU -------------------------------

TEST_F(Vivid, GstLaunchToFilesink) {
  // The guest's writable scratch space (/run, a tmpfs; the host's /tmp is read-only in there).
  const char* scratch = g_getenv("TMPDIR");
  const std::string path = std::string(scratch ? scratch : "/tmp") + "/cudav4l2src-vivid.raw";
  unlink(path.c_str());
  gchar* out = nullptr;
  gchar* err = nullptr;
  gint status = -1;
  const std::string device = "device=" + kDevice;
  const std::string location = "location=" + path;
  const gchar* argv[] = {"gst-launch-1.0",
                         "-q",
                         "cudav4l2src",
                         device.c_str(),
                         "num-buffers=5",
                         "!",
                         "video/x-bayer,format=rggb10le,width=640,height=480",
                         "!",
                         "filesink",
                         location.c_str(),
                         nullptr};
  GError* error = nullptr;
  ASSERT_TRUE(g_spawn_sync(nullptr, const_cast<gchar**>(argv), nullptr, G_SPAWN_SEARCH_PATH,
                           nullptr, nullptr, &out, &err, &status, &error))
      << (error ? error->message : "");
  EXPECT_TRUE(g_spawn_check_wait_status(status, nullptr)) << out << err;
  g_free(out);
  g_free(err);
  gchar* contents = nullptr;
  gsize length = 0;
  ASSERT_TRUE(g_file_get_contents(path.c_str(), &contents, &length, nullptr));
  const size_t frame = 640 * 480 * 2;
  EXPECT_EQ(length, 5 * frame);
  const cb::BayerFormat& rg10 = *cb::bayer_format_from_caps_name("rggb10le");
  for (size_t i = 0; i + frame <= length; i += frame) {
    const auto bars = cipc_test::check_colour_bars(reinterpret_cast<const uint8_t*>(contents) + i,
                                                   frame, 1280, rg10, 640, 480);
    EXPECT_EQ(bars.mismatches, 0u) << "frame " << i / frame << ": " << bars.first_mismatch;
  }
  g_free(contents);
  unlink(path.c_str());
}

}  // namespace
