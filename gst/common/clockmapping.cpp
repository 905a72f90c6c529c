// SPDX-License-Identifier: LGPL-2.1-or-later
#include "common/clockmapping.h"

#include "waker.h"

namespace cipc_gst {

namespace {

// GstSystemClock of type MONOTONIC reads CLOCK_MONOTONIC itself: no conversion, no jitter.
bool reads_monotonic(GstClock* clock) {
  if (!GST_IS_SYSTEM_CLOCK(clock)) return false;
  GstClockType type = GST_CLOCK_TYPE_REALTIME;
  g_object_get(clock, "clock-type", &type, nullptr);
  return type == GST_CLOCK_TYPE_MONOTONIC;
}

gint64 measured_offset(GstClock* clock) {
  return static_cast<gint64>(cipc::monotonic_ns()) - static_cast<gint64>(gst_clock_get_time(clock));
}

}  // namespace

gint64 monotonic_offset(GstClock* clock) {
  if (clock == nullptr || reads_monotonic(clock)) return 0;
  return measured_offset(clock);
}

gint64 ClockOffset::get(GstClock* clock) {
  if (clock == nullptr) return 0;
  if (clock != clock_) {
    gst_object_replace(reinterpret_cast<GstObject**>(&clock_), GST_OBJECT_CAST(clock));
    monotonic_ = reads_monotonic(clock);
  }
  return monotonic_ ? 0 : measured_offset(clock);
}

uint64_t running_time_to_monotonic(GstClockTime running_time, GstClockTime base_time,
                                   gint64 offset) {
  if (!GST_CLOCK_TIME_IS_VALID(running_time)) return cipc::kNoTimestamp;
  return static_cast<uint64_t>(static_cast<gint64>(running_time + base_time) + offset);
}

GstClockTime monotonic_to_running_time(uint64_t monotonic, GstClockTime base_time, gint64 offset) {
  if (monotonic == cipc::kNoTimestamp) return GST_CLOCK_TIME_NONE;
  const gint64 running = static_cast<gint64>(monotonic) - offset - static_cast<gint64>(base_time);
  return running < 0 ? 0 : static_cast<GstClockTime>(running);
}

bool TimestampMapper::map(uint64_t pts, uint64_t dts, bool live, GstClockTime base_time,
                          gint64 offset, GstClockTime* pts_out, GstClockTime* dts_out) {
  auto running = [&](uint64_t monotonic) {
    return static_cast<gint64>(monotonic) - offset - static_cast<gint64>(base_time);
  };
  const gint64 pts_running = pts == cipc::kNoTimestamp ? 0 : running(pts);
  if (live) {
    if (pts != cipc::kNoTimestamp && pts_running < 0) return false;
  } else if (!have_shift_ && pts != cipc::kNoTimestamp) {
    have_shift_ = true;
    shift_ = pts_running < 0 ? static_cast<GstClockTime>(-pts_running) : 0;
  }
  const gint64 shift = live ? 0 : static_cast<gint64>(shift_);
  auto out = [&](uint64_t monotonic) -> GstClockTime {
    if (monotonic == cipc::kNoTimestamp) return GST_CLOCK_TIME_NONE;
    const gint64 t = running(monotonic) + shift;
    return t < 0 ? 0 : static_cast<GstClockTime>(t);
  };
  *pts_out = out(pts);
  *dts_out = out(dts);
  return true;
}

GstClockTime capture_running_time(GstClockTime now, GstClockTime monotonic_now,
                                  GstClockTime base_time, bool have_stamp, uint64_t stamp_ns) {
  GstClockTime at = now;
  if (have_stamp && monotonic_now >= stamp_ns) {
    const GstClockTime age = monotonic_now - stamp_ns;
    if (age < 10 * GST_SECOND && age <= now) at = now - age;
  }
  return at > base_time ? at - base_time : 0;
}

}  // namespace cipc_gst
