// SPDX-License-Identifier: LGPL-2.1-or-later
// Pure helpers between GStreamer buffers and the wire's FRAME message: plane layout in both
// directions (with the consumer-side bounds check), and running time <-> CLOCK_MONOTONIC.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <string>

#include "protocol.h"

namespace cipc_gst {

// Writes the buffer's plane offsets and strides (from its GstVideoMeta, else from `info`) and
// the payload size into `frame`.
void describe_planes(GstBuffer* buffer, const GstVideoInfo& info, cipc::Frame& frame);

// Entries (rows of GstVideoInfo's stride 4) of a palette format's plane 1.
constexpr guint kPaletteEntries = 256;

// Rows in `plane` of a frame of `info` (chroma planes may have fewer; a palette has
// kPaletteEntries).
guint plane_rows(const GstVideoInfo& info, guint plane);

// Bytes of a row of `plane` that hold pixels: the widest of the plane's components (width x
// pixel stride), so a packed 4:2:2 row of odd width keeps its last chroma pair, which
// gst_video_frame_copy() drops between different strides (it measures the first component, Y).
// 0 where the format has no pixel stride (v210, UYVP, IYU1): then only the stride says.
gsize plane_row_bytes(const GstVideoInfo& info, guint plane);

// Copies every plane of `src` into `dst` (same format and size, any strides): rows of
// plane_row_bytes() (the smaller stride where that is 0); tiled formats tile by tile.
bool copy_video_frame(GstVideoFrame* dst, const GstVideoFrame* src);

// Consumer side: checks that the producer's layout keeps every plane of `info` inside
// `frame.size` bytes (never trusting the peer). On success fills `layout` with the offsets and
// strides to put into the output buffer's GstVideoMeta.
bool validate_planes(const cipc::Frame& frame, const GstVideoInfo& info, GstVideoInfo* layout,
                     std::string* why);

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

}  // namespace cipc_gst
