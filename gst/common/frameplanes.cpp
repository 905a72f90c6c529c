// SPDX-License-Identifier: LGPL-2.1-or-later
#include "common/frameplanes.h"

#include <cstring>

namespace cipc_gst {

void describe_planes(GstBuffer* buffer, const GstVideoInfo& info, cipc::Frame& frame) {
  const GstVideoMeta* meta = gst_buffer_get_video_meta(buffer);
  const guint n = meta ? meta->n_planes : GST_VIDEO_INFO_N_PLANES(&info);
  frame.n_planes = MIN(n, cipc::kMaxPlanes);
  for (guint i = 0; i < frame.n_planes; ++i) {
    frame.plane_offset[i] = meta ? meta->offset[i] : GST_VIDEO_INFO_PLANE_OFFSET(&info, i);
    frame.plane_stride[i] = meta ? meta->stride[i] : GST_VIDEO_INFO_PLANE_STRIDE(&info, i);
  }
  frame.size = gst_buffer_get_size(buffer);
}

guint plane_rows(const GstVideoInfo& info, guint plane) {
  // A palette plane (RGB8P) holds no component: GstVideoInfo lays it out as
  // 256 entries of 4 bytes (stride 4), whatever the picture's height (issue 24, defect 4).
  if (plane == 1 && GST_VIDEO_FORMAT_INFO_HAS_PALETTE(info.finfo)) return kPaletteEntries;
  // The first component stored in this plane gives the plane's height.
  gint comp[GST_VIDEO_MAX_COMPONENTS];
  gst_video_format_info_component(info.finfo, plane, comp);
  return GST_VIDEO_FORMAT_INFO_SCALE_HEIGHT(info.finfo, comp[0], GST_VIDEO_INFO_HEIGHT(&info));
}

gsize plane_row_bytes(const GstVideoInfo& info, guint plane) {
  if (plane == 1 && GST_VIDEO_FORMAT_INFO_HAS_PALETTE(info.finfo)) return 4;
  gint comp[GST_VIDEO_MAX_COMPONENTS];
  gst_video_format_info_component(info.finfo, plane, comp);
  gsize widest = 0;
  for (guint i = 0; i < GST_VIDEO_MAX_COMPONENTS && comp[i] >= 0; ++i) {
    const gsize bytes = gsize(GST_VIDEO_INFO_COMP_WIDTH(&info, comp[i])) *
                        GST_VIDEO_INFO_COMP_PSTRIDE(&info, comp[i]);
    widest = MAX(widest, bytes);
  }
  return widest;
}

bool copy_video_frame(GstVideoFrame* dst, const GstVideoFrame* src) {
  const GstVideoInfo& info = dst->info;
  if (GST_VIDEO_INFO_FORMAT(&src->info) != GST_VIDEO_INFO_FORMAT(&info) ||
      GST_VIDEO_INFO_WIDTH(&src->info) != GST_VIDEO_INFO_WIDTH(&info) ||
      GST_VIDEO_INFO_HEIGHT(&src->info) != GST_VIDEO_INFO_HEIGHT(&info))
    return false;
  // Tiles have no rows to measure, bottom-up (negative) strides no row start to take as is:
  // GStreamer's copy walks both right.
  bool plain_rows = !GST_VIDEO_FORMAT_INFO_IS_TILED(info.finfo);
  for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES(dst); ++p)
    plain_rows = plain_rows && GST_VIDEO_FRAME_PLANE_STRIDE(src, p) > 0 &&
                 GST_VIDEO_FRAME_PLANE_STRIDE(dst, p) > 0;
  if (!plain_rows) return gst_video_frame_copy(dst, src);
  for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES(dst); ++p) {
    const auto* s = static_cast<const guint8*>(GST_VIDEO_FRAME_PLANE_DATA(src, p));
    auto* d = static_cast<guint8*>(GST_VIDEO_FRAME_PLANE_DATA(dst, p));
    if (p == 1 && GST_VIDEO_FORMAT_INFO_HAS_PALETTE(info.finfo)) {
      memcpy(d, s, kPaletteEntries * 4);  // 256 entries in a row, whatever the stride says
      continue;
    }
    const gint ss = GST_VIDEO_FRAME_PLANE_STRIDE(src, p);
    const gint ds = GST_VIDEO_FRAME_PLANE_STRIDE(dst, p);
    gsize row = plane_row_bytes(info, p);
    row = row == 0 ? gsize(MIN(ss, ds)) : MIN(row, gsize(MIN(ss, ds)));
    const guint rows = plane_rows(info, p);
    for (guint y = 0; y < rows; ++y) memcpy(d + gsize(y) * ds, s + gsize(y) * ss, row);
  }
  return true;
}

gsize contiguous_span(const GstVideoInfo& info, const PlanePointers& dst,
                      const PlanePointers& src) {
  const auto at = [](const void* p) { return reinterpret_cast<guintptr>(p); };
  gsize span = 0;
  for (guint p = 0; p < GST_VIDEO_INFO_N_PLANES(&info); ++p) {
    if (!dst.data[p] || !src.data[p] || dst.stride[p] <= 0 || src.stride[p] != dst.stride[p])
      return 0;
    // Planes before plane 0 (or a layout whose distances differ) are not one span.
    if (at(dst.data[p]) < at(dst.data[0]) || at(src.data[p]) < at(src.data[0])) return 0;
    const gsize distance = at(dst.data[p]) - at(dst.data[0]);
    if (at(src.data[p]) - at(src.data[0]) != distance) return 0;
    span = MAX(span, distance + gsize(dst.stride[p]) * plane_rows(info, p));
  }
  return span;
}

// Whether the frame is long enough for the caps' default layout.
static bool holds_default_layout(const cipc::Frame& frame, const GstVideoInfo& info,
                                 std::string* why) {
  if (frame.size >= GST_VIDEO_INFO_SIZE(&info)) return true;
  *why = "frame of " + std::to_string(frame.size) + " bytes is smaller than the caps need (" +
         std::to_string(GST_VIDEO_INFO_SIZE(&info)) + ")";
  return false;
}

bool validate_planes(const cipc::Frame& frame, const GstVideoInfo& info, GstVideoInfo* layout,
                     std::string* why) {
  *layout = info;
  const guint n_planes = GST_VIDEO_INFO_N_PLANES(&info);
  const GstVideoFormatInfo* finfo = info.finfo;
  if (frame.n_planes == 0) {
    return holds_default_layout(frame, info, why);  // no layout sent: the caps' default
  }
  if (frame.n_planes != n_planes) {
    *why = "frame has " + std::to_string(frame.n_planes) + " planes, caps have " +
           std::to_string(n_planes);
    return false;
  }
  const bool tiled = GST_VIDEO_FORMAT_INFO_IS_TILED(finfo);
  for (guint p = 0; p < n_planes; ++p) {
    const uint64_t offset = frame.plane_offset[p];
    const gint stride = frame.plane_stride[p];
    if (tiled) {
      if (offset != GST_VIDEO_INFO_PLANE_OFFSET(&info, p) ||
          stride != GST_VIDEO_INFO_PLANE_STRIDE(&info, p)) {
        *why = "tiled formats must use the default layout";
        return false;
      }
      // A frame shorter than the default layout would have downstream read past the slot
      // (found by tests/fuzz frame-layout).
      if (!holds_default_layout(frame, info, why)) return false;
      continue;
    }
    const guint rows = plane_rows(info, p);
    const gint min_stride = GST_VIDEO_INFO_PLANE_STRIDE(&info, p);
    if (stride < min_stride) {
      *why = "plane " + std::to_string(p) + " stride " + std::to_string(stride) +
             " is smaller than a row (" + std::to_string(min_stride) + ")";
      return false;
    }
    const uint64_t end = offset + uint64_t(stride) * rows;
    if (end > frame.size) {
      *why = "plane " + std::to_string(p) + " ends at byte " + std::to_string(end) + ", past the " +
             std::to_string(frame.size) + "-byte frame";
      return false;
    }
    layout->offset[p] = offset;
    layout->stride[p] = stride;
  }
  layout->size = frame.size;
  return true;
}

}  // namespace cipc_gst
