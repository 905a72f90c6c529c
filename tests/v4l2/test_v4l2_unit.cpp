// SPDX-License-Identifier: LGPL-2.1-or-later
// cudav4l2src without a camera: the V4L2 class's format mapping, stride and rate arithmetic
// and open errors; the element's registration, properties and errors for nodes that are not
// cameras; and the colour-bar oracle that the vivid suite (run-vivid-suite) checks frames with.
// The plugin is loaded from the build tree (GST_PLUGIN_PATH).
#include <fcntl.h>
#include <linux/videodev2.h>
#include <unistd.h>

#include <gst/gst.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "colour_bars.h"
#include "v4l2capture.h"

namespace cb = cipc_bayer;
namespace cv = cipc_v4l2;

namespace {

// ---- Formats --------------------------------------------------------------------------------

TEST(V4l2Formats, MapsEveryBayerFourccToItsCapsName) {
  struct Case {
    uint32_t fourcc;
    const char* caps;
    unsigned bits, bytes;
    cb::CfaOrder order;
  };
  const Case cases[] = {
      {V4L2_PIX_FMT_SRGGB10, "rggb10le", 10, 2, cb::CfaOrder::kRGGB},  // 'RG10'
      {V4L2_PIX_FMT_SGRBG10, "grbg10le", 10, 2, cb::CfaOrder::kGRBG},  // 'BA10'
      {V4L2_PIX_FMT_SGBRG10, "gbrg10le", 10, 2, cb::CfaOrder::kGBRG},  // 'GB10'
      {V4L2_PIX_FMT_SBGGR10, "bggr10le", 10, 2, cb::CfaOrder::kBGGR},  // 'BG10'
      {V4L2_PIX_FMT_SRGGB8, "rggb", 8, 1, cb::CfaOrder::kRGGB},
      {V4L2_PIX_FMT_SGRBG8, "grbg", 8, 1, cb::CfaOrder::kGRBG},
      {V4L2_PIX_FMT_SGBRG8, "gbrg", 8, 1, cb::CfaOrder::kGBRG},
      {V4L2_PIX_FMT_SBGGR8, "bggr", 8, 1, cb::CfaOrder::kBGGR},  // 'BA81'
      {V4L2_PIX_FMT_SRGGB12, "rggb12le", 12, 2, cb::CfaOrder::kRGGB},
      {V4L2_PIX_FMT_SGRBG12, "grbg12le", 12, 2, cb::CfaOrder::kGRBG},
      {V4L2_PIX_FMT_SGBRG12, "gbrg12le", 12, 2, cb::CfaOrder::kGBRG},
      {V4L2_PIX_FMT_SBGGR12, "bggr12le", 12, 2, cb::CfaOrder::kBGGR},
  };
  EXPECT_EQ(cb::bayer_formats().size(), std::size(cases));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.caps);
    const cb::BayerFormat* f = cb::bayer_format_from_fourcc(c.fourcc);
    ASSERT_NE(f, nullptr);
    EXPECT_STREQ(f->caps_name, c.caps);
    EXPECT_EQ(f->bits, c.bits);
    EXPECT_EQ(f->bytes_per_sample, c.bytes);
    EXPECT_EQ(f->order, c.order);
    EXPECT_EQ(cb::bayer_format_from_caps_name(c.caps), f);  // and back
  }
}

TEST(V4l2Formats, IgnoresFormatsItDoesNotCapture) {
  EXPECT_EQ(cb::bayer_format_from_fourcc(V4L2_PIX_FMT_YUYV), nullptr);
  EXPECT_EQ(cb::bayer_format_from_fourcc(V4L2_PIX_FMT_SRGGB16), nullptr);
  EXPECT_EQ(cb::bayer_format_from_fourcc(V4L2_PIX_FMT_SRGGB10P), nullptr);  // MIPI-packed
  EXPECT_EQ(cb::bayer_format_from_caps_name("rggb16le"), nullptr);
  EXPECT_EQ(cb::bayer_format_from_caps_name("RGGB10LE"), nullptr);
  EXPECT_EQ(cb::bayer_format_from_caps_name(""), nullptr);
}

TEST(V4l2Formats, PrintsFourccs) {
  EXPECT_EQ(cv::fourcc_to_string(V4L2_PIX_FMT_SRGGB10), "RG10");
  EXPECT_EQ(cv::fourcc_to_string(V4L2_PIX_FMT_SBGGR8), "BA81");
  EXPECT_EQ(cv::fourcc_to_string(V4L2_PIX_FMT_Y16_BE), "Y16 -BE");
  EXPECT_EQ(cv::fourcc_to_string(0), "????");
}

// ---- Strides and rates ----------------------------------------------------------------------

TEST(V4l2Strides, TightAndImplicitStrides) {
  const cb::BayerFormat& rg10 = *cb::bayer_format_from_caps_name("rggb10le");
  const cb::BayerFormat& rggb = *cb::bayer_format_from_caps_name("rggb");
  EXPECT_EQ(cb::tight_stride(rg10, 1920), 3840u);
  EXPECT_EQ(cb::tight_stride(rggb, 1920), 1920u);
  // GStreamer's implicit Bayer stride is GST_ROUND_UP_4 (width) samples.
  EXPECT_EQ(cb::implicit_stride(rg10, 640), 1280u);
  EXPECT_EQ(cb::implicit_stride(rg10, 641), 1288u);
  EXPECT_EQ(cb::implicit_stride(rg10, 642), 1288u);
  EXPECT_EQ(cb::implicit_stride(rggb, 641), 644u);
  EXPECT_EQ(cb::implicit_stride(rggb, 1), 4u);
}

TEST(V4l2Strides, MetaOnlyWhenTheDriversStrideDiffersFromTheImplicitOne) {
  const cb::BayerFormat& rg10 = *cb::bayer_format_from_caps_name("rggb10le");
  EXPECT_FALSE(cb::stride_needs_video_meta(rg10, 1920, 3840));
  EXPECT_TRUE(cb::stride_needs_video_meta(rg10, 1920, 3904));  // padded to 64 bytes... and more
  EXPECT_TRUE(cb::stride_needs_video_meta(rg10, 3856, 7744));  // Orin's padding of 3856 px rows
  EXPECT_TRUE(cb::stride_needs_video_meta(rg10, 641, 1282));   // tight, but GStreamer pads to 4
  EXPECT_FALSE(cb::stride_needs_video_meta(rg10, 641, 1288));
}

TEST(V4l2Rates, FrameIntervalsBecomeFramerates) {
  EXPECT_EQ(cv::framerate_from_interval(1, 30), (cv::Fraction{30, 1}));
  EXPECT_EQ(cv::framerate_from_interval(2, 25), (cv::Fraction{25, 2}));
  EXPECT_EQ(cv::framerate_from_interval(1001, 30000), (cv::Fraction{30000, 1001}));
  EXPECT_EQ(cv::framerate_from_interval(100, 6000), (cv::Fraction{60, 1}));  // reduced
  EXPECT_EQ(cv::framerate_from_interval(0, 1), (cv::Fraction{0, 1}));
  EXPECT_EQ(cv::frame_duration_ns({25, 1}), 40000000u);
  EXPECT_EQ(cv::frame_duration_ns({30000, 1001}), 33366666u);
  EXPECT_EQ(cv::frame_duration_ns({0, 1}), 0u);
}

// ---- Open errors ----------------------------------------------------------------------------

void expect_sentence(const cv::Error& e, const std::string& path) {
  EXPECT_NE(e.message.find("'" + path + "'"), std::string::npos) << e.message;
  ASSERT_FALSE(e.message.empty());
  EXPECT_EQ(e.message.back(), '.') << e.message;
}

TEST(V4l2Open, MissingNodeSaysItDoesNotExist) {
  cv::Error e;
  EXPECT_EQ(cv::Device::open("/dev/video-cudaipc-missing", &e), nullptr);
  EXPECT_EQ(e.kind, cv::ErrorKind::kNotFound);
  EXPECT_EQ(e.errnum, ENOENT);
  EXPECT_NE(e.message.find("does not exist"), std::string::npos) << e.message;
  EXPECT_NE(e.detail.find("open"), std::string::npos) << e.detail;
  expect_sentence(e, "/dev/video-cudaipc-missing");
}

TEST(V4l2Open, CharacterDeviceThatIsNotV4l2) {
  cv::Error e;
  EXPECT_EQ(cv::Device::open("/dev/null", &e), nullptr);
  EXPECT_EQ(e.kind, cv::ErrorKind::kNotV4l2);
  EXPECT_NE(e.message.find("is not a V4L2"), std::string::npos) << e.message;
  EXPECT_NE(e.detail.find("VIDIOC_QUERYCAP"), std::string::npos) << e.detail;
  expect_sentence(e, "/dev/null");
}

TEST(V4l2Open, RegularFileAndDirectoryAreNotDevices) {
  char path[] = "/tmp/cudav4l2src-unit-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  cv::Error e;
  EXPECT_EQ(cv::Device::open(path, &e), nullptr);
  EXPECT_EQ(e.kind, cv::ErrorKind::kNotV4l2);
  EXPECT_NE(e.message.find("not a device node"), std::string::npos) << e.message;
  expect_sentence(e, path);
  unlink(path);

  cv::Error d;
  EXPECT_EQ(cv::Device::open("/tmp", &d), nullptr);
  EXPECT_EQ(d.kind, cv::ErrorKind::kNotV4l2);
}

TEST(V4l2Open, ErrnoBecomesASentence) {
  const cv::Error denied = cv::open_error("/dev/video3", EACCES);
  EXPECT_EQ(denied.kind, cv::ErrorKind::kPermission);
  EXPECT_NE(denied.message.find("permission denied"), std::string::npos);
  expect_sentence(denied, "/dev/video3");
  const cv::Error busy = cv::open_error("/dev/video3", EBUSY);
  EXPECT_EQ(busy.kind, cv::ErrorKind::kBusy);
  expect_sentence(busy, "/dev/video3");
  const cv::Error gone = cv::open_error("/dev/video3", ENODEV);
  EXPECT_EQ(gone.kind, cv::ErrorKind::kNotFound);
  expect_sentence(gone, "/dev/video3");
}

// ---- The colour-bar oracle ------------------------------------------------------------------

// A frame as vivid draws it: every sample at the level its bar and CFA site predict.
std::vector<uint8_t> synthetic_bars(const cb::BayerFormat& f, uint32_t width, uint32_t height,
                                    size_t stride) {
  std::vector<uint8_t> frame(stride * height, 0xAB);  // row padding is garbage
  for (uint32_t y = 0; y < height; ++y)
    for (uint32_t x = 0; x < width; ++x) {
      const uint32_t v = cipc_test::expected_sample(f, width, x, y);
      uint8_t* p = frame.data() + y * stride + x * f.bytes_per_sample;
      p[0] = static_cast<uint8_t>(v);
      if (f.bytes_per_sample == 2) p[1] = static_cast<uint8_t>(v >> 8);
    }
  return frame;
}

TEST(ColourBarOracle, LevelsAreVividsSeventyFivePercent) {
  EXPECT_EQ(cipc_test::bar_level(8), 191u);
  EXPECT_EQ(cipc_test::bar_level(10), 767u);  // as captured from vivid (RG10, BA10)
  EXPECT_EQ(cipc_test::bar_level(12), 3071u);
  const cb::BayerFormat& rg10 = *cb::bayer_format_from_caps_name("rggb10le");
  // Row 0 of RGGB alternates R and G: white bar R=G=767, cyan bar R=0, magenta bar G=0.
  EXPECT_EQ(cipc_test::expected_sample(rg10, 640, 0, 0), 767u);
  EXPECT_EQ(cipc_test::expected_sample(rg10, 640, 1, 0), 767u);
  EXPECT_EQ(cipc_test::expected_sample(rg10, 640, 160, 0), 0u);    // cyan, R site
  EXPECT_EQ(cipc_test::expected_sample(rg10, 640, 161, 0), 767u);  // cyan, G site
  EXPECT_EQ(cipc_test::expected_sample(rg10, 640, 321, 0), 0u);    // magenta, G site
  EXPECT_EQ(cipc_test::expected_sample(rg10, 640, 481, 1), 767u);  // blue, B site
  EXPECT_EQ(cipc_test::expected_sample(rg10, 640, 639, 1), 0u);    // black
}

TEST(ColourBarOracle, AcceptsTheExpectedFrameAndRejectsShiftedPhases) {
  for (const cb::BayerFormat& f : cb::bayer_formats()) {
    SCOPED_TRACE(f.caps_name);
    const uint32_t w = 64, h = 8;
    const size_t stride = cb::tight_stride(f, w) + 32;  // exercise a padded stride
    std::vector<uint8_t> frame = synthetic_bars(f, w, h, stride);
    const cipc_test::BarCheck ok =
        cipc_test::check_colour_bars(frame.data(), frame.size(), stride, f, w, h);
    EXPECT_EQ(ok.mismatches, 0u) << ok.first_mismatch;
    EXPECT_EQ(ok.checked, uint64_t{w} * h);
    // The same data read as another CFA phase must not pass.
    for (const cb::BayerFormat& other : cb::bayer_formats()) {
      if (other.bits != f.bits || other.order == f.order) continue;
      const cipc_test::BarCheck bad =
          cipc_test::check_colour_bars(frame.data(), frame.size(), stride, other, w, h);
      EXPECT_GT(bad.mismatches, 0u) << other.caps_name;
    }
    // A frame that is all zero must not pass either.
    std::vector<uint8_t> zero(frame.size(), 0);
    EXPECT_GT(cipc_test::check_colour_bars(zero.data(), zero.size(), stride, f, w, h).mismatches,
              0u);
  }
}

// ---- The element ----------------------------------------------------------------------------

class V4l2SrcElement : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }

  // Sets `device`, tries PAUSED, returns the first error message (text) on the bus.
  static std::string start_error(const std::string& device, GQuark* domain, gint* code) {
    GstElement* pipeline = gst_pipeline_new(nullptr);
    GstElement* src = gst_element_factory_make("cudav4l2src", nullptr);
    GstElement* sink = gst_element_factory_make("fakesink", nullptr);
    EXPECT_NE(src, nullptr);
    if (!src) return "";
    g_object_set(src, "device", device.c_str(), nullptr);
    gst_bin_add_many(GST_BIN(pipeline), src, sink, nullptr);
    gst_element_link(src, sink);
    EXPECT_EQ(gst_element_set_state(pipeline, GST_STATE_PAUSED), GST_STATE_CHANGE_FAILURE);
    GstBus* bus = gst_element_get_bus(pipeline);
    GstMessage* msg = gst_bus_timed_pop_filtered(bus, GST_SECOND, GST_MESSAGE_ERROR);
    std::string text;
    if (msg) {
      GError* err = nullptr;
      gst_message_parse_error(msg, &err, nullptr);
      text = err->message;
      *domain = err->domain;
      *code = err->code;
      g_error_free(err);
      gst_message_unref(msg);
    }
    // Exactly one error: the device is opened in NULL->READY, so basesrc adds no second one.
    GstMessage* second = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
    EXPECT_EQ(second, nullptr);
    if (second) gst_message_unref(second);
    gst_object_unref(bus);
    gst_element_set_state(pipeline, GST_STATE_NULL);
    gst_object_unref(pipeline);
    return text;
  }
};

TEST_F(V4l2SrcElement, IsRegisteredWithDocumentedProperties) {
  GstElement* e = gst_element_factory_make("cudav4l2src", nullptr);
  ASSERT_NE(e, nullptr) << "plugin not found: is GST_PLUGIN_PATH set?";
  EXPECT_STREQ(G_OBJECT_TYPE_NAME(e), "GstCudaV4l2Src");
  GstElementFactory* f = gst_element_get_factory(e);
  EXPECT_STREQ(gst_element_factory_get_metadata(f, GST_ELEMENT_METADATA_KLASS), "Source/Video");

  gchar* device = nullptr;
  gint io_mode = -1;
  guint buffers = 0, timeout = 0;
  g_object_get(e, "device", &device, "io-mode", &io_mode, "driver-buffers", &buffers,
               "frame-timeout", &timeout, nullptr);
  EXPECT_STREQ(device, "/dev/video0");
  g_free(device);
  EXPECT_EQ(io_mode, 0);  // auto
  EXPECT_EQ(buffers, 4u);
  EXPECT_EQ(timeout, 5000u);

  auto* spec =
      G_PARAM_SPEC_UINT(g_object_class_find_property(G_OBJECT_GET_CLASS(e), "driver-buffers"));
  EXPECT_EQ(spec->minimum, 2u);
  EXPECT_EQ(spec->maximum, 32u);
  GParamSpec* io = g_object_class_find_property(G_OBJECT_GET_CLASS(e), "io-mode");
  ASSERT_TRUE(G_IS_PARAM_SPEC_ENUM(io));
  GEnumClass* modes = G_PARAM_SPEC_ENUM(io)->enum_class;
  for (const char* nick : {"auto", "userptr", "mmap"})
    EXPECT_NE(g_enum_get_value_by_nick(modes, nick), nullptr) << nick;

  // Every property of ours has a blurb that says something.
  guint n = 0;
  GParamSpec** specs = g_object_class_list_properties(G_OBJECT_GET_CLASS(e), &n);
  for (guint i = 0; i < n; ++i) {
    if (specs[i]->owner_type != G_OBJECT_TYPE(e)) continue;
    const gchar* blurb = g_param_spec_get_blurb(specs[i]);
    EXPECT_TRUE(blurb && std::string(blurb).size() > 20) << g_param_spec_get_name(specs[i]);
  }
  g_free(specs);
  gst_object_unref(e);
}

TEST_F(V4l2SrcElement, StatsStartEmpty) {
  GstElement* e = gst_element_factory_make("cudav4l2src", nullptr);
  ASSERT_NE(e, nullptr);
  GstStructure* stats = nullptr;
  g_object_get(e, "stats", &stats, nullptr);
  ASSERT_NE(stats, nullptr);
  guint64 frames = 1, drops = 1, copies = 1, corrupted = 1;
  EXPECT_TRUE(gst_structure_get_uint64(stats, "frames", &frames));
  EXPECT_TRUE(gst_structure_get_uint64(stats, "drops", &drops));
  EXPECT_TRUE(gst_structure_get_uint64(stats, "copies", &copies));
  EXPECT_TRUE(gst_structure_get_uint64(stats, "corrupted", &corrupted));
  EXPECT_EQ(frames + drops + copies + corrupted, 0u);
  EXPECT_STREQ(gst_structure_get_string(stats, "io-mode"), "none");
  gst_structure_free(stats);
  gst_object_unref(e);
}

TEST_F(V4l2SrcElement, TemplateOffersEightTenAndTwelveBitBayer) {
  GstElementFactory* f = gst_element_factory_find("cudav4l2src");
  ASSERT_NE(f, nullptr);
  GstCaps* tmpl = nullptr;
  for (const GList* l = gst_element_factory_get_static_pad_templates(f); l; l = l->next) {
    auto* t = static_cast<GstStaticPadTemplate*>(l->data);
    if (t->direction == GST_PAD_SRC) tmpl = gst_static_caps_get(&t->static_caps);
  }
  ASSERT_NE(tmpl, nullptr);
  for (const cb::BayerFormat& format : cb::bayer_formats()) {
    GstCaps* one = gst_caps_new_simple("video/x-bayer", "format", G_TYPE_STRING, format.caps_name,
                                       "width", G_TYPE_INT, 1920, "height", G_TYPE_INT, 1080,
                                       "framerate", GST_TYPE_FRACTION, 30, 1, nullptr);
    EXPECT_TRUE(gst_caps_can_intersect(one, tmpl)) << format.caps_name;
    gst_caps_unref(one);
  }
  gst_caps_unref(tmpl);
  gst_object_unref(f);
}

TEST_F(V4l2SrcElement, MissingDeviceIsAClearError) {
  GQuark domain = 0;
  gint code = 0;
  const std::string text = start_error("/dev/video-cudaipc-missing", &domain, &code);
  EXPECT_EQ(text, "Cannot open device '/dev/video-cudaipc-missing': it does not exist.");
  EXPECT_EQ(domain, GST_RESOURCE_ERROR);
  EXPECT_EQ(code, GST_RESOURCE_ERROR_NOT_FOUND);
}

TEST_F(V4l2SrcElement, NonVideoDeviceIsAClearError) {
  GQuark domain = 0;
  gint code = 0;
  const std::string text = start_error("/dev/null", &domain, &code);
  EXPECT_EQ(text, "'/dev/null' is not a V4L2 (video4linux) device.");
  EXPECT_EQ(domain, GST_RESOURCE_ERROR);
}

}  // namespace
