// SPDX-License-Identifier: LGPL-2.1-or-later
// cudav4l2src's caps from a device's modes (gst/camera/v4l2caps), with the modes written here as
// v4l2/ describes them: discrete sizes, stepwise and continuous ranges, rate lists, rate ranges
// and unknown rates, several Bayer formats and some that are not, and the order fixation
// prefers formats in. No device, no plugin: the vivid suite checks the same against a driver.
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "camera/v4l2caps.h"
#include "formats.h"
#include "v4l2capture.h"

namespace cb = cipc_bayer;
namespace v4l = cipc_v4l2;

namespace {

using CapsPtr = std::unique_ptr<GstCaps, decltype(&gst_caps_unref)>;

v4l::FrameRates rate_list(std::vector<v4l::Fraction> rates) {
  return {v4l::FrameRates::Kind::kDiscrete, std::move(rates), {}, {}};
}

v4l::FrameRates rate_range(v4l::Fraction slowest, v4l::Fraction fastest) {
  return {v4l::FrameRates::Kind::kRange, {}, slowest, fastest};
}

v4l::FrameSize discrete(uint32_t width, uint32_t height, v4l::FrameRates rates) {
  return {true, width, width, 1, height, height, 1, std::move(rates)};
}

// A stepwise range (step 1: continuous), with the rates of its smallest size.
v4l::FrameSize size_range(uint32_t min_width, uint32_t max_width, uint32_t step_width,
                          uint32_t min_height, uint32_t max_height, uint32_t step_height,
                          v4l::FrameRates rates) {
  return {false,      min_width,  max_width,   step_width,
          min_height, max_height, step_height, std::move(rates)};
}

v4l::FormatDescription format(uint32_t fourcc, std::vector<v4l::FrameSize> sizes) {
  return {fourcc, v4l::fourcc_to_string(fourcc), std::move(sizes)};
}

const v4l::FrameRates k30 = rate_list({{30, 1}});
const uint32_t kYuyv = cb::fourcc('Y', 'U', 'Y', 'V');
const uint32_t kPackedRggb10 = cb::fourcc('p', 'R', 'A', 'A');  // MIPI-packed: not captured

class V4l2Caps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }

  static CapsPtr caps_of(const std::vector<v4l::FormatDescription>& formats,
                         uint32_t preferred_fourcc = 0) {
    return CapsPtr(cipc_gst::caps_from_formats(formats, preferred_fourcc), gst_caps_unref);
  }

  // Structure by structure, in order, with the types the string gives.
  static void expect_caps(const CapsPtr& got, const char* expected) {
    CapsPtr want(gst_caps_from_string(expected), gst_caps_unref);
    ASSERT_TRUE(want) << expected;
    gchar* got_text = gst_caps_to_string(got.get());
    EXPECT_TRUE(gst_caps_is_strictly_equal(got.get(), want.get()))
        << "got " << got_text << "\nwanted " << expected;
    g_free(got_text);
  }

  // The caps of a device with one format of one size (or range of sizes).
  static void expect_mode(uint32_t fourcc, v4l::FrameSize size, const char* expected) {
    expect_caps(caps_of({format(fourcc, {std::move(size)})}), expected);
  }
};

// ---- Sizes ----------------------------------------------------------------------------------

TEST_F(V4l2Caps, DiscreteSizeAtOneRateIsFixedCaps) {
  const CapsPtr caps = caps_of({format(cb::kFourccSRGGB10, {discrete(1920, 1080, k30)})});
  EXPECT_TRUE(gst_caps_is_fixed(caps.get()));
  expect_caps(caps,
              "video/x-bayer, format=(string)rggb10le, width=(int)1920, height=(int)1080, "
              "framerate=(fraction)30/1");
}

TEST_F(V4l2Caps, EachDiscreteSizeIsAStructureOfItsOwnInTheDriversOrder) {
  const CapsPtr caps = caps_of({format(
      cb::kFourccSGRBG10, {discrete(3840, 2160, k30), discrete(1920, 1080, rate_list({{60, 1}})),
                           discrete(640, 480, k30)})});
  expect_caps(caps,
              "video/x-bayer, format=(string)grbg10le, width=(int)3840, height=(int)2160, "
              "framerate=(fraction)30/1; "
              "video/x-bayer, format=(string)grbg10le, width=(int)1920, height=(int)1080, "
              "framerate=(fraction)60/1; "
              "video/x-bayer, format=(string)grbg10le, width=(int)640, height=(int)480, "
              "framerate=(fraction)30/1");
}

TEST_F(V4l2Caps, StepwiseSizesBecomeRangesWithTheirStep) {
  expect_mode(cb::kFourccSBGGR12, size_range(64, 4096, 16, 48, 2160, 2, k30),
              "video/x-bayer, format=(string)bggr12le, width=(int)[ 64, 4096, 16 ], "
              "height=(int)[ 48, 2160, 2 ], framerate=(fraction)30/1");
}

TEST_F(V4l2Caps, ContinuousSizesBecomeRangesWithoutAStep) {
  expect_mode(cb::kFourccSRGGB8, size_range(16, 1920, 1, 16, 1080, 1, k30),
              "video/x-bayer, format=(string)rggb, width=(int)[ 16, 1920 ], "
              "height=(int)[ 16, 1080 ], framerate=(fraction)30/1");
}

TEST_F(V4l2Caps, ARangeOfOneWidthOrHeightIsThatValue) {
  expect_mode(cb::kFourccSRGGB10, size_range(1280, 1280, 8, 720, 1080, 8, k30),
              "video/x-bayer, format=(string)rggb10le, width=(int)1280, "
              "height=(int)[ 720, 1080, 8 ], framerate=(fraction)30/1");
}

// ---- Rates ----------------------------------------------------------------------------------

TEST_F(V4l2Caps, SeveralRatesBecomeAListInTheDriversOrder) {
  const CapsPtr caps = caps_of(
      {format(cb::kFourccSRGGB10, {discrete(1920, 1080, rate_list({{60, 1}, {30, 1}, {15, 2}}))})});
  ASSERT_EQ(gst_caps_get_size(caps.get()), 1u);
  const GValue* rates = gst_structure_get_value(gst_caps_get_structure(caps.get(), 0), "framerate");
  ASSERT_TRUE(rates && GST_VALUE_HOLDS_LIST(rates));
  ASSERT_EQ(gst_value_list_get_size(rates), 3u);
  const gint want[3][2] = {{60, 1}, {30, 1}, {15, 2}};  // fastest first, as v4l2/ lists them
  for (guint i = 0; i < 3; ++i) {
    const GValue* rate = gst_value_list_get_value(rates, i);
    EXPECT_EQ(gst_value_get_fraction_numerator(rate), want[i][0]) << "rate " << i;
    EXPECT_EQ(gst_value_get_fraction_denominator(rate), want[i][1]) << "rate " << i;
  }
}

TEST_F(V4l2Caps, RateRangeBecomesAFractionRange) {
  expect_mode(cb::kFourccSRGGB10, discrete(1280, 720, rate_range({1, 1}, {120, 1})),
              "video/x-bayer, format=(string)rggb10le, width=(int)1280, height=(int)720, "
              "framerate=(fraction)[ 1/1, 120/1 ]");
}

TEST_F(V4l2Caps, RateRangeOfOneRateIsThatRate) {
  expect_mode(cb::kFourccSRGGB10, discrete(1280, 720, rate_range({25, 1}, {25, 1})),
              "video/x-bayer, format=(string)rggb10le, width=(int)1280, height=(int)720, "
              "framerate=(fraction)25/1");
}

TEST_F(V4l2Caps, UnknownRatesAcceptAnyRate) {
  expect_mode(cb::kFourccSRGGB10, discrete(1280, 720, v4l::FrameRates{}),
              "video/x-bayer, format=(string)rggb10le, width=(int)1280, height=(int)720, "
              "framerate=(fraction)[ 0/1, 2147483647/1 ]");
}

TEST_F(V4l2Caps, CountsPastGintBecomeTheLargestGint) {
  EXPECT_EQ(cipc_gst::clamp_int(0), 0);
  EXPECT_EQ(cipc_gst::clamp_int(G_MAXINT), G_MAXINT);
  EXPECT_EQ(cipc_gst::clamp_int(static_cast<uint32_t>(G_MAXINT) + 1), G_MAXINT);
  EXPECT_EQ(cipc_gst::clamp_int(UINT32_MAX), G_MAXINT);
  expect_mode(cb::kFourccSRGGB10,
              size_range(1, UINT32_MAX, 1, 1, UINT32_MAX, 1, rate_range({1, 1}, {UINT32_MAX, 1})),
              "video/x-bayer, format=(string)rggb10le, width=(int)[ 1, 2147483647 ], "
              "height=(int)[ 1, 2147483647 ], framerate=(fraction)[ 1/1, 2147483647/1 ]");
}

// ---- Formats --------------------------------------------------------------------------------

TEST_F(V4l2Caps, TheDriversCurrentFormatComesFirstThenTheDriversOrder) {
  const std::vector<v4l::FormatDescription> formats = {
      format(cb::kFourccSBGGR8, {discrete(640, 480, k30)}),
      format(cb::kFourccSGBRG10, {discrete(640, 480, k30)}),
      format(cb::kFourccSRGGB12, {discrete(1920, 1080, k30), discrete(640, 480, k30)}),
      format(cb::kFourccSRGGB10, {discrete(640, 480, k30)}),
  };
  const CapsPtr caps = caps_of(formats, cb::kFourccSRGGB12);
  std::vector<std::string> order;
  for (guint i = 0; i < gst_caps_get_size(caps.get()); ++i)
    order.push_back(gst_structure_get_string(gst_caps_get_structure(caps.get(), i), "format"));
  EXPECT_EQ(order,
            (std::vector<std::string>{"rggb12le", "rggb12le", "bggr", "gbrg10le", "rggb10le"}));
  // With no current format (or one it does not capture) the driver's order stands.
  const CapsPtr unordered = caps_of(formats, kYuyv);
  EXPECT_STREQ(gst_structure_get_string(gst_caps_get_structure(unordered.get(), 0), "format"),
               "bggr");
}

TEST_F(V4l2Caps, FormatsItDoesNotCaptureAreLeftOut) {
  const CapsPtr caps = caps_of({format(kYuyv, {discrete(1920, 1080, k30)}),
                                format(cb::kFourccSGRBG8, {discrete(1920, 1080, k30)}),
                                format(kPackedRggb10, {discrete(1920, 1080, k30)})},
                               kYuyv);
  expect_caps(caps,
              "video/x-bayer, format=(string)grbg, width=(int)1920, height=(int)1080, "
              "framerate=(fraction)30/1");
}

TEST_F(V4l2Caps, ADeviceWithNoBayerFormatGivesEmptyCaps) {
  EXPECT_TRUE(gst_caps_is_empty(
      caps_of({format(kYuyv, {discrete(1920, 1080, k30)}), format(kPackedRggb10, {})}).get()));
  EXPECT_TRUE(gst_caps_is_empty(caps_of({}).get()));
}

TEST_F(V4l2Caps, FixationPrefersTheCurrentFormatThenTenTwelveAndEightBits) {
  EXPECT_EQ(cipc_gst::format_rank("rggb", cb::kFourccSRGGB8), 0);  // current beats depth
  EXPECT_EQ(cipc_gst::format_rank("rggb10le", cb::kFourccSRGGB8), 1);
  EXPECT_EQ(cipc_gst::format_rank("bggr10le", cb::kFourccSRGGB8), 1);
  EXPECT_EQ(cipc_gst::format_rank("gbrg12le", cb::kFourccSRGGB8), 2);
  EXPECT_EQ(cipc_gst::format_rank("grbg", cb::kFourccSRGGB8), 3);
  EXPECT_EQ(cipc_gst::format_rank("rggb10le", 0), 1);
  EXPECT_LT(cipc_gst::format_rank("rggb12le", 0), cipc_gst::format_rank("rggb", 0));
}

TEST_F(V4l2Caps, NamesThatAreNoBayerFormatOfOursRankLast) {
  const int worst_bayer = cipc_gst::format_rank("bggr", 0);
  for (const char* name : {"GRAY16_LE", "RGGB10LE", "rggb16le", ""}) {
    SCOPED_TRACE(name);
    EXPECT_GT(cipc_gst::format_rank(name, 0), worst_bayer);
  }
  EXPECT_GT(cipc_gst::format_rank(nullptr, cb::kFourccSRGGB10), worst_bayer);
}

}  // namespace
