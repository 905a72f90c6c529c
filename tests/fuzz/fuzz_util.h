// SPDX-License-Identifier: LGPL-2.1-or-later
// Shared by the libFuzzer targets in tests/fuzz: a front-to-back reader of the fuzzer's bytes
// (and the writer the seed generator uses to produce inputs it can read), a check that aborts
// with a message (so libFuzzer records the input as a crash), descriptor counting and a private
// temporary folder per process.
#pragma once

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "posix_util.h"

namespace cipc_fuzz {

using cipc_test::open_fd_count;

// A failed invariant: print why and abort, which libFuzzer reports as a crash with the input.
[[noreturn]] inline void fail(const std::string& why) {
  fprintf(stderr, "FUZZ INVARIANT VIOLATED: %s\n", why.c_str());
  fflush(stderr);
  abort();
}

inline void check(bool ok, const std::string& why) {
  if (!ok) fail(why);
}

// Reads the input from the front; once it is used up every read returns zeros, so a target
// never needs to check the length and a short input simply ends the run early.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  size_t remaining() const { return empty() ? 0 : size_ - pos_; }
  uint8_t u8() { return empty() ? 0 : data_[pos_++]; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  uint32_t u32() { return static_cast<uint32_t>(u16()) | (static_cast<uint32_t>(u16()) << 16); }
  uint64_t u64() { return static_cast<uint64_t>(u32()) | (static_cast<uint64_t>(u32()) << 32); }
  bool flag() { return (u8() & 1) != 0; }
  // Up to n bytes (fewer when the input ends).
  std::vector<uint8_t> bytes(size_t n) {
    const size_t take = n < remaining() ? n : remaining();
    std::vector<uint8_t> out(data_ + pos_, data_ + pos_ + take);
    pos_ += take;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Writes what Input reads, in the same order: the seed generator builds inputs with it.
class InputWriter {
 public:
  InputWriter& u8(uint8_t v) {
    out_.push_back(v);
    return *this;
  }
  InputWriter& u16(uint16_t v) {
    return u8(static_cast<uint8_t>(v)).u8(static_cast<uint8_t>(v >> 8));
  }
  InputWriter& u32(uint32_t v) {
    return u16(static_cast<uint16_t>(v)).u16(static_cast<uint16_t>(v >> 16));
  }
  InputWriter& u64(uint64_t v) {
    return u32(static_cast<uint32_t>(v)).u32(static_cast<uint32_t>(v >> 32));
  }
  InputWriter& bytes(const std::vector<uint8_t>& b) {
    out_.insert(out_.end(), b.begin(), b.end());
    return *this;
  }
  const std::vector<uint8_t>& data() const { return out_; }

 private:
  std::vector<uint8_t> out_;
};

// A folder under /tmp for this process's sockets, removed at exit.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/cipc-fuzz-XXXXXX";
    const char* dir = ::mkdtemp(tmpl);
    check(dir != nullptr, "mkdtemp failed");
    path_ = dir;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace cipc_fuzz
