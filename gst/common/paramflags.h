// SPDX-License-Identifier: LGPL-2.1-or-later
// The flags of every element's properties, one set for all six: settable up to READY (what the
// element reads when it starts), settable while PLAYING (read per frame), read-only (stats).
// The names are static strings.
#pragma once

#include <gst/gst.h>

namespace cipc_gst {

constexpr GParamFlags kParamReadyRW =
    static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
constexpr GParamFlags kParamPlayingRW = static_cast<GParamFlags>(
    G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING);
constexpr GParamFlags kParamRO =
    static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);

}  // namespace cipc_gst
