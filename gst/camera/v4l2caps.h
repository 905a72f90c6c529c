// SPDX-License-Identifier: LGPL-2.1-or-later
// A V4L2 device's capture modes as video/x-bayer caps, and the order cudav4l2src prefers formats
// in. cudav4l2src calls caps_from_formats() when it opens the device (NULL -> READY) and
// format_rank() and clamp_int() when it fixates; the descriptions come from v4l2/
// (Device::enumerate_formats()), which has no GStreamer. Plain functions of their arguments, so
// tests build the descriptions by hand (tests/gst/test_v4l2caps.cpp) and need no device. Any
// thread.
#pragma once

#include <gst/gst.h>

#include <cstdint>
#include <vector>

#include "v4l2capture.h"

namespace cipc_gst {

// A V4L2 count (uint32) as a caps int: past G_MAXINT it is G_MAXINT.
gint clamp_int(uint32_t v);

// The device's Bayer modes (bayer/formats.h's formats) as caps, one structure per size: the
// format `preferred_fourcc` (the driver's current one) first, then the others in the driver's
// order. Formats the element does not capture are left out; empty caps if none is left.
GstCaps* caps_from_formats(const std::vector<cipc_v4l2::FormatDescription>& formats,
                           uint32_t preferred_fourcc);

// How much fixation prefers the video/x-bayer format `name`, lower first: the driver's current
// format (`preferred_fourcc`), then 10-bit, 12-bit, 8-bit; a name that is no Bayer format of
// ours (or null) comes last.
int format_rank(const char* name, uint32_t preferred_fourcc);

}  // namespace cipc_gst
