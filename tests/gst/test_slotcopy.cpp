// SPDX-License-Identifier: LGPL-2.1-or-later
// cudasink-ipc's copy of a frame upstream did not write into a slot (gst/ipcsink/slotcopy):
// every pixel of odd widths and padded rows.
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/frameplanes.h"
#include "glue_fixture.h"
#include "host_memory.h"
#include "ipcsink/slotcopy.h"
#include "memory/slotpool.h"

namespace {

using namespace cipc_test;

// Every pixel of every row, as GStreamer's own unpack reads it (an independent reference: it
// knows each format's packing), is the same in `a` and `b`; the first difference otherwise.
std::string first_pixel_difference(const GstVideoFrame& a, const GstVideoFrame& b) {
  const GstVideoFormatInfo* finfo = a.info.finfo;
  const gint width = GST_VIDEO_FRAME_WIDTH(&a);
  // Unpacked pixels are 4 components of 8 or 16 bits.
  std::vector<guint8> ua(gsize(width) * 8 + 64), ub(ua.size());
  for (gint y = 0; y < GST_VIDEO_FRAME_HEIGHT(&a); ++y) {
    std::fill(ua.begin(), ua.end(), 0);
    std::fill(ub.begin(), ub.end(), 0);
    finfo->unpack_func(finfo, GST_VIDEO_PACK_FLAG_NONE, ua.data(), a.data, a.info.stride, 0, y,
                       width);
    finfo->unpack_func(finfo, GST_VIDEO_PACK_FLAG_NONE, ub.data(), b.data, b.info.stride, 0, y,
                       width);
    if (ua != ub) {
      gsize i = 0;
      while (ua[i] == ub[i]) ++i;
      const gsize pixel_bytes = GST_VIDEO_FORMAT_INFO_BITS(finfo) > 8 ? 8 : 4;
      return "row " + std::to_string(y) + ", pixel " + std::to_string(i / pixel_bytes);
    }
  }
  return "";
}

// Found in review of issue 26: into host slots the copy was gst_video_frame_copy(), which between
// different strides copies width x the pixel stride of a plane's first component. For packed
// 4:2:2 (YUY2, UYVY, ...) of odd width that is Y's, so the last chroma pair of every row was left
// out. Every raw format, odd and even widths, upstream's rows padded as a camera's bytesperline
// would: each pixel in the slot equals upstream's.
TEST_F(Glue, HostSlotCopyKeepsEveryPixelOfOddWidthsAndPaddedRows) {
  EXPECT_EQ(cipc_gst::plane_row_bytes(info("video/x-raw,format=YUY2,width=5,height=2"), 0), 12u);
  EXPECT_EQ(cipc_gst::plane_row_bytes(info("video/x-raw,format=UYVY,width=5,height=2"), 0), 12u);
  EXPECT_EQ(cipc_gst::plane_row_bytes(info("video/x-raw,format=NV12,width=5,height=2"), 1), 6u);
  EXPECT_EQ(cipc_gst::plane_row_bytes(info("video/x-raw,format=I420,width=5,height=2"), 2), 3u);
  EXPECT_EQ(cipc_gst::plane_row_bytes(info("video/x-raw,format=BGRx,width=5,height=2"), 0), 20u);

  std::string error;
  std::unique_ptr<cipc_gst::SlotCopier> copier = cipc_gst::SlotCopier::create(-1, &error);
  ASSERT_TRUE(copier) << error;
  guint n_raw = 0;
  const GstVideoFormat* raw = gst_video_formats_raw(&n_raw);
  int copied = 0;
  for (guint i = 0; i < n_raw; ++i) {
    const GstVideoFormatInfo* finfo = gst_video_format_get_info(raw[i]);
    if (GST_VIDEO_FORMAT_INFO_IS_TILED(finfo) || finfo->unpack_func == nullptr) continue;
    for (const guint width : {33u, 64u}) {
      // GStreamer's own layout of these is short at widths not a multiple of 6: their chroma
      // row's stride is the luma row's (44 bytes at 33), but 17 pairs of 10-bit samples take 48,
      // so its unpack reads past the row into whatever follows it.
      const GstVideoFormat short_rows[] = {GST_VIDEO_FORMAT_NV12_10LE32,
                                           GST_VIDEO_FORMAT_NV16_10LE32};
      if (width % 6 != 0 && std::count(std::begin(short_rows), std::end(short_rows), raw[i]))
        continue;
      GstVideoInfo vinfo;
      if (!gst_video_info_set_format(&vinfo, raw[i], width, 7)) continue;
      const std::string name =
          std::string(gst_video_format_to_string(raw[i])) + " width " + std::to_string(width);
      cipc_gst::SlotPoolGenerations pools(std::make_shared<cipc_slots::HostMemoryBackend>(), 2,
                                          [](uint64_t, const std::string&, uint64_t) {});
      GstCaps* caps = gst_video_info_to_caps(&vinfo);
      ASSERT_TRUE(pools.ensure(caps, &error)) << name << ": " << error;
      gst_caps_unref(caps);
      // Upstream's frame: every row 40 bytes longer than the default, random bytes throughout.
      const guint n = GST_VIDEO_INFO_N_PLANES(&vinfo);
      gsize offsets[GST_VIDEO_MAX_PLANES] = {};
      gint strides[GST_VIDEO_MAX_PLANES] = {};
      gsize total = 0;
      for (guint p = 0; p < n; ++p) {
        strides[p] = GST_VIDEO_INFO_PLANE_STRIDE(&vinfo, p) + 40;
        offsets[p] = total;
        total += gsize(strides[p]) * cipc_gst::plane_rows(vinfo, p);
      }
      GstBuffer* upstream = gst_buffer_new_allocate(nullptr, total, nullptr);
      GstMapInfo m;
      ASSERT_TRUE(gst_buffer_map(upstream, &m, GST_MAP_WRITE));
      uint32_t x = 88172645u + i * 131u + width;
      for (gsize b = 0; b < m.size; ++b) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        m.data[b] = uint8_t(x);
      }
      gst_buffer_unmap(upstream, &m);
      gst_buffer_add_video_meta_full(upstream, GST_VIDEO_FRAME_FLAG_NONE, raw[i], width, 7, n,
                                     offsets, strides);

      GstBuffer* slot = copier->copy(pools, upstream, &error);
      ASSERT_NE(slot, nullptr) << name << ": " << error;
      GstVideoFrame in, out;
      ASSERT_TRUE(gst_video_frame_map(&in, &vinfo, upstream, GST_MAP_READ)) << name;
      ASSERT_TRUE(gst_video_frame_map(&out, &vinfo, slot, GST_MAP_READ)) << name;
      EXPECT_EQ(first_pixel_difference(in, out), "") << name;
      gst_video_frame_unmap(&out);
      gst_video_frame_unmap(&in);
      gst_buffer_unref(slot);
      gst_buffer_unref(upstream);
      ++copied;
    }
  }
  EXPECT_GT(copied, 2 * 90);
}

}  // namespace
