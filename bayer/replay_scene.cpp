// SPDX-License-Identifier: LGPL-2.1-or-later
// The replay camera's scene (replay_scene.h).
#include "replay_scene.h"

#include <algorithm>
#include <vector>

namespace cipc_bayer {

namespace {

// B, G, R of the eight bars.
constexpr uint8_t kBars[8][3] = {
    {255, 255, 255},  // white
    {0, 255, 255},    // yellow
    {255, 255, 0},    // cyan
    {0, 255, 0},      // green
    {255, 0, 255},    // magenta
    {0, 0, 255},      // red
    {255, 0, 0},      // blue
    {0, 0, 0},        // black
};

void scene_rows(uint32_t index, uint32_t count, int width, int height, int first_row, int rows,
                uint8_t* out, size_t pitch) {
  const uint64_t shift = static_cast<uint64_t>(index % count) * width / count;
  for (int r = 0; r < rows; ++r) {
    const int y = first_row + r;
    const int level = height > 1 ? 255 - static_cast<int>(int64_t{y} * 192 / (height - 1)) : 255;
    uint8_t* row = out + static_cast<size_t>(r) * pitch;
    for (int x = 0; x < width; ++x) {
      const uint64_t xs = (x + shift) % static_cast<uint64_t>(width);
      const uint8_t* bar = kBars[xs * 8 / static_cast<uint64_t>(width)];
      for (int ch = 0; ch < 3; ++ch) row[4 * x + ch] = static_cast<uint8_t>(bar[ch] * level / 255);
      row[4 * x + 3] = 255;
    }
  }
}

}  // namespace

void replay_scene_bgra(uint32_t index, uint32_t count, int width, int height, uint8_t* out,
                       size_t pitch) {
  if (!out || count == 0 || width < 1 || height < 1) return;
  scene_rows(index, count, width, height, 0, height, out, pitch);
}

void replay_frame_raw10(uint32_t index, uint32_t count, int width, int height,
                        const MosaicParams& params, uint8_t* out, size_t out_pitch) {
  if (!out || count == 0 || width < 1 || height < 1) return;
  // Two rows at a time: the CFA pattern starts again on every even row.
  const size_t pitch = static_cast<size_t>(width) * 4;
  std::vector<uint8_t> colour(pitch * 2);
  for (int y = 0; y < height; y += 2) {
    const int rows = std::min(2, height - y);
    scene_rows(index, count, width, height, y, rows, colour.data(), pitch);
    mosaic_cpu(colour.data(), pitch, static_cast<int>(MosaicInput::kBgra),
               out + static_cast<size_t>(y) * out_pitch, out_pitch, width, rows, params);
  }
}

}  // namespace cipc_bayer
