// SPDX-License-Identifier: LGPL-2.1-or-later
// The Unix SOCK_SEQPACKET transport (ipc/channel.h): packets, descriptor passing, limits, and the
// producer's listening socket with its stale/live/foreign-file rules.

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "channel.h"
#include "test_util.h"

namespace cipc {
namespace {

using cipc_test::eventually;
using cipc_test::limit_descriptors_in_flight;
using cipc_test::open_fd_count;
using cipc_test::path_exists;
using cipc_test::TempDir;

std::pair<Channel, Channel> connected_pair() {
  auto p = Channel::pair();
  EXPECT_TRUE(p.is_ok()) << (p.is_ok() ? "" : p.error().message);
  return std::move(p.value());
}

// sendmsg() straight on the socket, bypassing Channel::send's own limits.
using cipc_test::send_with_fds;

UniqueFd make_memfd(const char* text) {
  UniqueFd fd(::memfd_create("channel-test", MFD_CLOEXEC));
  EXPECT_TRUE(fd.valid());
  const size_t n = std::strlen(text);
  EXPECT_EQ(::write(fd.get(), text, n), static_cast<ssize_t>(n));
  return fd;
}

std::string read_all_at(int fd, size_t n) {
  std::string s(n, '\0');
  const ssize_t r = ::pread(fd, s.data(), n, 0);
  s.resize(r < 0 ? 0 : static_cast<size_t>(r));
  return s;
}

// A socket file nobody listens on any more, as a killed producer leaves it.
void make_stale_socket(const std::string& path) {
  const int s = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
  ASSERT_GE(s, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(s, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0)
      << std::strerror(errno);
  ::close(s);
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  ASSERT_TRUE(S_ISSOCK(st.st_mode));
}

ino_t inode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

// ---- Channel::pair -----------------------------------------------------------------------------

TEST(ChannelPair, SendsAndReceivesOnePacket) {
  auto [a, b] = connected_pair();
  const std::vector<uint8_t> bytes = {1, 2, 3, 250, 0, 7};
  ASSERT_EQ(a.send(bytes), IoResult::kOk);
  Packet p;
  ASSERT_EQ(b.receive(p), IoResult::kOk);
  EXPECT_EQ(p.bytes, bytes);
  EXPECT_TRUE(p.fds.empty());
}

TEST(ChannelPair, KeepsPacketBoundariesAndOrder) {
  auto [a, b] = connected_pair();
  const std::vector<std::vector<uint8_t>> sent = {
      std::vector<uint8_t>(1, 0x11), std::vector<uint8_t>(1000, 0x22),
      std::vector<uint8_t>(kMaxMessageSize, 0x33), std::vector<uint8_t>(12, 0x44)};
  for (const auto& s : sent) ASSERT_EQ(a.send(s), IoResult::kOk);
  for (const auto& s : sent) {
    Packet p;
    ASSERT_EQ(b.receive(p), IoResult::kOk);
    EXPECT_EQ(p.bytes, s);
  }
  Packet p;
  EXPECT_EQ(b.receive(p), IoResult::kWouldBlock);
}

TEST(ChannelPair, SendsEncodedMessagesBothWays) {
  auto [a, b] = connected_pair();
  Release r;
  r.generation = 9;
  r.slot = 3;
  r.sequence = 1234;
  ASSERT_EQ(a.send(Message{r}), IoResult::kOk);
  ASSERT_EQ(b.send(Message{Eos{}}), IoResult::kOk);

  Packet p;
  ASSERT_EQ(b.receive(p), IoResult::kOk);
  EXPECT_EQ(p.bytes, encode(Message{r}));
  ASSERT_EQ(a.receive(p), IoResult::kOk);
  EXPECT_EQ(p.bytes, encode(Message{Eos{}}));
}

TEST(ChannelPair, DescriptorsArriveAsNewNumbersForTheSameFiles) {
  auto [a, b] = connected_pair();
  UniqueFd memfd = make_memfd("written before sending");
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  UniqueFd pipe_read(pipe_fds[0]);
  UniqueFd pipe_write(pipe_fds[1]);

  const int send_fds[] = {memfd.get(), pipe_write.get()};
  ASSERT_EQ(a.send(encode(Message{Eos{}}), send_fds, 2), IoResult::kOk);
  Packet p;
  ASSERT_EQ(b.receive(p), IoResult::kOk);
  ASSERT_EQ(p.fds.size(), 2u);
  for (const UniqueFd& fd : p.fds) {
    EXPECT_TRUE(fd.valid());
    EXPECT_NE(fd.get(), memfd.get());
    EXPECT_NE(fd.get(), pipe_write.get());
    EXPECT_NE(fd.get(), pipe_read.get());
  }
  EXPECT_NE(p.fds[0].get(), p.fds[1].get());

  // The memfd: same inode, and bytes written through one are read through the other.
  struct stat st_orig {
  }, st_recv{};
  ASSERT_EQ(::fstat(memfd.get(), &st_orig), 0);
  ASSERT_EQ(::fstat(p.fds[0].get(), &st_recv), 0);
  EXPECT_EQ(st_orig.st_ino, st_recv.st_ino);
  EXPECT_EQ(st_orig.st_dev, st_recv.st_dev);
  EXPECT_EQ(read_all_at(p.fds[0].get(), 22), "written before sending");
  ASSERT_EQ(::pwrite(p.fds[0].get(), "WRITTEN", 7, 0), 7);
  EXPECT_EQ(read_all_at(memfd.get(), 22), "WRITTEN before sending");

  // The pipe: writing through the received write end reaches our read end.
  ASSERT_EQ(::write(p.fds[1].get(), "ping", 4), 4);
  char buf[8] = {};
  ASSERT_EQ(::read(pipe_read.get(), buf, sizeof(buf)), 4);
  EXPECT_STREQ(buf, "ping");
}

TEST(ChannelPair, ReceivedDescriptorsAreCloseOnExec) {
  auto [a, b] = connected_pair();
  UniqueFd memfd = make_memfd("x");
  const int fd = memfd.get();
  ASSERT_EQ(a.send(encode(Message{Eos{}}), &fd, 1), IoResult::kOk);
  Packet p;
  ASSERT_EQ(b.receive(p), IoResult::kOk);
  ASSERT_EQ(p.fds.size(), 1u);
  const int flags = ::fcntl(p.fds[0].get(), F_GETFD);
  ASSERT_GE(flags, 0);
  EXPECT_TRUE(flags & FD_CLOEXEC) << "a received descriptor would leak into exec'd children";
}

TEST(ChannelPair, MaxDescriptorsPerMessageAreAccepted) {
  auto [a, b] = connected_pair();
  std::vector<UniqueFd> owned;
  std::vector<int> raw;
  for (size_t i = 0; i < kMaxFdsPerMessage; ++i) {
    owned.push_back(make_memfd("m"));
    raw.push_back(owned.back().get());
  }
  ASSERT_EQ(a.send(encode(Message{Eos{}}), raw.data(), raw.size()), IoResult::kOk);
  Packet p;
  ASSERT_EQ(b.receive(p), IoResult::kOk);
  EXPECT_EQ(p.fds.size(), kMaxFdsPerMessage);
}

TEST(ChannelPair, ReceiveOnEmptyChannelWouldBlock) {
  auto [a, b] = connected_pair();
  Packet p;
  EXPECT_EQ(b.receive(p), IoResult::kWouldBlock);
  EXPECT_EQ(a.receive(p), IoResult::kWouldBlock);
}

TEST(ChannelPair, ReceiveAfterPeerClosedDeliversPendingDataThenClosed) {
  auto [a, b] = connected_pair();
  ASSERT_EQ(a.send(std::vector<uint8_t>{42}), IoResult::kOk);
  a.close();
  EXPECT_FALSE(a.valid());
  Packet p;
  ASSERT_EQ(b.receive(p), IoResult::kOk);
  EXPECT_EQ(p.bytes, std::vector<uint8_t>{42});
  std::string error;
  EXPECT_EQ(b.receive(p, &error), IoResult::kClosed);
  EXPECT_FALSE(error.empty());
  EXPECT_EQ(b.receive(p), IoResult::kClosed) << "closed stays closed";
}

TEST(ChannelPair, SendToClosedPeerIsClosed) {
  auto [a, b] = connected_pair();
  b.close();
  std::string error;
  EXPECT_EQ(a.send(std::vector<uint8_t>{1}, nullptr, 0, &error), IoResult::kClosed);
  EXPECT_FALSE(error.empty());
}

TEST(ChannelPair, UsingAClosedChannelIsClosedNotACrash) {
  auto [a, b] = connected_pair();
  a.close();
  Packet p;
  EXPECT_EQ(a.send(std::vector<uint8_t>{1}), IoResult::kClosed);
  EXPECT_EQ(a.receive(p), IoResult::kClosed);
  Channel never_opened;
  EXPECT_FALSE(never_opened.valid());
  EXPECT_EQ(never_opened.send(std::vector<uint8_t>{1}), IoResult::kClosed);
  EXPECT_EQ(never_opened.receive(p), IoResult::kClosed);
}

TEST(ChannelPair, ShutdownMakesThePeerSeeClosed) {
  auto [a, b] = connected_pair();
  a.shutdown();
  Packet p;
  EXPECT_EQ(b.receive(p), IoResult::kClosed);
}

TEST(ChannelPair, PacketOfExactlyMaxMessageSizeIsAccepted) {
  auto [a, b] = connected_pair();
  ASSERT_EQ(a.send(std::vector<uint8_t>(kMaxMessageSize, 0xab)), IoResult::kOk);
  Packet p;
  ASSERT_EQ(b.receive(p), IoResult::kOk);
  EXPECT_EQ(p.bytes.size(), kMaxMessageSize);
}

// Regression test for a bug since fixed, as it was: ipc/channel.cpp Channel::receive() sizes its
// buffer to kMaxMessageSize + 1 ("one spare byte reveals oversized packets", line 114) but only
// checks MSG_TRUNC (line 155). A packet of exactly kMaxMessageSize + 1 bytes fits the buffer, so no
// MSG_TRUNC is raised and it is returned as kOk, descriptors included. The missing check is
// `n > kMaxMessageSize`.
TEST(ChannelPair, PacketOneByteOverMaxMessageSizeIsRejected) {
  auto [a, b] = connected_pair();
  UniqueFd memfd = make_memfd("attached");
  const int baseline = open_fd_count();
  ASSERT_EQ(send_with_fds(a.fd(), std::vector<uint8_t>(kMaxMessageSize + 1, 0xcd), {memfd.get()}),
            static_cast<ssize_t>(kMaxMessageSize + 1));
  {
    Packet p;
    std::string error;
    EXPECT_EQ(b.receive(p, &error), IoResult::kError);
    EXPECT_TRUE(p.fds.empty()) << "the rejected packet's descriptor was handed out";
  }
  EXPECT_EQ(open_fd_count(), baseline) << "the attached descriptor leaked";
}

TEST(ChannelPair, PacketFarOverMaxMessageSizeIsRejectedWithoutLeakingDescriptors) {
  auto [a, b] = connected_pair();
  UniqueFd memfd = make_memfd("attached");
  const int baseline = open_fd_count();
  for (size_t size : {kMaxMessageSize + 2, kMaxMessageSize + 100, size_t{64} * 1024}) {
    ASSERT_EQ(send_with_fds(a.fd(), std::vector<uint8_t>(size, 0xcd), {memfd.get()}),
              static_cast<ssize_t>(size));
    Packet p;
    std::string error;
    EXPECT_EQ(b.receive(p, &error), IoResult::kError) << size << " bytes";
    EXPECT_NE(error.find("oversized"), std::string::npos) << error;
    EXPECT_TRUE(p.fds.empty());
    p = Packet{};
    EXPECT_EQ(open_fd_count(), baseline) << "descriptor leaked with a " << size << "-byte packet";
  }
  // The channel still works after refusing them.
  ASSERT_EQ(a.send(std::vector<uint8_t>{5}), IoResult::kOk);
  Packet p;
  ASSERT_EQ(b.receive(p), IoResult::kOk);
  EXPECT_EQ(p.bytes, std::vector<uint8_t>{5});
}

TEST(ChannelPair, TooManyDescriptorsAreRejectedWithoutLeak) {
  auto [a, b] = connected_pair();
  std::vector<UniqueFd> owned;
  std::vector<int> raw;
  for (size_t i = 0; i < kMaxFdsPerMessage + 2; ++i) {
    owned.push_back(make_memfd("m"));
    raw.push_back(owned.back().get());
  }
  const std::vector<uint8_t> bytes = encode(Message{Eos{}});
  const int baseline = open_fd_count();
  ASSERT_EQ(send_with_fds(a.fd(), bytes, raw), static_cast<ssize_t>(bytes.size()))
      << std::strerror(errno);
  {
    Packet p;
    std::string error;
    EXPECT_EQ(b.receive(p, &error), IoResult::kError);
    EXPECT_NE(error.find("file descriptors"), std::string::npos) << error;
    EXPECT_TRUE(p.fds.empty());
  }
  EXPECT_EQ(open_fd_count(), baseline) << "received descriptors leaked";
}

TEST(ChannelPair, SendRefusesMoreThanMaxDescriptors) {
  auto [a, b] = connected_pair();
  std::vector<UniqueFd> owned;
  std::vector<int> raw;
  for (size_t i = 0; i < kMaxFdsPerMessage + 1; ++i) {
    owned.push_back(make_memfd("m"));
    raw.push_back(owned.back().get());
  }
  std::string error;
  EXPECT_EQ(a.send(encode(Message{Eos{}}), raw.data(), raw.size(), &error), IoResult::kError);
  EXPECT_FALSE(error.empty());
  Packet p;
  EXPECT_EQ(b.receive(p), IoResult::kWouldBlock) << "nothing may have been sent";
}

// Past the sender's RLIMIT_NOFILE of descriptors in flight (ETOOMANYREFS) the connection is fine:
// its receiver has not read yet. A producer that took it for a broken connection dropped a
// consumer that attached while others had not read their slots yet (issue 46).
TEST(ChannelPair, SendWithDescriptorsPastTheInFlightLimitWouldBlockUntilTheReaderReads) {
  auto [a, b] = connected_pair();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(30);
    // Exit codes: 0 as expected; 2 setup failed; 3 no would-block; 4 an error instead; 5 no send
    // after the reader read. The count is the user's: as root, another user's, which other tests
    // running meanwhile do not add to.
    if (::getuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(2);
    if (!limit_descriptors_in_flight(static_cast<rlim_t>(open_fd_count() + 24))) ::_exit(2);
    UniqueFd memfd = make_memfd("in-flight");
    const int fd = memfd.get();
    const std::vector<uint8_t> bytes = encode(Message{Eos{}});
    IoResult r = IoResult::kOk;
    for (int i = 0; i < 10000 && r == IoResult::kOk; ++i) r = a.send(bytes, &fd, 1);
    if (r == IoResult::kError) ::_exit(4);
    if (r != IoResult::kWouldBlock) ::_exit(3);
    // The reader takes what was sent (each received descriptor closed with its packet): the
    // same send goes through again. Other processes of this user count too: retried a while.
    Packet p;
    for (int tries = 0; tries < 5000; ++tries) {
      while (b.receive(p) == IoResult::kOk) p.fds.clear();
      if (a.send(bytes, &fd, 1) == IoResult::kOk) ::_exit(0);
      ::usleep(1000);
    }
    ::_exit(5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died";
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "2: could not drop capabilities or lower the limit; 3: no would-block; 4: an error "
         "instead of would-block; 5: no send once the reader read";
}

TEST(ChannelPair, SendOnFullSocketWouldBlockInsteadOfBlocking) {
  auto [a, b] = connected_pair();
  const std::vector<uint8_t> packet(4096, 0x5a);
  IoResult r = IoResult::kOk;
  int sent = 0;
  for (int i = 0; i < 100000 && r == IoResult::kOk; ++i) {
    r = a.send(packet);
    if (r == IoResult::kOk) ++sent;
  }
  ASSERT_EQ(r, IoResult::kWouldBlock) << "after " << sent << " packets";
  EXPECT_GT(sent, 0);

  // Once the reader drains the queue, the writer can send again.
  Packet p;
  int received = 0;
  while (b.receive(p) == IoResult::kOk) ++received;
  EXPECT_EQ(received, sent);
  EXPECT_EQ(a.send(packet), IoResult::kOk);
}

TEST(ChannelPair, PeerCredentialsAreThisProcess) {
  auto [a, b] = connected_pair();
  auto creds = b.peer_credentials();
  ASSERT_TRUE(creds.is_ok()) << creds.error().message;
  EXPECT_EQ(creds->pid, ::getpid());
  EXPECT_EQ(creds->uid, ::getuid());
  EXPECT_EQ(creds->gid, ::getgid());
}

TEST(ChannelPair, WaitReadableTimesOutWhenIdleAndReturnsForDataHangupOrWake) {
  auto [a, b] = connected_pair();
  EXPECT_FALSE(b.wait_readable(20));

  int wake[2];
  ASSERT_EQ(::pipe2(wake, O_CLOEXEC), 0);
  UniqueFd wake_read(wake[0]), wake_write(wake[1]);
  EXPECT_FALSE(b.wait_readable(20, wake_read.get()));
  ASSERT_EQ(::write(wake_write.get(), "w", 1), 1);
  EXPECT_TRUE(b.wait_readable(5000, wake_read.get()));

  ASSERT_EQ(a.send(std::vector<uint8_t>{1}), IoResult::kOk);
  EXPECT_TRUE(b.wait_readable(5000));
  Packet p;
  ASSERT_EQ(b.receive(p), IoResult::kOk);

  a.close();
  EXPECT_TRUE(b.wait_readable(5000)) << "a hang-up must end the wait";
}

// ---- Listener --------------------------------------------------------------------------------

TEST(Listener, BindCreatesSocketFileWithMode0600) {
  TempDir dir;
  const std::string path = dir.file("p.sock");
  auto l = Listener::bind(path, 0600);
  ASSERT_TRUE(l.is_ok()) << l.error().message;
  EXPECT_EQ(l->path(), path);
  EXPECT_GE(l->fd(), 0);
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST(Listener, BindAppliesTheRequestedMode) {
  TempDir dir;
  for (unsigned mode : {0660u, 0666u, 0700u}) {
    const std::string path = dir.file("mode" + std::to_string(mode) + ".sock");
    auto l = Listener::bind(path, mode);
    ASSERT_TRUE(l.is_ok()) << l.error().message;
    struct stat st {};
    ASSERT_EQ(::lstat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, mode);
  }
}

TEST(Listener, ConnectThenAcceptGivesAConnectedPair) {
  TempDir dir;
  const std::string path = dir.file("p.sock");
  auto l = Listener::bind(path, 0600);
  ASSERT_TRUE(l.is_ok()) << l.error().message;

  Channel server;
  EXPECT_EQ(l->accept(server), IoResult::kWouldBlock) << "nobody connected yet";

  auto client = Channel::connect(path);
  ASSERT_TRUE(client.is_ok()) << client.error().message;
  ASSERT_TRUE(eventually([&] { return l->accept(server) == IoResult::kOk; }));
  ASSERT_TRUE(server.valid());

  ASSERT_EQ(client->send(Message{Hello{}}), IoResult::kOk);
  Packet p;
  ASSERT_EQ(cipc_test::receive_within(server, p), IoResult::kOk);
  EXPECT_EQ(p.bytes, encode(Message{Hello{}}));
  ASSERT_EQ(server.send(Message{Eos{}}), IoResult::kOk);
  ASSERT_EQ(cipc_test::receive_within(*client, p), IoResult::kOk);
  EXPECT_EQ(p.bytes, encode(Message{Eos{}}));

  auto creds = server.peer_credentials();
  ASSERT_TRUE(creds.is_ok());
  EXPECT_EQ(creds->pid, ::getpid());
  EXPECT_EQ(creds->uid, ::getuid());

  // The client side is non-blocking too.
  EXPECT_EQ(client->receive(p), IoResult::kWouldBlock);
}

TEST(Listener, LiveListenerAtPathIsAddressInUseAndKeepsServing) {
  TempDir dir;
  const std::string path = dir.file("p.sock");
  auto first = Listener::bind(path, 0600);
  ASSERT_TRUE(first.is_ok()) << first.error().message;
  const ino_t inode = inode_of(path);

  auto second = Listener::bind(path, 0600);
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.error().code, ErrorCode::kAddressInUse);
  EXPECT_NE(second.error().message.find(path), std::string::npos) << second.error().message;

  // Not hijacked: the same file still belongs to the first listener, which still accepts.
  EXPECT_EQ(inode_of(path), inode);
  auto client = Channel::connect(path);
  ASSERT_TRUE(client.is_ok()) << client.error().message;
  ASSERT_EQ(client->send(std::vector<uint8_t>{9}), IoResult::kOk);
  // Accept until we find our client (the second bind's probe connection may come first).
  bool got_it = eventually([&] {
    Channel server;
    if (first->accept(server) != IoResult::kOk) return false;
    Packet p;
    return cipc_test::receive_within(server, p, 100) == IoResult::kOk &&
           p.bytes == std::vector<uint8_t>{9};
  });
  EXPECT_TRUE(got_it);
}

TEST(Listener, StaleSocketFileIsReplaced) {
  TempDir dir;
  const std::string path = dir.file("p.sock");
  make_stale_socket(path);
  ASSERT_FALSE(Channel::connect(path).is_ok()) << "precondition: nobody listens";

  auto l = Listener::bind(path, 0600);
  ASSERT_TRUE(l.is_ok()) << l.error().message;
  auto client = Channel::connect(path);
  ASSERT_TRUE(client.is_ok()) << client.error().message;
  Channel server;
  EXPECT_TRUE(eventually([&] { return l->accept(server) == IoResult::kOk; }));
}

// Issue 24, item 3: two producers started together on a stale socket file could both come up,
// one of them serving an unlinked socket. Taking the path is one atomic step now: whatever the
// interleaving, exactly one wins, the other is told the path is in use, and the socket at the
// path is the winner's, listening.
TEST(Listener, TwoStartedTogetherOnAStaleSocketNeverBothComeUp) {
  TempDir dir;
  constexpr int kRounds = 500;
  int both_came_up = 0, neither = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string path = dir.file("race" + std::to_string(round) + ".sock");
    make_stale_socket(path);
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    Result<Listener> results[2] = {Error{ErrorCode::kInvalidArgument, "not run"},
                                   Error{ErrorCode::kInvalidArgument, "not run"}};
    auto start = [&](int i) {
      ready.fetch_add(1);
      while (!go.load()) {
      }
      results[i] = Listener::bind(path, 0600);
    };
    std::thread a(start, 0), b(start, 1);
    while (ready.load() < 2) {
    }
    go = true;
    a.join();
    b.join();
    const int winners = int(results[0].is_ok()) + int(results[1].is_ok());
    both_came_up += winners == 2;
    neither += winners == 0;
    if (winners != 1) continue;
    Listener& winner = results[0].is_ok() ? *results[0] : *results[1];
    const Error& loser = results[0].is_ok() ? results[1].error() : results[0].error();
    EXPECT_EQ(loser.code, ErrorCode::kAddressInUse) << "round " << round << ": " << loser.message;
    auto client = Channel::connect(path);
    ASSERT_TRUE(client.is_ok()) << "round " << round << ": " << client.error().message;
    Channel server;
    EXPECT_TRUE(eventually([&] { return winner.accept(server) == IoResult::kOk; }))
        << "round " << round << ": the socket at the path is not the winner's";
  }
  EXPECT_EQ(both_came_up, 0) << "rounds in which both producers came up, of " << kRounds;
  EXPECT_EQ(neither, 0) << "rounds in which neither came up, of " << kRounds;
}

TEST(Listener, BindLeavesOnlyTheSocketAndItsLockAndCloseOnlyTheLock) {
  TempDir dir;
  const std::string path = dir.file("p.sock");
  auto names = [&] {
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
      found.push_back(entry.path().filename().string());
    std::sort(found.begin(), found.end());
    return found;
  };
  {
    auto l = Listener::bind(path, 0600);
    ASSERT_TRUE(l.is_ok()) << l.error().message;
    EXPECT_EQ(names(), (std::vector<std::string>{"p.sock", "p.sock.lock"}));
  }
  // The lock file stays: removing it would let two producers hold locks on different files.
  EXPECT_EQ(names(), (std::vector<std::string>{"p.sock.lock"}));
  auto again = Listener::bind(path, 0600);
  EXPECT_TRUE(again.is_ok()) << again.error().message;
}

TEST(Listener, LockFileNameTakenBySymlinkOrDirectoryIsRefusedNotFollowed) {
  TempDir dir;
  const std::string path = dir.file("p.sock");
  const std::string elsewhere = dir.file("elsewhere");
  ASSERT_EQ(::symlink(elsewhere.c_str(), cipc::SocketPathLock::lock_path(path).c_str()), 0);
  auto l = Listener::bind(path, 0600);
  ASSERT_FALSE(l.is_ok());
  EXPECT_EQ(l.error().code, ErrorCode::kNotASocket);
  EXPECT_NE(l.error().message.find("symbolic link"), std::string::npos) << l.error().message;
  EXPECT_FALSE(path_exists(elsewhere)) << "the link was followed";
  EXPECT_FALSE(path_exists(path));

  const std::string other = dir.file("q.sock");
  ASSERT_EQ(::mkdir(cipc::SocketPathLock::lock_path(other).c_str(), 0700), 0);
  auto d = Listener::bind(other, 0600);
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.error().message.find(cipc::SocketPathLock::lock_path(other)), std::string::npos)
      << d.error().message;
  EXPECT_FALSE(path_exists(other));
}

TEST(Listener, RegularFileAtPathIsNotASocketAndIsLeftUntouched) {
  TempDir dir;
  const std::string path = dir.file("p.sock");
  {
    UniqueFd f(::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    ASSERT_TRUE(f.valid());
    ASSERT_EQ(::write(f.get(), "precious", 8), 8);
  }
  const ino_t inode = inode_of(path);

  auto l = Listener::bind(path, 0600);
  ASSERT_FALSE(l.is_ok());
  EXPECT_EQ(l.error().code, ErrorCode::kNotASocket);
  EXPECT_NE(l.error().message.find(path), std::string::npos) << l.error().message;

  EXPECT_EQ(inode_of(path), inode);
  UniqueFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(f.valid());
  EXPECT_EQ(read_all_at(f.get(), 100), "precious");
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
}

TEST(Listener, SymlinkAtPathIsNotFollowedNorReplaced) {
  TempDir dir;
  const std::string target = dir.file("target.sock");
  const std::string path = dir.file("p.sock");
  make_stale_socket(target);
  ASSERT_EQ(::symlink(target.c_str(), path.c_str()), 0);

  auto l = Listener::bind(path, 0600);
  ASSERT_FALSE(l.is_ok());
  EXPECT_EQ(l.error().code, ErrorCode::kNotASocket);
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  ASSERT_EQ(::lstat(target.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
}

TEST(Listener, DirectoryAtPathIsNotASocket) {
  TempDir dir;
  const std::string path = dir.file("p.sock");
  ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
  auto l = Listener::bind(path, 0600);
  ASSERT_FALSE(l.is_ok());
  EXPECT_EQ(l.error().code, ErrorCode::kNotASocket);
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

TEST(Listener, PathTooLongOrEmptyIsInvalidArgument) {
  TempDir dir;
  const std::string longest_ok =
      dir.path() + "/" + std::string(sizeof(sockaddr_un::sun_path) - 2 - dir.path().size(), 'a');
  ASSERT_EQ(longest_ok.size(), sizeof(sockaddr_un::sun_path) - 1);
  auto ok = Listener::bind(longest_ok, 0600);
  EXPECT_TRUE(ok.is_ok()) << ok.error().message;

  const std::string too_long = longest_ok + "b";
  auto l = Listener::bind(too_long, 0600);
  ASSERT_FALSE(l.is_ok());
  EXPECT_EQ(l.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(path_exists(too_long));

  auto empty = Listener::bind("", 0600);
  ASSERT_FALSE(empty.is_ok());
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidArgument);

  auto c = Channel::connect(too_long);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
}

TEST(Listener, PathInMissingDirectoryIsAnErrorNamingThePath) {
  TempDir dir;
  const std::string path = dir.file("no/such/dir/p.sock");
  auto l = Listener::bind(path, 0600);
  ASSERT_FALSE(l.is_ok());
  EXPECT_NE(l.error().message.find(path), std::string::npos) << l.error().message;
  EXPECT_FALSE(path_exists(path));
}

TEST(Listener, DestructorRemovesTheSocketFile) {
  TempDir dir;
  const std::string path = dir.file("p.sock");
  {
    auto l = Listener::bind(path, 0600);
    ASSERT_TRUE(l.is_ok()) << l.error().message;
    EXPECT_TRUE(path_exists(path));
  }
  EXPECT_FALSE(path_exists(path));
}

TEST(Listener, CloseRemovesTheSocketFileAndStopsServing) {
  TempDir dir;
  const std::string path = dir.file("p.sock");
  auto l = Listener::bind(path, 0600);
  ASSERT_TRUE(l.is_ok()) << l.error().message;
  l->close();
  EXPECT_FALSE(path_exists(path));
  auto c = Channel::connect(path);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.error().code, ErrorCode::kConnectFailed);
}

TEST(Listener, DestructorLeavesAFileThatReplacedOurSocket) {
  TempDir dir;
  const std::string path = dir.file("p.sock");
  {
    auto l = Listener::bind(path, 0600);
    ASSERT_TRUE(l.is_ok()) << l.error().message;
    // Someone else removes our socket and puts their own file there.
    ASSERT_EQ(::unlink(path.c_str()), 0);
    UniqueFd f(::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600));
    ASSERT_TRUE(f.valid());
    ASSERT_EQ(::write(f.get(), "theirs", 6), 6);
  }
  ASSERT_TRUE(path_exists(path)) << "the successor's file was removed";
  UniqueFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  EXPECT_EQ(read_all_at(f.get(), 10), "theirs");
}

TEST(Listener, DestructorLeavesASuccessorsSocket) {
  TempDir dir;
  const std::string path = dir.file("p.sock");
  auto old_one = Listener::bind(path, 0600);
  ASSERT_TRUE(old_one.is_ok()) << old_one.error().message;
  ASSERT_EQ(::unlink(path.c_str()), 0);
  // While it runs, the old producer still owns the path through its lock...
  auto refused = Listener::bind(path, 0600);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kAddressInUse) << refused.error().message;
  // ...unless the lock file went too (a /tmp cleaner removes both).
  ASSERT_EQ(::unlink(cipc::SocketPathLock::lock_path(path).c_str()), 0);
  auto new_one = Listener::bind(path, 0600);
  ASSERT_TRUE(new_one.is_ok()) << new_one.error().message;
  { Listener gone = std::move(old_one.value()); }
  ASSERT_TRUE(path_exists(path));
  EXPECT_TRUE(Channel::connect(path).is_ok()) << "the successor must still be reachable";
}

TEST(Listener, MoveTransfersOwnershipOfTheFile) {
  TempDir dir;
  const std::string path = dir.file("p.sock");
  auto l = Listener::bind(path, 0600);
  ASSERT_TRUE(l.is_ok()) << l.error().message;
  Listener moved = std::move(l.value());
  { Listener moved_from = std::move(l.value()); }  // the emptied original: owns nothing
  EXPECT_TRUE(path_exists(path));
  EXPECT_EQ(moved.path(), path);
  EXPECT_TRUE(Channel::connect(path).is_ok());
  moved = Listener();
  EXPECT_FALSE(path_exists(path));
}

// ---- Channel::connect ------------------------------------------------------------------------

TEST(ChannelConnect, MissingPathIsConnectFailed) {
  TempDir dir;
  auto c = Channel::connect(dir.file("nobody.sock"));
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.error().code, ErrorCode::kConnectFailed);
  EXPECT_NE(c.error().message.find("nobody.sock"), std::string::npos) << c.error().message;
}

TEST(ChannelConnect, StaleSocketIsConnectFailed) {
  TempDir dir;
  const std::string path = dir.file("stale.sock");
  make_stale_socket(path);
  auto c = Channel::connect(path);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.error().code, ErrorCode::kConnectFailed);
}

}  // namespace
}  // namespace cipc

namespace {

// Issue 17, defect 9: a consumer pointed at a regular file or a directory was told "Connection
// refused"; it must hear that the path is not a socket.
TEST(Connect, RegularFileOrDirectoryAtPathIsNotASocket) {
  cipc_test::TempDir dir;
  const std::string file = dir.file("regular");
  { std::ofstream(file) << "x"; }
  auto r = cipc::Channel::connect(file);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().code, cipc::ErrorCode::kNotASocket) << r.error().message;
  EXPECT_NE(r.error().message.find("is not a socket but a regular file"), std::string::npos)
      << r.error().message;
  const std::string sub = dir.file("subdir");
  ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
  r = cipc::Channel::connect(sub);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().code, cipc::ErrorCode::kNotASocket) << r.error().message;
  ::rmdir(sub.c_str());
  ::unlink(file.c_str());
}

// Issue 17, defect 4: the fallback socket directory /tmp/cudaipc-<uid> must be a private
// directory of ours; one made by someone else (or opened to others) is refused, never used.
TEST(Connect, PrivateSocketDirectoryMustBeOursAndClosed) {
  const std::string dir = "/tmp/cudaipc-" + std::to_string(::getuid());
  const std::string path = dir + "/check.sock";
  struct stat st {};
  const bool existed = ::lstat(dir.c_str(), &st) == 0;
  ASSERT_TRUE(cipc::check_private_socket_dir(path, /*create=*/true).is_ok());
  ASSERT_EQ(::lstat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  const cipc::Status open_dir = cipc::check_private_socket_dir(path, /*create=*/false);
  EXPECT_FALSE(open_dir.is_ok());
  EXPECT_NE(open_dir.message().find("squatting"), std::string::npos) << open_dir.message();
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  // Paths elsewhere are the user's own business.
  EXPECT_TRUE(cipc::check_private_socket_dir("/tmp/elsewhere.sock", false).is_ok());
  if (!existed) ::rmdir(dir.c_str());
}

// Issue 24, defect 7: a link or a file where the private socket directory belongs is named as
// such, not as "a directory whose mode lets others in". Runs in a child with a /tmp of its own
// (a private mount namespace), so the real /tmp/cudaipc-<uid> is never touched.
TEST(Connect, SquattedSocketDirectoryIsDescribedAsWhatItIs) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) ||
        ::mount("tmpfs", "/tmp", "tmpfs", 0, "mode=1777") != 0)
      ::_exit(77);
    const std::string dir = "/tmp/cudaipc-" + std::to_string(::getuid());
    const std::string path = dir + "/check.sock";
    auto says = [&](const char* wanted) {
      const cipc::Status s = cipc::check_private_socket_dir(path, /*create=*/false);
      const std::string m = s.message();
      if (s.is_ok() || m.find(wanted) == std::string::npos ||
          m.find("squatting") == std::string::npos)
        return false;
      return std::strcmp(wanted, "lets other users in") == 0 ||
             m.find("lets other") == std::string::npos;
    };
    if (::symlink("/tmp", dir.c_str()) != 0 || !says("symbolic link")) ::_exit(1);
    ::unlink(dir.c_str());
    const int fd = ::open(dir.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0 || !says("regular file")) ::_exit(2);
    ::close(fd);
    ::unlink(dir.c_str());
    if (::mkdir(dir.c_str(), 0700) != 0 || ::chmod(dir.c_str(), 0750) != 0 ||
        !says("lets other users in"))
      ::_exit(3);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "no private mount namespace here (needs root)";
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: a symlink, 2: a regular file, 3: an open directory was described wrongly";
}

}  // namespace
