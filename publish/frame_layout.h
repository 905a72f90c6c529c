// SPDX-License-Identifier: LGPL-2.1-or-later
// A frame's layout in a slot for a publisher without GStreamer: the raw video formats a writer
// may publish, their planes laid out as GStreamer lays them out by default (so a consumer's
// downstream that ignores video meta still reads them right), and the caps string consumers
// receive in CAPS.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "protocol.h"

namespace cipc_publish {

struct FrameLayout {
  std::string format;  // GStreamer's name: "BGRx", "NV12", ...
  uint32_t width = 0;
  uint32_t height = 0;
  uint32_t framerate_num = 0;  // 0/1: variable
  uint32_t framerate_den = 1;
  uint64_t size = 0;  // bytes of one frame
  uint32_t n_planes = 0;
  std::array<uint64_t, cipc::kMaxPlanes> plane_offset{};
  std::array<int32_t, cipc::kMaxPlanes> plane_stride{};
  std::array<uint32_t, cipc::kMaxPlanes> plane_rows{};
  std::array<uint32_t, cipc::kMaxPlanes> plane_row_bytes{};  // bytes of a row that hold pixels
  // A plane's stride in a caller's frame whose plane 0 has rows of S bytes: S >> this (I420's
  // chroma planes: 1; NV12's interleaved chroma: 0).
  std::array<uint32_t, cipc::kMaxPlanes> stride_shift{};
};

// The layout of a `format` frame of width x height. False with `why` for a format this table
// does not know, or a size out of range (0, above 32768, or a frame over the slot limit).
bool make_frame_layout(const std::string& format, uint32_t width, uint32_t height, FrameLayout* out,
                       std::string* why);

// The formats make_frame_layout() knows, comma-separated (for error messages and docs).
const char* publishable_formats();

// What consumers receive in CAPS: "video/x-raw, format=(string)BGRx, width=(int)1920, ...".
std::string caps_string(const FrameLayout& layout);

}  // namespace cipc_publish
