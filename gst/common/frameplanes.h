// SPDX-License-Identifier: LGPL-2.1-or-later
// Pure helpers between GStreamer buffers and the wire's FRAME message: plane layout in both
// directions (with the consumer-side bounds check) and the CPU frame copy that keeps every
// row's last pixels. Timestamps are clockmapping.h's.
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

// One side of a plane copy: each plane's first byte (host address, or a device address cast to
// a pointer) and its row stride in bytes.
struct PlanePointers {
  const void* data[GST_VIDEO_MAX_PLANES] = {};
  gint stride[GST_VIDEO_MAX_PLANES] = {};
};

// Where `dst` and `src` lay out a frame of `info` alike - every plane at the same distance from
// plane 0, with the same stride - the frame is one span of bytes on either side: its length,
// from plane 0's first byte to the end of the plane that ends last. 0 where the layouts differ
// (then only a plane-by-plane, row-by-row copy will do). The caller knows that each side's
// planes lie in one allocation, since the bytes between planes are part of the span.
gsize contiguous_span(const GstVideoInfo& info, const PlanePointers& dst, const PlanePointers& src);

// Consumer side: checks that the producer's layout keeps every plane of `info` inside
// `frame.size` bytes (never trusting the peer). On success fills `layout` with the offsets and
// strides to put into the output buffer's GstVideoMeta.
bool validate_planes(const cipc::Frame& frame, const GstVideoInfo& info, GstVideoInfo* layout,
                     std::string* why);

}  // namespace cipc_gst
