// SPDX-License-Identifier: LGPL-2.1-or-later
#include "path_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "file_kind.h"

namespace cipc {
namespace {

std::string octal(unsigned mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", mode & 07777);
  return text;
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

constexpr int kOpenFlags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK;

// Why the lock file at `path` could not be opened (open() said `e`).
Error open_error(const std::string& socket_path, const std::string& path, int e, bool creating) {
  const std::string uid = std::to_string(::geteuid());
  struct stat st {};
  const bool exists = ::lstat(path.c_str(), &st) == 0;
  if (e == ELOOP || (exists && S_ISLNK(st.st_mode)))
    return Error{ErrorCode::kNotASocket,
                 "the lock file '" + path + "' beside the socket is a symbolic link; remove it"};
  if (exists && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))  // a socket: ENXIO, a device: ...
    return Error{ErrorCode::kNotASocket, "the lock file '" + path +
                                             "' beside the socket is not a regular file but " +
                                             file_kind(st.st_mode) + "; remove it"};
  if (creating && e == ENOENT)
    return Error{ErrorCode::kSystem, "cannot create the lock file '" + path +
                                         "' beside the socket: the directory '" +
                                         directory_of(path) +
                                         "' does not exist; create it, or choose a socket-path "
                                         "in an existing directory"};
  if (creating && (e == EACCES || e == EPERM || e == EROFS))
    return Error{ErrorCode::kPermissionDenied,
                 "cannot create the lock file '" + path + "' beside the socket: " +
                     (e == EROFS ? "the file system of '" + directory_of(path) + "' is read-only"
                                 : "this user (uid " + uid + ") may not create files in '" +
                                       directory_of(path) + "'") +
                     "; choose a socket-path in a directory this user can write"};
  if ((e == EACCES || e == EPERM) && exists && st.st_uid != ::geteuid())
    // Without opening it we cannot tell whether anybody holds it: say just that.
    return Error{ErrorCode::kPermissionDenied,
                 "the lock file '" + path + "' beside the socket belongs to uid " +
                     std::to_string(st.st_uid) + " with mode " + octal(st.st_mode) +
                     ", and this user (uid " + uid +
                     ") cannot open it, so it cannot tell whether a producer is serving '" +
                     socket_path + "'; if none is, have uid " + std::to_string(st.st_uid) +
                     " (or root) remove the lock file, or choose another socket-path"};
  return Error{
      e == EACCES || e == EPERM || e == EROFS ? ErrorCode::kPermissionDenied : ErrorCode::kSystem,
      "cannot open the lock file '" + path + "' beside the socket: " + std::strerror(e)};
}

}  // namespace

unsigned SocketPathLock::lock_mode(unsigned socket_mode) {
  return 0600u | ((socket_mode & 0020) ? 0040u : 0u) | ((socket_mode & 0002) ? 0004u : 0u);
}

Result<SocketPathLock> SocketPathLock::take(const std::string& socket_path, unsigned socket_mode) {
  const std::string path = lock_path(socket_path);
  const unsigned mode = lock_mode(socket_mode);
  // O_NOFOLLOW: a symbolic link planted at the lock's name must not make us create or lock a file
  // elsewhere. O_NONBLOCK: opening a FIFO planted there would otherwise wait for a writer forever
  // (it is refused below, as not a regular file). Read-only is enough for flock() and works on a
  // lock file another user made readable for us. An existing file is opened without O_CREAT: in a
  // sticky directory, fs.protected_regular refuses O_CREAT on another user's file.
  UniqueFd fd;
  for (int attempt = 0; !fd; ++attempt) {
    fd.reset(::open(path.c_str(), kOpenFlags));
    if (fd) break;
    if (errno != ENOENT || attempt == 4) return open_error(socket_path, path, errno, false);
    fd.reset(::open(path.c_str(), kOpenFlags | O_CREAT | O_EXCL, mode));
    if (!fd && errno != EEXIST) return open_error(socket_path, path, errno, true);
    // EEXIST: made by another producer just now (or a link planted): open what is there.
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return Error{ErrorCode::kSystem, "fstat('" + path + "'): " + std::strerror(errno)};
  if (!S_ISREG(st.st_mode))
    return Error{ErrorCode::kNotASocket, "the lock file '" + path +
                                             "' beside the socket is not a regular file but " +
                                             file_kind(st.st_mode) + "; remove it"};
  for (;;) {
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) break;
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK)
      return Error{ErrorCode::kAddressInUse, "another producer is serving or starting on '" +
                                                 socket_path + "' (it holds '" + path +
                                                 "'); stop it or choose another socket-path"};
    return Error{ErrorCode::kSystem, "flock('" + path + "'): " + std::strerror(errno)};
  }
  // Ours: give it the mode the socket asks for, whatever the umask took away when it was made
  // (or a producer with another socket-mode left). Another user's file keeps its owner's choice.
  if (st.st_uid == ::geteuid() && (st.st_mode & 07777) != mode && ::fchmod(fd.get(), mode) != 0)
    return Error{ErrorCode::kSystem,
                 "fchmod('" + path + "', " + octal(mode) + "): " + std::strerror(errno)};
  SocketPathLock lock;
  lock.fd_ = std::move(fd);
  lock.dev_ = st.st_dev;
  lock.ino_ = st.st_ino;
  return lock;
}

bool SocketPathLock::is_at(const std::string& socket_path) const {
  struct stat st {};
  return fd_.valid() && ::lstat(lock_path(socket_path).c_str(), &st) == 0 && st.st_dev == dev_ &&
         st.st_ino == ino_;
}

}  // namespace cipc
