// SPDX-License-Identifier: LGPL-2.1-or-later
// The lock that makes taking a socket path one step: "<socket path>.lock", held with flock() for
// as long as a producer serves the path. Two producers started together on the same path (with or
// without a stale socket file left there) cannot both pass it, so the one that loses is told the
// path is in use instead of coming up on a socket the winner then unlinks.
//
// The lock file is never removed: unlinking it would let a third producer lock a fresh file of the
// same name while the second still holds the old one. It is empty and small. It is readable by
// exactly the users the socket's mode admits (those who may connect: write permission), so that
// after a clean stop any of them can take the path next, in a sticky directory too.
#pragma once

#include <sys/types.h>

#include <string>

#include "status.h"
#include "unique_fd.h"

namespace cipc {

class SocketPathLock {
 public:
  SocketPathLock() = default;

  // Takes the lock of `socket_path` without waiting: kAddressInUse when another process (or
  // another listener in this one) holds it; kNotASocket/kPermissionDenied when the lock file's
  // name is taken by something we cannot or must not use (a symbolic link, a directory, a FIFO,
  // another user's file we may not open). `socket_mode`: the mode the socket file gets; the lock
  // file, when it is ours, gets the read bits of the classes that mode lets connect.
  static Result<SocketPathLock> take(const std::string& socket_path, unsigned socket_mode = 0600);

  static std::string lock_path(const std::string& socket_path) { return socket_path + ".lock"; }
  // The lock file's mode for a socket of mode `socket_mode`: 0600, plus 0040 when the group may
  // connect (0020), plus 0004 when others may (0002).
  static unsigned lock_mode(unsigned socket_mode);

  bool held() const { return fd_.valid(); }
  // Whether the file at lock_path(socket_path) is still the one we hold (not removed or
  // replaced, as a /tmp cleaner does).
  bool is_at(const std::string& socket_path) const;
  void release() { fd_.reset(); }

 private:
  UniqueFd fd_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

}  // namespace cipc
