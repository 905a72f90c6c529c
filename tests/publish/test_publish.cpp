// SPDX-License-Identifier: LGPL-2.1-or-later
// publish/: the writer's frame layouts are GStreamer's (a consumer's downstream that ignores
// video meta reads them right), the slot numbering rules, and the slot ring.
#include <gst/gst.h>
#include <gst/video/video.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "frame_layout.h"
#include "host_memory.h"
#include "slot_indices.h"
#include "slot_ring.h"

namespace {

using cipc_publish::FrameLayout;
using cipc_publish::LentSlot;
using cipc_publish::SlotIndices;
using cipc_publish::SlotRing;
using std::chrono::milliseconds;

const char* const kFormats[] = {"BGRA", "BGRx", "RGBA", "RGBx", "ARGB",  "ABGR",
                                "xRGB", "xBGR", "RGB",  "BGR",  "GRAY8", "GRAY16_LE",
                                "YUY2", "UYVY", "NV12", "I420"};

TEST(FrameLayout, EveryPublishableFormatIsLaidOutAsGStreamerDoes) {
  gst_init(nullptr, nullptr);
  const std::pair<uint32_t, uint32_t> sizes[] = {
      {1, 1}, {2, 2}, {3, 5}, {161, 121}, {322, 243}, {1920, 1080}, {3840, 2160}, {4095, 2161}};
  for (const char* format : kFormats) {
    for (const auto& [width, height] : sizes) {
      SCOPED_TRACE(std::string(format) + " " + std::to_string(width) + "x" +
                   std::to_string(height));
      FrameLayout layout;
      std::string why;
      ASSERT_TRUE(cipc_publish::make_frame_layout(format, width, height, &layout, &why)) << why;
      GstVideoInfo info;
      ASSERT_TRUE(
          gst_video_info_set_format(&info, gst_video_format_from_string(format), width, height));
      EXPECT_EQ(layout.size, GST_VIDEO_INFO_SIZE(&info));
      ASSERT_EQ(layout.n_planes, GST_VIDEO_INFO_N_PLANES(&info));
      for (uint32_t p = 0; p < layout.n_planes; ++p) {
        EXPECT_EQ(layout.plane_offset[p], GST_VIDEO_INFO_PLANE_OFFSET(&info, p)) << "plane " << p;
        EXPECT_EQ(layout.plane_stride[p], GST_VIDEO_INFO_PLANE_STRIDE(&info, p)) << "plane " << p;
        EXPECT_LE(layout.plane_row_bytes[p], uint32_t(layout.plane_stride[p]));
        EXPECT_LE(layout.plane_offset[p] + uint64_t(layout.plane_rows[p]) * layout.plane_stride[p],
                  layout.size);
      }
      // Consumers parse the caps with GStreamer: the same format and size come back.
      layout.framerate_num = 30;
      GstCaps* caps = gst_caps_from_string(cipc_publish::caps_string(layout).c_str());
      ASSERT_NE(caps, nullptr);
      GstVideoInfo parsed;
      ASSERT_TRUE(gst_video_info_from_caps(&parsed, caps));
      EXPECT_EQ(GST_VIDEO_INFO_FORMAT(&parsed), GST_VIDEO_INFO_FORMAT(&info));
      EXPECT_EQ(GST_VIDEO_INFO_WIDTH(&parsed), int(width));
      EXPECT_EQ(GST_VIDEO_INFO_HEIGHT(&parsed), int(height));
      EXPECT_EQ(GST_VIDEO_INFO_FPS_N(&parsed), 30);
      gst_caps_unref(caps);
    }
  }
}

TEST(FrameLayout, UnknownFormatsAndSizesAreRefusedSayingWhy) {
  FrameLayout layout;
  std::string why;
  EXPECT_FALSE(cipc_publish::make_frame_layout("MJPG", 64, 48, &layout, &why));
  EXPECT_NE(why.find("BGRx"), std::string::npos) << "lists what can be published: " << why;
  EXPECT_FALSE(cipc_publish::make_frame_layout("BGRx", 0, 48, &layout, &why));
  EXPECT_FALSE(cipc_publish::make_frame_layout("BGRx", 64, 40000, &layout, &why));
  EXPECT_NE(why.find("out of range"), std::string::npos) << why;
}

TEST(SlotIndices, IndicesAreNeverReusedAndRollOverComesBeforeTheLimit) {
  static_assert(cipc_publish::kRolloverAt < cipc::kMaxSlots, "roll over before the limit");
  SlotIndices indices;
  uint32_t index = 0;
  bool first_past = false;
  for (uint32_t i = 0; i < cipc::kMaxSlots; ++i) {
    ASSERT_EQ(indices.take(&index, &first_past), SlotIndices::Taken::kSendable);
    ASSERT_EQ(index, i);
    ASSERT_FALSE(first_past);
    EXPECT_EQ(indices.needs_rollover(), i + 1 >= cipc_publish::kRolloverAt) << i;
  }
  EXPECT_EQ(indices.take(&index, &first_past), SlotIndices::Taken::kPastLimit);
  EXPECT_TRUE(first_past);
  EXPECT_EQ(indices.take(&index, &first_past), SlotIndices::Taken::kPastLimit);
  EXPECT_FALSE(first_past) << "said once";
  EXPECT_EQ(cipc_publish::consumer_slot_budget(0), 0u);
  EXPECT_EQ(cipc_publish::consumer_slot_budget(6), 4u);
  EXPECT_EQ(cipc_publish::consumer_slot_budget(2), 1u);
}

class Ring : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    ASSERT_TRUE(cipc_publish::make_frame_layout("GRAY8", 64, 8, &layout_, &why));
    ring_ = std::make_shared<SlotRing>(std::make_shared<cipc_slots::HostMemoryBackend>(), 3);
    ASSERT_TRUE(ring_->start_generation(layout_, &why)) << why;
  }
  SlotRing::Wait lend(LentSlot* out, int timeout_ms = 0) {
    std::string why;
    return ring_->acquire(timeout_ms, nullptr, out, &why);
  }
  FrameLayout layout_;
  std::shared_ptr<SlotRing> ring_;
};

TEST_F(Ring, LendsEverySlotOnceThenTimesOut) {
  std::set<uint32_t> indices;
  LentSlot slots[3];
  for (LentSlot& s : slots) {
    ASSERT_EQ(lend(&s), SlotRing::Wait::kLent);
    indices.insert(s.index);
    EXPECT_GE(s.memory->size(), layout_.size);
  }
  EXPECT_EQ(indices, (std::set<uint32_t>{0, 1, 2}));
  LentSlot none;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(lend(&none, 100), SlotRing::Wait::kTimeout);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(95));
  // Returned oldest first: the slot given back longest ago is lent next.
  ring_->give_back(slots[2]);
  ring_->give_back(slots[0]);
  LentSlot again;
  ASSERT_EQ(lend(&again), SlotRing::Wait::kLent);
  EXPECT_EQ(again.index, slots[2].index);
}

TEST_F(Ring, AHeldSlotReturnsWhenItsLastClaimGoesAndWakesAWaiter) {
  LentSlot a, b, c;
  ASSERT_EQ(lend(&a), SlotRing::Wait::kLent);
  ASSERT_EQ(lend(&b), SlotRing::Wait::kLent);
  ASSERT_EQ(lend(&c), SlotRing::Wait::kLent);
  auto hold = ring_->hold(a);
  auto second_claim = hold;
  bool asked = false;
  std::thread releaser([&] {
    std::this_thread::sleep_for(milliseconds(100));
    hold.reset();
    second_claim.reset();
  });
  LentSlot next;
  std::string why;
  EXPECT_EQ(ring_->acquire(
                5000, [&] { asked = true; }, &next, &why),
            SlotRing::Wait::kLent);
  releaser.join();
  EXPECT_TRUE(asked) << "the producer is asked to read RELEASEs before the wait";
  EXPECT_EQ(next.index, a.index);
}

TEST_F(Ring, ARetiredSlotIsNeverLentAgainAndIsReplacedWithANewIndex) {
  LentSlot a;
  ASSERT_EQ(lend(&a), SlotRing::Wait::kLent);
  auto hold = ring_->hold(a);
  hold->retire();
  hold.reset();
  EXPECT_EQ(ring_->slots_retired(), 1u);
  std::set<uint32_t> lent;
  LentSlot s;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(lend(&s), SlotRing::Wait::kLent);
    lent.insert(s.index);
  }
  EXPECT_EQ(lent, (std::set<uint32_t>{1, 2, 3})) << "slot 0 retired, slot 3 made in its place";
  EXPECT_EQ(ring_->slots_allocated(), 4u);
}

TEST_F(Ring, ANewGenerationLeavesLentSlotsValidAndNeverTakesThemBack) {
  LentSlot old_slot;
  ASSERT_EQ(lend(&old_slot), SlotRing::Wait::kLent);
  auto* bytes = static_cast<uint8_t*>(old_slot.memory->data());
  bytes[0] = 42;
  FrameLayout bigger;
  std::string why;
  ASSERT_TRUE(cipc_publish::make_frame_layout("BGRx", 32, 32, &bigger, &why));
  ASSERT_TRUE(ring_->start_generation(bigger, &why)) << why;
  EXPECT_EQ(bytes[0], 42) << "a lent slot of the old generation stays mapped";
  EXPECT_EQ(ring_->current()->number, old_slot.generation->number + 1);
  ring_->give_back(old_slot);
  for (int i = 0; i < 3; ++i) {
    LentSlot s;
    ASSERT_EQ(lend(&s), SlotRing::Wait::kLent);
    EXPECT_EQ(s.generation->number, ring_->current()->number);
    EXPECT_GE(s.memory->size(), bigger.size);
  }
  LentSlot none;
  EXPECT_EQ(lend(&none), SlotRing::Wait::kTimeout) << "the old slot did not join the new ring";
  EXPECT_EQ(ring_->generations(), 2u);
}

TEST_F(Ring, InterruptAndCloseEndAWait) {
  LentSlot s[3];
  for (LentSlot& x : s) ASSERT_EQ(lend(&x), SlotRing::Wait::kLent);
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(50));
    ring_->interrupt();
  });
  LentSlot none;
  EXPECT_EQ(lend(&none, -1), SlotRing::Wait::kInterrupted);
  t.join();
  ring_->clear_interrupt();
  EXPECT_EQ(lend(&none, 10), SlotRing::Wait::kTimeout);
  ring_->close();
  EXPECT_EQ(lend(&none, -1), SlotRing::Wait::kClosed);
  for (LentSlot& x : s) ring_->give_back(x);  // freed, not lent again
  EXPECT_EQ(lend(&none, 0), SlotRing::Wait::kClosed);
}

}  // namespace
