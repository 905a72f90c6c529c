// SPDX-License-Identifier: LGPL-2.1-or-later
// A Unix SOCK_SEQPACKET connection carrying whole messages plus file descriptors (SCM_RIGHTS),
// and the listening socket a producer serves on. Sends never block: a full socket is reported,
// not waited on, so the producer's streaming thread cannot be stalled by a consumer.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "path_lock.h"
#include "protocol.h"
#include "status.h"
#include "unique_fd.h"

namespace cipc {

constexpr size_t kMaxFdsPerMessage = 4;

// The socket path both elements use when none is set: "$XDG_RUNTIME_DIR/cudaipc.sock" when that
// directory is the user's own, else "/tmp/cudaipc-<uid>/cudaipc.sock". Per user, so that another
// user cannot squat the default path.
std::string default_socket_path();
// For "no producer" errors at `path`: when it is the default path, how it was chosen and where a
// producer with another environment listens instead; "" for any other path.
std::string explain_default_socket_path(const std::string& path);

// For a socket path inside "/tmp/cudaipc-<uid>" (the fallback above): creates that directory
// mode 0700 if missing and checks that it is a real directory of ours that nobody else can
// enter. Other paths: nothing to do.
Status check_private_socket_dir(const std::string& socket_path, bool create);

struct Packet {
  std::vector<uint8_t> bytes;
  std::vector<UniqueFd> fds;
};

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

enum class IoResult { kOk, kWouldBlock, kClosed, kError };

class Channel {
 public:
  Channel() = default;
  explicit Channel(UniqueFd fd) : fd_(std::move(fd)) {}

  // Connects to a producer's socket. kConnectFailed when nobody listens there.
  static Result<Channel> connect(const std::string& path);
  // Two connected ends, for tests and in-process use.
  static Result<std::pair<Channel, Channel>> pair();

  bool valid() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }

  // Whether packets sent here are still queued, unread by the peer (SIOCOUTQ: an AF_UNIX sender
  // is charged for each packet until the receiver has read it). False when unknown.
  bool peer_has_unread() const;
  // Bytes the packets sent here and not read by the peer yet are charged for (SIOCOUTQ: their
  // kernel buffers included; a send that would take it past SO_SNDBUF would block); 0 when
  // unknown.
  size_t unread_bytes() const;
  // Whether the peer has closed its end (what it sent before may still be queued here). Never
  // blocks; false when unknown.
  bool peer_hung_up() const;

  // Sends one packet without blocking. `error` receives a reason for kError. kWouldBlock: the
  // socket is full, or (with descriptors) too many of this user's descriptors are in flight
  // (ETOOMANYREFS): try again once the receivers have read.
  IoResult send(const std::vector<uint8_t>& bytes, const int* fds = nullptr, size_t n_fds = 0,
                std::string* error = nullptr);
  IoResult send(const Message& message, const int* fds = nullptr, size_t n_fds = 0,
                std::string* error = nullptr);

  // Receives one packet without blocking. A packet larger than kMaxMessageSize, or with more
  // than kMaxFdsPerMessage descriptors, is an error (any descriptors that came are closed).
  IoResult receive(Packet& out, std::string* error = nullptr);
  // After receive() said kError: true when the cause is this process (it could not take the
  // descriptors that came because its descriptor table is full), not the peer.
  bool last_error_is_local() const { return last_error_local_; }

  // Waits until readable (or hung up). Returns false on timeout. timeout_ms < 0: forever.
  // `wake_fd` (optional) also ends the wait when readable.
  bool wait_readable(int timeout_ms, int wake_fd = -1) const;

  Result<PeerCredentials> peer_credentials() const;
  void shutdown();
  void close() { fd_.reset(); }

 private:
  UniqueFd fd_;
  bool last_error_local_ = false;
};

// The producer's listening socket at a filesystem path. On bind, a stale socket file left by a
// dead producer is replaced; a live one (someone accepts connections there) is refused; a path
// that is not a socket is never touched. The file is removed on destruction if it is still ours.
class Listener {
 public:
  Listener() = default;
  Listener(Listener&& other) noexcept;
  Listener& operator=(Listener&& other) noexcept;
  ~Listener();

  // Serves `path` (file mode `mode`): takes the path's lock (path_lock.h), replaces a stale socket
  // file nobody accepts on, and publishes the socket at `path` only once it listens, checking
  // that what is then at `path` is our socket. Refuses a live producer's path (kAddressInUse), any
  // other kind of file there (kNotASocket), and a path that names a directory (ends in '/').
  // The socket is bound first under a random private name in the same directory, which is never
  // another process's: producers in other PID namespaces share directories too.
  static Result<Listener> bind(const std::string& path, unsigned mode);

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  // Accepts one pending connection without blocking; kWouldBlock when none is waiting.
  // `errno_out` (optional) receives errno for kError (EMFILE: our descriptor table is full).
  IoResult accept(Channel& out, std::string* error = nullptr, int* errno_out = nullptr);

  // Checks that our socket file is still at path() (one lstat). When it was removed (a /tmp
  // cleaner, a deploy script) it publishes a new listening socket there: we hold the path's lock,
  // so the path is still ours to serve (when the lock file went too, it takes the lock again
  // first). Anything else found at the path is left alone. Returns a sentence for the user when
  // the state changed ("" while nothing did, so a caller checking every second says each thing
  // once). fd() may change: poll the new one from then on.
  std::string check_published();
  // check_published() once `now_ns` (any monotonic clock) is `interval_ns` past the last time
  // this ran it; "" before that. next_check_ns() is when it is due, for a poll timeout.
  std::string check_published_due(uint64_t now_ns, uint64_t interval_ns);
  uint64_t next_check_ns() const { return next_check_ns_; }
  void close();

 private:
  enum class PathState { kOurs, kRepublishFailed, kTakenByOther, kLockLost };
  UniqueFd fd_;
  SocketPathLock lock_;  // held while we serve path_
  std::string path_;
  unsigned mode_ = 0600;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  PathState state_ = PathState::kOurs;
  std::string last_problem_;  // the last thing check_published() said was wrong
  uint64_t next_check_ns_ = 0;
};

}  // namespace cipc
