// SPDX-License-Identifier: LGPL-2.1-or-later
#include "frame_layout.h"

#include <cstring>

namespace cipc_publish {
namespace {

constexpr uint32_t kMaxDimension = 32768;

uint64_t round_up(uint64_t value, uint64_t to) {
  return (value + to - 1) / to * to;
}

// How a format's planes relate to the picture: bytes per pixel of each plane's rows and the
// subsampling of its rows and columns (a shift).
struct FormatPlanes {
  const char* name;
  uint32_t n_planes;
  uint32_t pixel_bytes[3];  // per plane, per (subsampled) pixel
  uint32_t x_shift[3];
  uint32_t y_shift[3];
  bool even_width;  // packed 4:2:2: a row holds whole pixel pairs
};

// Plane layouts as GStreamer's video-info makes them for these formats: every row rounded up to
// 4 bytes, planar chroma sized from the width and height rounded up to even.
constexpr FormatPlanes kFormats[] = {
    {"BGRA", 1, {4}, {0}, {0}, false},          {"BGRx", 1, {4}, {0}, {0}, false},
    {"RGBA", 1, {4}, {0}, {0}, false},          {"RGBx", 1, {4}, {0}, {0}, false},
    {"ARGB", 1, {4}, {0}, {0}, false},          {"ABGR", 1, {4}, {0}, {0}, false},
    {"xRGB", 1, {4}, {0}, {0}, false},          {"xBGR", 1, {4}, {0}, {0}, false},
    {"RGB", 1, {3}, {0}, {0}, false},           {"BGR", 1, {3}, {0}, {0}, false},
    {"GRAY8", 1, {1}, {0}, {0}, false},         {"GRAY16_LE", 1, {2}, {0}, {0}, false},
    {"YUY2", 1, {2}, {0}, {0}, true},           {"UYVY", 1, {2}, {0}, {0}, true},
    {"NV12", 2, {1, 2}, {0, 1}, {0, 1}, false}, {"I420", 3, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}, false},
};

const FormatPlanes* find_format(const std::string& name) {
  for (const FormatPlanes& f : kFormats)
    if (name == f.name) return &f;
  return nullptr;
}

}  // namespace

const char* publishable_formats() {
  return "BGRA, BGRx, RGBA, RGBx, ARGB, ABGR, xRGB, xBGR, RGB, BGR, GRAY8, GRAY16_LE, YUY2, "
         "UYVY, NV12, I420";
}

bool make_frame_layout(const std::string& format, uint32_t width, uint32_t height, FrameLayout* out,
                       std::string* why) {
  const FormatPlanes* f = find_format(format);
  if (f == nullptr) {
    *why =
        "format '" + format + "' cannot be published (publishable: " + publishable_formats() + ")";
    return false;
  }
  if (width == 0 || height == 0 || width > kMaxDimension || height > kMaxDimension) {
    *why = "frame size " + std::to_string(width) + "x" + std::to_string(height) +
           " is out of range (1 to " + std::to_string(kMaxDimension) + " each way)";
    return false;
  }
  FrameLayout l;
  l.format = f->name;
  l.width = width;
  l.height = height;
  l.n_planes = f->n_planes;
  // Planar chroma is sized from the even-rounded picture, as GStreamer does.
  const uint64_t planar_w = f->n_planes > 1 ? round_up(width, 2) : width;
  const uint64_t planar_h = f->n_planes > 1 ? round_up(height, 2) : height;
  const uint64_t pixels_w = f->even_width ? round_up(width, 2) : planar_w;
  uint64_t offset = 0;
  for (uint32_t p = 0; p < f->n_planes; ++p) {
    const uint64_t cols = pixels_w >> f->x_shift[p];
    const uint64_t rows = planar_h >> f->y_shift[p];
    const uint64_t row_bytes = cols * f->pixel_bytes[p];
    const uint64_t stride = round_up(row_bytes, 4);
    l.plane_offset[p] = offset;
    l.plane_stride[p] = static_cast<int32_t>(stride);
    // Rows that hold pixels: odd heights keep their last chroma row.
    l.plane_rows[p] = static_cast<uint32_t>(f->y_shift[p] ? (height + 1) / 2 : height);
    l.plane_row_bytes[p] = static_cast<uint32_t>((f->x_shift[p]   ? (width + 1) / 2
                                                  : f->even_width ? round_up(width, 2)
                                                                  : width) *
                                                 f->pixel_bytes[p]);
    l.stride_shift[p] = f->x_shift[p] > 0 && f->pixel_bytes[p] == f->pixel_bytes[0] ? 1 : 0;
    offset += stride * rows;
  }
  l.size = offset;
  if (l.size > cipc::kMaxSlotSize) {
    *why = "a " + format + " frame of " + std::to_string(width) + "x" + std::to_string(height) +
           " takes " + std::to_string(l.size) + " bytes, more than the slot limit of " +
           std::to_string(cipc::kMaxSlotSize);
    return false;
  }
  *out = l;
  return true;
}

std::string caps_string(const FrameLayout& layout) {
  std::string caps = "video/x-raw, format=(string)" + layout.format + ", width=(int)" +
                     std::to_string(layout.width) + ", height=(int)" +
                     std::to_string(layout.height) + ", framerate=(fraction)" +
                     std::to_string(layout.framerate_num) + "/" +
                     std::to_string(layout.framerate_den ? layout.framerate_den : 1) +
                     ", pixel-aspect-ratio=(fraction)1/1, interlace-mode=(string)progressive";
  return caps;
}

}  // namespace cipc_publish
