// SPDX-License-Identifier: LGPL-2.1-or-later
// The Bayer formats of this project as V4L2 and GStreamer name them: one table of V4L2 fourcc,
// video/x-bayer format name, bit depth and CFA order, read by the V4L2 capture (v4l2/), by
// cudav4l2src and by the caps glue of bgratorg10 and rg10tobgra (bayercaps.h).
//
// Samples of more than 8 bits sit in 16-bit little-endian words, least significant bits first
// (the V4L2 definition; Jetson VI on Xavier/Orin writes them MSB-aligned instead, which the
// debayer's BitAlignment handles). The fourccs are plain constants, equal to linux/videodev2.h's
// V4L2_PIX_FMT_* (v4l2/ checks that at compile time), so this needs no kernel header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cfa.h"

namespace cipc_bayer {

// v4l2_fourcc(a, b, c, d).
constexpr uint32_t fourcc(char a, char b, char c, char d) {
  return static_cast<uint32_t>(static_cast<unsigned char>(a)) |
         static_cast<uint32_t>(static_cast<unsigned char>(b)) << 8 |
         static_cast<uint32_t>(static_cast<unsigned char>(c)) << 16 |
         static_cast<uint32_t>(static_cast<unsigned char>(d)) << 24;
}

// V4L2_PIX_FMT_S{RGGB,GRBG,GBRG,BGGR}{8,10,12}.
constexpr uint32_t kFourccSRGGB8 = fourcc('R', 'G', 'G', 'B');
constexpr uint32_t kFourccSGRBG8 = fourcc('G', 'R', 'B', 'G');
constexpr uint32_t kFourccSGBRG8 = fourcc('G', 'B', 'R', 'G');
constexpr uint32_t kFourccSBGGR8 = fourcc('B', 'A', '8', '1');
constexpr uint32_t kFourccSRGGB10 = fourcc('R', 'G', '1', '0');
constexpr uint32_t kFourccSGRBG10 = fourcc('B', 'A', '1', '0');
constexpr uint32_t kFourccSGBRG10 = fourcc('G', 'B', '1', '0');
constexpr uint32_t kFourccSBGGR10 = fourcc('B', 'G', '1', '0');
constexpr uint32_t kFourccSRGGB12 = fourcc('R', 'G', '1', '2');
constexpr uint32_t kFourccSGRBG12 = fourcc('B', 'A', '1', '2');
constexpr uint32_t kFourccSGBRG12 = fourcc('G', 'B', '1', '2');
constexpr uint32_t kFourccSBGGR12 = fourcc('B', 'G', '1', '2');

// A Bayer format as V4L2 and GStreamer name it.
struct BayerFormat {
  uint32_t fourcc;            // V4L2_PIX_FMT_*
  const char* caps_name;      // video/x-bayer format string: "rggb", "rggb10le", ...
  unsigned bits;              // significant bits per sample: 8, 10 or 12
  unsigned bytes_per_sample;  // 1 or 2
  CfaOrder order;
};

// Every format: 8-, 10- and 12-bit Bayer in all four CFA orders.
const std::vector<BayerFormat>& bayer_formats();
const BayerFormat* bayer_format_from_fourcc(uint32_t fourcc);
// Exact, case-sensitive match of the video/x-bayer format name; null for anything else.
const BayerFormat* bayer_format_from_caps_name(const std::string& name);

// Bytes of one row of `width` samples with no padding.
size_t tight_stride(const BayerFormat& format, uint32_t width);
// The row stride GStreamer assumes for video/x-bayer when no GstVideoMeta says otherwise:
// GST_ROUND_UP_4(width) samples (bayer2rgb, videotestsrc and rgb2bayer all use it).
size_t implicit_stride(const BayerFormat& format, uint32_t width);
// Whether rows of `bytes_per_line` need a GstVideoMeta (or a repacking copy) to be read
// correctly by an element that assumes implicit_stride().
bool stride_needs_video_meta(const BayerFormat& format, uint32_t width, uint32_t bytes_per_line);

}  // namespace cipc_bayer
