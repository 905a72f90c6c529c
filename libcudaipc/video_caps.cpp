// SPDX-License-Identifier: LGPL-2.1-or-later
#include "video_caps.h"

#include <cctype>
#include <cstdlib>

namespace cipc_libcudaipc {
namespace {

// The value of `field` in a caps string, without its "(type)" prefix and quotes.
bool field_value(const std::string& caps, const std::string& field, std::string* out) {
  size_t at = 0;
  for (;;) {
    at = caps.find(field + "=", at);
    if (at == std::string::npos) return false;
    // A whole field name: preceded by ',' or ' ' (not e.g. "chroma-format=").
    if (at > 0 && caps[at - 1] != ',' && caps[at - 1] != ' ') {
      ++at;
      continue;
    }
    break;
  }
  size_t pos = at + field.size() + 1;
  if (pos < caps.size() && caps[pos] == '(') {
    const size_t close = caps.find(')', pos);
    if (close == std::string::npos) return false;
    pos = close + 1;
  }
  while (pos < caps.size() && caps[pos] == ' ') ++pos;
  const bool quoted = pos < caps.size() && caps[pos] == '"';
  if (quoted) ++pos;
  size_t end = pos;
  while (end < caps.size() && (quoted ? caps[end] != '"' : caps[end] != ',' && caps[end] != ';'))
    ++end;
  *out = caps.substr(pos, end - pos);
  while (!out->empty() && out->back() == ' ') out->pop_back();
  return !out->empty();
}

bool positive(const std::string& text, uint32_t* out) {
  if (text.empty() || text.size() > 6) return false;
  for (char c : text)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  const long v = std::strtol(text.c_str(), nullptr, 10);
  if (v < 1 || v > 65536) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

// Formats whose chroma planes have half the rows.
bool half_height_chroma(const std::string& f) {
  return f == "NV12" || f == "NV21" || f == "I420" || f == "YV12" || f == "P010_10LE" ||
         f == "P016_LE" || f == "I420_10LE" || f == "P012_LE";
}

// Formats whose every plane has the full number of rows.
bool full_height_planes(const std::string& f) {
  static const char* const known[] = {
      "BGRA",  "BGRx",  "RGBA",  "RGBx",      "ARGB",       "ABGR",      "xRGB", "xBGR",
      "RGB",   "BGR",   "GRAY8", "GRAY16_LE", "GRAY16_BE",  "UYVY",      "YUY2", "YVYU",
      "RGB16", "BGR16", "Y42B",  "Y444",      "NV16",       "NV61",      "NV24", "RGBP",
      "BGRP",  "GBR",   "AYUV",  "r210",      "RGB10A2_LE", "BGR10A2_LE"};
  for (const char* k : known)
    if (f == k) return true;
  return false;
}

// Bytes per pixel of plane 0's rows, or 0 when not listed (planar formats: their luma plane).
uint32_t row_bytes_per_pixel(const std::string& f) {
  if (f == "BGRA" || f == "BGRx" || f == "RGBA" || f == "RGBx" || f == "ARGB" || f == "ABGR" ||
      f == "xRGB" || f == "xBGR" || f == "AYUV" || f == "r210" || f == "RGB10A2_LE" ||
      f == "BGR10A2_LE")
    return 4;
  if (f == "RGB" || f == "BGR") return 3;
  if (f == "GRAY16_LE" || f == "GRAY16_BE" || f == "UYVY" || f == "YUY2" || f == "YVYU" ||
      f == "RGB16" || f == "BGR16" || f == "P010_10LE" || f == "P016_LE" || f == "P012_LE" ||
      f == "I420_10LE")
    return 2;
  if (f == "GRAY8" || f == "NV12" || f == "NV21" || f == "I420" || f == "YV12" || f == "Y42B" ||
      f == "Y444" || f == "NV16" || f == "NV61" || f == "NV24" || f == "RGBP" || f == "BGRP" ||
      f == "GBR")
    return 1;
  return 0;
}

}  // namespace

bool parse_video_caps(const std::string& caps, VideoCaps* out, std::string* why) {
  VideoCaps c;
  std::string width, height;
  if (caps.compare(0, 11, "video/x-raw") != 0) {
    *why = "not raw video: " + caps.substr(0, 64);
    return false;
  }
  if (!field_value(caps, "format", &c.format) || c.format.size() >= 16) {
    *why = "no usable format in '" + caps.substr(0, 200) + "'";
    return false;
  }
  if (!field_value(caps, "width", &width) || !positive(width, &c.width) ||
      !field_value(caps, "height", &height) || !positive(height, &c.height)) {
    *why = "no usable width and height in '" + caps.substr(0, 200) + "'";
    return false;
  }
  *out = c;
  return true;
}

uint32_t plane_rows(const VideoCaps& caps, uint32_t plane) {
  if (full_height_planes(caps.format)) return caps.height;
  if (half_height_chroma(caps.format)) return plane == 0 ? caps.height : (caps.height + 1) / 2;
  return 0;
}

bool frame_fits(const VideoCaps& caps, const cipc::Frame& frame, std::string* why) {
  if (frame.n_planes == 0) {
    *why = "the frame describes no planes";
    return false;
  }
  for (uint32_t p = 0; p < frame.n_planes; ++p) {
    const uint64_t rows = plane_rows(caps, p);
    const int64_t stride = frame.plane_stride[p];
    if (stride <= 0) {
      *why = "plane " + std::to_string(p) + " has stride " + std::to_string(stride);
      return false;
    }
    const uint64_t min_stride =
        p == 0 ? uint64_t{row_bytes_per_pixel(caps.format)} * caps.width : 0;
    if (static_cast<uint64_t>(stride) < min_stride) {
      *why = "plane 0 rows of " + std::to_string(stride) + " bytes are shorter than " +
             std::to_string(caps.width) + " pixels of " + caps.format;
      return false;
    }
    const uint64_t end = frame.plane_offset[p] + (rows ? rows : 1) * static_cast<uint64_t>(stride);
    if (end > frame.size) {
      *why = "plane " + std::to_string(p) + " ends at byte " + std::to_string(end) + " of a " +
             std::to_string(frame.size) + "-byte frame";
      return false;
    }
  }
  return true;
}

}  // namespace cipc_libcudaipc
