// SPDX-License-Identifier: LGPL-2.1-or-later
// Running time <-> CLOCK_MONOTONIC, the time base of the wire's FRAME timestamps: the offset of
// the pipeline's clock, both conversions, and the consumer's mapping of a producer's timestamps
// into its own pipeline.
#pragma once

#include <gst/gst.h>

#include <cstdint>

#include "protocol.h"  // kNoTimestamp

namespace cipc_gst {

// CLOCK_MONOTONIC minus the clock's time, in ns: 0 for a monotonic GstSystemClock (the default
// pipeline clock), measured otherwise. With no clock, 0.
gint64 monotonic_offset(GstClock* clock);

// monotonic_offset() for the element's clock, asking a clock's type only when the clock
// changes: per frame it costs nothing for the default (monotonic) clock.
class ClockOffset {
 public:
  ClockOffset() = default;
  ~ClockOffset() { reset(); }
  ClockOffset(const ClockOffset&) = delete;
  ClockOffset& operator=(const ClockOffset&) = delete;
  gint64 get(GstClock* clock);
  void reset() { gst_clear_object(&clock_); }

 private:
  GstClock* clock_ = nullptr;  // a reference: the same address can never be a different clock
  bool monotonic_ = false;
};

// Running time -> CLOCK_MONOTONIC ns (kNoTimestamp for GST_CLOCK_TIME_NONE).
uint64_t running_time_to_monotonic(GstClockTime running_time, GstClockTime base_time,
                                   gint64 offset);
// CLOCK_MONOTONIC ns -> running time (GST_CLOCK_TIME_NONE for kNoTimestamp; times before the
// pipeline started clamp to 0).
GstClockTime monotonic_to_running_time(uint64_t monotonic, GstClockTime base_time, gint64 offset);

// Consumer side: the producer's CLOCK_MONOTONIC timestamps as running times of this pipeline,
// strictly increasing whenever the producer's are. Frames captured before this pipeline started
// would map to negative running times:
// - from a live producer (FRAME flag kLive) such a frame is stale: map() says to drop it;
// - otherwise (a file, a test source) every timestamp of the connection is shifted later by
//   what the first frame lacked, which keeps the producer's spacing and loses nothing.
// reset() on every new connection.
class TimestampMapper {
 public:
  void reset() {
    have_shift_ = false;
    shift_ = 0;
  }
  // False: the frame is stale (see above). Otherwise *pts and *dts are set (NONE stays NONE).
  bool map(uint64_t pts, uint64_t dts, bool live, GstClockTime base_time, gint64 offset,
           GstClockTime* pts_out, GstClockTime* dts_out);
  GstClockTime shift() const { return shift_; }

 private:
  bool have_shift_ = false;
  GstClockTime shift_ = 0;
};

// Capture side (cudav4l2src): the running time of a frame a driver stamped at `stamp_ns` of
// CLOCK_MONOTONIC (`have_stamp` false: no such stamp), from the pipeline clock's time `now`,
// CLOCK_MONOTONIC's `monotonic_now` and the element's `base_time`: the frame's age taken off
// `now`. A stamp in the future or older than 10 s is not trusted (the clock's now is used), and
// a frame never comes before the pipeline started (0).
GstClockTime capture_running_time(GstClockTime now, GstClockTime monotonic_now,
                                  GstClockTime base_time, bool have_stamp, uint64_t stamp_ns);

}  // namespace cipc_gst
