// SPDX-License-Identifier: LGPL-2.1-or-later
// rg10replaysrc (the replay camera) as GStreamer sees it: defaults and caps, every byte of its
// frames against the mosaic of its scene (bayer/replay_scene.h) for an odd size, the loop
// replayed by reference (no per-frame copy), read-only frames, live pacing by the clock and a
// camera's latency, and a loop too large for the machine refused with a sentence. Runs with or
// without CUDA; the plugin is loaded from the build tree (GST_PLUGIN_PATH).
#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "mosaic.h"
#include "replay_scene.h"

namespace cb = cipc_bayer;

namespace {

class Rg10ReplaySrc : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }

  // Runs `launch` (ending in "appsink name=out") to EOS and keeps every sample.
  void run(const std::string& launch) {
    GError* error = nullptr;
    pipeline_ = gst_parse_launch(launch.c_str(), &error);
    ASSERT_NE(pipeline_, nullptr) << (error ? error->message : "");
    GstElement* sink = gst_bin_get_by_name(GST_BIN(pipeline_), "out");
    ASSERT_NE(sink, nullptr);
    ASSERT_NE(gst_element_set_state(pipeline_, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
    while (GstSample* sample = gst_app_sink_pull_sample(GST_APP_SINK(sink))) {
      samples_.push_back(sample);
      arrivals_.push_back(std::chrono::steady_clock::now());
    }
    gst_object_unref(sink);
  }
  ~Rg10ReplaySrc() override {
    for (GstSample* s : samples_) gst_sample_unref(s);
    if (pipeline_) {
      gst_element_set_state(pipeline_, GST_STATE_NULL);
      gst_object_unref(pipeline_);
    }
  }
  GstBuffer* buffer(size_t i) const { return gst_sample_get_buffer(samples_.at(i)); }
  std::vector<uint8_t> bytes(size_t i) const {
    std::vector<uint8_t> v(gst_buffer_get_size(buffer(i)));
    gst_buffer_extract(buffer(i), 0, v.data(), v.size());
    return v;
  }
  // The first error on the bus, or "".
  std::string bus_error() const {
    GstBus* bus = gst_element_get_bus(pipeline_);
    GstMessage* m = gst_bus_timed_pop_filtered(bus, 5 * GST_SECOND, GST_MESSAGE_ERROR);
    std::string text;
    if (m) {
      GError* e = nullptr;
      gst_message_parse_error(m, &e, nullptr);
      text = e->message;
      g_error_free(e);
      gst_message_unref(m);
    }
    gst_object_unref(bus);
    return text;
  }

  GstElement* pipeline_ = nullptr;
  std::vector<GstSample*> samples_;
  std::vector<std::chrono::steady_clock::time_point> arrivals_;
};

TEST_F(Rg10ReplaySrc, DefaultsAreALive1080p60Rggb10CameraWithEightFrames) {
  GstElement* src = gst_element_factory_make("rg10replaysrc", nullptr);
  ASSERT_NE(src, nullptr);
  guint frames = 0;
  gboolean live = FALSE;
  gint alignment = -1;
  g_object_get(src, "frames", &frames, "is-live", &live, "bit-alignment", &alignment, nullptr);
  EXPECT_EQ(frames, 8u);
  EXPECT_TRUE(live);
  EXPECT_EQ(alignment, 0) << "lsb";
  gst_object_unref(src);

  run("rg10replaysrc num-buffers=1 frames=1 ! appsink name=out sync=false");
  ASSERT_EQ(samples_.size(), 1u);
  GstCaps* caps = gst_sample_get_caps(samples_[0]);
  GstCaps* expected =
      gst_caps_from_string("video/x-bayer,format=rggb10le,width=1920,height=1080,framerate=60/1");
  EXPECT_TRUE(gst_caps_is_equal(caps, expected)) << gst_caps_to_string(caps);
  gst_caps_unref(expected);
  EXPECT_EQ(gst_buffer_get_size(buffer(0)), 1920u * 2 * 1080);
}

TEST_F(Rg10ReplaySrc, FramesAreTheSceneMosaickedAndTheLoopIsReplayedByReference) {
  const int w = 35, h = 7;
  const size_t stride = 36 * 2;  // GST_ROUND_UP_4(35) * 2; the padding is zero
  run("rg10replaysrc is-live=false frames=3 num-buffers=7 bit-alignment=msb ! "
      "video/x-bayer,format=gbrg10le,width=35,height=7,framerate=25/1 ! appsink name=out "
      "sync=false");
  ASSERT_EQ(samples_.size(), 7u);
  cb::MosaicParams p;
  p.phase = cb::CfaOrder::kGBRG;
  p.alignment = cb::BitAlignment::kMsb;
  for (size_t i = 0; i < samples_.size(); ++i) {
    std::vector<uint8_t> colour(static_cast<size_t>(w) * 4 * h);
    cb::replay_scene_bgra(static_cast<uint32_t>(i), 3, w, h, colour.data(),
                          static_cast<size_t>(w) * 4);
    std::vector<uint8_t> expected(stride * h, 0);
    cb::mosaic_cpu(colour.data(), static_cast<size_t>(w) * 4,
                   static_cast<int>(cb::MosaicInput::kBgra), expected.data(), stride, w, h, p);
    EXPECT_EQ(bytes(i), expected) << "frame " << i;
    EXPECT_EQ(GST_BUFFER_PTS(buffer(i)), i * GST_SECOND / 25) << i;
    EXPECT_EQ(GST_BUFFER_DURATION(buffer(i)), GST_SECOND / 25) << i;
    EXPECT_EQ(GST_BUFFER_OFFSET(buffer(i)), i);
  }
  EXPECT_NE(bytes(1), bytes(0)) << "the scene moves";
  // Frame i + 3 is the very memory of frame i: nothing was rendered or copied for it.
  for (size_t i = 0; i + 3 < samples_.size(); ++i)
    EXPECT_EQ(gst_buffer_peek_memory(buffer(i + 3), 0), gst_buffer_peek_memory(buffer(i), 0)) << i;
  EXPECT_NE(gst_buffer_peek_memory(buffer(1), 0), gst_buffer_peek_memory(buffer(0), 0));
}

TEST_F(Rg10ReplaySrc, WritingIntoAFrameWritesACopyAndTheLoopStaysIntact) {
  run("rg10replaysrc is-live=false frames=2 num-buffers=3 ! video/x-bayer,width=8,height=2 ! "
      "appsink name=out sync=false");
  ASSERT_EQ(samples_.size(), 3u);
  const std::vector<uint8_t> original = bytes(2);  // frame 0 again, same memory as buffer 0
  ASSERT_EQ(gst_buffer_peek_memory(buffer(0), 0), gst_buffer_peek_memory(buffer(2), 0));
  // The frames are read-only memory: GStreamer gives a writer a copy of its own.
  GstMapInfo map;
  ASSERT_TRUE(gst_buffer_map(buffer(0), &map, GST_MAP_WRITE));
  std::fill(map.data, map.data + map.size, 0xEE);
  gst_buffer_unmap(buffer(0), &map);
  EXPECT_NE(gst_buffer_peek_memory(buffer(0), 0), gst_buffer_peek_memory(buffer(2), 0));
  EXPECT_EQ(bytes(2), original) << "a write reached the frame the loop replays";
  EXPECT_TRUE(GST_MEMORY_IS_READONLY(gst_buffer_peek_memory(buffer(2), 0)));
}

TEST_F(Rg10ReplaySrc, LiveFramesArePacedByTheClock) {
  run("rg10replaysrc frames=2 num-buffers=10 ! video/x-bayer,width=16,height=4,framerate=50/1 ! "
      "appsink name=out sync=false");
  ASSERT_EQ(samples_.size(), 10u);
  for (size_t i = 1; i < samples_.size(); ++i)
    EXPECT_EQ(GST_BUFFER_PTS(buffer(i)) - GST_BUFFER_PTS(buffer(i - 1)), GST_SECOND / 50) << i;
  // Nine frame periods cannot pass faster than the clock (a lower bound: load only adds).
  const auto spread =
      std::chrono::duration_cast<std::chrono::milliseconds>(arrivals_.back() - arrivals_.front());
  EXPECT_GE(spread.count(), 170) << "frames came faster than 50 per second";
}

TEST_F(Rg10ReplaySrc, LiveLatencyIsOneFrameLikeACamera) {
  pipeline_ = gst_parse_launch(
      "rg10replaysrc name=camera frames=1 ! video/x-bayer,width=16,height=4,framerate=50/1 ! "
      "fakesink",
      nullptr);
  ASSERT_NE(pipeline_, nullptr);
  gst_element_set_state(pipeline_, GST_STATE_PLAYING);
  ASSERT_EQ(gst_element_get_state(pipeline_, nullptr, nullptr, 5 * GST_SECOND),
            GST_STATE_CHANGE_SUCCESS);
  // The source's own answer (a sink answers for the pipeline only once it has synchronised).
  GstElement* camera = gst_bin_get_by_name(GST_BIN(pipeline_), "camera");
  GstPad* pad = gst_element_get_static_pad(camera, "src");
  GstQuery* q = gst_query_new_latency();
  EXPECT_TRUE(gst_pad_query(pad, q));
  gst_object_unref(pad);
  gst_object_unref(camera);
  gboolean live = FALSE;
  GstClockTime min = 0, max = 0;
  gst_query_parse_latency(q, &live, &min, &max);
  gst_query_unref(q);
  EXPECT_TRUE(live);
  EXPECT_EQ(min, GST_SECOND / 50);
}

TEST_F(Rg10ReplaySrc, LoopLargerThanTheMachineIsRefusedWithASentence) {
  // 240 frames of 32768x32768 RAW10 (2 GiB each): 480 GiB, refused before any allocation.
  run("rg10replaysrc is-live=false frames=240 num-buffers=1 ! "
      "video/x-bayer,width=32768,height=32768 ! appsink name=out sync=false");
  EXPECT_TRUE(samples_.empty());
  const std::string error = bus_error();
  EXPECT_NE(error.find("Replaying 240 frames of 2048.0 MiB"), std::string::npos) << error;
  EXPECT_NE(error.find("Lower frames or the resolution"), std::string::npos) << error;
}

}  // namespace
