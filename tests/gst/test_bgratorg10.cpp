// SPDX-License-Identifier: LGPL-2.1-or-later
// bgratorg10 (the CPU camera simulator) as GStreamer sees it: caps negotiation, property
// defaults, and output words checked exactly against the mosaic's CPU implementation
// (bayer/mosaic.h); the default instance names of the plugin's elements. Runs with or without
// CUDA. The plugin is loaded from the build tree (GST_PLUGIN_PATH).
#include <gst/check/gstharness.h>
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "formats.h"
#include "mosaic.h"

namespace cb = cipc_bayer;

namespace {

class BgraToRg10 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }
};

// A pseudo-random frame of `size` bytes.
std::vector<uint8_t> pattern(size_t size, uint32_t seed) {
  std::vector<uint8_t> v(size);
  uint32_t x = seed * 2654435761u + 1u;
  for (uint8_t& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

// Pushes one frame of `in` through a harness negotiated to the given caps and returns the
// output buffer's bytes.
std::vector<uint8_t> run(GstHarness* h, const std::string& in_caps, const std::string& out_caps,
                         const std::vector<uint8_t>& in) {
  gst_harness_set_src_caps_str(h, in_caps.c_str());
  gst_harness_set_sink_caps_str(h, out_caps.c_str());
  GstBuffer* buf = gst_buffer_new_memdup(in.data(), in.size());
  EXPECT_EQ(gst_harness_push(h, buf), GST_FLOW_OK);
  GstBuffer* out = gst_harness_pull(h);
  std::vector<uint8_t> bytes;
  if (!out) return bytes;
  bytes.resize(gst_buffer_get_size(out));
  gst_buffer_extract(out, 0, bytes.data(), bytes.size());
  gst_buffer_unref(out);
  return bytes;
}

std::string current_caps(GstHarness* h) {
  GstCaps* caps = gst_pad_get_current_caps(h->sinkpad);
  if (!caps) return "";
  gchar* s = gst_caps_to_string(caps);
  std::string out = s;
  g_free(s);
  gst_caps_unref(caps);
  return out;
}

TEST_F(BgraToRg10, IsRegisteredWithDefaults) {
  GstElement* e = gst_element_factory_make("bgratorg10", nullptr);
  ASSERT_NE(e, nullptr) << "plugin not found: is GST_PLUGIN_PATH set?";
  EXPECT_STREQ(G_OBJECT_TYPE_NAME(e), "GstBgraToRg10");
  GstElementFactory* f = gst_element_get_factory(e);
  EXPECT_STREQ(gst_element_factory_get_metadata(f, GST_ELEMENT_METADATA_KLASS),
               "Filter/Converter/Video");
  gint alignment = -1;
  guint black = 99;
  gdouble r = 0, g = 0, b = 0;
  g_object_get(e, "bit-alignment", &alignment, "black-level", &black, "wb-red", &r, "wb-green", &g,
               "wb-blue", &b, nullptr);
  EXPECT_EQ(alignment, 0);  // lsb
  EXPECT_EQ(black, 0u);
  EXPECT_EQ(r, 1.0);
  EXPECT_EQ(g, 1.0);
  EXPECT_EQ(b, 1.0);
  auto* spec =
      G_PARAM_SPEC_UINT(g_object_class_find_property(G_OBJECT_GET_CLASS(e), "black-level"));
  EXPECT_EQ(spec->maximum, 1022u);
  auto* wb = G_PARAM_SPEC_DOUBLE(g_object_class_find_property(G_OBJECT_GET_CLASS(e), "wb-red"));
  EXPECT_EQ(wb->minimum, 0.01);
  EXPECT_EQ(wb->maximum, 100.0);
  gst_object_unref(e);
}

TEST_F(BgraToRg10, OutputMatchesMosaicExactly) {
  constexpr int kW = 8, kH = 4;
  GstHarness* h = gst_harness_new("bgratorg10");
  gst_util_set_object_arg(G_OBJECT(h->element), "black-level", "40");
  g_object_set(h->element, "wb-red", 1.7, "wb-blue", 1.3, nullptr);
  const std::vector<uint8_t> in = pattern(kW * kH * 4, 1);
  const std::vector<uint8_t> out =
      run(h, "video/x-raw,format=BGRx,width=8,height=4,framerate=30/1",
          "video/x-bayer,format=bggr10le,width=8,height=4,framerate=30/1", in);
  EXPECT_NE(current_caps(h).find("bggr10le"), std::string::npos) << current_caps(h);

  cb::MosaicParams p;
  p.phase = cb::CfaOrder::kBGGR;
  p.black_level = 40;
  p.wb_red = 1.7f;
  p.wb_blue = 1.3f;
  std::vector<uint8_t> expected(kW * 2 * kH, 0);
  cb::mosaic_cpu(in.data(), kW * 4, static_cast<int>(cb::MosaicInput::kBgra), expected.data(),
                 kW * 2, kW, kH, p);
  EXPECT_EQ(out, expected);
  for (size_t i = 0; i < out.size(); i += 2) {
    const int v = out[i] | (out[i + 1] << 8);
    EXPECT_GE(v, 40);
    EXPECT_LE(v, 1023);
  }
  gst_harness_teardown(h);
}

TEST_F(BgraToRg10, MsbAlignmentAndPaddedRows) {
  // Width 6: RGB input rows are 20 bytes (GstVideoInfo rounds to 4), output rows
  // GST_ROUND_UP_4(6) * 2 = 16 bytes with 4 bytes of zeroed padding.
  constexpr int kW = 6, kH = 3;
  GstHarness* h = gst_harness_new("bgratorg10");
  gst_util_set_object_arg(G_OBJECT(h->element), "bit-alignment", "msb");
  const std::vector<uint8_t> in = pattern(20 * kH, 2);
  const std::vector<uint8_t> out = run(h, "video/x-raw,format=RGB,width=6,height=3,framerate=0/1",
                                       "video/x-bayer,format=gbrg10le", in);
  ASSERT_EQ(out.size(), 16u * kH);

  cb::MosaicParams p;
  p.phase = cb::CfaOrder::kGBRG;
  p.alignment = cb::BitAlignment::kMsb;
  std::vector<uint8_t> expected(16 * kH, 0);
  cb::mosaic_cpu(in.data(), 20, static_cast<int>(cb::MosaicInput::kRgb), expected.data(), 16, kW,
                 kH, p);
  EXPECT_EQ(out, expected);
  for (size_t i = 0; i < out.size(); i += 2)
    EXPECT_EQ((out[i] | (out[i + 1] << 8)) & 0x3F, 0) << "low 6 bits of word " << i / 2;
  gst_harness_teardown(h);
}

TEST_F(BgraToRg10, DefaultFormatIsRggb) {
  GstHarness* h = gst_harness_new("bgratorg10");
  const std::vector<uint8_t> in(4 * 4 * 2, 255);
  const std::vector<uint8_t> out =
      run(h, "video/x-raw,format=RGBA,width=4,height=2,framerate=30/1", "video/x-bayer", in);
  const std::string caps = current_caps(h);
  EXPECT_NE(caps.find("rggb10le"), std::string::npos) << caps;
  EXPECT_NE(caps.find("width=(int)4"), std::string::npos) << caps;
  EXPECT_NE(caps.find("framerate=(fraction)30/1"), std::string::npos) << caps;
  ASSERT_EQ(out.size(), 16u);
  for (size_t i = 0; i < out.size(); i += 2) EXPECT_EQ(out[i] | (out[i + 1] << 8), 1023);
  gst_harness_teardown(h);
}

TEST_F(BgraToRg10, RefusesUnsupportedInput) {
  GstHarness* h = gst_harness_new("bgratorg10");
  GstCaps* i420 = gst_caps_from_string("video/x-raw,format=I420,width=8,height=4,framerate=30/1");
  GstPad* sink = gst_element_get_static_pad(h->element, "sink");
  EXPECT_FALSE(gst_pad_query_accept_caps(sink, i420));
  gst_object_unref(sink);
  gst_harness_set_src_caps(h, i420);  // takes the caps
  GstBuffer* buf = gst_buffer_new_allocate(nullptr, 8 * 4 * 3 / 2, nullptr);
  EXPECT_EQ(gst_harness_push(h, buf), GST_FLOW_NOT_NEGOTIATED);
  gst_harness_teardown(h);
}

// The formats of a pad template's "format" list.
std::set<std::string> template_formats(const char* factory_name, GstPadDirection direction) {
  std::set<std::string> formats;
  GstElementFactory* f = gst_element_factory_find(factory_name);
  if (!f) return formats;
  for (const GList* l = gst_element_factory_get_static_pad_templates(f); l; l = l->next) {
    auto* t = static_cast<GstStaticPadTemplate*>(l->data);
    if (t->direction != direction) continue;
    GstCaps* caps = gst_static_caps_get(&t->static_caps);
    const GValue* list = gst_structure_get_value(gst_caps_get_structure(caps, 0), "format");
    if (list && GST_VALUE_HOLDS_LIST(list)) {
      for (guint i = 0; i < gst_value_list_get_size(list); ++i)
        formats.insert(g_value_get_string(gst_value_list_get_value(list, i)));
    }
    gst_caps_unref(caps);
  }
  gst_object_unref(f);
  return formats;
}

// The Bayer pads offer exactly the formats of bayer/formats.h: its 10-bit ones for the
// converters and the replay camera (CIPC_BAYER10_FORMATS of gst/camera/bayercaps.h), all of them
// for cudav4l2src.
TEST_F(BgraToRg10, BayerTemplatesMatchTheFormatTable) {
  std::set<std::string> all, ten_bit;
  for (const cb::BayerFormat& f : cb::bayer_formats()) {
    all.insert(f.caps_name);
    if (f.bits == 10) ten_bit.insert(f.caps_name);
  }
  EXPECT_EQ(template_formats("bgratorg10", GST_PAD_SRC), ten_bit);
  EXPECT_EQ(template_formats("rg10replaysrc", GST_PAD_SRC), ten_bit);
  EXPECT_EQ(template_formats("cudav4l2src", GST_PAD_SRC), all);
  GstElementFactory* rg10tobgra = gst_element_factory_find("rg10tobgra");
  if (!rg10tobgra) return;  // built without CUDA
  gst_object_unref(rg10tobgra);
  EXPECT_EQ(template_formats("rg10tobgra", GST_PAD_SINK), ten_bit);
}

// GStreamer names an element after its GType without the "Gst" prefix, lower case, plus a
// per-type counter ("-" before it when the name ends in a digit): the type names are chosen so
// that this is the element's own name.
TEST_F(BgraToRg10, DefaultNamesAreTheElementNames) {
  struct Case {
    const char* factory;
    const char* type_name;
    const char* prefix;
  };
  const Case cases[] = {
      {"bgratorg10", "GstBgraToRg10", "bgratorg10-"},
      {"cudav4l2src", "GstCudaV4l2Src", "cudav4l2src"},
      {"rg10replaysrc", "GstRg10ReplaySrc", "rg10replaysrc"},
      {"rg10tobgra", "GstRg10ToBgra", "rg10tobgra"},
  };
  for (const Case& c : cases) {
    GstElement* e = gst_element_factory_make(c.factory, nullptr);
    if (!e && std::string(c.factory) == "rg10tobgra") continue;  // built without CUDA
    ASSERT_NE(e, nullptr) << c.factory;
    EXPECT_STREQ(G_OBJECT_TYPE_NAME(e), c.type_name);
    const std::string name = GST_OBJECT_NAME(e);
    const std::string prefix = c.prefix;
    EXPECT_EQ(name.compare(0, prefix.size(), prefix), 0) << name;
    const std::string counter = name.substr(std::min(prefix.size(), name.size()));
    EXPECT_FALSE(counter.empty()) << name;
    for (char ch : counter) EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(ch))) << name;
    gst_object_unref(e);
  }
}

}  // namespace
