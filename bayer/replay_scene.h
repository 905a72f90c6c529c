// SPDX-License-Identifier: LGPL-2.1-or-later
// The scene of the replay camera (the rg10replaysrc element): eight colour bars that scroll
// left by one frame width every `count` frames, so frame `count` is frame 0 again and a loop of
// `count` pre-mosaicked frames plays as continuous motion; each bar dims from full at the top
// to a quarter at the bottom. Plain C++: no CUDA, no GStreamer.
//
// Pixel (x, y) of frame `index` (taken modulo `count`), 8-bit BGRA:
//   shift = index * width / count (integer division), bar = ((x + shift) mod width) * 8 / width,
//   colour = white, yellow, cyan, green, magenta, red, blue, black [bar] (channels 0 or 255),
//   level = 255 - y * 192 / (height - 1) (255 when height is 1), channel = colour * level / 255,
//   alpha 255.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mosaic.h"

namespace cipc_bayer {

// Writes frame `index` of a `count`-frame loop as BGRA rows `pitch` bytes apart (>= 4 * width).
// Does nothing when `out` is null, `count` is 0, or width or height is < 1.
void replay_scene_bgra(uint32_t index, uint32_t count, int width, int height, uint8_t* out,
                       size_t pitch);

// The same frame mosaicked as mosaic_cpu() would mosaic replay_scene_bgra()'s output, two rows
// at a time (no full-frame colour buffer): 16-bit words, rows `out_pitch` bytes apart.
void replay_frame_raw10(uint32_t index, uint32_t count, int width, int height,
                        const MosaicParams& params, uint8_t* out, size_t out_pitch);

}  // namespace cipc_bayer
