// SPDX-License-Identifier: LGPL-2.1-or-later
// The frame records of the e2e peer (peer.cpp --record): `index pts duration offset crc32` per
// frame, times in nanoseconds or "none". Read by the tests that compare what crossed with what
// was produced. Header-only.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace cipc_test {

struct FrameRecord {
  uint64_t index = 0;
  std::optional<uint64_t> pts, duration, offset;
  std::string crc;
};

inline std::optional<uint64_t> parse_record_time(const std::string& field) {
  if (field == "none") return std::nullopt;
  return std::strtoull(field.c_str(), nullptr, 10);
}

inline std::vector<FrameRecord> read_frame_records(const std::string& path) {
  std::vector<FrameRecord> records;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string index, pts, duration, offset, crc;
    if (!(s >> index >> pts >> duration >> offset >> crc)) continue;
    FrameRecord r;
    r.index = std::strtoull(index.c_str(), nullptr, 10);
    r.pts = parse_record_time(pts);
    r.duration = parse_record_time(duration);
    r.offset = parse_record_time(offset);
    r.crc = crc;
    records.push_back(r);
  }
  return records;
}

}  // namespace cipc_test
