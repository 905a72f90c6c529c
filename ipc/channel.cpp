// SPDX-License-Identifier: LGPL-2.1-or-later
#include "channel.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <linux/sockios.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "file_kind.h"

namespace cipc {

std::string describe_descriptor_limit() {
  rlimit limit{};
  std::string text = "this process (pid " + std::to_string(::getpid()) + ") has reached its limit";
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    text += " of " + std::to_string(limit.rlim_cur);
  return text + " open file descriptors (ulimit -n)";
}

Error system_error(const std::string& what, int errno_value) {
  if (errno_value == EMFILE)
    return Error{ErrorCode::kOutOfResources, what + ": " + describe_descriptor_limit()};
  if (errno_value == ENFILE)
    return Error{ErrorCode::kOutOfResources,
                 what + ": the system-wide limit of open files is reached (fs.file-max)"};
  return Error{ErrorCode::kSystem, what + ": " + std::strerror(errno_value)};
}

namespace {

std::string private_socket_dir() {
  return "/tmp/cudaipc-" + std::to_string(::getuid());
}

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

bool is_own_private_dir(const std::string& dir) {
  struct stat st {};
  return ::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::getuid() &&
         (st.st_mode & 0077) == 0;
}

}  // namespace

std::string default_socket_path() {
  const char* runtime = ::getenv("XDG_RUNTIME_DIR");
  if (runtime && runtime[0] == '/' && is_own_private_dir(runtime))
    return std::string(runtime) + "/cudaipc.sock";
  return private_socket_dir() + "/cudaipc.sock";
}

std::string explain_default_socket_path(const std::string& path) {
  if (path != default_socket_path()) return "";
  const std::string fallback = private_socket_dir() + "/cudaipc.sock";
  const char* runtime = ::getenv("XDG_RUNTIME_DIR");
  if (path != fallback)
    return "'" + path + "' is the default socket path, from XDG_RUNTIME_DIR; a producer started " +
           "without XDG_RUNTIME_DIR (a service, sudo, a container) serves '" + fallback +
           "' instead: give both the same socket-path";
  return "'" + path + "' is the default socket path" +
         (runtime && runtime[0] ? " (XDG_RUNTIME_DIR='" + std::string(runtime) +
                                      "' is not a private directory of this user)"
                                : std::string(" (XDG_RUNTIME_DIR is not set)")) +
         "; a producer started with XDG_RUNTIME_DIR set serves '$XDG_RUNTIME_DIR/cudaipc.sock' "
         "instead: give both the same socket-path";
}

Status check_private_socket_dir(const std::string& socket_path, bool create) {
  const std::string dir = private_socket_dir();
  if (socket_path.compare(0, dir.size() + 1, dir + "/") != 0) return Status::ok();
  if (create && ::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return Error{ErrorCode::kPermissionDenied,
                 "cannot create the socket directory '" + dir + "': " + std::strerror(errno)};
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT && !create)
      return Error{ErrorCode::kConnectFailed,
                   "no producer is serving '" + socket_path + "' ('" + dir + "' does not exist)"};
    return system_error("lstat('" + dir + "')", errno);
  }
  // Say what is really there: a link or a file is not "a directory with a loose mode".
  std::string what;
  if (S_ISLNK(st.st_mode))
    what = "is a symbolic link, not a directory";
  else if (!S_ISDIR(st.st_mode))
    what = std::string("is not a directory but a ") + (S_ISREG(st.st_mode)    ? "regular file"
                                                       : S_ISSOCK(st.st_mode) ? "socket"
                                                                              : "special file");
  else if (st.st_uid != ::getuid())
    what = "belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " +
           std::to_string(::getuid()) + ")";
  else if ((st.st_mode & 0077) != 0)
    what = "lets other users in (mode " + octal_mode(st.st_mode) + "; it must be 0700)";
  if (!what.empty())
    return Error{ErrorCode::kPermissionDenied,
                 "the socket directory '" + dir + "' " + what +
                     "; it is not a private directory of this user, so someone else may be "
                     "squatting the default socket path: remove it, or set socket-path"};
  return Status::ok();
}

namespace {

Result<sockaddr_un> make_address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path))
    return Error{ErrorCode::kInvalidArgument,
                 "socket path '" + path + "' is empty or longer than " +
                     std::to_string(sizeof(addr.sun_path) - 1) + " bytes"};
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

UniqueFd make_socket() {
  return UniqueFd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
}

void set_error(std::string* error, const std::string& text) {
  if (error) *error = text;
}

}  // namespace

Result<Channel> Channel::connect(const std::string& path) {
  auto addr = make_address(path);
  if (!addr) return addr.error();
  // Connect in blocking mode (a Unix connect completes or fails at once), then go non-blocking.
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd) return system_error("socket()", errno);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.value()), sizeof(sockaddr_un)) !=
      0) {
    const int e = errno;
    struct stat st {};
    if (e == ECONNREFUSED && ::stat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode))
      return Error{ErrorCode::kNotASocket,
                   "'" + path + "' is not a socket but " + file_kind(st.st_mode) +
                       "; socket-path must name the socket a cudasink-ipc serves"};
    if (e == ENOENT || e == ECONNREFUSED)
      return Error{ErrorCode::kConnectFailed,
                   "no producer is serving '" + path + "' (" + std::strerror(e) + ")"};
    if (e == EACCES)
      return Error{ErrorCode::kPermissionDenied, "no permission to connect to '" + path + "'"};
    return system_error("connect('" + path + "')", e);
  }
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) != 0)
    return system_error("fcntl(O_NONBLOCK)", errno);
  return Channel(std::move(fd));
}

Result<std::pair<Channel, Channel>> Channel::pair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) != 0)
    return system_error("socketpair()", errno);
  return std::make_pair(Channel(UniqueFd(fds[0])), Channel(UniqueFd(fds[1])));
}

IoResult Channel::send(const Message& message, const int* fds, size_t n_fds, std::string* error) {
  return send(encode(message), fds, n_fds, error);
}

IoResult Channel::send(const std::vector<uint8_t>& bytes, const int* fds, size_t n_fds,
                       std::string* error) {
  if (!fd_) {
    set_error(error, "channel is closed");
    return IoResult::kClosed;
  }
  if (n_fds > kMaxFdsPerMessage) {
    set_error(error, "too many file descriptors for one message");
    return IoResult::kError;
  }
  iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
  if (n_fds > 0) {
    std::memset(control, 0, sizeof(control));
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
  }
  for (;;) {
    const ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return IoResult::kOk;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return IoResult::kWouldBlock;
    // Descriptors this user has in flight, unread by their receivers, exceed RLIMIT_NOFILE: the
    // receivers will take some (and the descriptor can go later), the connection is fine.
    if (errno == ETOOMANYREFS && n_fds > 0) return IoResult::kWouldBlock;
    if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) {
      set_error(error, "peer closed the connection");
      return IoResult::kClosed;
    }
    set_error(error, std::string("sendmsg(): ") + std::strerror(errno));
    return IoResult::kError;
  }
}

size_t Channel::unread_bytes() const {
  int queued = 0;
  if (!fd_ || ::ioctl(fd_.get(), SIOCOUTQ, &queued) != 0 || queued < 0) return 0;
  return static_cast<size_t>(queued);
}

bool Channel::peer_has_unread() const {
  int queued = 0;
  return fd_ && ::ioctl(fd_.get(), SIOCOUTQ, &queued) == 0 && queued > 0;
}

bool Channel::peer_hung_up() const {
  if (!fd_) return false;
  pollfd p{fd_.get(), POLLRDHUP, 0};
  int r;
  do r = ::poll(&p, 1, 0);
  while (r < 0 && errno == EINTR);
  return r > 0 && (p.revents & (POLLRDHUP | POLLHUP)) != 0;
}

IoResult Channel::receive(Packet& out, std::string* error) {
  out.bytes.clear();
  out.fds.clear();
  if (!fd_) {
    set_error(error, "channel is closed");
    return IoResult::kClosed;
  }
  // Received on the stack, uninitialised, and only what came is copied out: sizing out.bytes to
  // the largest message would zero 16 KiB per message, once per consumer and frame in a producer.
  uint8_t buffer[kMaxMessageSize + 1];  // one spare byte reveals oversized packets
  iovec iov{buffer, sizeof(buffer)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  bool reset_reported = false;
  last_error_local_ = false;
  for (;;) {
    n = ::recvmsg(fd_.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n >= 0) break;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return IoResult::kWouldBlock;
    // A peer that closes with our messages unread makes the kernel report ECONNRESET once,
    // ahead of what the peer sent before closing (its BYE or ERROR). Read on: those messages
    // are still queued, and the end of the queue reads as a plain close.
    if (errno == ECONNRESET && !reset_reported) {
      reset_reported = true;
      continue;
    }
    if (errno == ECONNRESET || errno == ENOTCONN) {
      set_error(error, "peer closed the connection");
      return IoResult::kClosed;
    }
    set_error(error, std::string("recvmsg(): ") + std::strerror(errno));
    return IoResult::kError;
  }
  // Take ownership of every descriptor first, so that nothing leaks on any error below.
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        out.fds.emplace_back(fd);
      }
    }
  }
  if (n == 0 && out.fds.empty()) {
    set_error(error, "peer closed the connection");
    return IoResult::kClosed;
  }
  if ((msg.msg_flags & MSG_TRUNC) || static_cast<size_t>(n) > kMaxMessageSize) {
    out.fds.clear();
    set_error(error, "oversized message (more than " + std::to_string(kMaxMessageSize) + " bytes)");
    return IoResult::kError;
  }
  if (msg.msg_flags & MSG_CTRUNC || out.fds.size() > kMaxFdsPerMessage) {
    out.fds.clear();
    // The kernel also truncates when it cannot install the descriptors here: that is our
    // limit, not the peer's fault. A probe tells the two apart.
    const int probe = ::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0);
    const int probe_errno = errno;
    if (probe >= 0) ::close(probe);
    if (probe < 0 && (probe_errno == EMFILE || probe_errno == ENFILE)) {
      last_error_local_ = true;
      set_error(error, "could not take a file descriptor the peer sent: " +
                           (probe_errno == EMFILE
                                ? describe_descriptor_limit()
                                : std::string("the system-wide limit of open files is reached")));
      return IoResult::kError;
    }
    set_error(error, "too many file descriptors attached to one message");
    return IoResult::kError;
  }
  out.bytes.assign(buffer, buffer + n);
  return IoResult::kOk;
}

bool Channel::wait_readable(int timeout_ms, int wake_fd) const {
  pollfd p[2] = {{fd_.get(), POLLIN, 0}, {wake_fd, POLLIN, 0}};
  const nfds_t n = wake_fd >= 0 ? 2 : 1;
  for (;;) {
    const int r = ::poll(p, n, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    return r > 0;
  }
}

Result<PeerCredentials> Channel::peer_credentials() const {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd_.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return system_error("getsockopt(SO_PEERCRED)", errno);
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

void Channel::shutdown() {
  if (fd_) ::shutdown(fd_.get(), SHUT_RDWR);
}

Listener::Listener(Listener&& other) noexcept {
  *this = std::move(other);
}

Listener& Listener::operator=(Listener&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::move(other.fd_);
    lock_ = std::move(other.lock_);
    path_ = std::move(other.path_);
    mode_ = other.mode_;
    dev_ = other.dev_;
    ino_ = other.ino_;
    state_ = other.state_;
    last_problem_ = std::move(other.last_problem_);
    next_check_ns_ = other.next_check_ns_;
    other.path_.clear();
  }
  return *this;
}

Listener::~Listener() {
  close();
}

void Listener::close() {
  if (!path_.empty()) {
    // Remove the file only if it is still the socket we created, not a successor's.
    struct stat st {};
    if (::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_)
      ::unlink(path_.c_str());
    path_.clear();
  }
  fd_.reset();
  lock_.release();  // last: the next producer finds the path free
}

namespace {

std::string hex_random(size_t bytes) {
  unsigned char buf[16] = {};
  bytes = std::min(bytes, sizeof(buf));
  size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::getrandom(buf + got, bytes - got, GRND_NONBLOCK);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      // No entropy yet (early boot) or no getrandom(): still unique enough to retry on a clash.
      static std::atomic<uint64_t> counter{0};
      std::random_device rd;
      uint64_t mix =
          (uint64_t{rd()} << 32) ^ rd() ^ counter.fetch_add(1) ^
          static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
      for (size_t i = got; i < bytes;
           ++i, mix = mix * 6364136223846793005ull + 1442695040888963407ull)
        buf[i] = static_cast<unsigned char>(mix >> 56);
      got = bytes;
    }
  }
  static const char digits[] = "0123456789abcdef";
  std::string text;
  for (size_t i = 0; i < bytes; ++i) {
    text += digits[buf[i] >> 4];
    text += digits[buf[i] & 15];
  }
  return text;
}

// A name beside `path` for binding the socket before it is published, so that it appears at
// `path` only once it listens (a consumer never finds a socket that refuses it). Random, not
// derived from our pid: producers in other PID namespaces (containers) sharing the directory have
// the same pids. "" when no such name fits in sun_path: then the socket is bound at `path` itself.
std::string private_bind_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string name = dir + "/.cudaipc-" + hex_random(8) + ".tmp";
  return name.size() < sizeof(sockaddr_un::sun_path) ? name : std::string();
}

bool same_file(const std::string& path, dev_t dev, ino_t ino) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

// Moves the bound, listening socket (`dev`, `ino`) from `from` to `to` unless something appeared
// at `to`. On failure the name `from` is removed, if it still is our socket.
Status publish_socket(const std::string& from, const std::string& to, dev_t dev, ino_t ino) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0)
    return Status::ok();
  int e = errno;
  if (e == EINVAL || e == ENOSYS) {
    // A filesystem without RENAME_NOREPLACE: link() refuses an existing name just the same.
    if (::link(from.c_str(), to.c_str()) == 0) {
      if (same_file(from, dev, ino)) ::unlink(from.c_str());
      return Status::ok();
    }
    e = errno;
  }
  if (same_file(from, dev, ino)) ::unlink(from.c_str());
  if (e == EEXIST)
    return Error{ErrorCode::kAddressInUse, "'" + to + "' was taken by another producer"};
  return system_error("publishing the socket at '" + to + "'", e);
}

struct PublishedSocket {
  UniqueFd fd;
  dev_t dev = 0;
  ino_t ino = 0;
};

// A new listening socket of mode `mode`, published at `path` (which must be free), and checked to
// be there: a producer that comes up is reachable at its path.
Result<PublishedSocket> publish_new_socket(const std::string& path, unsigned mode) {
  PublishedSocket s;
  s.fd = make_socket();
  if (!s.fd) return system_error("socket()", errno);
  std::string bound;
  for (int attempt = 0;; ++attempt) {
    const std::string bind_name = private_bind_name(path);
    bound = bind_name.empty() ? path : bind_name;
    auto addr = make_address(bound);
    if (!addr) return addr.error();
    if (::bind(s.fd.get(), reinterpret_cast<const sockaddr*>(&addr.value()), sizeof(sockaddr_un)) ==
        0)
      break;
    const int e = errno;
    // A private name that exists is someone else's: never remove it, draw another.
    if (e == EADDRINUSE && !bind_name.empty() && attempt < 16) continue;
    if (e == EADDRINUSE)
      return Error{ErrorCode::kAddressInUse, "'" + path + "' was taken by another producer"};
    if (e == EACCES || e == EROFS || e == ENOENT)
      return Error{ErrorCode::kPermissionDenied,
                   "cannot create socket '" + path + "': " + std::strerror(e)};
    return system_error("bind('" + bound + "')", e);
  }
  struct stat st {};
  if (::lstat(bound.c_str(), &st) != 0) return system_error("lstat('" + bound + "')", errno);
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  // Until it is published, a failure removes the socket file we bound (only ours).
  auto fail = [&](Error error) {
    if (same_file(bound, s.dev, s.ino)) ::unlink(bound.c_str());
    return error;
  };
  if (!S_ISSOCK(st.st_mode))
    return Error{ErrorCode::kSystem, "'" + bound + "' is not the socket just bound there"};
  if (::chmod(bound.c_str(), mode) != 0) return fail(system_error("chmod('" + path + "')", errno));
  if (::listen(s.fd.get(), 16) != 0) return fail(system_error("listen()", errno));
  if (bound != path) {
    const Status published = publish_socket(bound, path, s.dev, s.ino);
    if (!published) return published.error();
  }
  // What consumers reach at `path` must be this socket, not one another process put there.
  if (::lstat(path.c_str(), &st) != 0)
    return system_error("checking the socket just published at '" + path + "'", errno);
  if (st.st_dev != s.dev || st.st_ino != s.ino)
    return Error{ErrorCode::kAddressInUse,
                 "after publishing the socket at '" + path + "', " + file_kind(st.st_mode) +
                     " of another process is there instead of it (someone replaced it at once); "
                     "refusing to come up where consumers cannot reach this producer"};
  return s;
}

}  // namespace

Result<Listener> Listener::bind(const std::string& path, unsigned mode) {
  auto addr = make_address(path);
  if (!addr) return addr.error();
  // A path that names a directory would leave "<dir>/.lock" behind and never serve: refuse it
  // before anything is created.
  struct stat st {};
  if (path.back() == '/' || (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)))
    return Error{ErrorCode::kNotASocket,
                 "socket path '" + path +
                     "' names a directory; socket-path must name the socket file, e.g. '" +
                     (path.back() == '/' ? path : path + "/") + "cudaipc.sock'"};
  const Status dir = check_private_socket_dir(path, /*create=*/true);
  if (!dir) return dir.error();

  // Every producer takes the path's lock first, so probing, replacing a stale file and binding
  // are one step, never interleaved with another producer's.
  auto lock = SocketPathLock::take(path, mode);
  if (!lock) return lock.error();

  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return Error{ErrorCode::kNotASocket,
                   "'" + path + "' exists and is not a socket; refusing to replace it"};
    auto probe = Channel::connect(path);
    if (probe) {
      // Someone serves it without the lock: an older version of this plugin, or another program.
      return Error{ErrorCode::kAddressInUse, "another producer is serving '" + path +
                                                 "'; stop it or choose another socket-path"};
    }
    if (probe.error().code != ErrorCode::kConnectFailed) return probe.error();
    // Nobody accepts there: the file is left over from a producer that died. Replace it.
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      return system_error("removing stale socket '" + path + "'", errno);
  } else if (errno != ENOENT) {
    return system_error("lstat('" + path + "')", errno);
  }

  auto socket = publish_new_socket(path, mode);
  if (!socket) return socket.error();
  Listener l;
  l.lock_ = std::move(*lock);
  l.fd_ = std::move(socket->fd);
  l.path_ = path;
  l.mode_ = mode;
  l.dev_ = socket->dev;
  l.ino_ = socket->ino;
  return l;
}

std::string Listener::check_published() {
  if (path_.empty()) return "";
  struct stat st {};
  const bool present = ::lstat(path_.c_str(), &st) == 0;
  const int lstat_errno = present ? 0 : errno;
  if (present && st.st_dev == dev_ && st.st_ino == ino_) {
    state_ = PathState::kOurs;
    return "";
  }
  const std::string where = "the socket file '" + path_ + "' of this producer";
  auto report = [&](PathState state, const std::string& text) -> std::string {
    const bool again = state_ == state && last_problem_ == text;
    state_ = state;
    last_problem_ = text;
    return again ? std::string() : text;
  };
  if (present || lstat_errno != ENOENT) {
    // Not ours any more, and not gone: never remove what someone else put there.
    const std::string what =
        present ? "was replaced by " + file_kind(st.st_mode) + " that is not this producer's"
                : std::string("cannot be checked (lstat: ") + std::strerror(lstat_errno) + ")";
    return report(PathState::kTakenByOther,
                  where + " " + what +
                      "; new consumers cannot reach this producer there. It is left alone: "
                      "remove it, and this producer publishes its socket there again");
  }
  // Gone. We may serve the path again as long as we hold its lock; a cleaner that removed the
  // lock file too let another producer take the path meanwhile, or lets us lock it again.
  if (!lock_.is_at(path_)) {
    auto lock = SocketPathLock::take(path_, mode_);
    if (!lock)
      return report(PathState::kLockLost,
                    where +
                        " and its lock file were removed; this producer cannot take the path "
                        "again (" +
                        lock.error().message + "), so new consumers cannot reach it");
    lock_ = std::move(*lock);
  }
  auto socket = publish_new_socket(path_, mode_);
  if (!socket)
    return report(PathState::kRepublishFailed,
                  where + " was removed; publishing it again failed (" + socket.error().message +
                      "), so new consumers cannot reach this producer");
  fd_ = std::move(socket->fd);  // consumers attached before keep their own connections
  dev_ = socket->dev;
  ino_ = socket->ino;
  state_ = PathState::kOurs;
  last_problem_.clear();
  return where +
         " was removed while it served (a /tmp cleaner?); published it again, so new "
         "consumers can attach";
}

std::string Listener::check_published_due(uint64_t now_ns, uint64_t interval_ns) {
  if (now_ns < next_check_ns_) return "";
  next_check_ns_ = now_ns + interval_ns;
  return check_published();
}

IoResult Listener::accept(Channel& out, std::string* error, int* errno_out) {
  for (;;) {
    const int fd = ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      out = Channel(UniqueFd(fd));
      return IoResult::kOk;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return IoResult::kWouldBlock;
    if (errno_out) *errno_out = errno;
    set_error(error, system_error("accept()", errno).message);
    return IoResult::kError;
  }
}

}  // namespace cipc
