// SPDX-License-Identifier: LGPL-2.1-or-later
// cudasink-ipc's caps policy and pool choice (gst/ipcsink/sinknegotiation), without the plugin
// or a pipeline: which memories each slot kind takes, which formats lead for an upstream with
// and without a preference of its own, and which pool each negotiated memory is offered.
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ipcsink/sinknegotiation.h"

namespace {

class SinkNegotiation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }
  void SetUp() override { template_ = gst_caps_from_string(CIPC_SINK_TEMPLATE_CAPS); }
  void TearDown() override { gst_caps_unref(template_); }

  // The format a caps negotiation would settle on: the first one offered.
  static std::string settled_format(GstCaps* caps) {
    if (gst_caps_is_empty(caps)) return "(none)";
    GstCaps* fixed = gst_caps_fixate(gst_caps_copy(caps));
    const gchar* format = gst_structure_get_string(gst_caps_get_structure(fixed, 0), "format");
    const std::string out = format ? format : "(no format)";
    gst_caps_unref(fixed);
    return out;
  }
  // What the sink answers an upstream that can make `upstream` (a caps string).
  std::string format_for(const char* upstream, bool cuda_slots) {
    GstCaps* filter = gst_caps_from_string(upstream);
    GstCaps* caps = cipc_gst::sink_input_caps(template_, filter, cuda_slots);
    const std::string out = settled_format(caps);
    gst_caps_unref(caps);
    gst_caps_unref(filter);
    return out;
  }
  static bool deep(const char* caps_string) {
    GstCaps* caps = gst_caps_from_string(caps_string);
    const bool out = cipc_gst::leads_with_a_deep_format(caps);
    gst_caps_unref(caps);
    return out;
  }
  static cipc_gst::SinkPool pool_for(const char* caps_string, bool cuda_slots) {
    GstCaps* caps = gst_caps_from_string(caps_string);
    const cipc_gst::SinkPool out = cipc_gst::sink_pool_for(caps, cuda_slots);
    gst_caps_unref(caps);
    return out;
  }
  static std::string features_of(GstCaps* caps, guint i) {
    gchar* text = gst_caps_features_to_string(gst_caps_get_features(caps, i));
    const std::string out = text;
    g_free(text);
    return out;
  }
  static std::vector<std::string> formats_of(GstCaps* caps, guint i) {
    const GValue* list = gst_structure_get_value(gst_caps_get_structure(caps, i), "format");
    std::vector<std::string> out;
    if (list && GST_VALUE_HOLDS_LIST(list)) {
      for (guint j = 0; j < gst_value_list_get_size(list); ++j)
        out.push_back(g_value_get_string(gst_value_list_get_value(list, j)));
    } else if (list && G_VALUE_HOLDS_STRING(list)) {
      out.push_back(g_value_get_string(list));
    }
    return out;
  }

  GstCaps* template_ = nullptr;
};

TEST_F(SinkNegotiation, HostSlotsTakeSystemMemoryOnlyAndCudaSlotsEveryMemory) {
  GstCaps* host = cipc_gst::sink_memory_caps(template_, false);
  ASSERT_GT(gst_caps_get_size(host), 0u);
  for (guint i = 0; i < gst_caps_get_size(host); ++i)
    EXPECT_EQ(features_of(host, i), GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY) << i;
  GstCaps* slot_frames =
      gst_caps_from_string("video/x-raw(" GST_CAPS_FEATURE_MEMORY_CUDA_IPC "),format=BGRA");
  EXPECT_FALSE(gst_caps_can_intersect(host, slot_frames));

  GstCaps* cuda = cipc_gst::sink_memory_caps(template_, true);
  EXPECT_TRUE(gst_caps_is_equal(cuda, template_)) << gst_caps_to_string(cuda);
  EXPECT_TRUE(gst_caps_can_intersect(cuda, slot_frames));
  GstCaps* system_frames = gst_caps_from_string("video/x-raw,format=BGRA");
  EXPECT_TRUE(gst_caps_can_intersect(cuda, system_frames)) << "system memory is uploaded";
  gst_caps_unref(system_frames);
  gst_caps_unref(slot_frames);
  gst_caps_unref(cuda);
  gst_caps_unref(host);
}

// Only the first format of the first structure counts, and only its depth: a list of everything
// an element can make starts with ABGR64_LE; anything else is a choice.
TEST_F(SinkNegotiation, ADeepFirstFormatMarksAListOfEverythingNotAPreference) {
  EXPECT_TRUE(deep("video/x-raw,format={ABGR64_LE,BGRA,BGRx}"));
  EXPECT_TRUE(deep("video/x-raw,format=P010_10LE"));
  EXPECT_FALSE(deep("video/x-raw,format={BGRA,ABGR64_LE}"));
  EXPECT_FALSE(deep("video/x-raw,format=I420"));
  EXPECT_FALSE(deep("video/x-raw,format=BGRA;video/x-raw,format=ABGR64_LE"));
  EXPECT_FALSE(deep("video/x-raw,width=64"));
  EXPECT_FALSE(deep("EMPTY"));
  EXPECT_FALSE(deep("ANY"));
}

// Each structure comes first with the display formats, then as it was, in the same memory: the
// formats upstream may pick first change, what the sink accepts does not.
TEST_F(SinkNegotiation, DisplayFormatsLeadEachMemoryAndEveryFormatStillFollows) {
  GstCaps* caps = gst_caps_from_string("video/x-raw(" GST_CAPS_FEATURE_MEMORY_CUDA_IPC
                                       "),format={ABGR64_LE,NV12};video/x-raw,format=I420");
  GstCaps* preferred = cipc_gst::prefer_display_formats(caps);
  ASSERT_EQ(gst_caps_get_size(preferred), 4u) << gst_caps_to_string(preferred);
  const std::vector<std::string> display{"BGRx", "BGRA", "RGBx", "RGBA"};
  EXPECT_EQ(formats_of(preferred, 0), display);
  EXPECT_EQ(features_of(preferred, 0), GST_CAPS_FEATURE_MEMORY_CUDA_IPC);
  EXPECT_EQ(formats_of(preferred, 1), (std::vector<std::string>{"ABGR64_LE", "NV12"}));
  EXPECT_EQ(features_of(preferred, 1), GST_CAPS_FEATURE_MEMORY_CUDA_IPC);
  EXPECT_EQ(formats_of(preferred, 2), display);
  EXPECT_EQ(features_of(preferred, 2), GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY);
  EXPECT_EQ(formats_of(preferred, 3), std::vector<std::string>{"I420"});
  EXPECT_TRUE(gst_caps_is_subset(caps, preferred));
  gst_caps_unref(preferred);
  gst_caps_unref(caps);
}

// videotestsrc lists everything it can make, deepest first: left to itself it would send
// ABGR64_LE, which no display sink takes and cudasrc-ipc cannot convert.
TEST_F(SinkNegotiation, UpstreamFreeToChooseSettlesOnAFormatDisplaysTake) {
  const char* everything = "video/x-raw,format={ABGR64_LE,ARGB64,BGRA,BGRx,RGBA,I420,NV12}";
  EXPECT_EQ(format_for(everything, false), "BGRx");
  EXPECT_EQ(format_for(everything, true), "BGRx");
  GstCaps* caps = cipc_gst::sink_input_caps(template_, nullptr, false);
  EXPECT_EQ(settled_format(caps), "BGRx") << "with no filter, display formats lead too";
  gst_caps_unref(caps);
}

// rg10tobgra leads with BGRA: kept, so a consumer may ask for exactly that format; so is a
// format no display takes, when upstream chose it.
TEST_F(SinkNegotiation, UpstreamWithAPreferenceOfItsOwnKeepsIt) {
  EXPECT_EQ(format_for("video/x-raw,format={BGRA,BGRx}", false), "BGRA");
  EXPECT_EQ(format_for("video/x-raw,format={NV12,BGRx}", true), "NV12");
}

// A deep format upstream can make nothing but is demoted behind the display formats, not refused.
TEST_F(SinkNegotiation, UpstreamThatCanMakeOnlyADeepFormatStillGetsIt) {
  EXPECT_EQ(format_for("video/x-raw,format=ABGR64_LE", false), "ABGR64_LE");
  EXPECT_EQ(format_for("video/x-raw,format={ABGR64_LE,P010_10LE}", false), "ABGR64_LE");
}

TEST_F(SinkNegotiation, HostSlotsRefuseUpstreamThatWritesOnlyCudaSlots) {
  const char* slots_only = "video/x-raw(" GST_CAPS_FEATURE_MEMORY_CUDA_IPC "),format=BGRA";
  EXPECT_EQ(format_for(slots_only, false), "(none)");
  EXPECT_EQ(format_for(slots_only, true), "BGRA");
}

// The pool that saves each upstream memory a copy: our slots for frames written as slots or for
// host slots; pinned host memory for a CPU writer into CUDA slots (an asynchronous upload).
TEST_F(SinkNegotiation, EachUpstreamMemoryIsOfferedThePoolThatSavesItACopy) {
  using cipc_gst::SinkPool;
  const char* system = "video/x-raw,format=BGRA,width=64,height=48";
  const char* slots =
      "video/x-raw(" GST_CAPS_FEATURE_MEMORY_CUDA_IPC "),format=BGRA,width=64,height=48";
  EXPECT_EQ(pool_for(system, false), SinkPool::kSlots);
  EXPECT_EQ(pool_for(system, true), SinkPool::kPinnedUpload);
  EXPECT_EQ(pool_for(slots, true), SinkPool::kSlots);
}

#ifdef CIPC_HAVE_GST_CUDA
// nvcodec elements write GstCudaMemory: they are offered GStreamer's exportable CUDA pool, never
// our slots or pinned memory, which they could not write into.
TEST_F(SinkNegotiation, GstCudaMemoryIsOfferedGStreamersExportablePool) {
  const char* gst_cuda =
      "video/x-raw(" GST_CAPS_FEATURE_MEMORY_CUDA_MEMORY "),format=NV12,width=64,height=48";
  EXPECT_EQ(pool_for(gst_cuda, true), cipc_gst::SinkPool::kExportableGstCuda);
  EXPECT_EQ(format_for(gst_cuda, true), "NV12");
}
#endif

}  // namespace
