// SPDX-License-Identifier: LGPL-2.1-or-later
// The conformance check every two-process test applies to each buffer leaving cudasrc-ipc: the
// buffer agrees with the caps it was negotiated with, as any downstream element relies on
// (videoconvert, gst_video_frame_map, OpenCV's appsink). Its GstVideoMeta (when present) names
// the caps' format, width and height and as many planes; each plane's offset and stride place
// the plane's rows inside the buffer's memory; and the buffer maps as a video frame. A buffer
// without a meta must be at least as large as the caps' default layout.
//
// Header-only, for the test peers (tests/e2e/peer.cpp, tests/gpu/cuda_peer.cpp). Checks only
// what can be read without mapping the memory first; the map itself comes last.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <string>

namespace cipc_test {

// "" when `buffer` conforms to `info` (the negotiated caps); otherwise the first way it does not.
// `map_frame` false skips the final gst_video_frame_map() (a caller that maps it anyway, or
// memory whose CPU map costs a download the caller does not want to pay twice).
inline std::string frame_nonconformance(const GstVideoInfo& info, GstBuffer* buffer,
                                        bool map_frame = true) {
  const gsize size = gst_buffer_get_size(buffer);
  const GstVideoMeta* meta = gst_buffer_get_video_meta(buffer);
  const GstVideoFormatInfo* finfo = info.finfo;
  const guint n_planes = GST_VIDEO_INFO_N_PLANES(&info);
  if (meta) {
    if (meta->format != GST_VIDEO_INFO_FORMAT(&info))
      return std::string("the video meta says ") + gst_video_format_to_string(meta->format) +
             " but the caps say " + GST_VIDEO_INFO_NAME(&info);
    if (int(meta->width) != GST_VIDEO_INFO_WIDTH(&info) ||
        int(meta->height) != GST_VIDEO_INFO_HEIGHT(&info))
      return "the video meta says " + std::to_string(meta->width) + "x" +
             std::to_string(meta->height) + " but the caps say " +
             std::to_string(GST_VIDEO_INFO_WIDTH(&info)) + "x" +
             std::to_string(GST_VIDEO_INFO_HEIGHT(&info));
    if (meta->n_planes != n_planes)
      return "the video meta has " + std::to_string(meta->n_planes) + " planes, the format " +
             std::to_string(n_planes);
    for (guint p = 0; p < n_planes; ++p) {
      gint comp[GST_VIDEO_MAX_COMPONENTS];
      gst_video_format_info_component(finfo, p, comp);
      const gint c = comp[0] >= 0 ? comp[0] : 0;
      const gsize rows = GST_VIDEO_INFO_COMP_HEIGHT(&info, c);
      const gint pstride = GST_VIDEO_INFO_COMP_PSTRIDE(&info, c);
      const gsize min_stride =
          pstride > 0 ? gsize(GST_VIDEO_INFO_COMP_WIDTH(&info, c)) * pstride : 1;
      if (meta->stride[p] <= 0 || gsize(meta->stride[p]) < min_stride)
        return "plane " + std::to_string(p) + "'s stride " + std::to_string(meta->stride[p]) +
               " is less than a row of " + std::to_string(min_stride) + " bytes";
      const gsize end = meta->offset[p] + gsize(meta->stride[p]) * (rows - 1) + min_stride;
      if (end > size)
        return "plane " + std::to_string(p) + " (offset " + std::to_string(meta->offset[p]) +
               ", stride " + std::to_string(meta->stride[p]) + ", " + std::to_string(rows) +
               " rows) ends at byte " + std::to_string(end) + " of a " + std::to_string(size) +
               "-byte buffer";
    }
  } else if (size < GST_VIDEO_INFO_SIZE(&info)) {
    return "a buffer without a video meta holds " + std::to_string(size) +
           " bytes, the caps' default layout " + std::to_string(GST_VIDEO_INFO_SIZE(&info));
  }
  if (map_frame) {
    GstVideoFrame frame;
    GstVideoInfo copy = info;
    if (!gst_video_frame_map(&frame, &copy, buffer, GST_MAP_READ))
      return "gst_video_frame_map() refuses it";
    gst_video_frame_unmap(&frame);
  }
  return "";
}

}  // namespace cipc_test
