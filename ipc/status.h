// SPDX-License-Identifier: LGPL-2.1-or-later
// Error reporting for the ipc layer: plain values, no exceptions, so that callers inside GObject
// vfuncs never have to catch anything.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace cipc {

// What went wrong, coarse enough for callers to branch on, with a sentence for people.
enum class ErrorCode {
  kInvalidArgument,
  kSystem,         // a POSIX call failed; the message carries strerror
  kAddressInUse,   // a live producer already serves the socket path
  kNotASocket,     // the socket path exists and is some other kind of file
  kConnectFailed,  // no producer at the path (yet)
  kTimeout,
  kInterrupted,
  kClosed,           // the peer went away
  kProtocol,         // the peer sent something malformed or out of order
  kVersionMismatch,  // the peer speaks another protocol version
  kMemoryKindMismatch,
  kGpuMismatch,
  kPermissionDenied,  // peer credentials refused
  kUnsupported,
  kOutOfResources,  // this process ran out of something (file descriptors, memory)
};

struct Error {
  ErrorCode code;
  std::string message;
};

class Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design
  static Status ok() { return Status(); }

  bool is_ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }
  ErrorCode code() const { return error_.code; }
  const std::string& message() const { return error_.message; }

 private:
  Error error_{ErrorCode::kInvalidArgument, {}};
  bool ok_ = true;
};

// A value or an Error. Small stand-in for std::expected (C++23).
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }
  const Error& error() const { return std::get<Error>(v_); }
  Status status() const { return is_ok() ? Status() : Status(error()); }

 private:
  std::variant<T, Error> v_;
};

// "what: strerror", and for EMFILE/ENFILE also the limit that was reached.
Error system_error(const std::string& what, int errno_value);

// "this process (pid N) has reached its limit of M open file descriptors (ulimit -n)".
std::string describe_descriptor_limit();

}  // namespace cipc
