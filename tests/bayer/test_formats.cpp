// SPDX-License-Identifier: LGPL-2.1-or-later
// The Bayer format table and the CFA order (bayer/formats.h, bayer/cfa.h). No CUDA, no
// GStreamer, no kernel header: tests/v4l2 checks the fourccs against linux/videodev2.h.
#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <set>
#include <string>

#include "cfa.h"
#include "formats.h"

namespace cb = cipc_bayer;

namespace {

std::string fourcc_chars(uint32_t f) {
  std::string s;
  for (int i = 0; i < 4; ++i) s += static_cast<char>((f >> (8 * i)) & 0xff);
  return s;
}

TEST(BayerFormats, TableHasEveryDepthAndOrderOnce) {
  struct Case {
    const char* fourcc;
    const char* caps;
    unsigned bits;
    cb::CfaOrder order;
  };
  const Case cases[] = {
      {"RGGB", "rggb", 8, cb::CfaOrder::kRGGB},      {"GRBG", "grbg", 8, cb::CfaOrder::kGRBG},
      {"GBRG", "gbrg", 8, cb::CfaOrder::kGBRG},      {"BA81", "bggr", 8, cb::CfaOrder::kBGGR},
      {"RG10", "rggb10le", 10, cb::CfaOrder::kRGGB}, {"BA10", "grbg10le", 10, cb::CfaOrder::kGRBG},
      {"GB10", "gbrg10le", 10, cb::CfaOrder::kGBRG}, {"BG10", "bggr10le", 10, cb::CfaOrder::kBGGR},
      {"RG12", "rggb12le", 12, cb::CfaOrder::kRGGB}, {"BA12", "grbg12le", 12, cb::CfaOrder::kGRBG},
      {"GB12", "gbrg12le", 12, cb::CfaOrder::kGBRG}, {"BG12", "bggr12le", 12, cb::CfaOrder::kBGGR},
  };
  EXPECT_EQ(cb::bayer_formats().size(), std::size(cases));
  std::set<uint32_t> fourccs;
  std::set<std::string> names;
  for (const cb::BayerFormat& f : cb::bayer_formats()) {
    fourccs.insert(f.fourcc);
    names.insert(f.caps_name);
  }
  EXPECT_EQ(fourccs.size(), cb::bayer_formats().size());
  EXPECT_EQ(names.size(), cb::bayer_formats().size());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.caps);
    const cb::BayerFormat* f = cb::bayer_format_from_caps_name(c.caps);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(fourcc_chars(f->fourcc), c.fourcc);
    EXPECT_EQ(f->bits, c.bits);
    EXPECT_EQ(f->bytes_per_sample, c.bits > 8 ? 2u : 1u);
    EXPECT_EQ(f->order, c.order);
    EXPECT_EQ(cb::bayer_format_from_fourcc(f->fourcc), f);
  }
  EXPECT_EQ(cb::bayer_format_from_fourcc(cb::fourcc('Y', 'U', 'Y', 'V')), nullptr);
  EXPECT_EQ(cb::bayer_format_from_fourcc(0), nullptr);
  EXPECT_EQ(cb::bayer_format_from_caps_name("RGGB10LE"), nullptr);
  EXPECT_EQ(cb::bayer_format_from_caps_name("rggb16le"), nullptr);
  EXPECT_EQ(cb::bayer_format_from_caps_name(""), nullptr);
}

TEST(BayerFormats, Strides) {
  const cb::BayerFormat& rg10 = *cb::bayer_format_from_caps_name("rggb10le");
  const cb::BayerFormat& rggb = *cb::bayer_format_from_caps_name("rggb");
  EXPECT_EQ(cb::tight_stride(rg10, 641), 1282u);
  EXPECT_EQ(cb::tight_stride(rggb, 641), 641u);
  EXPECT_EQ(cb::implicit_stride(rg10, 641), 1288u);  // GST_ROUND_UP_4 (641) * 2
  EXPECT_EQ(cb::implicit_stride(rg10, 644), 1288u);
  EXPECT_EQ(cb::implicit_stride(rggb, 1), 4u);
  EXPECT_FALSE(cb::stride_needs_video_meta(rg10, 640, 1280));
  EXPECT_TRUE(cb::stride_needs_video_meta(rg10, 642, 1284));
}

TEST(CfaOrder, ColoursOfTheTile) {
  using cb::kCfaBlue;
  using cb::kCfaGreen;
  using cb::kCfaRed;
  struct Case {
    cb::CfaOrder order;
    cb::CfaColor tile[4];  // top-left, top-right, bottom-left, bottom-right
  };
  const Case cases[] = {
      {cb::CfaOrder::kRGGB, {kCfaRed, kCfaGreen, kCfaGreen, kCfaBlue}},
      {cb::CfaOrder::kBGGR, {kCfaBlue, kCfaGreen, kCfaGreen, kCfaRed}},
      {cb::CfaOrder::kGRBG, {kCfaGreen, kCfaRed, kCfaBlue, kCfaGreen}},
      {cb::CfaOrder::kGBRG, {kCfaGreen, kCfaBlue, kCfaRed, kCfaGreen}},
  };
  for (const Case& c : cases) {
    for (int r = 0; r < 4; ++r)
      for (int col = 0; col < 4; ++col)
        EXPECT_EQ(cb::cfa_color(c.order, r, col), c.tile[(r & 1) * 2 + (col & 1)])
            << static_cast<int>(c.order) << " at " << r << "," << col;
  }
}

}  // namespace
