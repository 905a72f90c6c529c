// SPDX-License-Identifier: LGPL-2.1-or-later
// Plane layouts in both directions and the consumer's bounds check (gst/common/frameplanes),
// for every raw format GStreamer knows.
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "common/frameplanes.h"
#include "glue_fixture.h"

namespace {

using namespace cipc_test;

TEST_F(Glue, PlaneLayoutRoundTripsThroughTheWire) {
  const GstVideoInfo nv12 = info("video/x-raw,format=NV12,width=322,height=242");
  GstBuffer* b = gst_buffer_new_allocate(nullptr, 150000, nullptr);
  // A producer layout with padding: stride 384, chroma plane at a distance.
  gsize offsets[4] = {0, 384 * 242 + 1024, 0, 0};
  gint strides[4] = {384, 384, 0, 0};
  gst_buffer_add_video_meta_full(b, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_FORMAT_NV12, 322, 242, 2,
                                 offsets, strides);
  cipc::Frame f;
  cipc_gst::describe_planes(b, nv12, f);
  EXPECT_EQ(f.n_planes, 2u);
  EXPECT_EQ(f.plane_offset[1], offsets[1]);
  EXPECT_EQ(f.plane_stride[0], 384);
  EXPECT_EQ(f.size, gst_buffer_get_size(b));

  GstVideoInfo layout;
  std::string why;
  ASSERT_TRUE(cipc_gst::validate_planes(f, nv12, &layout, &why)) << why;
  EXPECT_EQ(layout.offset[1], offsets[1]);
  EXPECT_EQ(layout.stride[1], 384);
  gst_buffer_unref(b);
}

TEST_F(Glue, ConsumerRejectsLayoutsThatLeaveTheFrame) {
  const GstVideoInfo i420 = info("video/x-raw,format=I420,width=320,height=240");
  cipc::Frame f;
  f.size = GST_VIDEO_INFO_SIZE(&i420);
  f.n_planes = 3;
  for (int p = 0; p < 3; ++p) {
    f.plane_offset[p] = GST_VIDEO_INFO_PLANE_OFFSET(&i420, p);
    f.plane_stride[p] = GST_VIDEO_INFO_PLANE_STRIDE(&i420, p);
  }
  GstVideoInfo layout;
  std::string why;
  EXPECT_TRUE(cipc_gst::validate_planes(f, i420, &layout, &why)) << why;

  cipc::Frame past_end = f;
  past_end.plane_offset[2] = f.size - 10;  // the V plane would run past the frame
  EXPECT_FALSE(cipc_gst::validate_planes(past_end, i420, &layout, &why));
  EXPECT_NE(why.find("plane 2"), std::string::npos) << why;

  cipc::Frame short_stride = f;
  short_stride.plane_stride[0] = 100;  // rows narrower than the picture
  EXPECT_FALSE(cipc_gst::validate_planes(short_stride, i420, &layout, &why));

  cipc::Frame huge_stride = f;
  huge_stride.plane_stride[0] = 1 << 20;
  EXPECT_FALSE(cipc_gst::validate_planes(huge_stride, i420, &layout, &why));

  cipc::Frame wrong_planes = f;
  wrong_planes.n_planes = 2;
  EXPECT_FALSE(cipc_gst::validate_planes(wrong_planes, i420, &layout, &why));

  cipc::Frame no_layout_small = f;
  no_layout_small.n_planes = 0;
  no_layout_small.size = f.size - 1;
  EXPECT_FALSE(cipc_gst::validate_planes(no_layout_small, i420, &layout, &why));
  no_layout_small.size = f.size;
  EXPECT_TRUE(cipc_gst::validate_planes(no_layout_small, i420, &layout, &why));
}

// Issue 24, defect 4: RGB8P frames taller than 256 rows were refused, the palette plane being
// taken for `height` rows. Every format GStreamer knows, at sizes up to 8K: the default layout
// and a padded one (wider strides, gaps between planes) are described, validated and accepted;
// up to 1080p a frame's pixels also survive producer -> bytes -> consumer bit-exact.
TEST_F(Glue, EveryFormatAtEverySizeDescribesValidatesAndRoundTrips) {
  struct Size {
    guint w, h;
  };
  const Size sizes[] = {{1, 1}, {64, 256}, {64, 300}, {641, 479}, {1920, 1080}, {7680, 4320}};
  int formats = 0, checked = 0, round_trips = 0;
  // GStreamer 1.22 has no GST_VIDEO_FORMAT_LAST: the enum ends after the highest raw format.
  guint n_raw = 0;
  const GstVideoFormat* raw = gst_video_formats_raw(&n_raw);
  int last = 0;
  for (guint i = 0; i < n_raw; ++i) last = MAX(last, int(raw[i]));
  for (int f = GST_VIDEO_FORMAT_I420; f <= last; ++f) {
    const auto format = static_cast<GstVideoFormat>(f);
    const GstVideoFormatInfo* finfo = gst_video_format_get_info(format);
    if (finfo == nullptr || GST_VIDEO_FORMAT_INFO_FORMAT(finfo) == GST_VIDEO_FORMAT_UNKNOWN)
      continue;
    ++formats;
    for (const Size& sz : sizes) {
      GstVideoInfo info;
      if (!gst_video_info_set_format(&info, format, sz.w, sz.h)) continue;
      const std::string name = std::string(gst_video_format_to_string(format)) + " " +
                               std::to_string(sz.w) + "x" + std::to_string(sz.h);
      const guint n = GST_VIDEO_INFO_N_PLANES(&info);
      const bool tiled = GST_VIDEO_FORMAT_INFO_IS_TILED(finfo);
      // Big frames: lazily mapped host memory, never touched above 1080p.
      GstBuffer* plain = untouched_buffer(GST_VIDEO_INFO_SIZE(&info));
      ASSERT_NE(plain, nullptr) << name;
      cipc::Frame frame;
      cipc_gst::describe_planes(plain, info, frame);
      GstVideoInfo layout;
      std::string why;
      EXPECT_TRUE(cipc_gst::validate_planes(frame, info, &layout, &why)) << name << ": " << why;
      gst_buffer_unref(plain);
      ++checked;
      if (tiled) continue;  // tiled formats must keep the default layout
      // The producer's padded layout, planes in order with 64 spare bytes each.
      gsize offsets[GST_VIDEO_MAX_PLANES] = {};
      gint strides[GST_VIDEO_MAX_PLANES] = {};
      gsize total = 0;
      for (guint p = 0; p < n; ++p) {
        strides[p] = GST_VIDEO_INFO_PLANE_STRIDE(&info, p) + 64;
        offsets[p] = total;
        total += gsize(strides[p]) * cipc_gst::plane_rows(info, p) + 64;
      }
      const bool small = uint64_t(sz.w) * sz.h <= 1920 * 1080;
      GstBuffer* padded = untouched_buffer(total);
      ASSERT_NE(padded, nullptr) << name;
      gst_buffer_add_video_meta_full(padded, GST_VIDEO_FRAME_FLAG_NONE, format, sz.w, sz.h, n,
                                     offsets, strides);
      cipc::Frame pf;
      cipc_gst::describe_planes(padded, info, pf);
      ASSERT_TRUE(cipc_gst::validate_planes(pf, info, &layout, &why)) << name << ": " << why;
      for (guint p = 0; p < n; ++p) {
        EXPECT_EQ(layout.offset[p], offsets[p]) << name;
        EXPECT_EQ(layout.stride[p], strides[p]) << name;
      }
      if (small) {
        // Producer: random pixels copied into the padded slot.
        GstBuffer* source = gst_buffer_new_allocate(nullptr, GST_VIDEO_INFO_SIZE(&info), nullptr);
        GstMapInfo m;
        ASSERT_TRUE(gst_buffer_map(source, &m, GST_MAP_WRITE));
        uint32_t x = 2463534242u + f;
        for (gsize i = 0; i < m.size; ++i) {
          x ^= x << 13, x ^= x >> 17, x ^= x << 5;
          m.data[i] = uint8_t(x);
        }
        gst_buffer_unmap(source, &m);
        GstVideoFrame src, slot;
        ASSERT_TRUE(gst_video_frame_map(&src, &info, source, GST_MAP_READ)) << name;
        ASSERT_TRUE(gst_video_frame_map(&slot, &info, padded, GST_MAP_WRITE)) << name;
        ASSERT_TRUE(gst_video_frame_copy(&slot, &src)) << name;
        gst_video_frame_unmap(&slot);
        // Consumer: the slot's bytes with a meta of the validated layout, as cudasrc-ipc does.
        GstBuffer* received = gst_buffer_copy_deep(padded);
        gst_buffer_remove_meta(received, GST_META_CAST(gst_buffer_get_video_meta(received)));
        gst_buffer_add_video_meta_full(received, GST_VIDEO_FRAME_FLAG_NONE, format, sz.w, sz.h, n,
                                       layout.offset, layout.stride);
        GstVideoFrame in;
        ASSERT_TRUE(gst_video_frame_map(&in, &info, received, GST_MAP_READ)) << name;
        // Downstream, reading through that meta, finds every row of every plane as the source
        // had it. Compared are the bytes gst_video_frame_copy_plane() copies between different
        // strides (width x pixel stride of the plane's first component, the whole row where that
        // is 0; the 1024-byte palette), not the row padding: 1.28 memcpy()s whole planes,
        // padding included, where the strides match (1.20 and 1.22 copy row by row), so a
        // second gst_video_frame_copy() of the source is no reference.
        for (guint p = 0; p < n; ++p) {
          const auto* s = static_cast<const guint8*>(GST_VIDEO_FRAME_PLANE_DATA(&src, p));
          const auto* r = static_cast<const guint8*>(GST_VIDEO_FRAME_PLANE_DATA(&in, p));
          const gint ss = GST_VIDEO_FRAME_PLANE_STRIDE(&src, p);
          const gint rs = GST_VIDEO_FRAME_PLANE_STRIDE(&in, p);
          gsize row_bytes = 256 * 4;
          guint rows = 1;
          if (p != 1 || !GST_VIDEO_FORMAT_INFO_HAS_PALETTE(finfo)) {
            gint comp[GST_VIDEO_MAX_COMPONENTS];
            gst_video_format_info_component(finfo, p, comp);
            row_bytes = gsize(GST_VIDEO_FRAME_COMP_WIDTH(&src, comp[0])) *
                        GST_VIDEO_FRAME_COMP_PSTRIDE(&src, comp[0]);
            if (row_bytes == 0) row_bytes = MIN(ss, rs);
            rows = cipc_gst::plane_rows(info, p);
          }
          guint y = 0;
          while (y < rows && memcmp(s + gsize(y) * ss, r + gsize(y) * rs, row_bytes) == 0) ++y;
          EXPECT_EQ(y, rows) << name << ": pixels differ, plane " << p << " row " << y;
        }
        gst_video_frame_unmap(&in);
        gst_video_frame_unmap(&src);
        gst_buffer_unref(received);
        gst_buffer_unref(source);
        ++round_trips;
      }
      gst_buffer_unref(padded);
    }
  }
  EXPECT_GT(formats, 100);
  EXPECT_GT(checked, 5 * 100);
  EXPECT_GT(round_trips, 4 * 90);
}

// The planes of a buffer laid out by `layout` (offsets and strides) at `base`.
cipc_gst::PlanePointers planes_at(const guint8* base, const GstVideoInfo& layout) {
  cipc_gst::PlanePointers planes;
  for (guint p = 0; p < GST_VIDEO_INFO_N_PLANES(&layout); ++p) {
    planes.data[p] = base + layout.offset[p];
    planes.stride[p] = layout.stride[p];
  }
  return planes;
}

// An upload goes as one 1D copy only where both sides lay the frame out alike: then the span
// covers every plane's every row, and nothing beyond the frame.
TEST_F(Glue, ContiguousSpanCoversAFrameLaidOutAlikeAndNothingElse) {
  static guint8 src[1 << 22], dst[1 << 22];
  for (const char* caps : {"video/x-raw,format=BGRA,width=1920,height=1080",
                           "video/x-raw,format=NV12,width=322,height=242",
                           "video/x-raw,format=I420,width=321,height=241",
                           "video/x-raw,format=RGB8P,width=64,height=48"}) {
    const GstVideoInfo vi = info(caps);
    EXPECT_EQ(cipc_gst::contiguous_span(vi, planes_at(dst, vi), planes_at(src, vi)),
              GST_VIDEO_INFO_SIZE(&vi))
        << caps;
  }
  const GstVideoInfo nv12 = info("video/x-raw,format=NV12,width=322,height=242");
  // A padded stride on one side: row by row.
  GstVideoInfo padded = nv12;
  padded.stride[0] = padded.stride[1] = 384;
  padded.offset[1] = 384 * 242;
  EXPECT_EQ(cipc_gst::contiguous_span(nv12, planes_at(dst, padded), planes_at(src, nv12)), 0u);
  // The same strides but the chroma plane elsewhere: row by row.
  GstVideoInfo moved = nv12;
  moved.offset[1] += 1024;
  EXPECT_EQ(cipc_gst::contiguous_span(nv12, planes_at(dst, moved), planes_at(src, nv12)), 0u);
  // Both sides padded alike: one span, up to the end of the chroma plane's last row.
  EXPECT_EQ(cipc_gst::contiguous_span(nv12, planes_at(dst, padded), planes_at(src, padded)),
            gsize(384 * 242 + 384 * 121));
  // Planes in the other order (chroma first) on both sides: not one span from plane 0.
  GstVideoInfo swapped = nv12;
  swapped.offset[0] = 384 * 121;
  swapped.offset[1] = 0;
  swapped.stride[0] = swapped.stride[1] = 384;
  EXPECT_EQ(cipc_gst::contiguous_span(nv12, planes_at(dst, swapped), planes_at(src, swapped)), 0u);
  // A missing plane pointer or a zero stride: nothing to copy as one span.
  cipc_gst::PlanePointers none = planes_at(src, nv12);
  none.data[1] = nullptr;
  EXPECT_EQ(cipc_gst::contiguous_span(nv12, planes_at(dst, nv12), none), 0u);
}

}  // namespace
