// SPDX-License-Identifier: LGPL-2.1-or-later
#include "formats.h"

namespace cipc_bayer {

namespace {

const std::vector<BayerFormat> kBayerFormats = {
    {kFourccSRGGB8, "rggb", 8, 1, CfaOrder::kRGGB},
    {kFourccSGRBG8, "grbg", 8, 1, CfaOrder::kGRBG},
    {kFourccSGBRG8, "gbrg", 8, 1, CfaOrder::kGBRG},
    {kFourccSBGGR8, "bggr", 8, 1, CfaOrder::kBGGR},
    {kFourccSRGGB10, "rggb10le", 10, 2, CfaOrder::kRGGB},
    {kFourccSGRBG10, "grbg10le", 10, 2, CfaOrder::kGRBG},
    {kFourccSGBRG10, "gbrg10le", 10, 2, CfaOrder::kGBRG},
    {kFourccSBGGR10, "bggr10le", 10, 2, CfaOrder::kBGGR},
    {kFourccSRGGB12, "rggb12le", 12, 2, CfaOrder::kRGGB},
    {kFourccSGRBG12, "grbg12le", 12, 2, CfaOrder::kGRBG},
    {kFourccSGBRG12, "gbrg12le", 12, 2, CfaOrder::kGBRG},
    {kFourccSBGGR12, "bggr12le", 12, 2, CfaOrder::kBGGR},
};

}  // namespace

const std::vector<BayerFormat>& bayer_formats() {
  return kBayerFormats;
}

const BayerFormat* bayer_format_from_fourcc(uint32_t fourcc) {
  for (const BayerFormat& f : kBayerFormats)
    if (f.fourcc == fourcc) return &f;
  return nullptr;
}

const BayerFormat* bayer_format_from_caps_name(const std::string& name) {
  for (const BayerFormat& f : kBayerFormats)
    if (name == f.caps_name) return &f;
  return nullptr;
}

size_t tight_stride(const BayerFormat& format, uint32_t width) {
  return static_cast<size_t>(width) * format.bytes_per_sample;
}

size_t implicit_stride(const BayerFormat& format, uint32_t width) {
  return ((static_cast<size_t>(width) + 3) & ~static_cast<size_t>(3)) * format.bytes_per_sample;
}

bool stride_needs_video_meta(const BayerFormat& format, uint32_t width, uint32_t bytes_per_line) {
  return bytes_per_line != implicit_stride(format, width);
}

}  // namespace cipc_bayer
