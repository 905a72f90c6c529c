// SPDX-License-Identifier: LGPL-2.1-or-later
// Small helpers shared by the ipc tests: a private temporary directory per test, descriptor
// counting, bounded polling and a raw-socket client that reads whole decoded messages.
#pragma once

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "channel.h"
#include "posix_util.h"
#include "protocol.h"

// Readable names in gtest failure messages instead of raw bytes.
namespace cipc {

inline const char* io_result_name(IoResult r) {
  switch (r) {
    case IoResult::kOk: return "kOk";
    case IoResult::kWouldBlock: return "kWouldBlock";
    case IoResult::kClosed: return "kClosed";
    case IoResult::kError: return "kError";
  }
  return "?";
}
inline void PrintTo(IoResult r, std::ostream* os) {
  *os << io_result_name(r);
}

inline void PrintTo(ErrorCode c, std::ostream* os) {
  static const char* const names[] = {
      "kInvalidArgument",  "kSystem",          "kAddressInUse",       "kNotASocket",
      "kConnectFailed",    "kTimeout",         "kInterrupted",        "kClosed",
      "kProtocol",         "kVersionMismatch", "kMemoryKindMismatch", "kGpuMismatch",
      "kPermissionDenied", "kUnsupported"};
  const auto i = static_cast<size_t>(c);
  *os << (i < sizeof(names) / sizeof(names[0]) ? names[i] : "ErrorCode(?)");
}

inline void PrintTo(DecodeFailure f, std::ostream* os) {
  static const char* const names[] = {"kTruncated",       "kTooLarge",    "kBadMagic",
                                      "kVersionMismatch", "kUnknownType", "kBadLength",
                                      "kOutOfRange"};
  const auto i = static_cast<size_t>(f);
  *os << (i < sizeof(names) / sizeof(names[0]) ? names[i] : "DecodeFailure(?)");
}

}  // namespace cipc

namespace cipc_test {

// mkdtemp() under /tmp, removed with everything in it when the test ends. Every test gets its own,
// so socket paths never collide when tests run in parallel.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/cipc-test-XXXXXX";
    const char* dir = ::mkdtemp(tmpl);
    if (dir == nullptr) {
      ADD_FAILURE() << "mkdtemp failed";
      return;
    }
    path_ = dir;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline bool path_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// Polls `pred` until it holds or `timeout_ms` passed. For "it eventually happens" checks only.
inline bool eventually(const std::function<bool()>& pred, int timeout_ms = 5000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// Receives one packet, waiting up to `timeout_ms` for it. kWouldBlock means nothing came in time.
inline cipc::IoResult receive_within(cipc::Channel& channel, cipc::Packet& packet,
                                     int timeout_ms = 5000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const cipc::IoResult r = channel.receive(packet);
    if (r != cipc::IoResult::kWouldBlock) return r;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return r;
    channel.wait_readable(static_cast<int>(left));
  }
}

// Receives and decodes one message; fails the test (and returns false) when none arrives or it does
// not decode.
inline bool receive_message(cipc::Channel& channel, cipc::Message* out, int timeout_ms = 5000) {
  cipc::Packet packet;
  const cipc::IoResult r = receive_within(channel, packet, timeout_ms);
  if (r != cipc::IoResult::kOk) {
    ADD_FAILURE() << "no message arrived (" << cipc::io_result_name(r) << ")";
    return false;
  }
  cipc::DecodeResult d = cipc::decode(packet.bytes.data(), packet.bytes.size());
  if (!d) {
    ADD_FAILURE() << "undecodable message: " << cipc::describe(d.error());
    return false;
  }
  *out = std::move(d.message());
  return true;
}

// A raw client of the producer at `path`; with `say_hello` it performs the handshake by hand and
// expects the WELCOME. An empty Channel (and a test failure) when it cannot connect.
inline cipc::Channel raw_client(const std::string& path, bool say_hello) {
  auto c = cipc::Channel::connect(path);
  EXPECT_TRUE(c.is_ok()) << c.error().message;
  if (!c.is_ok()) return cipc::Channel();
  if (say_hello) {
    EXPECT_EQ(c->send(cipc::Message{cipc::Hello{}}), cipc::IoResult::kOk);
    cipc::Message m;
    if (receive_message(*c, &m)) {
      EXPECT_EQ(m.type(), cipc::MessageType::kWelcome);
    }
  }
  return std::move(c.value());
}

}  // namespace cipc_test
