// SPDX-License-Identifier: LGPL-2.1-or-later
#include "path_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace cipc {

Result<SocketPathLock> SocketPathLock::take(const std::string& socket_path) {
  const std::string path = lock_path(socket_path);
  // O_NOFOLLOW: a symbolic link planted at the lock's name must not make us create or lock a file
  // elsewhere. Read-only is enough for flock() and works on a lock file made by a producer that
  // ran with another umask.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600));
  if (!fd) {
    const int e = errno;
    struct stat st {};
    const bool exists = ::lstat(path.c_str(), &st) == 0;
    if (e == ELOOP || (exists && S_ISLNK(st.st_mode)))
      return Error{ErrorCode::kNotASocket,
                   "the lock file '" + path + "' beside the socket is a symbolic link; remove it"};
    if (e == EACCES && exists && st.st_uid != ::geteuid())
      return Error{ErrorCode::kPermissionDenied,
                   "the lock file '" + path + "' beside the socket belongs to uid " +
                       std::to_string(st.st_uid) +
                       ", who may be serving this path; choose another "
                       "socket-path"};
    return Error{e == EACCES || e == EROFS ? ErrorCode::kPermissionDenied : ErrorCode::kSystem,
                 "cannot open the lock file '" + path + "' beside the socket: " + std::strerror(e)};
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return Error{ErrorCode::kSystem, "fstat('" + path + "'): " + std::strerror(errno)};
  if (!S_ISREG(st.st_mode))
    return Error{ErrorCode::kNotASocket,
                 "the lock file '" + path + "' beside the socket is not a regular file; remove it"};
  for (;;) {
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) break;
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK)
      return Error{ErrorCode::kAddressInUse, "another producer is serving or starting on '" +
                                                 socket_path + "' (it holds '" + path +
                                                 "'); stop it or choose another socket-path"};
    return Error{ErrorCode::kSystem, "flock('" + path + "'): " + std::strerror(errno)};
  }
  SocketPathLock lock;
  lock.fd_ = std::move(fd);
  return lock;
}

}  // namespace cipc
