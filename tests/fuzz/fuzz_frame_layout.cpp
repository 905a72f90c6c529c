// SPDX-License-Identifier: LGPL-2.1-or-later
// libFuzzer target: the consumer's check of a producer's plane layout (gst/common/frameplanes.h,
// validate_planes), which is all that stands between a lying producer and downstream elements
// reading outside the frame.
//
// Input: a raw video format (any GStreamer knows), width (1..256) and height (1..1088: past a
// palette's 256 rows and past 1080p's), then a FRAME's
// size, plane count, offsets and strides. The FRAME goes through the wire codec first (what
// decode() refuses never reaches validate_planes). When validate_planes accepts the layout, the
// target lays the frame out exactly as cudasrc-ipc does - a buffer of frame.size bytes with a
// GstVideoMeta of the accepted offsets and strides - and reads, in its own instrumented code,
// every byte a downstream element may read for that format: each row of each plane (the row
// length of the format's default layout, as many rows as its tallest component), or the whole
// plane of a tiled format.
// A read past the buffer fails the target (checked explicitly, and by ASan); UBSan reports
// undefined behaviour in the check itself.
#include <gst/gst.h>
#include <gst/video/video.h>

#include <stdio.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/frameplanes.h"
#include "fuzz_util.h"
#include "protocol.h"

using cipc_fuzz::check;
using cipc_fuzz::Input;

namespace {

const GstVideoFormat* g_formats = nullptr;
guint g_n_formats = 0;

// The byte range [offset, offset + extent) of `plane` in the default layout of `info`.
uint64_t default_extent(const GstVideoInfo& info, guint plane) {
  const guint n = GST_VIDEO_INFO_N_PLANES(&info);
  uint64_t end = GST_VIDEO_INFO_SIZE(&info);
  // Planes need not be stored in order: the plane's end is the nearest start above its own.
  for (guint q = 0; q < n; ++q)
    if (GST_VIDEO_INFO_PLANE_OFFSET(&info, q) > GST_VIDEO_INFO_PLANE_OFFSET(&info, plane) &&
        GST_VIDEO_INFO_PLANE_OFFSET(&info, q) < end)
      end = GST_VIDEO_INFO_PLANE_OFFSET(&info, q);
  return end - GST_VIDEO_INFO_PLANE_OFFSET(&info, plane);
}

// Rows of `plane` a downstream element reads: the tallest component stored in it (computed
// here independently of frameplanes.cpp), or for a palette all of its default extent.
uint64_t rows_read(const GstVideoInfo& info, guint plane) {
  uint64_t rows = 0;
  // A palette (plane 1 of RGB8P) is 256 entries whatever the height, though GStreamer lists
  // components in it.
  const bool palette = GST_VIDEO_FORMAT_INFO_HAS_PALETTE(info.finfo) && plane == 1;
  for (guint c = 0; c < GST_VIDEO_INFO_N_COMPONENTS(&info) && !palette; ++c)
    if (GST_VIDEO_INFO_COMP_PLANE(&info, c) == plane)
      rows = std::max<uint64_t>(rows, GST_VIDEO_INFO_COMP_HEIGHT(&info, c));
  if (rows == 0) {
    const uint64_t row = static_cast<uint64_t>(GST_VIDEO_INFO_PLANE_STRIDE(&info, plane));
    rows = (default_extent(info, plane) + row - 1) / row;
  }
  return rows;
}

volatile uint8_t g_sink;

// Reads [from, from + n) of the frame. The bound is checked here too, so that a layout reaching
// past the frame fails in every build, not only under ASan.
void read_range(const uint8_t* base, uint64_t frame_size, guint plane, uint64_t from, uint64_t n) {
  check(from + n <= frame_size, "validate_planes accepted a layout whose plane " +
                                    std::to_string(plane) + " is read at bytes [" +
                                    std::to_string(from) + ", " + std::to_string(from + n) +
                                    ") of a " + std::to_string(frame_size) + "-byte frame");
  uint8_t acc = 0;
  for (uint64_t i = 0; i < n; ++i) acc ^= base[from + i];
  g_sink = acc;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  gst_init(argc, argv);
  g_formats = gst_video_formats_raw(&g_n_formats);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (g_formats == nullptr) LLVMFuzzerInitialize(nullptr, nullptr);
  Input in(data, size);
  const GstVideoFormat format = g_formats[in.u8() % g_n_formats];
  const guint width = 1 + in.u8();
  const guint height = 1 + in.u16() % 1088;
  GstVideoInfo info;
  if (!gst_video_info_set_format(&info, format, width, height)) return 0;

  cipc::Frame frame;
  const uint32_t size_choice = in.u32();
  // Around the format's own size, where the interesting boundaries are.
  frame.size = 1 + size_choice % (2 * GST_VIDEO_INFO_SIZE(&info) + 64);
  frame.n_planes = in.u8() % (cipc::kMaxPlanes + 1);
  for (uint32_t p = 0; p < cipc::kMaxPlanes; ++p) {
    const bool use_default = in.flag();
    const uint32_t off = in.u32(), stride_delta = in.u32();
    if (use_default && p < GST_VIDEO_INFO_N_PLANES(&info)) {
      frame.plane_offset[p] = GST_VIDEO_INFO_PLANE_OFFSET(&info, p) + off % 64;
      frame.plane_stride[p] =
          GST_VIDEO_INFO_PLANE_STRIDE(&info, p) + static_cast<int32_t>(stride_delta % 64) - 8;
    } else {
      frame.plane_offset[p] = off % (frame.size + 16);
      frame.plane_stride[p] = static_cast<int32_t>(stride_delta);
    }
  }
  // Only what the wire codec lets through can reach the element.
  const std::vector<uint8_t> wire = cipc::encode(cipc::Message{frame});
  cipc::DecodeResult decoded = cipc::decode(wire.data(), wire.size());
  if (!decoded) return 0;
  frame = std::get<cipc::Frame>(decoded.message().body);

  GstVideoInfo layout;
  std::string why;
  if (!cipc_gst::validate_planes(frame, info, &layout, &why)) {
    check(!why.empty(), "a refused layout without an explanation");
    return 0;
  }

  if (getenv("CIPC_FUZZ_VERBOSE")) {
    fprintf(stderr, "accepted: %s %ux%u (default size %zu), frame of %llu bytes, %u plane(s):",
            gst_video_format_to_string(format), width, height, GST_VIDEO_INFO_SIZE(&info),
            (unsigned long long)frame.size, frame.n_planes);
    for (guint p = 0; p < GST_VIDEO_INFO_N_PLANES(&info); ++p)
      fprintf(stderr, " [offset %zu stride %d]", GST_VIDEO_INFO_PLANE_OFFSET(&layout, p),
              GST_VIDEO_INFO_PLANE_STRIDE(&layout, p));
    fprintf(stderr, "\n");
  }
  // Exactly frame.size bytes on the heap, so that ASan's redzone follows the last byte.
  auto* bytes = static_cast<uint8_t*>(std::calloc(frame.size, 1));
  check(bytes != nullptr, "calloc failed");
  const guint n_planes = GST_VIDEO_INFO_N_PLANES(&info);
  const bool tiled = GST_VIDEO_FORMAT_INFO_IS_TILED(info.finfo);
  for (guint p = 0; p < n_planes; ++p) {
    const uint64_t offset = GST_VIDEO_INFO_PLANE_OFFSET(&layout, p);
    const int64_t stride = GST_VIDEO_INFO_PLANE_STRIDE(&layout, p);
    const uint64_t extent = default_extent(info, p);
    if (tiled) {
      read_range(bytes, frame.size, p, offset, extent);
      continue;
    }
    const uint64_t row = static_cast<uint64_t>(GST_VIDEO_INFO_PLANE_STRIDE(&info, p));
    check(row > 0 && stride > 0, "an accepted layout with a non-positive stride");
    const uint64_t rows = rows_read(info, p);
    for (uint64_t y = 0; y < rows; ++y)
      read_range(bytes, frame.size, p, offset + y * static_cast<uint64_t>(stride), row);
  }
  std::free(bytes);
  return 0;
}
