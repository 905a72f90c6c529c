// SPDX-License-Identifier: LGPL-2.1-or-later
// video/x-bayer caps of 10-bit samples in 16-bit little-endian words (GStreamer 1.24+ names:
// rggb10le, bggr10le, grbg10le, gbrg10le), shared by bgratorg10 and rg10tobgra. The formats
// themselves are bayer/formats.h's; no CUDA here.
#pragma once

#include <gst/gst.h>

#include "cfa.h"

// The 10-bit formats of bayer/formats.h as a caps list, for static pad templates (the tests
// check that it names exactly those).
#define CIPC_BAYER10_FORMATS "{ rggb10le, bggr10le, grbg10le, gbrg10le }"

namespace cipc_gst {

// The CFA order of a 10-bit format name; false for anything else.
bool bayer10_phase(const char* format, cipc_bayer::CfaOrder* phase);

// Bytes per row when no GstVideoMeta says otherwise: GST_ROUND_UP_4(width) * 2.
gsize bayer10_default_stride(gint width);

// For caps transforms between video/x-raw and video/x-bayer: one structure per structure of
// `caps`, named `media_type`, with the `formats` list (GStreamer list syntax, e.g. "{ a, b }")
// and the width, height and framerate of the original; `feature` (may be null) on each.
GstCaps* caps_with_size_and_rate(GstCaps* caps, const char* media_type, const char* formats,
                                 const char* feature);

// Frame size of fixed caps: video/x-bayer RAW10 at the default stride (bayer10_frame_size), or
// raw video as GstVideoInfo lays it out. For both converters' transform_size/get_unit_size.
bool frame_size_of(GstCaps* caps, gsize* size);

// Frame size of fixed video/x-bayer caps at the default stride; false if the caps lack a
// positive width or height.
bool bayer10_frame_size(GstCaps* caps, gsize* size);

}  // namespace cipc_gst
