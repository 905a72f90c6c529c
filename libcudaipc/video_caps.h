// SPDX-License-Identifier: LGPL-2.1-or-later
// What libcudaipc needs of a producer's caps string, without GStreamer: the video format name
// and size, and whether a frame's planes fit in its payload for that format (the consumer never
// trusts the producer's layout).
#pragma once

#include <cstdint>
#include <string>

#include "protocol.h"

namespace cipc_libcudaipc {

struct VideoCaps {
  std::string format;  // GStreamer name, e.g. "BGRA"
  uint32_t width = 0;
  uint32_t height = 0;
};

// Reads "video/x-raw, format=(string)BGRA, width=(int)1920, height=(int)1080, ..." (types and
// quotes optional). False with `why` when format, width or height is missing or out of range.
bool parse_video_caps(const std::string& caps, VideoCaps* out, std::string* why);

// Rows of plane `plane` for a frame of `caps`' format, or 0 for a format this table does not
// know (then only the wire decoder's bounds apply).
uint32_t plane_rows(const VideoCaps& caps, uint32_t plane);

// Every plane the format has lies inside the frame's payload (offset + rows x stride).
bool frame_fits(const VideoCaps& caps, const cipc::Frame& frame, std::string* why);

}  // namespace cipc_libcudaipc
