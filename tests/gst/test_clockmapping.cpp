// SPDX-License-Identifier: LGPL-2.1-or-later
// Running time <-> CLOCK_MONOTONIC and the consumer's timestamp mapping
// (gst/common/clockmapping).
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include "common/clockmapping.h"
#include "glue_fixture.h"
#include "waker.h"

namespace {

using namespace cipc_test;

// Issue 17, defect 7: frames captured before the consumer's pipeline started all came out with
// PTS 0. A non-live producer's frames now keep their spacing (one shift for the connection); a
// live producer's stale frames are dropped; either way timestamps stay strictly increasing.
TEST_F(Glue, TimestampMapperKeepsSpacingOrDropsStaleLiveFrames) {
  const GstClockTime base = 10 * GST_SECOND;
  const uint64_t frame = 33333333;
  cipc_gst::TimestampMapper m;
  GstClockTime pts = 0, dts = 0, last = 0;
  // Not live: 30 frames from 2 s before this pipeline's start, then on past it.
  for (uint64_t k = 0; k < 90; ++k) {
    const uint64_t mono = 8 * GST_SECOND + k * frame;
    ASSERT_TRUE(m.map(mono, cipc::kNoTimestamp, false, base, 0, &pts, &dts));
    EXPECT_EQ(pts, k * frame) << "frame " << k;
    EXPECT_EQ(dts, GST_CLOCK_TIME_NONE);
    if (k > 0) {
      EXPECT_GT(pts, last);
    }
    last = pts;
  }
  EXPECT_EQ(m.shift(), 2 * GST_SECOND);
  // A new connection starts a new timeline; a first frame after the start needs no shift.
  m.reset();
  ASSERT_TRUE(m.map(11 * GST_SECOND, 11 * GST_SECOND - 5, false, base, 0, &pts, &dts));
  EXPECT_EQ(pts, GST_SECOND);
  EXPECT_EQ(dts, GST_SECOND - 5);
  EXPECT_EQ(m.shift(), 0u);

  // Live: stale frames are refused, fresh ones keep their exact running time.
  cipc_gst::TimestampMapper live;
  EXPECT_FALSE(live.map(base - frame, cipc::kNoTimestamp, true, base, 0, &pts, &dts));
  EXPECT_FALSE(live.map(base - 1, cipc::kNoTimestamp, true, base, 0, &pts, &dts));
  ASSERT_TRUE(live.map(base + 7, cipc::kNoTimestamp, true, base, 0, &pts, &dts));
  EXPECT_EQ(pts, 7u);
  EXPECT_EQ(live.shift(), 0u);
  // No timestamp stays none, live or not.
  ASSERT_TRUE(live.map(cipc::kNoTimestamp, cipc::kNoTimestamp, true, base, 0, &pts, &dts));
  EXPECT_EQ(pts, GST_CLOCK_TIME_NONE);
}

TEST_F(Glue, TimestampsCrossThroughMonotonicExactly) {
  GstClock* clock = gst_system_clock_obtain();  // monotonic by default
  EXPECT_EQ(cipc_gst::monotonic_offset(clock), 0);
  const GstClockTime base_a = 5 * GST_SECOND, base_b = 9 * GST_SECOND;
  const GstClockTime pts = 7 * GST_SECOND + 123;
  const uint64_t mono = cipc_gst::running_time_to_monotonic(pts, base_a, 0);
  EXPECT_EQ(mono, 12 * GST_SECOND + 123);
  // The consumer started 4 s later: the same instant is 4 s earlier in its running time.
  EXPECT_EQ(cipc_gst::monotonic_to_running_time(mono, base_b, 0), 3 * GST_SECOND + 123);
  // Frames from before the consumer's start clamp to 0; none stays none.
  EXPECT_EQ(cipc_gst::monotonic_to_running_time(GST_SECOND, base_b, 0), 0u);
  EXPECT_EQ(cipc_gst::running_time_to_monotonic(GST_CLOCK_TIME_NONE, base_a, 0),
            cipc::kNoTimestamp);
  EXPECT_EQ(cipc_gst::monotonic_to_running_time(cipc::kNoTimestamp, base_b, 0),
            GST_CLOCK_TIME_NONE);

  // A realtime clock is measured against CLOCK_MONOTONIC.
  GstClock* realtime = GST_CLOCK(
      g_object_new(GST_TYPE_SYSTEM_CLOCK, "clock-type", GST_CLOCK_TYPE_REALTIME, nullptr));
  const gint64 offset = cipc_gst::monotonic_offset(realtime);
  const gint64 expected =
      static_cast<gint64>(cipc::monotonic_ns()) - static_cast<gint64>(gst_clock_get_time(realtime));
  EXPECT_NEAR(static_cast<double>(offset), static_cast<double>(expected), 5e6);

  // The per-frame cache agrees with the direct answer, also when the clock changes.
  cipc_gst::ClockOffset cache;
  EXPECT_EQ(cache.get(clock), 0);
  EXPECT_NEAR(static_cast<double>(cache.get(realtime)), static_cast<double>(offset), 5e6);
  EXPECT_EQ(cache.get(clock), 0);
  EXPECT_EQ(cache.get(nullptr), 0);
  gst_object_unref(realtime);
  gst_object_unref(clock);
}

// cudav4l2src stamps a frame with the driver's capture time: its age (CLOCK_MONOTONIC now minus
// the driver's stamp) taken off the pipeline clock's now, so a frame that waited in the driver's
// queue keeps the time it was captured; a stamp that cannot be right is not believed.
TEST_F(Glue, CaptureTimeIsTheDriversStampOnThePipelineClock) {
  const GstClockTime base = 2 * GST_SECOND, now = 7 * GST_SECOND, mono = 100 * GST_SECOND;
  const GstClockTime ms = GST_MSECOND;
  // Captured 5 ms ago: 5 ms before now.
  EXPECT_EQ(cipc_gst::capture_running_time(now, mono, base, true, mono - 5 * ms),
            now - 5 * ms - base);
  // No stamp, a stamp from the future, one older than 10 s: now.
  EXPECT_EQ(cipc_gst::capture_running_time(now, mono, base, false, mono - 5 * ms), now - base);
  EXPECT_EQ(cipc_gst::capture_running_time(now, mono, base, true, mono + ms), now - base);
  EXPECT_EQ(cipc_gst::capture_running_time(now, mono, base, true, mono - 10 * GST_SECOND),
            now - base);
  // Older than the pipeline clock itself: now.
  EXPECT_EQ(cipc_gst::capture_running_time(3 * ms, mono, 0, true, mono - 4 * ms), 3 * ms);
  // Captured before the pipeline started: running time 0, never negative.
  EXPECT_EQ(cipc_gst::capture_running_time(now, mono, base, true, mono - 6 * GST_SECOND), 0u);
}

}  // namespace
