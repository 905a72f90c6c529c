// SPDX-License-Identifier: LGPL-2.1-or-later
// The oracle for frames of the vivid driver's default test pattern, "75% Colorbar", as it
// appears in a Bayer format: eight vertical bars of equal width - white, yellow, cyan, green,
// magenta, red, blue, black - whose R, G and B are each either 0 or 75% of full scale. vivid's
// pattern generator works in 12 bits (75% = 3071) and shifts down: 767 in 10-bit samples, 191 in
// 8-bit ones (measured on Debian's 6.1 kernel; on-screen text switched off with the
// osd_text_mode control). Each sample holds the colour its CFA site sees; so every sample of a
// frame is predictable exactly.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cfa.h"
#include "formats.h"

namespace cipc_test {

struct BarColour {
  bool r, g, b;
};
constexpr BarColour kBars[8] = {{1, 1, 1}, {1, 1, 0}, {0, 1, 1}, {0, 1, 0},
                                {1, 0, 1}, {1, 0, 0}, {0, 0, 1}, {0, 0, 0}};

// 75% of full scale as vivid produces it for `bits`-bit samples.
inline uint32_t bar_level(unsigned bits) {
  return 3071u >> (12 - bits);
}

inline uint32_t expected_sample(const cipc_bayer::BayerFormat& format, uint32_t width, uint32_t x,
                                uint32_t y) {
  const BarColour& bar = kBars[static_cast<uint64_t>(x) * 8 / width];
  const cipc_bayer::CfaColor channel =
      cipc_bayer::cfa_color(format.order, static_cast<int>(y), static_cast<int>(x));
  const bool on = channel == cipc_bayer::kCfaRed     ? bar.r
                  : channel == cipc_bayer::kCfaGreen ? bar.g
                                                     : bar.b;
  return on ? bar_level(format.bits) : 0;
}

struct BarCheck {
  uint64_t checked = 0;
  uint64_t mismatches = 0;
  std::string first_mismatch;  // "(x,y) = v, expected e"
  uint32_t max_value = 0;
};

// The bytes of row `y` of the pattern (rows repeat with period 2).
inline std::vector<uint8_t> expected_row(const cipc_bayer::BayerFormat& format, uint32_t width,
                                         uint32_t y) {
  std::vector<uint8_t> row(static_cast<size_t>(width) * format.bytes_per_sample);
  for (uint32_t x = 0; x < width; ++x) {
    const uint32_t v = expected_sample(format, width, x, y);
    uint8_t* p = row.data() + static_cast<size_t>(x) * format.bytes_per_sample;
    p[0] = static_cast<uint8_t>(v);
    if (format.bytes_per_sample == 2) p[1] = static_cast<uint8_t>(v >> 8);
  }
  return row;
}

// Compares every sample of a frame with the pattern (a row at a time; sample by sample only in
// rows that differ, to report the first mismatch). When the width is not a multiple of 8 (vivid
// then scales its bars), the two columns either side of a bar edge are not checked.
inline BarCheck check_colour_bars(const uint8_t* data, size_t size, size_t stride,
                                  const cipc_bayer::BayerFormat& format, uint32_t width,
                                  uint32_t height) {
  BarCheck result;
  const bool exact_bars = width % 8 == 0;
  const std::vector<uint8_t> rows[2] = {expected_row(format, width, 0),
                                        expected_row(format, width, 1)};
  const size_t row_bytes = rows[0].size();
  for (uint32_t y = 0; y < height; ++y) {
    const size_t offset = static_cast<size_t>(y) * stride;
    if (offset + row_bytes > size) {
      result.mismatches += width;
      if (result.first_mismatch.empty())
        result.first_mismatch = "row " + std::to_string(y) + " is missing";
      continue;
    }
    const uint8_t* row = data + offset;
    if (exact_bars && std::memcmp(row, rows[y & 1].data(), row_bytes) == 0) {
      result.checked += width;
      result.max_value = std::max(result.max_value, bar_level(format.bits));
      continue;
    }
    for (uint32_t x = 0; x < width; ++x) {
      if (!exact_bars) {
        const uint64_t edge = (static_cast<uint64_t>(x) * 8) % width;
        if (edge < 16 || edge > width - 16) continue;  // within 2 samples of a bar edge
      }
      const uint8_t* p = row + static_cast<size_t>(x) * format.bytes_per_sample;
      const uint32_t value = format.bytes_per_sample == 1 ? p[0] : (p[0] | (p[1] << 8));
      const uint32_t expected = expected_sample(format, width, x, y);
      ++result.checked;
      result.max_value = std::max(result.max_value, value);
      if (value != expected) {
        if (result.mismatches == 0)
          result.first_mismatch = "(" + std::to_string(x) + "," + std::to_string(y) +
                                  ") = " + std::to_string(value) + ", expected " +
                                  std::to_string(expected);
        ++result.mismatches;
      }
    }
  }
  return result;
}

}  // namespace cipc_test
