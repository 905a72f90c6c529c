// SPDX-License-Identifier: LGPL-2.1-or-later
// rg10tobgra as GStreamer sees it. Everywhere: registration, properties, caps, and - without a
// GPU - the error a user gets. On a GPU (tests/gpu/run-on-gpu; skipped elsewhere, saying why):
// output against the CPU reference (cuda/debayer.h) for foreign input, the pinned pool read in
// place behind bgratorg10, and the camera chain into cudasink-ipc's CUDA slots received by
// cudasrc-ipc - frames equal to the reference, no copies counted anywhere.
#include <gst/app/gstappsink.h>
#include <gst/base/gstbasetransform.h>
#include <gst/check/gstharness.h>
#include <gst/gst.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cuda_api.h"
#include "cuda_test_util.h"
#include "debayer.h"
#include "mosaic.h"
#include "process.h"
#include "replay_scene.h"

namespace cb = cipc_bayer;
namespace cc = cipc_cuda;

namespace {

class Rg10ToBgra : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }
};

#define NEED_GPU()                                                          \
  do {                                                                      \
    const std::string why_ = cipc_test::cuda_missing_reason();              \
    if (!why_.empty()) GTEST_SKIP() << "needs a CUDA GPU (" << why_ << ")"; \
  } while (0)

std::vector<uint8_t> random_words(int width, int height, size_t pitch, uint32_t seed) {
  std::vector<uint8_t> v(pitch * static_cast<size_t>(height), 0);
  uint32_t x = seed * 2654435761u + 1u;
  for (int r = 0; r < height; ++r)
    for (int c = 0; c < width; ++c) {
      x = x * 1664525u + 1013904223u;
      const uint16_t w = static_cast<uint16_t>((x >> 12) & 0x3FF);
      v[r * pitch + 2 * c] = static_cast<uint8_t>(w & 0xFF);
      v[r * pitch + 2 * c + 1] = static_cast<uint8_t>(w >> 8);
    }
  return v;
}

int max_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 256;
  int worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

GstStructure* stats_of(GstElement* e) {
  GstStructure* s = nullptr;
  g_object_get(e, "stats", &s, nullptr);
  return s;
}

guint64 stat(GstElement* e, const char* field) {
  GstStructure* s = stats_of(e);
  guint64 v = G_MAXUINT64;
  if (s) gst_structure_get_uint64(s, field, &v);
  if (s) gst_structure_free(s);
  return v;
}

double stat_double(GstElement* e, const char* field) {
  GstStructure* s = stats_of(e);
  gdouble v = -1;
  if (s) gst_structure_get_double(s, field, &v);
  if (s) gst_structure_free(s);
  return v;
}

std::string stat_string(GstElement* e, const char* field) {
  GstStructure* s = stats_of(e);
  const char* v = s ? gst_structure_get_string(s, field) : nullptr;
  std::string result = v ? v : "(missing)";
  if (s) gst_structure_free(s);
  return result;
}

// The first error on a pipeline's bus, for failure messages.
std::string bus_error(GstElement* pipeline) {
  GstBus* bus = gst_element_get_bus(pipeline);
  GstMessage* msg = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
  std::string text = "no error on the consumer's bus";
  if (msg) {
    GError* err = nullptr;
    gchar* debug = nullptr;
    gst_message_parse_error(msg, &err, &debug);
    text = std::string("consumer error: ") + err->message + " (" + (debug ? debug : "") + ")";
    g_error_free(err);
    g_free(debug);
    gst_message_unref(msg);
  }
  gst_object_unref(bus);
  return text;
}

std::vector<uint8_t> buffer_bytes(GstBuffer* b) {
  std::vector<uint8_t> v(gst_buffer_get_size(b));
  gst_buffer_extract(b, 0, v.data(), v.size());
  return v;
}

TEST_F(Rg10ToBgra, IsRegisteredWithDefaultsAndRanges) {
  GstElement* e = gst_element_factory_make("rg10tobgra", nullptr);
  ASSERT_NE(e, nullptr) << "plugin not found: is GST_PLUGIN_PATH set?";
  EXPECT_STREQ(G_OBJECT_TYPE_NAME(e), "GstRg10ToBgra");
  guint black = 99;
  gdouble gain = 0, gamma = 0;
  gint device = 0;
  g_object_get(e, "black-level", &black, "gain", &gain, "gamma", &gamma, "cuda-device-id", &device,
               nullptr);
  GObjectClass* klass = G_OBJECT_GET_CLASS(e);
  auto enum_default = [&](const char* name) {
    auto* spec = G_PARAM_SPEC_ENUM(g_object_class_find_property(klass, name));
    return std::string(g_enum_get_value(spec->enum_class, spec->default_value)->value_nick);
  };
  EXPECT_EQ(enum_default("bit-alignment"), "lsb");
  EXPECT_EQ(enum_default("method"), "mhc");
  EXPECT_EQ(enum_default("wb-mode"), "fixed");
  EXPECT_EQ(enum_default("transfer"), "srgb");
  EXPECT_EQ(enum_default("precision"), "fast");
  EXPECT_EQ(enum_default("input-mode"), "auto");
  EXPECT_EQ(black, 0u);
  EXPECT_EQ(gain, 1.0);
  EXPECT_EQ(gamma, 2.2);
  EXPECT_EQ(device, -1);
  EXPECT_EQ(G_PARAM_SPEC_UINT(g_object_class_find_property(klass, "black-level"))->maximum, 1022u);
  for (const char* p : {"bit-alignment", "black-level", "wb-mode", "wb-red", "wb-green", "wb-blue",
                        "method", "gain", "transfer", "gamma", "precision", "cuda-device-id",
                        "input-pool-size", "input-mode", "stats"}) {
    GParamSpec* spec = g_object_class_find_property(klass, p);
    ASSERT_NE(spec, nullptr) << p;
    EXPECT_GT(std::string(g_param_spec_get_blurb(spec)).size(), 20u) << p;
  }
  gst_object_unref(e);
}

TEST_F(Rg10ToBgra, CapsPreferCudaMemoryAndKeepSizeAndRate) {
  GstElement* e = gst_element_factory_make("rg10tobgra", nullptr);
  ASSERT_NE(e, nullptr);
  GstPad* sink = gst_element_get_static_pad(e, "sink");
  GstPad* src = gst_element_get_static_pad(e, "src");
  GstCaps* in =
      gst_caps_from_string("video/x-bayer,format=grbg10le,width=640,height=480,framerate=30/1");
  EXPECT_TRUE(gst_pad_query_accept_caps(sink, in));
  GstCaps* bayer8 = gst_caps_from_string("video/x-bayer,format=rggb,width=640,height=480");
  EXPECT_FALSE(gst_pad_query_accept_caps(sink, bayer8));
  GstCaps* out = GST_BASE_TRANSFORM_GET_CLASS(e)->transform_caps(GST_BASE_TRANSFORM(e),
                                                                 GST_PAD_SINK, in, nullptr);
  ASSERT_EQ(gst_caps_get_size(out), 2u);
  EXPECT_TRUE(gst_caps_features_contains(gst_caps_get_features(out, 0), "memory:CUDAIPCMemory"));
  gchar* text = gst_caps_to_string(out);
  EXPECT_NE(std::string(text).find("width=(int)640"), std::string::npos) << text;
  EXPECT_NE(std::string(text).find("framerate=(fraction)30/1"), std::string::npos) << text;
  EXPECT_NE(std::string(text).find("BGRA"), std::string::npos) << text;
  g_free(text);
  gst_caps_unref(out);
  gst_caps_unref(bayer8);
  gst_caps_unref(in);
  gst_object_unref(sink);
  gst_object_unref(src);
  gst_object_unref(e);
}

TEST_F(Rg10ToBgra, WithoutAGpuStartingFailsWithAClearError) {
  if (cipc_test::cuda_missing_reason().empty()) GTEST_SKIP() << "this machine has a GPU";
  GError* err = nullptr;
  GstElement* pipeline =
      gst_parse_launch("videotestsrc num-buffers=1 ! bgratorg10 ! rg10tobgra ! fakesink", &err);
  ASSERT_NE(pipeline, nullptr) << (err ? err->message : "");
  EXPECT_EQ(gst_element_set_state(pipeline, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  GstBus* bus = gst_element_get_bus(pipeline);
  GstMessage* msg = gst_bus_timed_pop_filtered(bus, GST_SECOND, GST_MESSAGE_ERROR);
  ASSERT_NE(msg, nullptr);
  GError* gerr = nullptr;
  gst_message_parse_error(msg, &gerr, nullptr);
  EXPECT_NE(std::string(gerr->message).find("needs a CUDA GPU"), std::string::npos)
      << gerr->message;
  g_error_free(gerr);
  gst_message_unref(msg);
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
}

// ---------------------------------------------------------------------------------------------
// GPU

TEST_F(Rg10ToBgra, ForeignInputIsCopiedCountedAndMatchesTheReference) {
  NEED_GPU();
  constexpr int kW = 643, kH = 101;  // odd sizes; default input stride ROUND_UP_4(643) * 2
  const size_t in_pitch = 644 * 2;
  GstHarness* h = gst_harness_new("rg10tobgra");
  g_object_set(h->element, "black-level", 50u, "wb-red", 1.8, "wb-blue", 1.4, "gain", 1.2, nullptr);
  gst_util_set_object_arg(G_OBJECT(h->element), "bit-alignment", "lsb");
  gst_util_set_object_arg(G_OBJECT(h->element), "method", "mhc");
  gst_harness_set_src_caps_str(h,
                               "video/x-bayer,format=gbrg10le,width=643,height=101,framerate=30/1");
  gst_harness_set_sink_caps_str(h, "video/x-raw,format=BGRA,width=643,height=101,framerate=30/1");
  const std::vector<uint8_t> raw = random_words(kW, kH, in_pitch, 5);
  ASSERT_EQ(gst_harness_push(h, gst_buffer_new_memdup(raw.data(), raw.size())), GST_FLOW_OK);
  GstBuffer* out = gst_harness_pull(h);
  ASSERT_NE(out, nullptr);
  cc::DebayerParams p;
  p.phase = cb::CfaOrder::kGBRG;
  p.black_level = 50;
  p.wb_red = 1.8f;
  p.wb_blue = 1.4f;
  p.gain = 1.2f;
  std::vector<uint8_t> expected(kW * 4 * kH);
  cc::debayer_cpu(raw.data(), in_pitch, expected.data(), kW * 4, kW, kH, p);
  EXPECT_LE(max_difference(buffer_bytes(out), expected), 1);
  gst_buffer_unref(out);
  EXPECT_EQ(stat(h->element, "input-copies"), 1u);
  EXPECT_EQ(stat(h->element, "downloads"), 1u);
  gst_harness_teardown(h);
}

// The first frames of videotestsrc, as BGRx.
std::vector<std::vector<uint8_t>> test_frames(const char* pattern, int w, int h, int n) {
  std::vector<std::vector<uint8_t>> frames;
  const std::string desc = std::string("videotestsrc pattern=") + pattern +
                           " num-buffers=" + std::to_string(n) +
                           " ! video/x-raw,format=BGRx,width=" + std::to_string(w) +
                           ",height=" + std::to_string(h) + " ! appsink name=out sync=false";
  GstElement* p = gst_parse_launch(desc.c_str(), nullptr);
  GstElement* sink = gst_bin_get_by_name(GST_BIN(p), "out");
  gst_element_set_state(p, GST_STATE_PLAYING);
  while (GstSample* s = gst_app_sink_pull_sample(GST_APP_SINK(sink))) {
    frames.push_back(buffer_bytes(gst_sample_get_buffer(s)));
    gst_sample_unref(s);
  }
  gst_element_set_state(p, GST_STATE_NULL);
  gst_object_unref(sink);
  gst_object_unref(p);
  return frames;
}

// What the chain bgratorg10 (defaults, rggb10le) ! rg10tobgra (defaults) makes of a frame.
std::vector<uint8_t> expected_chain(const std::vector<uint8_t>& bgrx, int w, int h) {
  const size_t raw_pitch = static_cast<size_t>(GST_ROUND_UP_4(w)) * 2;
  std::vector<uint8_t> raw(raw_pitch * h, 0), out(static_cast<size_t>(w) * 4 * h);
  cb::mosaic_cpu(bgrx.data(), static_cast<size_t>(w) * 4, static_cast<int>(cb::MosaicInput::kBgra),
                 raw.data(), raw_pitch, w, h, cb::MosaicParams{});
  cc::debayer_cpu(raw.data(), raw_pitch, out.data(), static_cast<size_t>(w) * 4, w, h,
                  cc::DebayerParams{});
  return out;
}

// What a debayer chain delivered: frames at its appsink, and rg10tobgra's own counts.
struct ChainRun {
  int received = 0;
  guint64 debayered = 0;
  guint64 input_copies = 0;
  guint64 input_uploads = 0;
  std::string input_path;
  double in_place_us = 0, upload_us = 0;
};

// Runs `launch`, a chain with `rg10tobgra name=debayer` and an `appsink name=out` of BGRA, to its
// end; frame n must equal expected(n) within 1 code.
ChainRun run_debayer_chain(const char* launch,
                           const std::function<std::vector<uint8_t>(int)>& expected, int w, int h) {
  ChainRun run;
  GstElement* p = gst_parse_launch(launch, nullptr);
  EXPECT_NE(p, nullptr) << launch;
  if (!p) return run;
  GstElement* debayer = gst_bin_get_by_name(GST_BIN(p), "debayer");
  GstElement* sink = gst_bin_get_by_name(GST_BIN(p), "out");
  gst_element_set_state(p, GST_STATE_PLAYING);
  while (GstSample* s = gst_app_sink_pull_sample(GST_APP_SINK(sink))) {
    EXPECT_LE(max_difference(buffer_bytes(gst_sample_get_buffer(s)),
                             expected_chain(expected(run.received), w, h)),
              1)
        << "frame " << run.received;
    ++run.received;
    gst_sample_unref(s);
  }
  run.debayered = stat(debayer, "frames");
  run.input_copies = stat(debayer, "input-copies");
  run.input_uploads = stat(debayer, "input-uploads");
  run.input_path = stat_string(debayer, "input-path");
  run.in_place_us = stat_double(debayer, "in-place-us");
  run.upload_us = stat_double(debayer, "upload-us");
  gst_element_set_state(p, GST_STATE_NULL);
  gst_object_unref(debayer);
  gst_object_unref(sink);
  gst_object_unref(p);
  return run;
}

// videotestsrc (`pattern`, BGRx) ! bgratorg10 ! rg10tobgra `options` into an appsink: every frame
// must be the reference's.
ChainRun run_simulator_chain(const char* pattern, int w, int h, int frames, const char* options) {
  const auto source = test_frames(pattern, w, h, frames);
  EXPECT_EQ(source.size(), static_cast<size_t>(frames));
  const std::string size = "width=" + std::to_string(w) + ",height=" + std::to_string(h);
  const std::string launch =
      std::string("videotestsrc pattern=") + pattern + " num-buffers=" + std::to_string(frames) +
      " ! video/x-raw,format=BGRx," + size + " ! bgratorg10 ! rg10tobgra name=debayer " + options +
      " ! video/x-raw,format=BGRA ! appsink name=out sync=false";
  return run_debayer_chain(
      launch.c_str(),
      [&](int n) { return n < static_cast<int>(source.size()) ? source[n] : source.back(); }, w, h);
}

TEST_F(Rg10ToBgra, BehindBgratorg10TheInputIsReadInPlace) {
  NEED_GPU();
  constexpr int kFrames = 10;
  const ChainRun run = run_simulator_chain("smpte", 320, 240, kFrames, "input-mode=in-place");
  EXPECT_EQ(run.received, kFrames);
  EXPECT_EQ(run.debayered, static_cast<guint64>(kFrames));
  EXPECT_EQ(run.input_copies, 0u) << "bgratorg10 did not write into the pinned pool";
  EXPECT_EQ(run.input_uploads, 0u);
  EXPECT_EQ(run.input_path, "in-place");
  EXPECT_EQ(run.in_place_us, 0.0) << "only input-mode=auto times the paths";
}

// input-mode=upload: each frame uploaded by a copy engine into alternating device buffers while
// the previous frame's kernel runs (moving frames; odd width: rows not 16-byte aligned).
TEST_F(Rg10ToBgra, BehindBgratorg10UploadedFramesMatchTheReference) {
  NEED_GPU();
  constexpr int kFrames = 12;
  const ChainRun run = run_simulator_chain("ball", 322, 181, kFrames, "input-mode=upload");
  EXPECT_EQ(run.received, kFrames);
  EXPECT_EQ(run.input_copies, 0u) << "bgratorg10 did not write into the pinned pool";
  EXPECT_EQ(run.input_uploads, static_cast<guint64>(kFrames));
  EXPECT_EQ(run.input_path, "upload");
}

// input-mode=auto (the default) times both ways on the first frame and reads every frame the
// faster way; the stats say which and why.
TEST_F(Rg10ToBgra, AutoTimesBothInputPathsAndUsesTheFaster) {
  NEED_GPU();
  constexpr int kFrames = 8;
  const ChainRun run = run_simulator_chain("smpte", 640, 480, kFrames, "");
  EXPECT_EQ(run.received, kFrames);
  EXPECT_GT(run.in_place_us, 0.0);
  EXPECT_GT(run.upload_us, 0.0);
  const bool upload = run.upload_us < run.in_place_us;
  EXPECT_EQ(run.input_path, upload ? "upload" : "in-place");
  EXPECT_EQ(run.input_uploads, upload ? static_cast<guint64>(kFrames) : 0u);
  std::printf("640x480 pinned input: in place %.1f us, upload + kernel %.1f us -> %s\n",
              run.in_place_us, run.upload_us, run.input_path.c_str());
}

// The replay camera allocates its loop with the pinned allocator rg10tobgra proposes, so the
// kernel reads every replayed frame in place, as it would a capture buffer.
TEST_F(Rg10ToBgra, ReplayCameraFramesAreReadInPlace) {
  NEED_GPU();
  constexpr int kW = 320, kH = 240, kLoop = 4, kFrames = 10;
  const ChainRun run = run_debayer_chain(
      "rg10replaysrc is-live=false frames=4 num-buffers=10 ! video/x-bayer,width=320,height=240 "
      "! rg10tobgra name=debayer input-mode=in-place ! video/x-raw,format=BGRA ! appsink "
      "name=out sync=false",
      [&](int n) {
        std::vector<uint8_t> scene(static_cast<size_t>(kW) * 4 * kH);
        cb::replay_scene_bgra(static_cast<uint32_t>(n), kLoop, kW, kH, scene.data(),
                              static_cast<size_t>(kW) * 4);
        return scene;
      },
      kW, kH);
  EXPECT_EQ(run.received, kFrames);
  EXPECT_EQ(run.input_copies, 0u) << "the replayed frames were not pinned memory";
  EXPECT_EQ(run.input_path, "in-place");
}

// The camera chain into cudasink-ipc's CUDA slots, in a producer process of its own
// (gst-launch-1.0), received here by cudasrc-ipc downloading into system memory: every frame
// equals the reference. require-zero-copy makes the sink fail if rg10tobgra did not write into
// its slots; the copy audit (tests/gpu/run-on-gpu chain) counts the rest.
TEST_F(Rg10ToBgra, CameraChainWritesStraightIntoCudasinkIpcSlots) {
  NEED_GPU();
  gchar* launcher = g_find_program_in_path("gst-launch-1.0");
  if (!launcher) GTEST_SKIP() << "gst-launch-1.0 is not in PATH";
  constexpr int kW = 640, kH = 360, kFrames = 30;
  const auto source = test_frames("smpte", kW, kH, kFrames);
  const std::string socket = "/tmp/cipc-rg10tobgra-" + std::to_string(getpid()) + ".sock";
  cipc_test::Process producer(
      "producer",
      {launcher, "videotestsrc", "pattern=smpte", "num-buffers=30", "is-live=true", "!",
       "video/x-raw,format=BGRx,width=640,height=360,framerate=60/1", "!", "bgratorg10", "!",
       "rg10tobgra", "!", "cudasink-ipc", "wait-for-consumer=true", "copy-policy=require-zero-copy",
       "socket-path=" + socket},
      {});
  g_free(launcher);
  ASSERT_TRUE(producer.started()) << producer.start_error();
  for (int i = 0; i < 100 && !cipc_test::is_socket(socket); ++i) g_usleep(50000);
  ASSERT_TRUE(cipc_test::is_socket(socket)) << producer.transcript();
  const std::string consumer_desc = "cudasrc-ipc socket-path=" + socket +
                                    " ! video/x-raw,format=BGRA ! appsink name=out sync=false";
  GstElement* consumer = gst_parse_launch(consumer_desc.c_str(), nullptr);
  ASSERT_NE(consumer, nullptr);
  GstElement* sink = gst_bin_get_by_name(GST_BIN(consumer), "out");
  gst_element_set_state(consumer, GST_STATE_PLAYING);
  int n = 0;
  while (n < kFrames) {
    GstSample* s = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 10 * GST_SECOND);
    if (!s) break;
    EXPECT_LE(
        max_difference(buffer_bytes(gst_sample_get_buffer(s)), expected_chain(source[n], kW, kH)),
        1)
        << "frame " << n;
    ++n;
    gst_sample_unref(s);
  }
  EXPECT_EQ(n, kFrames) << bus_error(consumer) << "\n" << producer.transcript();
  EXPECT_EQ(producer.wait_exit(std::chrono::seconds(10)), std::optional<int>(0))
      << producer.transcript();
  gst_element_set_state(consumer, GST_STATE_NULL);
  gst_object_unref(sink);
  gst_object_unref(consumer);
}

}  // namespace
