// SPDX-License-Identifier: LGPL-2.1-or-later
// The replay camera's scene (bayer/replay_scene.h): hand-checked pixels, the loop, and its RAW10
// frames (made two rows at a time) against mosaic_cpu() of the whole colour frame, for every
// phase, both bit alignments and odd sizes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "mosaic.h"
#include "replay_scene.h"

namespace cb = cipc_bayer;

namespace {

std::vector<uint8_t> scene(uint32_t index, uint32_t count, int width, int height) {
  std::vector<uint8_t> v(static_cast<size_t>(width) * 4 * height, 0xAA);
  cb::replay_scene_bgra(index, count, width, height, v.data(), static_cast<size_t>(width) * 4);
  return v;
}

const uint8_t* pixel(const std::vector<uint8_t>& frame, int width, int x, int y) {
  return frame.data() + (static_cast<size_t>(y) * width + x) * 4;
}

}  // namespace

TEST(ReplayScene, BarsDimDownwardsAndScrollOneWidthPerLoop) {
  const int w = 16, h = 5;
  const auto f0 = scene(0, 4, w, h);
  // Frame 0, top row: bar x*8/16 = x/2: white at 0..1, yellow (B 0, G 255, R 255) at 2..3, ...
  const uint8_t* white = pixel(f0, w, 0, 0);
  EXPECT_EQ(white[0], 255);
  EXPECT_EQ(white[1], 255);
  EXPECT_EQ(white[2], 255);
  EXPECT_EQ(white[3], 255);
  const uint8_t* yellow = pixel(f0, w, 2, 0);
  EXPECT_EQ(yellow[0], 0);
  EXPECT_EQ(yellow[1], 255);
  EXPECT_EQ(yellow[2], 255);
  const uint8_t* black = pixel(f0, w, 15, 0);
  EXPECT_EQ(black[0] | black[1] | black[2], 0);
  // Bottom row at a quarter: 255 * (255 - 192) / 255 = 63.
  EXPECT_EQ(pixel(f0, w, 0, h - 1)[1], 63);
  EXPECT_EQ(pixel(f0, w, 0, 2)[1], 255 - 2 * 192 / 4);
  // Frame 1 of 4 is shifted by 16/4 = 4 columns: its column 0 is frame 0's column 4 (cyan).
  const auto f1 = scene(1, 4, w, h);
  EXPECT_EQ(std::memcmp(pixel(f1, w, 0, 0), pixel(f0, w, 4, 0), 4), 0);
  EXPECT_EQ(std::memcmp(pixel(f1, w, 12, 3), pixel(f0, w, 0, 3), 4), 0);
  // The loop: frame `count` is frame 0, and the frames of one loop all differ.
  EXPECT_EQ(scene(4, 4, w, h), f0);
  EXPECT_NE(f1, f0);
  EXPECT_NE(scene(2, 4, w, h), f1);
}

TEST(ReplayScene, OneRowAndOnePixelFramesAreFullBrightness) {
  const auto row = scene(0, 1, 3, 1);
  EXPECT_EQ(row[0], 255);
  const auto dot = scene(7, 3, 1, 1);
  EXPECT_EQ(dot[0], 255);
  EXPECT_EQ(dot[3], 255);
}

TEST(ReplayScene, Raw10FramesAreTheMosaicOfTheScene) {
  const int sizes[][2] = {{1, 1}, {2, 2}, {7, 5}, {33, 17}, {64, 3}, {130, 9}};
  for (const auto& size : sizes) {
    const int w = size[0], h = size[1];
    const size_t pitch = static_cast<size_t>(w + 3) * 2 + 6;  // padded, like a real stride
    for (int phase = 0; phase < cb::kCfaOrderCount; ++phase) {
      for (cb::BitAlignment alignment : {cb::BitAlignment::kLsb, cb::BitAlignment::kMsb}) {
        cb::MosaicParams p;
        p.phase = static_cast<cb::CfaOrder>(phase);
        p.alignment = alignment;
        for (uint32_t index : {0u, 3u}) {
          const auto colour = scene(index, 5, w, h);
          std::vector<uint8_t> expected(pitch * h, 0x5A), got(pitch * h, 0x5A);
          cb::mosaic_cpu(colour.data(), static_cast<size_t>(w) * 4,
                         static_cast<int>(cb::MosaicInput::kBgra), expected.data(), pitch, w, h, p);
          cb::replay_frame_raw10(index, 5, w, h, p, got.data(), pitch);
          ASSERT_EQ(got, expected) << w << "x" << h << " phase " << phase << " frame " << index;
        }
      }
    }
  }
}

TEST(ReplayScene, BadArgumentsWriteNothing) {
  std::vector<uint8_t> out(64, 0x11);
  const std::vector<uint8_t> untouched = out;
  cb::replay_scene_bgra(0, 0, 4, 4, out.data(), 16);
  cb::replay_scene_bgra(0, 2, 0, 4, out.data(), 16);
  cb::replay_scene_bgra(0, 2, 4, -1, out.data(), 16);
  cb::replay_scene_bgra(0, 2, 4, 4, nullptr, 16);
  cb::replay_frame_raw10(0, 0, 4, 4, cb::MosaicParams{}, out.data(), 8);
  cb::replay_frame_raw10(0, 2, -3, 4, cb::MosaicParams{}, out.data(), 8);
  EXPECT_EQ(out, untouched);
}
