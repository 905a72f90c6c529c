// SPDX-License-Identifier: LGPL-2.1-or-later
// The element-independent GStreamer pieces, without loading the plugin: plane layouts in both
// directions and the consumer's bounds check, timestamp conversion, slot memory, slot pool.
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clockmapping.h"
#include "common/frameplanes.h"
#include "host_memory.h"
#include "ipcsink/slotcopy.h"
#include "ipcsrc/srcnegotiation.h"
#include "ipcsrc/srcoutput.h"
#include "memory/slotmemory.h"
#include "memory/slotpool.h"
#include "waker.h"
#ifdef CIPC_HAVE_GST_GL
#include "ipcsrc/gl/glcudainteropoutput.h"
#endif
#ifdef CIPC_HAVE_GST_CUDA
#include "common/gstcudainterop.h"
#include "ipcsrc/srccudamemoryoutput.h"
#endif

namespace {

// A buffer of `size` bytes that nothing touches until written: anonymous mapped memory, so that
// an 8K frame of every format costs no page and no memset (glibc's MALLOC_PERTURB_, which meson
// test sets, fills every g_malloc'ed byte and made this suite take over a minute).
struct Mapping {
  void* data;
  size_t size;
};
GstBuffer* untouched_buffer(gsize size) {
  if (size == 0) return gst_buffer_new();  // formats without a size of their own (DMA_DRM)
  void* data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) return nullptr;
  return gst_buffer_new_wrapped_full(GstMemoryFlags(0), data, size, 0, size,
                                     new Mapping{data, size}, [](gpointer m) {
                                       auto* mapping = static_cast<Mapping*>(m);
                                       munmap(mapping->data, mapping->size);
                                       delete mapping;
                                     });
}

class Glue : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }
  static GstVideoInfo info(const char* caps_string) {
    GstCaps* caps = gst_caps_from_string(caps_string);
    GstVideoInfo i;
    EXPECT_TRUE(gst_video_info_from_caps(&i, caps));
    gst_caps_unref(caps);
    return i;
  }
};

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

// What cudasrc-ipc offers downstream, best first: a CUDA producer's slot itself, GStreamer CUDA
// memory (nvcodec builds), GL textures (GL builds, gl-import on, 4-byte formats), then system
// memory with BGRx beside BGRA; a host producer's caps as they are. The allocation query is then
// answered by the memory the negotiated caps name.
TEST_F(Glue, SourceOffersItsMemoriesFewestCopiesFirst) {
  GstCaps* producer =
      gst_caps_from_string("video/x-raw,format=BGRA,width=64,height=48,framerate=30/1");
  auto features_of = [](GstCaps* caps) {
    std::vector<std::string> out;
    for (guint i = 0; i < gst_caps_get_size(caps); ++i) {
      GstCapsFeatures* f = gst_caps_get_features(caps, i);
      out.push_back(f && gst_caps_features_get_size(f) ? gst_caps_features_get_nth(f, 0)
                                                       : "system");
    }
    return out;
  };
  for (const bool offer_gl : {false, true}) {
    SCOPED_TRACE(offer_gl ? "gl-import=cuda-interop" : "gl-import=none");
    GstCaps* caps = cipc_gst::src_output_caps(true, producer, offer_gl);
    std::vector<std::string> expected{GST_CAPS_FEATURE_MEMORY_CUDA_IPC};
#ifdef CIPC_HAVE_GST_CUDA
    expected.push_back(GST_CAPS_FEATURE_MEMORY_CUDA_MEMORY);
#endif
#ifdef CIPC_HAVE_GST_GL
    if (offer_gl) expected.push_back(GST_CAPS_FEATURE_MEMORY_GL_MEMORY);
#endif
    expected.push_back(GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY);
    EXPECT_EQ(features_of(caps), expected) << gst_caps_to_string(caps);
    GstCaps* bgrx = gst_caps_from_string("video/x-raw,format=BGRx,width=64,height=48");
    EXPECT_TRUE(gst_caps_can_intersect(bgrx, caps)) << "system memory offers BGRx for BGRA";
    gst_caps_unref(bgrx);
    for (guint i = 0; i < gst_caps_get_size(caps); ++i) {
      GstCaps* one = gst_caps_copy_nth(caps, i);
      const auto memory = cipc_gst::src_caps_memory(one);
      const std::string feature = features_of(one)[0];
      EXPECT_EQ(memory, feature == GST_CAPS_FEATURE_MEMORY_CUDA_IPC
                            ? cipc_gst::SrcCapsMemory::kCudaIpc
                        : feature == GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY
                            ? cipc_gst::SrcCapsMemory::kSystem
                        : feature == "memory:GLMemory" ? cipc_gst::SrcCapsMemory::kGl
                                                       : cipc_gst::SrcCapsMemory::kGstCuda)
          << feature;
      gst_caps_unref(one);
    }
    gst_caps_unref(caps);
  }
  GstCaps* host = cipc_gst::src_output_caps(false, producer, true);
  EXPECT_TRUE(gst_caps_is_strictly_equal(host, producer)) << gst_caps_to_string(host);
  gst_caps_unref(host);
  gst_caps_unref(producer);
}

// The producer's caps string: parsed as it is, and refused (nullptr) when it is not caps.
TEST_F(Glue, ProducerCapsParseOrAreRefused) {
  GstCaps* caps = cipc_gst::parse_producer_caps(
      "video/x-raw, format=(string)NV12, width=(int)64, height=(int)48, framerate=(fraction)30/1");
  ASSERT_NE(caps, nullptr);
  GstVideoInfo vi;
  EXPECT_TRUE(gst_video_info_from_caps(&vi, caps));
  EXPECT_EQ(GST_VIDEO_INFO_FORMAT(&vi), GST_VIDEO_FORMAT_NV12);
  gst_caps_unref(caps);
  EXPECT_EQ(cipc_gst::parse_producer_caps("not caps, ,="), nullptr);
}

// Issue 26, item 5: cudasrc-ipc's outputs are classes behind one interface; which one the
// negotiated caps ask for is a table, checked here row by row.
TEST_F(Glue, SourceOutputFollowsProducerMemoryCapsAndIoMode) {
  using cipc_gst::SrcOutputKind;
  struct Row {
    bool producer_cuda, caps_cuda_ipc, caps_gst_cuda, io_copy;
    SrcOutputKind expected;
    bool can_wrap = false;  // GStreamer >= 1.24 and the slots' own context
    bool caps_gl = false;   // memory:GLMemory
  };
  const Row rows[] = {
      // A host producer's slots go downstream as they are, whatever the caps or io-mode.
      {false, false, false, false, SrcOutputKind::kShared},
      {false, false, false, true, SrcOutputKind::kShared},
      {false, true, false, true, SrcOutputKind::kShared},
      // A CUDA producer: our memory (the slot, or io-mode=copy's private copy) ...
      {true, true, false, false, SrcOutputKind::kShared},
      {true, true, false, true, SrcOutputKind::kCopy},
      // ... GStreamer's CUDA memory: one device copy where GstCudaMemory cannot wrap the slot
      // (before 1.24, or another context), else the slot wrapped unless io-mode=copy asks for
      // the slot back at once ...
      {true, false, true, false, SrcOutputKind::kGstCuda},
      {true, false, true, true, SrcOutputKind::kGstCuda},
      {true, false, true, false, SrcOutputKind::kGstCudaWrapped, true},
      {true, false, true, true, SrcOutputKind::kGstCuda, true},
      // (a host producer's slots are never wrapped)
      {false, false, true, false, SrcOutputKind::kShared, true},
      // ... GL memory: one copy into a texture, with or without io-mode=copy (a host
      // producer's frames reach GL through glupload, as system memory) ...
      {true, false, false, false, SrcOutputKind::kGl, false, true},
      {true, false, false, true, SrcOutputKind::kGl, false, true},
      {false, false, false, false, SrcOutputKind::kShared, false, true},
      // ... or system memory (one download).
      {true, false, false, false, SrcOutputKind::kDownload},
      {true, false, false, true, SrcOutputKind::kDownload},
  };
  for (const Row& r : rows) {
    cipc_gst::SrcOutputRequest request;
    request.producer_cuda = r.producer_cuda;
    request.caps_cuda_ipc = r.caps_cuda_ipc;
    request.caps_gst_cuda = r.caps_gst_cuda;
    request.io_mode_copy = r.io_copy;
    request.gst_cuda_can_wrap = r.can_wrap;
    request.caps_gl = r.caps_gl;
    const SrcOutputKind kind = cipc_gst::choose_src_output(request);
    EXPECT_EQ(kind, r.expected) << "producer_cuda " << r.producer_cuda << " cuda-ipc caps "
                                << r.caps_cuda_ipc << " gst-cuda caps " << r.caps_gst_cuda
                                << " io-mode=copy " << r.io_copy << " can wrap " << r.can_wrap
                                << " gl caps " << r.caps_gl << ": " << cipc_gst::describe(kind);
  }
  // Every build makes the shared output; the CUDA ones only a CUDA build (their frames, and
  // the shared output's, are checked end to end: tests/e2e, tests/gpu).
  GstVideoInfo vinfo = info("video/x-raw,format=NV12,width=64,height=48");
  cipc_gst::SrcCudaSide cuda;
  std::atomic<guint64> downloads{0}, device_copies{0};
  auto shared =
      cipc_gst::make_src_output(SrcOutputKind::kShared, vinfo, &cuda, {&downloads, &device_copies});
  ASSERT_TRUE(shared);
  EXPECT_EQ(shared->kind(), SrcOutputKind::kShared);
#ifndef CIPC_HAVE_CUDA
  EXPECT_FALSE(cipc_gst::make_src_output(SrcOutputKind::kDownload, vinfo, &cuda,
                                         {&downloads, &device_copies}));
#endif
  // The wrapped output needs a GStreamer CUDA context: without one it is not made (the element
  // then copies).
  EXPECT_FALSE(cipc_gst::make_src_output(SrcOutputKind::kGstCudaWrapped, vinfo, &cuda,
                                         {&downloads, &device_copies}, nullptr));
}

#ifdef CIPC_HAVE_GST_CUDA
// Issue 29: GstCudaMemory describes memory as one pitch (its first plane's stride) over
// size / pitch rows. A layout it cannot describe is copied instead of wrapped.
TEST_F(Glue, WrappedGstCudaMemoryTakesOnlyLayoutsWithOnePitch) {
  GstVideoInfo nv12 = info("video/x-raw,format=NV12,width=64,height=48");
  nv12.stride[0] = nv12.stride[1] = 128;  // a slot's pitch, wider than the rows
  nv12.offset[1] = 128 * 48;
  nv12.size = 128 * 72;
  EXPECT_TRUE(cipc_gst::gst_cuda_memory_can_describe(nv12));
  GstVideoInfo uneven = nv12;
  uneven.stride[1] = 64;  // the chroma plane packed tighter than the luma plane
  EXPECT_FALSE(cipc_gst::gst_cuda_memory_can_describe(uneven));
  GstVideoInfo narrow = info("video/x-raw,format=BGRA,width=64,height=48");
  EXPECT_TRUE(cipc_gst::gst_cuda_memory_can_describe(narrow));
  narrow.stride[0] = 128;  // a pitch shorter than a row of 64 BGRA pixels (256 bytes)
  EXPECT_FALSE(cipc_gst::gst_cuda_memory_can_describe(narrow));
  // I420's chroma stride is half the luma's: one contiguous block when rows have no padding...
  GstVideoInfo i420 = info("video/x-raw,format=I420,width=64,height=48");
  EXPECT_TRUE(cipc_gst::gst_cuda_memory_can_describe(i420));
  // ...but not with a padded pitch: CPU mappings would miss chroma rows.
  i420.stride[0] = 128;
  i420.stride[1] = i420.stride[2] = 64;
  i420.offset[1] = 128 * 48;
  i420.offset[2] = i420.offset[1] + 64 * 24;
  i420.size = i420.offset[2] + 64 * 24;
  EXPECT_FALSE(cipc_gst::gst_cuda_memory_can_describe(i420));
}
#endif

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

TEST_F(Glue, SlotPoolAllocatesNumberedSlotsWithVideoMeta) {
  auto backend = std::make_shared<cipc_slots::HostMemoryBackend>();
  GstBufferPool* pool = gst_cipc_slot_pool_new(backend, 7);
  GstCaps* caps = gst_caps_from_string("video/x-raw,format=RGB,width=321,height=241");
  GstVideoInfo vi;
  gst_video_info_from_caps(&vi, caps);
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, 100, 2, 0);  // too small a size on purpose
  EXPECT_FALSE(gst_buffer_pool_set_config(pool, config)) << "a resized config is reported";
  config = gst_buffer_pool_get_config(pool);
  guint size = 0;
  gst_buffer_pool_config_get_params(config, nullptr, &size, nullptr, nullptr);
  EXPECT_EQ(size, GST_VIDEO_INFO_SIZE(&vi));
  ASSERT_TRUE(gst_buffer_pool_set_config(pool, config));
  ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE));

  GstBuffer* a = nullptr;
  GstBuffer* b = nullptr;
  ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &a, nullptr), GST_FLOW_OK);
  ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &b, nullptr), GST_FLOW_OK);
  const GstCipcSlotBinding* ba = gst_cipc_slot_memory_binding(gst_buffer_peek_memory(a, 0));
  const GstCipcSlotBinding* bb = gst_cipc_slot_memory_binding(gst_buffer_peek_memory(b, 0));
  ASSERT_TRUE(ba && bb);
  EXPECT_EQ(ba->generation, 7u);
  EXPECT_NE(ba->index, bb->index);
  EXPECT_GE(ba->producer_slot->size(), GST_VIDEO_INFO_SIZE(&vi));
  GstVideoMeta* meta = gst_buffer_get_video_meta(a);
  ASSERT_NE(meta, nullptr);
  EXPECT_EQ(meta->stride[0], GST_VIDEO_INFO_PLANE_STRIDE(&vi, 0));
  // Writable on the producer side: upstream writes frames into it.
  GstMapInfo map;
  ASSERT_TRUE(gst_buffer_map(a, &map, GST_MAP_WRITE));
  map.data[0] = 42;
  gst_buffer_unmap(a, &map);
  EXPECT_EQ(static_cast<uint8_t*>(ba->producer_slot->data())[0], 42);

  // A retired buffer (TAG_MEMORY) is not recycled: the next acquire gets a fresh slot.
  const uint32_t retired_index = ba->index;
  GST_BUFFER_FLAG_SET(a, GST_BUFFER_FLAG_TAG_MEMORY);
  gst_buffer_unref(a);
  gst_buffer_unref(b);
  EXPECT_EQ(gst_cipc_slot_pool_slots_allocated(GST_CIPC_SLOT_POOL(pool)), 2u);
  std::vector<GstBuffer*> again(2);
  for (auto& x : again) ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &x, nullptr), GST_FLOW_OK);
  for (auto* x : again)
    EXPECT_NE(gst_cipc_slot_memory_binding(gst_buffer_peek_memory(x, 0))->index, retired_index);
  EXPECT_EQ(gst_cipc_slot_pool_slots_allocated(GST_CIPC_SLOT_POOL(pool)), 3u);
  for (auto* x : again) gst_buffer_unref(x);
  gst_buffer_pool_set_active(pool, FALSE);
  gst_object_unref(pool);
  gst_caps_unref(caps);
}

// A writer that finds every slot out (a pool with a maximum) tells the producer before it waits,
// so that RELEASEs the producer left for its next frame are read now; a writer that finds a free
// slot, or must not wait, tells nobody.
TEST_F(Glue, SlotPoolAboutToWaitForASlotAsksForReleasesFirst) {
  std::atomic<int> asked{0};
  GstBuffer* returned_by_hook = nullptr;
  std::mutex lock;
  CipcSlotPoolHooks hooks;
  hooks.before_wait = [&] {
    ++asked;
    // As the producer would on reading a RELEASE: a held slot goes back to the pool.
    std::lock_guard<std::mutex> guard(lock);
    if (returned_by_hook) gst_buffer_unref(returned_by_hook);
    returned_by_hook = nullptr;
  };
  GstBufferPool* pool =
      gst_cipc_slot_pool_new(std::make_shared<cipc_slots::HostMemoryBackend>(), 1, hooks);
  GstCaps* caps = gst_caps_from_string("video/x-raw,format=GRAY8,width=64,height=4");
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, 256, 2, 2);  // at most two slots
  ASSERT_TRUE(gst_buffer_pool_set_config(pool, config) && gst_buffer_pool_set_active(pool, TRUE));

  GstBuffer* slots[2] = {nullptr, nullptr};
  for (GstBuffer*& slot : slots)
    ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &slot, nullptr), GST_FLOW_OK);
  EXPECT_EQ(asked, 0) << "free slots were there";
  GstBufferPoolAcquireParams dontwait{};
  dontwait.flags = GST_BUFFER_POOL_ACQUIRE_FLAG_DONTWAIT;
  GstBuffer* c = nullptr;
  EXPECT_EQ(gst_buffer_pool_acquire_buffer(pool, &c, &dontwait), GST_FLOW_EOS);
  EXPECT_EQ(asked, 0) << "an acquire that may not wait does not ask";
  {
    std::lock_guard<std::mutex> guard(lock);
    returned_by_hook = slots[1];
  }
  ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &c, nullptr), GST_FLOW_OK)
      << "the slot the hook returned was taken";
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(c, slots[1]);
  gst_buffer_unref(slots[0]);
  gst_buffer_unref(c);
  gst_buffer_pool_set_active(pool, FALSE);
  gst_object_unref(pool);
  gst_caps_unref(caps);
}

// Retired slots are replaced under new indices: the pool asks for a roll-over before the
// protocol's index limit, and past that limit still allocates (upstream writing into it must
// not fail) - such slots are never sent; cudasink-ipc copies them into the next generation.
TEST_F(Glue, SlotPoolAsksForRolloverBeforeTheIndexLimitAndNeverFailsPastIt) {
  auto backend = std::make_shared<cipc_slots::HostMemoryBackend>();
  GstBufferPool* pool = gst_cipc_slot_pool_new(backend, 1);
  GstCaps* caps = gst_caps_from_string("video/x-raw,format=GRAY8,width=16,height=16");
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, 256, 1, 0);
  ASSERT_TRUE(gst_buffer_pool_set_config(pool, config));
  ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE));
  auto* slot_pool = GST_CIPC_SLOT_POOL(pool);
  static_assert(kCipcSlotPoolRolloverAt < cipc::kMaxSlots, "roll over before the limit");
  uint32_t last_index = 0;
  for (guint i = 0; i < cipc::kMaxSlots + 10; ++i) {
    EXPECT_EQ(gst_cipc_slot_pool_needs_rollover(slot_pool), i >= kCipcSlotPoolRolloverAt) << i;
    GstBuffer* b = nullptr;
    ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &b, nullptr), GST_FLOW_OK) << "slot " << i;
    last_index = gst_cipc_slot_memory_binding(gst_buffer_peek_memory(b, 0))->index;
    GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_TAG_MEMORY);  // retired: freed, replaced by a new index
    gst_buffer_unref(b);
  }
  EXPECT_EQ(last_index, cipc::kMaxSlots + 9);
  EXPECT_EQ(gst_cipc_slot_pool_slots_allocated(slot_pool), cipc::kMaxSlots + 10);
  EXPECT_TRUE(gst_cipc_slot_pool_needs_rollover(slot_pool));
  gst_buffer_pool_set_active(pool, FALSE);
  gst_object_unref(pool);
  gst_caps_unref(caps);
}

TEST_F(Glue, ImportedMemoryIsReadOnlyAndSharesItsClaim) {
  cipc_slots::HostMemoryBackend backend;
  auto slot = backend.allocate(4096);
  ASSERT_TRUE(slot);
  static_cast<uint8_t*>(slot.value()->data())[100] = 7;
  auto imported = std::make_shared<cipc::ImportedSlot>();
  auto mem = backend.import(cipc::UniqueFd(::dup(slot.value()->export_fd())), 4096, nullptr);
  ASSERT_TRUE(mem);
  imported->memory = std::move(mem.value());
  imported->index = 3;
  GstMemory* m = gst_cipc_slot_memory_new_imported(imported, nullptr, 1000);
  EXPECT_TRUE(GST_MEMORY_IS_READONLY(m));
  EXPECT_EQ(gst_memory_get_sizes(m, nullptr, nullptr), 1000u);
  GstMapInfo map;
  ASSERT_TRUE(gst_memory_map(m, &map, GST_MAP_READ));
  EXPECT_EQ(map.data[100], 7);
  gst_memory_unmap(m, &map);
  EXPECT_FALSE(gst_memory_map(m, &map, GST_MAP_WRITE));
  GstMemory* part = gst_memory_share(m, 100, 10);
  ASSERT_TRUE(gst_memory_map(part, &map, GST_MAP_READ));
  EXPECT_EQ(map.data[0], 7);
  gst_memory_unmap(part, &map);
  EXPECT_EQ(gst_cipc_slot_memory_binding(part)->index, 3u);
  EXPECT_EQ(imported.use_count(), 2) << "both memories share one binding";
  gst_memory_unref(m);
  EXPECT_EQ(imported.use_count(), 2) << "the shared part keeps the slot";
  gst_memory_unref(part);
  EXPECT_EQ(imported.use_count(), 1);
}

// Acquires a buffer from `pool` (activating it) and marks it retired, so the pool replaces it
// under a new index; repeated, this walks the pool's index space.
static void use_up_indices(GstBufferPool* pool, guint n) {
  if (!gst_buffer_pool_is_active(pool)) {
    ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE));
  }
  for (guint i = 0; i < n; ++i) {
    GstBuffer* b = nullptr;
    ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &b, nullptr), GST_FLOW_OK);
    GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_TAG_MEMORY);
    gst_buffer_unref(b);
  }
}

struct Announced {
  uint64_t generation = 0;
  std::string caps;
  uint64_t frame_size = 0;
  int count = 0;
};

TEST_F(Glue, PoolGenerationsAnnounceEachNewFormatOnceWithoutMemoryFeatures) {
  Announced seen;
  cipc_gst::SlotPoolGenerations pools(std::make_shared<cipc_slots::HostMemoryBackend>(), 3,
                                      [&](uint64_t g, const std::string& caps, uint64_t size) {
                                        seen = {g, caps, size, seen.count + 1};
                                      });
  std::string error;
  GstCaps* a = gst_caps_from_string(
      "video/x-raw(memory:CUDAIPCMemory),format=GRAY8,width=16,height=16,framerate=30/1");
  ASSERT_TRUE(pools.ensure(a, &error)) << error;
  EXPECT_EQ(seen.count, 1);
  EXPECT_EQ(seen.generation, 1u);
  EXPECT_EQ(seen.frame_size, 256u);
  EXPECT_EQ(seen.caps.find("memory:"), std::string::npos) << seen.caps;
  ASSERT_TRUE(pools.ensure(a, &error));
  EXPECT_EQ(seen.count, 1) << "the same caps keep the generation";
  GstCaps* b = gst_caps_from_string("video/x-raw,format=GRAY8,width=32,height=16");
  GstBufferPool* first = GST_BUFFER_POOL(gst_object_ref(pools.pool()));
  ASSERT_TRUE(pools.ensure(b, &error));
  EXPECT_EQ(seen.count, 2);
  EXPECT_EQ(pools.generation(), 2u);
  EXPECT_EQ(pools.info().width, 32);
  EXPECT_NE(pools.pool(), first);
  GstCaps* bad = gst_caps_from_string("audio/x-raw,format=S16LE");
  EXPECT_FALSE(pools.ensure(bad, &error));
  EXPECT_NE(error.find("not a raw video format"), std::string::npos) << error;
  EXPECT_EQ(pools.generation(), 2u) << "a refused format leaves the current pool";
  gst_object_unref(first);
  gst_caps_unref(bad);
  gst_caps_unref(b);
  gst_caps_unref(a);
}

// Issue 27 and issue 24 item 6: the sink hears the slot limit upstream configures on the pool it
// writes into, and that pool's flushing - from the current generation only: a replaced pool is
// deactivated (which flushes it) and its configuration says nothing about the pool in use.
TEST_F(Glue, PoolGenerationsPassOnTheCurrentPoolsLimitAndFlushingOnly) {
  std::vector<guint> limits;
  std::vector<bool> flushing;
  CipcSlotPoolHooks hooks;
  hooks.on_configured = [&](guint max_slots) { limits.push_back(max_slots); };
  hooks.on_flushing = [&](bool f) { flushing.push_back(f); };
  cipc_gst::SlotPoolGenerations pools(
      std::make_shared<cipc_slots::HostMemoryBackend>(), 3,
      [](uint64_t, const std::string&, uint64_t) {}, hooks);
  std::string error;
  GstCaps* a = gst_caps_from_string("video/x-raw,format=GRAY8,width=16,height=16");
  ASSERT_TRUE(pools.ensure(a, &error)) << error;
  EXPECT_EQ(limits, (std::vector<guint>{0})) << "the sink's own configuration: it grows";
  // Upstream takes the proposed pool and bounds it, as a writer that allocates ahead may.
  GstBufferPool* first = GST_BUFFER_POOL(gst_object_ref(pools.pool()));
  GstStructure* config = gst_buffer_pool_get_config(first);
  gst_buffer_pool_config_set_params(config, a, 256, 3, 5);
  ASSERT_TRUE(gst_buffer_pool_set_config(first, config));
  EXPECT_EQ(limits, (std::vector<guint>{0, 5}));
  ASSERT_TRUE(gst_buffer_pool_set_active(first, TRUE));
  flushing.clear();
  gst_buffer_pool_set_flushing(first, TRUE);
  gst_buffer_pool_set_flushing(first, FALSE);
  EXPECT_EQ(flushing, (std::vector<bool>{true, false}));

  GstCaps* b = gst_caps_from_string("video/x-raw,format=GRAY8,width=32,height=16");
  flushing.clear();
  ASSERT_TRUE(pools.ensure(b, &error)) << error;  // deactivates (and so flushes) the first
  EXPECT_EQ(flushing, (std::vector<bool>{false})) << "only the new pool's state: not flushing";
  EXPECT_EQ(limits, (std::vector<guint>{0, 5, 0}));
  config = gst_buffer_pool_get_config(first);
  gst_buffer_pool_config_set_params(config, a, 256, 3, 4);
  gst_buffer_pool_set_config(first, config);
  EXPECT_EQ(limits, (std::vector<guint>{0, 5, 0})) << "the replaced pool is not heard";
  gst_object_unref(first);
  gst_caps_unref(b);
  gst_caps_unref(a);
}

#ifdef CIPC_HAVE_GST_GL
// Issue 26: what cudasrc-ipc offers GL elements for a CUDA producer's caps: GL memory with a 2D
// texture for the four 4-byte formats one RGBA8 texture holds as they are, nothing otherwise
// (NV12, I420... go to GL as system memory, through glupload).
TEST_F(Glue, GlMemoryIsOfferedForFourByteFormatsOnlyAsTwoDimensionalTextures) {
  const std::pair<const char*, bool> formats[] = {{"BGRA", true},  {"RGBA", true},  {"BGRx", true},
                                                  {"RGBx", true},  {"NV12", false}, {"I420", false},
                                                  {"GRAY8", false}};
  for (const auto& [format, expected] : formats) {
    SCOPED_TRACE(format);
    GstCaps* producer = gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, format, "width",
                                            G_TYPE_INT, 64, "height", G_TYPE_INT, 48, "framerate",
                                            GST_TYPE_FRACTION, 30, 1, nullptr);
    GstCaps* gl = cipc_gst::caps_with_gl_memory(producer);
    EXPECT_EQ(cipc_gst::gl_output_supports(gst_video_format_from_string(format)), expected);
    ASSERT_EQ(gst_caps_is_empty(gl), !expected) << gst_caps_to_string(gl);
    if (expected) {
      EXPECT_TRUE(cipc_gst::caps_have_gl_memory(gl));
      const GstStructure* st = gst_caps_get_structure(gl, 0);
      EXPECT_STREQ(gst_structure_get_string(st, "texture-target"), "2D");
      EXPECT_STREQ(gst_structure_get_string(st, "format"), format);
      GstCaps* plain = gst_caps_copy(gl);
      gst_caps_set_features(plain, 0, gst_caps_features_new_empty());
      EXPECT_FALSE(cipc_gst::caps_have_gl_memory(plain));
      gst_caps_unref(plain);
    }
    EXPECT_FALSE(cipc_gst::caps_have_gl_memory(producer));
    gst_caps_unref(gl);
    gst_caps_unref(producer);
  }
}
#endif

#ifdef CIPC_HAVE_GST_CUDA
// GStreamer 1.22 registers its CUDA allocator only when the nvcodec plugin loads; cudasrc-ipc's
// own GstCudaBufferPool (appsink downstream, no nvcodec element in the process) needs it
// registered, or the pool refuses its configuration. No GPU is needed to register it.
TEST_F(Glue, GstreamersCudaAllocatorIsRegisteredBeforeOurPoolsNeedIt) {
  cipc_gst::register_gst_cuda_allocator();
  GstAllocator* allocator = gst_allocator_find(GST_CUDA_MEMORY_TYPE_NAME);
  ASSERT_NE(allocator, nullptr) << GST_CUDA_MEMORY_TYPE_NAME << " is not registered";
  gst_object_unref(allocator);
}
#endif

// Issue 29: memory the pool did not allocate (an upstream GstCudaBufferPool's) is sent under an
// index of the current generation; indices it takes are never handed to the pool's own slots,
// count towards the roll-over, and run out at the protocol's limit instead of wrapping.
TEST_F(Glue, PoolGenerationsHandOutIndicesForForeignMemoryThatTheirSlotsNeverReuse) {
  auto backend = std::make_shared<cipc_slots::HostMemoryBackend>();
  cipc_gst::SlotPoolGenerations pools(backend, 2, nullptr);
  uint64_t generation = 0;
  uint32_t index = 0;
  EXPECT_FALSE(pools.take_index(&generation, &index)) << "no generation before the caps";
  std::string error;
  GstCaps* caps = gst_caps_from_string("video/x-raw,format=GRAY8,width=16,height=16");
  ASSERT_TRUE(pools.ensure(caps, &error)) << error;
  ASSERT_TRUE(gst_buffer_pool_set_active(pools.pool(), TRUE));  // allocates its 2 slots
  auto* slot_pool = GST_CIPC_SLOT_POOL(pools.pool());
  const guint preallocated = gst_cipc_slot_pool_slots_allocated(slot_pool);
  ASSERT_TRUE(pools.take_index(&generation, &index));
  EXPECT_EQ(generation, pools.generation());
  EXPECT_EQ(index, preallocated);
  // The pool's own slots, those it had and those it allocates after, never get that index.
  std::vector<GstBuffer*> held(4, nullptr);
  for (GstBuffer*& own : held) {
    ASSERT_EQ(gst_buffer_pool_acquire_buffer(pools.pool(), &own, nullptr), GST_FLOW_OK);
    EXPECT_NE(pools.current_slot(own)->index, index) << "the pool reused a taken index";
  }
  EXPECT_EQ(gst_cipc_slot_pool_slots_allocated(slot_pool), held.size() + 1);
  for (GstBuffer* own : held) {
    GST_BUFFER_FLAG_SET(own, GST_BUFFER_FLAG_TAG_MEMORY);  // freed: every later acquire allocates
    gst_buffer_unref(own);
  }

  use_up_indices(pools.pool(), kCipcSlotPoolRolloverAt - guint(held.size()) - 1);
  EXPECT_TRUE(gst_cipc_slot_pool_needs_rollover(slot_pool)) << "taken indices count";
  while (gst_cipc_slot_pool_slots_allocated(slot_pool) < cipc::kMaxSlots)
    ASSERT_TRUE(pools.take_index(&generation, &index));
  EXPECT_EQ(index, cipc::kMaxSlots - 1);
  EXPECT_FALSE(pools.take_index(&generation, &index)) << "past the limit nothing is sendable";
  bool rolled = false;
  ASSERT_TRUE(pools.roll_over_if_needed(&rolled, &error)) << error;
  ASSERT_TRUE(rolled);
  ASSERT_TRUE(pools.take_index(&generation, &index));
  EXPECT_EQ(generation, pools.generation());
  EXPECT_EQ(index, 0u) << "a new generation numbers from 0";
  gst_caps_unref(caps);
}

TEST_F(Glue, PoolGenerationsRollOverWithTheSameCapsAndTreatOldSlotsAsStale) {
  Announced seen;
  auto backend = std::make_shared<cipc_slots::HostMemoryBackend>();
  cipc_gst::SlotPoolGenerations pools(backend, 2,
                                      [&](uint64_t g, const std::string& caps, uint64_t size) {
                                        seen = {g, caps, size, seen.count + 1};
                                      });
  std::string error;
  GstCaps* caps = gst_caps_from_string("video/x-raw,format=GRAY8,width=16,height=16");
  ASSERT_TRUE(pools.ensure(caps, &error)) << error;
  bool rolled = true;
  ASSERT_TRUE(pools.roll_over_if_needed(&rolled, &error));
  EXPECT_FALSE(rolled) << "a fresh generation has indices left";

  GstBufferPool* old_pool = GST_BUFFER_POOL(gst_object_ref(pools.pool()));
  use_up_indices(old_pool, kCipcSlotPoolRolloverAt);
  GstBuffer* old_slot = nullptr;
  ASSERT_EQ(gst_buffer_pool_acquire_buffer(old_pool, &old_slot, nullptr), GST_FLOW_OK);
  EXPECT_TRUE(pools.current_slot(old_slot)) << "still the current generation";

  ASSERT_TRUE(pools.roll_over_if_needed(&rolled, &error)) << error;
  EXPECT_TRUE(rolled);
  EXPECT_EQ(pools.generation(), 2u);
  EXPECT_EQ(pools.rollovers(), 1u);
  EXPECT_EQ(seen.count, 2);
  EXPECT_TRUE(gst_caps_is_equal(pools.caps(), caps));
  EXPECT_TRUE(gst_buffer_pool_is_active(old_pool)) << "upstream may still write into it";
  EXPECT_FALSE(pools.current_slot(old_slot));
  EXPECT_TRUE(pools.stale_slot(old_slot));
  EXPECT_TRUE(pools.take_reconfigure());
  EXPECT_FALSE(pools.take_reconfigure()) << "upstream is asked once per generation";

  GstBuffer* fresh = nullptr;
  ASSERT_TRUE(gst_buffer_pool_set_active(pools.pool(), TRUE));
  ASSERT_EQ(gst_buffer_pool_acquire_buffer(pools.pool(), &fresh, nullptr), GST_FLOW_OK);
  EXPECT_TRUE(pools.current_slot(fresh));
  EXPECT_FALSE(pools.stale_slot(fresh));

  // Another backend's slot of the same generation number is foreign memory, neither current nor
  // stale (rg10tobgra's own exportable pool numbers its generations from 1 too).
  GstBufferPool* foreign =
      gst_cipc_slot_pool_new(std::make_shared<cipc_slots::HostMemoryBackend>(), 2);
  GstStructure* config = gst_buffer_pool_get_config(foreign);
  gst_buffer_pool_config_set_params(config, caps, 256, 1, 0);
  ASSERT_TRUE(gst_buffer_pool_set_config(foreign, config));
  ASSERT_TRUE(gst_buffer_pool_set_active(foreign, TRUE));
  GstBuffer* other = nullptr;
  ASSERT_EQ(gst_buffer_pool_acquire_buffer(foreign, &other, nullptr), GST_FLOW_OK);
  EXPECT_FALSE(pools.current_slot(other));
  EXPECT_FALSE(pools.stale_slot(other));

  gst_buffer_unref(other);
  gst_buffer_pool_set_active(foreign, FALSE);
  gst_object_unref(foreign);
  gst_buffer_unref(fresh);
  gst_buffer_unref(old_slot);
  gst_buffer_pool_set_active(old_pool, FALSE);
  gst_object_unref(old_pool);
  gst_caps_unref(caps);
}

}  // namespace
