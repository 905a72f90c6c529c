// SPDX-License-Identifier: LGPL-2.1-or-later
// Taking, keeping and giving back a socket path (ipc/channel.h Listener, ipc/path_lock.h):
// producers of other PID namespaces in one directory, what sits at "<socket>.lock", the lock
// file's mode for the next user, a socket file removed under a running producer, and a path that
// names a directory. Issue 43, items 2, 6, 7, 9 and 10.

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "channel.h"
#include "path_lock.h"
#include "producer.h"
#include "test_util.h"

namespace cipc {
namespace {

using cipc_test::eventually;
using cipc_test::path_exists;
using cipc_test::TempDir;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

unsigned mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Whether the socket at `path` is `listener`'s: a connection made there is accepted by it.
bool reaches(const std::string& path, Listener& listener) {
  auto client = Channel::connect(path);
  if (!client) return false;
  Channel server;
  // A connection that was made is queued already: it is accepted at once or never.
  return eventually([&] { return listener.accept(server) == IoResult::kOk; }, 1000);
}

// A forked child's outcome: its exit code (or 128 + the signal that ended it) and what it wrote.
struct ChildResult {
  int code = -1;
  std::string text;
};

// A forked child running a body that returns its exit code and may fill in a message.
struct Spawned {
  pid_t pid = -1;
  int out = -1;  // read end of the child's message pipe
};

Spawned spawn_child(const std::function<int(std::string&)>& body) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(out[0]);
    std::string text;
    const int code = body(text);
    if (!text.empty() && ::write(out[1], text.data(), text.size()) < 0) {
    }
    ::_exit(code);
  }
  ::close(out[1]);
  if (pid < 0) {
    ::close(out[0]);
    return {};
  }
  return {pid, out[0]};
}

ChildResult collect(const Spawned& child) {
  if (child.pid < 0) return {-1, "fork or pipe2 failed"};
  ChildResult result;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(child.out, buf, sizeof(buf));
    if (n > 0) {
      result.text.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  ::close(child.out);
  int status = 0;
  while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

ChildResult run_child(const std::function<int(std::string&)>& body) {
  return collect(spawn_child(body));
}

// Becomes `uid` (and gid `uid`, no supplementary groups) for good: for a forked child only.
bool become(uid_t uid) {
  return ::setgroups(0, nullptr) == 0 && ::setresgid(uid, uid, uid) == 0 &&
         ::setresuid(uid, uid, uid) == 0;
}

// ---- Item 2: the private bind name -----------------------------------------------------------

// The old private name was ".cudaipc-<pid>-<counter>.tmp", unlinked before each bind: a
// producer of the same pid in another PID namespace (every container's first process is pid 1)
// had its socket removed under it. Files of that pattern, for this very pid and every counter a
// test binary reaches, are another process's: none may be removed or changed.
TEST(SocketPath, PrivateBindNamesOfOtherProcessesAreNeverRemoved) {
  TempDir dir;
  constexpr int kCounters = 512;
  const std::string pid = std::to_string(::getpid());
  std::vector<ino_t> inodes;
  for (int n = 0; n < kCounters; ++n) {
    const std::string name = dir.file(".cudaipc-" + pid + "-" + std::to_string(n) + ".tmp");
    UniqueFd f(::open(name.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644));
    ASSERT_TRUE(f.valid()) << name << ": " << std::strerror(errno);
    ASSERT_EQ(::write(f.get(), "theirs", 6), 6);
    struct stat st {};
    ASSERT_EQ(::fstat(f.get(), &st), 0);
    inodes.push_back(st.st_ino);
  }
  for (int i = 0; i < 8; ++i) {
    const std::string path = dir.file("p" + std::to_string(i) + ".sock");
    auto l = Listener::bind(path, 0600);
    ASSERT_TRUE(l.is_ok()) << l.error().message;
    EXPECT_TRUE(reaches(path, *l)) << path;
  }
  int missing = 0;
  for (int n = 0; n < kCounters; ++n) {
    const std::string name = dir.file(".cudaipc-" + pid + "-" + std::to_string(n) + ".tmp");
    struct stat st {};
    if (::lstat(name.c_str(), &st) != 0 || st.st_ino != inodes[size_t(n)] || st.st_size != 6)
      ++missing;
  }
  EXPECT_EQ(missing, 0) << "another process's private socket names removed or replaced";
}

// Issue 43, item 2: two producers in their own PID namespaces (both pid 1), started together on
// different paths of one directory, as two containers sharing a socket directory do. Every start
// must succeed and be reachable at its own path. Before: 29 of 200 failed ("publishing the
// socket ...: No such file or directory"), 12 more came up on a socket nobody could reach.
TEST(SocketPath, ProducersInOtherPidNamespacesSharingADirectoryAllComeUpReachable) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for unshare(CLONE_NEWPID)";
  const ChildResult probe = run_child([](std::string&) {
    if (::unshare(CLONE_NEWPID) != 0) return 77;
    return 0;
  });
  if (probe.code == 77) GTEST_SKIP() << "unshare(CLONE_NEWPID) is not permitted here";
  TempDir dir;
  constexpr int kRounds = 100;
  int failed = 0, unreachable = 0, not_pid_one = 0;
  std::string first_problem;
  for (int round = 0; round < kRounds; ++round) {
    int go[2];
    ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
    // A child that enters a new PID namespace and runs the producer as its pid 1, which waits
    // for the start signal (the pipe's write end closing) and then binds and checks its path.
    auto producer = [&](const std::string& path) {
      return [&, path](std::string& why) {
        ::close(go[1]);
        if (::unshare(CLONE_NEWPID) != 0) return 77;
        const ChildResult inner = run_child([&](std::string& text) {
          char c;
          while (::read(go[0], &c, 1) < 0 && errno == EINTR) {
          }
          auto l = Listener::bind(path, 0600);
          if (!l) {
            text = l.error().message;
            return 1;
          }
          if (!reaches(path, *l)) {
            text = "came up, but a connection to '" + path + "' does not reach it";
            return 2;
          }
          return ::getpid() == 1 ? 0 : 3;
        });
        why = inner.text;
        return inner.code;
      };
    };
    const std::string a = dir.file("a" + std::to_string(round) + ".sock");
    const std::string b = dir.file("b" + std::to_string(round) + ".sock");
    // Both wait on `go` before they start: release them together.
    const Spawned ca = spawn_child(producer(a));
    const Spawned cb = spawn_child(producer(b));
    ::close(go[1]);
    const ChildResult results[2] = {collect(ca), collect(cb)};
    ::close(go[0]);
    for (const ChildResult& r : results) {
      if (r.code == 77) GTEST_SKIP() << "unshare(CLONE_NEWPID) failed in a child";
      failed += r.code == 1;
      unreachable += r.code == 2;
      not_pid_one += r.code == 3;
      if (r.code != 0 && first_problem.empty())
        first_problem =
            "round " + std::to_string(round) + ", exit " + std::to_string(r.code) + ": " + r.text;
    }
  }
  EXPECT_EQ(failed, 0) << "starts that failed, of " << 2 * kRounds << "; " << first_problem;
  EXPECT_EQ(unreachable, 0) << "starts that came up unreachable, of " << 2 * kRounds << "; "
                            << first_problem;
  EXPECT_EQ(not_pid_one, 0) << "producers that were not pid 1 of their namespace";
}

// ---- Item 6: a FIFO at the lock file's name --------------------------------------------------

// Issue 43, item 6: open() of a FIFO waits for a writer, so the producer's start hung forever.
// The bind runs in a child that an alarm ends, so that the old behaviour fails instead of hanging.
TEST(SocketPath, FifoAtTheLockFileNameIsRefusedNotWaitedOn) {
  TempDir dir;
  const std::string path = dir.file("p.sock");
  const std::string lock = SocketPathLock::lock_path(path);
  ASSERT_EQ(::mkfifo(lock.c_str(), 0600), 0) << std::strerror(errno);
  const ChildResult r = run_child([&](std::string& text) {
    ::alarm(10);
    auto l = Listener::bind(path, 0600);
    if (l) return 1;
    text = l.error().message;
    return l.error().code == ErrorCode::kNotASocket ? 0 : 2;
  });
  ASSERT_NE(r.code, 128 + SIGALRM) << "Listener::bind() hung on the FIFO at '" << lock << "'";
  EXPECT_EQ(r.code, 0) << "1: it came up, 2: another error code; " << r.text;
  EXPECT_TRUE(contains(r.text, lock)) << r.text;
  EXPECT_TRUE(contains(r.text, "not a regular file but a FIFO")) << r.text;
  struct stat st {};
  ASSERT_EQ(::lstat(lock.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO must be left alone";
  EXPECT_FALSE(path_exists(path));

  // A socket there cannot even be opened (ENXIO): it is named as what it is too.
  const std::string other = dir.file("q.sock");
  auto squatter = Listener::bind(SocketPathLock::lock_path(other), 0600);
  ASSERT_TRUE(squatter.is_ok()) << squatter.error().message;
  auto l = Listener::bind(other, 0600);
  ASSERT_FALSE(l.is_ok());
  EXPECT_EQ(l.error().code, ErrorCode::kNotASocket);
  EXPECT_TRUE(contains(l.error().message, "not a regular file but a socket")) << l.error().message;
}

// ---- Item 7: the lock file's mode ------------------------------------------------------------

// The lock file is readable by the classes of users the socket's mode lets connect (write bit),
// whatever the umask, so that after a clean stop any of them can take the path.
TEST(SocketPath, LockFileModeFollowsTheSocketModeWhateverTheUmask) {
  TempDir dir;
  const mode_t saved = ::umask(0077);
  struct Case {
    unsigned socket_mode, lock_mode;
  };
  for (const Case c :
       {Case{0666, 0644}, Case{0660, 0640}, Case{0600, 0600}, Case{0602, 0604}, Case{0666, 0644}}) {
    const std::string path = dir.file("p.sock");  // one path: an existing lock file follows too
    auto l = Listener::bind(path, c.socket_mode);
    ASSERT_TRUE(l.is_ok()) << l.error().message;
    EXPECT_EQ(mode_of(SocketPathLock::lock_path(path)), c.lock_mode)
        << "socket mode " << std::oct << c.socket_mode;
    EXPECT_EQ(mode_of(path), c.socket_mode);
  }
  ::umask(saved);
}

// Issue 43, item 7: once one user served a path in a sticky directory, no other user could ever
// serve it (the lock file stayed, mode 0600) nor delete it. Now any user the socket's mode admits
// takes it after a clean stop.
TEST(SocketPath, AnotherUserTheSocketModeAdmitsServesThePathAfterACleanStop) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as two other users";
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 01777), 0);  // like /tmp
  const std::string path = dir.file("shared.sock");
  const ChildResult first = run_child([&](std::string& why) {
    if (!become(47001)) return 77;
    ::umask(0077);
    auto l = Listener::bind(path, 0666);
    if (!l) {
      why = l.error().message;
      return 1;
    }
    return reaches(path, *l) ? 0 : 2;  // and a clean stop
  });
  ASSERT_NE(first.code, 77) << "setresuid failed";
  ASSERT_EQ(first.code, 0) << first.text;
  EXPECT_FALSE(path_exists(path)) << "a clean stop removes the socket";
  const ChildResult second = run_child([&](std::string& why) {
    if (!become(47002)) return 77;
    auto l = Listener::bind(path, 0666);
    if (!l) {
      why = l.error().message;
      return 1;
    }
    return reaches(path, *l) ? 0 : 2;
  });
  EXPECT_EQ(second.code, 0) << "uid 47002 could not serve the path uid 47001 served before: "
                            << second.text;
}

// Issue 43, item 7: a lock file this user cannot open said its owner "may be serving this path"
// when nobody was. It says what is known: whose file it is, its mode, that this user cannot tell.
// And while the owner does serve (flock held, file readable), that is what is said.
TEST(SocketPath, LockFileOfAnotherUserSaysWhatIsKnownOnly) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as two other users";
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 01777), 0);
  const std::string path = dir.file("private.sock");
  const std::string lock = SocketPathLock::lock_path(path);
  const ChildResult owner = run_child([&](std::string& why) {
    if (!become(47001)) return 77;
    auto l = Listener::bind(path, 0600);
    if (!l) why = l.error().message;
    return l ? 0 : 1;
  });
  ASSERT_NE(owner.code, 77) << "setresuid failed";
  ASSERT_EQ(owner.code, 0) << owner.text;
  const ChildResult other = run_child([&](std::string& why) {
    if (!become(47002)) return 77;
    auto l = Listener::bind(path, 0600);
    if (l) return 1;
    why = l.error().message;
    return l.error().code == ErrorCode::kPermissionDenied ? 0 : 2;
  });
  ASSERT_EQ(other.code, 0) << "1: came up, 2: another error code; " << other.text;
  EXPECT_FALSE(contains(other.text, "may be serving")) << other.text;
  EXPECT_TRUE(contains(other.text, "belongs to uid 47001 with mode 0600")) << other.text;
  EXPECT_TRUE(contains(other.text, "cannot open it")) << other.text;
  EXPECT_TRUE(contains(other.text, "remove")) << other.text;
  EXPECT_TRUE(contains(other.text, lock)) << other.text;

  // While a producer of the first user serves (mode 0666: the lock is readable), the other user
  // is told that someone serves.
  const std::string open_path = dir.file("open.sock");
  int ready[2], done[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(done, O_CLOEXEC), 0);
  const Spawned serving = spawn_child([&](std::string&) {
    ::close(ready[0]);
    ::close(done[1]);
    if (!become(47001)) return 77;
    auto l = Listener::bind(open_path, 0666);
    if (::write(ready[1], l ? "y" : "n", 1) != 1) return 1;
    char c;
    while (::read(done[0], &c, 1) < 0 && errno == EINTR) {
    }
    return 0;
  });
  ::close(ready[1]);
  ::close(done[0]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  const ChildResult busy = run_child([&](std::string& why) {
    if (!become(47002)) return 77;
    auto l = Listener::bind(open_path, 0666);
    if (l) return 1;
    why = l.error().message;
    return l.error().code == ErrorCode::kAddressInUse ? 0 : 2;
  });
  ::close(done[1]);
  collect(serving);
  ::close(ready[0]);
  EXPECT_EQ(c, 'y') << "the first user's producer did not come up";
  EXPECT_EQ(busy.code, 0) << busy.text;
  EXPECT_TRUE(contains(busy.text, "another producer is serving")) << busy.text;
}

// ---- Item 9: the socket file removed under a running producer --------------------------------

// Issue 43, item 9: a /tmp cleaner removed the socket file; the producer ran on unreachable. It
// holds the path's lock, so it publishes its socket there again and says so, once.
TEST(SocketPath, RemovedSocketFileIsPublishedAgain) {
  TempDir dir;
  const std::string path = dir.file("p.sock");
  auto l = Listener::bind(path, 0660);
  ASSERT_TRUE(l.is_ok()) << l.error().message;
  EXPECT_EQ(l->check_published(), "") << "nothing happened yet";
  auto early = Channel::connect(path);  // a consumer from before keeps its connection
  ASSERT_TRUE(early.is_ok());
  Channel early_server;
  ASSERT_TRUE(eventually([&] { return l->accept(early_server) == IoResult::kOk; }));

  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_FALSE(Channel::connect(path).is_ok());
  const std::string said = l->check_published();
  EXPECT_TRUE(contains(said, path) && contains(said, "was removed") &&
              contains(said, "published it again"))
      << said;
  EXPECT_EQ(mode_of(path), 0660u);
  EXPECT_TRUE(reaches(path, *l)) << "the socket published again does not reach the listener";
  EXPECT_EQ(l->check_published(), "") << "said once";

  ASSERT_EQ(early->send(std::vector<uint8_t>{7}), IoResult::kOk);
  Packet p;
  EXPECT_EQ(cipc_test::receive_within(early_server, p), IoResult::kOk);

  // A new producer is told the path is served, and the socket is removed on close as before.
  auto other = Listener::bind(path, 0600);
  ASSERT_FALSE(other.is_ok());
  EXPECT_EQ(other.error().code, ErrorCode::kAddressInUse) << other.error().message;
  l->close();
  EXPECT_FALSE(path_exists(path));
}

// Something else at the path is named and left alone; once it goes, the socket comes back.
TEST(SocketPath, ForeignFileAtTheSocketPathIsNamedAndLeftAlone) {
  TempDir dir;
  const std::string path = dir.file("p.sock");
  auto l = Listener::bind(path, 0600);
  ASSERT_TRUE(l.is_ok()) << l.error().message;
  ASSERT_EQ(::unlink(path.c_str()), 0);
  {
    UniqueFd f(::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644));
    ASSERT_TRUE(f.valid());
    ASSERT_EQ(::write(f.get(), "theirs", 6), 6);
  }
  const std::string said = l->check_published();
  EXPECT_TRUE(contains(said, "replaced by a regular file") && contains(said, "left alone")) << said;
  EXPECT_EQ(l->check_published(), "") << "said once";
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_size, 6);
  ASSERT_EQ(::unlink(path.c_str()), 0);
  EXPECT_TRUE(contains(l->check_published(), "published it again"));
  EXPECT_TRUE(reaches(path, *l));
}

// A cleaner that removed the lock file too: the producer locks the path again and serves it; when
// another producer took the path first, it says so and leaves that one's socket alone.
TEST(SocketPath, RemovedSocketAndLockFileAreTakenAgainOrTheTakerIsNamed) {
  TempDir dir;
  const std::string path = dir.file("p.sock");
  auto l = Listener::bind(path, 0600);
  ASSERT_TRUE(l.is_ok()) << l.error().message;
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::unlink(SocketPathLock::lock_path(path).c_str()), 0);
  EXPECT_TRUE(contains(l->check_published(), "published it again"));
  EXPECT_TRUE(reaches(path, *l));
  auto refused = Listener::bind(path, 0600);
  ASSERT_FALSE(refused.is_ok()) << "the lock was not taken again";
  EXPECT_EQ(refused.error().code, ErrorCode::kAddressInUse);

  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::unlink(SocketPathLock::lock_path(path).c_str()), 0);
  auto successor = Listener::bind(path, 0600);
  ASSERT_TRUE(successor.is_ok()) << successor.error().message;
  const std::string said = l->check_published();
  EXPECT_TRUE(contains(said, "replaced by a socket that is not this producer's")) << said;
  l->close();
  EXPECT_TRUE(reaches(path, *successor)) << "the successor's socket was touched";
}

class WarningLog : public ProducerObserver {
 public:
  void on_warning(const std::string& text) override {
    std::lock_guard<std::mutex> guard(lock_);
    warnings_.push_back(text);
  }
  std::vector<std::string> warnings() const {
    std::lock_guard<std::mutex> guard(lock_);
    return warnings_;
  }

 private:
  mutable std::mutex lock_;
  std::vector<std::string> warnings_;
};

// The producer checks its path on its own (about once a second), publishes again and warns.
TEST(SocketPath, ProducerRepublishesItsRemovedSocketAndWarns) {
  TempDir dir;
  WarningLog log;
  ProducerConfig config;
  config.socket_path = dir.file("p.sock");
  auto producer = Producer::start(config, &log);
  ASSERT_TRUE(producer.is_ok()) << producer.error().message;
  ASSERT_EQ(::unlink(config.socket_path.c_str()), 0);
  EXPECT_TRUE(eventually([&] { return path_exists(config.socket_path); }, 10000))
      << "the producer did not publish its socket again";
  Channel client = cipc_test::raw_client(config.socket_path, /*say_hello=*/true);
  EXPECT_TRUE(client.valid());
  ASSERT_TRUE(eventually([&] { return !log.warnings().empty(); }));
  const auto warnings = log.warnings();
  EXPECT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(contains(warnings[0], "was removed")) << warnings[0];
}

// ---- Item 10: paths that cannot be served ---------------------------------------------------

// Issue 43, item 10: socket-path=/dir/ left "/dir/.lock" behind. A path that names a directory is
// refused before anything is created.
TEST(SocketPath, PathNamingADirectoryIsRefusedBeforeAnyLockFileIsMade) {
  TempDir dir;
  const std::string sub = dir.file("sub");
  ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
  for (const std::string& path : {sub + "/", sub, dir.file("missing/"), dir.path() + "/."}) {
    auto l = Listener::bind(path, 0600);
    ASSERT_FALSE(l.is_ok()) << path;
    EXPECT_TRUE(contains(l.error().message, "names a directory")) << l.error().message;
  }
  EXPECT_FALSE(path_exists(sub + "/.lock"));
  EXPECT_FALSE(path_exists(sub + ".lock"));
  EXPECT_FALSE(path_exists(dir.file("missing")));
  EXPECT_FALSE(path_exists(dir.file("missing/.lock")));
  EXPECT_FALSE(path_exists(dir.path() + "/..lock"));
}

// Issue 43, item 10: a socket path in a directory that does not exist named the lock file ("cannot
// open the lock file ...: No such file or directory"); it names the missing directory.
TEST(SocketPath, MissingDirectoryIsNamed) {
  TempDir dir;
  const std::string path = dir.file("no/such/p.sock");
  auto l = Listener::bind(path, 0600);
  ASSERT_FALSE(l.is_ok());
  EXPECT_TRUE(
      contains(l.error().message, "the directory '" + dir.file("no/such") + "' does not exist"))
      << l.error().message;
}

}  // namespace
}  // namespace cipc
