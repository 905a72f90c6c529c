// SPDX-License-Identifier: LGPL-2.1-or-later
// CRC-32 (IEEE 802.3, the zlib one) for the frame records of the peer programs and the tests that
// compare against them. Header-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cipc_test {

inline uint32_t crc32_update(uint32_t crc, const uint8_t* data, size_t n) {
  static const auto table = [] {
    std::vector<uint32_t> t(256);
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

}  // namespace cipc_test
