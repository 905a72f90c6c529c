// SPDX-License-Identifier: LGPL-2.1-or-later
// What cudasrc-ipc offers downstream for a producer's caps (gst/ipcsrc/srcnegotiation), GL
// memory included.
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ipcsrc/srcnegotiation.h"
#include "memory/slotmemory.h"
#ifdef CIPC_HAVE_GST_CUDA
#include "common/gstcudainterop.h"
#endif
#ifdef CIPC_HAVE_GST_GL
#include "ipcsrc/gl/glcudainteropoutput.h"
#endif
#include "glue_fixture.h"

namespace {

using namespace cipc_test;

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

}  // namespace
