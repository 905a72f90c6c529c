// SPDX-License-Identifier: LGPL-2.1-or-later
// The lock that makes taking a socket path one step: "<socket path>.lock", held with flock() for
// as long as a producer serves the path. Two producers started together on the same path (with or
// without a stale socket file left there) cannot both pass it, so the one that loses is told the
// path is in use instead of coming up on a socket the winner then unlinks.
//
// The lock file is never removed: unlinking it would let a third producer lock a fresh file of the
// same name while the second still holds the old one. It is empty and small.
#pragma once

#include <string>

#include "status.h"
#include "unique_fd.h"

namespace cipc {

class SocketPathLock {
 public:
  SocketPathLock() = default;

  // Takes the lock of `socket_path` without waiting: kAddressInUse when another process (or
  // another listener in this one) holds it; kNotASocket/kPermissionDenied when the lock file's
  // name is taken by something we cannot or must not use (a symbolic link, a directory, another
  // user's file).
  static Result<SocketPathLock> take(const std::string& socket_path);

  static std::string lock_path(const std::string& socket_path) { return socket_path + ".lock"; }
  bool held() const { return fd_.valid(); }
  void release() { fd_.reset(); }

 private:
  UniqueFd fd_;
};

}  // namespace cipc
