// SPDX-License-Identifier: LGPL-2.1-or-later
// ReconnectingConsumer (ipc/reconnectingconsumer.h): finding a producer within connect-timeout,
// reattaching with reconnect, and the one event that says why a stream ended - with real producers
// and with a producer impersonator that breaks the protocol, over real sockets and host memory.

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "host_memory.h"
#include "process_identity.h"
#include "producer.h"
#include "reconnectingconsumer.h"
#include "test_util.h"

namespace cipc {
namespace {

using cipc_test::TempDir;
using Kind = ClientEvent::Kind;
using Failure = ClientEvent::Failure;

constexpr const char* kCapsString = "video/x-raw, format=GRAY8, width=64, height=64";
constexpr size_t kSlotBytes = 4096;

class NoHold final : public FrameHold {
 public:
  void retire() override {}
};

class Client : public ::testing::Test {
 protected:
  ClientConfig config(bool reconnect, uint32_t connect_timeout_ms = 2000) const {
    ClientConfig c;
    c.consumer.socket_path = path_;
    c.reconnect = reconnect;
    c.reconnect_interval_ms = 10;
    c.connect_timeout_ms = connect_timeout_ms;
    return c;
  }
  std::unique_ptr<ReconnectingConsumer> client(const ClientConfig& c, Waker* waker = nullptr) {
    return std::make_unique<ReconnectingConsumer>(
        c,
        [](const Welcome&) -> Result<std::shared_ptr<MemoryBackend>> {
          return std::shared_ptr<MemoryBackend>(std::make_shared<cipc_slots::HostMemoryBackend>());
        },
        waker);
  }
  std::unique_ptr<Producer> start_producer() {
    ProducerConfig c;
    c.socket_path = path_;
    auto p = Producer::start(c, nullptr);
    EXPECT_TRUE(p.is_ok()) << p.error().message;
    return p.is_ok() ? std::move(p.value()) : nullptr;
  }
  // Announces caps and publishes one frame in a new slot of `producer`.
  void publish_one(Producer& producer) {
    auto slot = backend_.allocate(kSlotBytes);
    ASSERT_TRUE(slot.is_ok());
    slots_.push_back(std::move(slot.value()));
    producer.set_caps(1, kCapsString, kSlotBytes);
    Frame f;
    f.size = kSlotBytes;
    producer.publish(SlotRef{1, static_cast<uint32_t>(slots_.size() - 1), slots_.back().get()}, f,
                     std::make_shared<NoHold>());
  }

  TempDir dir_;
  const std::string path_ = dir_.file("producer.sock");
  cipc_slots::HostMemoryBackend backend_;
  std::vector<std::unique_ptr<SlotMemory>> slots_;
};

TEST_F(Client, NoProducerWithinConnectTimeoutIsAFailureNamingIt) {
  auto c = client(config(false, 50));
  const ClientEvent ev = c->next();
  ASSERT_EQ(ev.kind, Kind::kFailed);
  EXPECT_EQ(ev.failure, Failure::kNoProducer);
  EXPECT_EQ(ev.error.code, ErrorCode::kConnectFailed) << ev.error.message;
  EXPECT_FALSE(ev.after_loss);
  EXPECT_EQ(c->connects(), 0u);
}

TEST_F(Client, AttachesToAProducerThatAppearsWithinConnectTimeout) {
  std::unique_ptr<Producer> producer;
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    producer = start_producer();
  });
  auto c = client(config(false, 5000));
  const ClientEvent ev = c->next();
  later.join();
  ASSERT_EQ(ev.kind, Kind::kAttached) << ev.error.message;
  EXPECT_TRUE(ev.new_instance);
  ASSERT_TRUE(c->consumer());
  EXPECT_EQ(c->consumer()->instance_id(), producer->instance_id());
  EXPECT_EQ(c->connects(), 1u);
}

TEST_F(Client, ProducerGoneWithoutReconnectEndsTheStream) {
  auto producer = start_producer();
  auto c = client(config(false));
  ASSERT_EQ(c->next().kind, Kind::kAttached);
  producer.reset();  // says BYE
  const ClientEvent ev = c->next();
  EXPECT_EQ(ev.kind, Kind::kEnded) << ev.error.message;
  EXPECT_FALSE(c->attached());
}

TEST_F(Client, ReconnectReattachesToARestartedProducerAndCountsImportsOfBoth) {
  auto producer = start_producer();
  auto c = client(config(true));
  ASSERT_EQ(c->next().kind, Kind::kAttached);
  publish_one(*producer);
  ASSERT_EQ(c->next().kind, Kind::kCaps);
  ClientEvent frame = c->next();
  ASSERT_EQ(frame.kind, Kind::kFrame);
  frame = ClientEvent();  // releases the frame
  EXPECT_EQ(c->slots_imported(), 1u);
  const uint64_t first = c->consumer()->instance_id();

  producer.reset();
  ClientEvent ev = c->next();
  EXPECT_EQ(ev.kind, Kind::kLost) << ev.error.message;
  producer = start_producer();
  ev = c->next();
  ASSERT_EQ(ev.kind, Kind::kAttached) << ev.error.message;
  EXPECT_TRUE(ev.new_instance);
  EXPECT_NE(c->consumer()->instance_id(), first);
  EXPECT_EQ(c->connects(), 2u);

  slots_.clear();
  publish_one(*producer);
  ASSERT_EQ(c->next().kind, Kind::kCaps);
  ASSERT_EQ(c->next().kind, Kind::kFrame);
  EXPECT_EQ(c->slots_imported(), 2u) << "imports of the first connection are kept in the count";
}

TEST_F(Client, ReconnectWaitsPastConnectTimeout) {
  auto c = client(config(true, 20));
  std::unique_ptr<Producer> producer;
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    producer = start_producer();
  });
  const ClientEvent ev = c->next();
  later.join();
  EXPECT_EQ(ev.kind, Kind::kAttached) << "reconnect=true waits for a producer forever";
}

// Each failed attempt that will be retried is reported, numbered from 1 for each wait, with
// why it failed: an application logs what it waits for (issue 43, item 10). The attempt that
// ends the wait (attached, or connect-timeout) is not one.
TEST_F(Client, EachRetriedAttemptIsReportedWithItsNumberAndCause) {
  ClientConfig c = config(true, 20);
  std::vector<uint64_t> numbers;
  std::vector<bool> after_loss;
  std::string first_error;
  c.on_retry = [&](const ConnectAttempt& a) {
    numbers.push_back(a.number);
    after_loss.push_back(a.after_loss);
    if (first_error.empty() && a.error) first_error = a.error->message;
  };
  auto cl = client(c);
  std::unique_ptr<Producer> producer;
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    producer = start_producer();
  });
  ASSERT_EQ(cl->next().kind, Kind::kAttached);
  later.join();
  ASSERT_GE(numbers.size(), 2u);
  for (size_t i = 0; i < numbers.size(); ++i) EXPECT_EQ(numbers[i], i + 1);
  EXPECT_FALSE(after_loss.front());
  EXPECT_NE(first_error.find(path_), std::string::npos) << first_error;

  // The producer goes: the next wait counts from 1 again, after a loss.
  numbers.clear();
  after_loss.clear();
  producer.reset();
  ClientEvent ev = cl->next();
  while (ev.kind == Kind::kCaps || ev.kind == Kind::kFrame) ev = cl->next();
  ASSERT_EQ(ev.kind, Kind::kLost) << ev.error.message;
  std::thread again([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    producer = start_producer();
  });
  ASSERT_EQ(cl->next().kind, Kind::kAttached);
  again.join();
  ASSERT_GE(numbers.size(), 1u);
  EXPECT_EQ(numbers.front(), 1u);
  EXPECT_TRUE(after_loss.front());
}

TEST_F(Client, WakerInterruptsTheWaitForAProducer) {
  Waker waker;
  ASSERT_TRUE(waker.valid());
  auto c = client(config(true), &waker);
  std::thread wake([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    waker.wake();
  });
  const ClientEvent ev = c->next();
  wake.join();
  EXPECT_EQ(ev.kind, Kind::kInterrupted);
}

TEST_F(Client, MemoryKindMismatchIsARefusalNotARetry) {
  auto producer = start_producer();  // host memory
  ClientConfig cfg = config(true);
  cfg.consumer.memory_kind = MemoryKind::kCuda;
  auto c = client(cfg);
  const ClientEvent ev = c->next();
  ASSERT_EQ(ev.kind, Kind::kFailed);
  EXPECT_EQ(ev.failure, Failure::kRefused);
  EXPECT_NE(ev.error.message.find("memory"), std::string::npos) << ev.error.message;
}

// Runs `body` in a child made by fork() and returns its exit status (or -1 if it did not exit).
int in_forked_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::alarm(20);
    ::_exit(body());
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

bool readable_now(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

// Issue 43, item 5: the eventfd is shared after fork(). A child's wake() must not end the
// parent's waits, nor leave the eventfd readable while the parent's flag says it is clear (the
// parent's poll() would return at once for ever: a spin).
TEST(WakerFork, WakeInAForkedChildLeavesTheParentsWakerAlone) {
  Waker waker;
  ASSERT_TRUE(waker.valid());
  EXPECT_EQ(in_forked_child([&] {
              waker.wake();
              return 0;
            }),
            0);
  EXPECT_FALSE(readable_now(waker.fd())) << "the child's wake() reached the parent's eventfd";
  EXPECT_FALSE(waker.is_set());
  waker.wake();  // the parent's own wake still works
  EXPECT_TRUE(readable_now(waker.fd()));
  waker.clear();
  EXPECT_FALSE(readable_now(waker.fd()));
}

// The process id behind every "is this the process that connected?" is cached, and a child's own
// however it was made: by fork() (its handlers run) and by _Fork(), which skips them, as a
// runtime making processes on its own may. A stale id there would let the child release the
// parent's frames.
TEST(ProcessIdentity, IsEachChildsOwnWithOrWithoutForkHandlers) {
  const pid_t parent = cipc::this_process_id();
  EXPECT_EQ(parent, ::getpid());
  EXPECT_EQ(in_forked_child([&] {
              const pid_t mine = static_cast<pid_t>(::syscall(SYS_getpid));
              return cipc::this_process_id() == mine && mine != parent ? 0 : 1;
            }),
            0);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  const pid_t child = ::_Fork();
  if (child == 0) {
    const pid_t mine = static_cast<pid_t>(::syscall(SYS_getpid));
    ::_exit(cipc::this_process_id() == mine && mine != parent ? 0 : 1);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "a child made without fork()'s handlers took the parent's id";
  EXPECT_EQ(cipc::this_process_id(), parent);
#else
  GTEST_SKIP() << "no _Fork() in this C library";
#endif
}

// Issue 43, item 5: a child made by fork() while the parent holds a frame inherits the client,
// its connection and the claim. Reading there, dropping the claim and disconnecting say nothing to
// the producer: it still counts the parent as attached and holding the frame.
TEST_F(Client, ForkedChildSaysNothingOnTheParentsConnection) {
  auto producer = start_producer();
  auto c = client(config(false));
  ASSERT_EQ(c->next().kind, Kind::kAttached);
  publish_one(*producer);
  ASSERT_EQ(c->next().kind, Kind::kCaps);
  ClientEvent frame = c->next();
  ASSERT_EQ(frame.kind, Kind::kFrame);
  ASSERT_TRUE(cipc_test::eventually([&] { return producer->stats().claims_outstanding == 1; }));

  std::string said;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const int status = in_forked_child([&] {
    ::close(pipe_fds[0]);
    const ClientEvent ev = c->next(100);  // must not read the parent's messages
    said = std::to_string(static_cast<int>(ev.kind)) + " " + ev.error.message;
    ssize_t n = ::write(pipe_fds[1], said.data(), said.size());
    (void)n;
    frame = ClientEvent();  // drops the inherited claim
    c->disconnect();
    c.reset();
    return 0;
  });
  ::close(pipe_fds[1]);
  char buf[512];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buf, sizeof(buf))) > 0) said.append(buf, size_t(n));
  ::close(pipe_fds[0]);
  ASSERT_EQ(status, 0);
  EXPECT_EQ(said.rfind(std::to_string(static_cast<int>(Kind::kFailed)) + " ", 0), 0u) << said;
  EXPECT_NE(said.find("fork()"), std::string::npos) << said;

  // A BYE from the child would have the producer close the connection, which the parent would
  // see here as the end of the stream.
  const ClientEvent after = c->next(300);
  EXPECT_EQ(after.kind, Kind::kTimeout) << after.error.message;
  EXPECT_TRUE(c->attached());
  EXPECT_EQ(producer->stats().claims_outstanding, 1u) << "the child released the parent's frame";
  frame = ClientEvent();  // the parent's own RELEASE goes through
  EXPECT_TRUE(cipc_test::eventually([&] { return producer->stats().claims_outstanding == 0; }));
  const ProducerStats s = producer->stats();
  EXPECT_EQ(s.releases, 1u);
  EXPECT_EQ(s.consumers, 1u) << "the child's exit disconnected the parent";
}

// A producer that completes the handshake, then sends something that is not a message.
void misbehaving_producer(const std::string& path, std::atomic<bool>& done) {
  auto listener = Listener::bind(path, 0600);
  ASSERT_TRUE(listener.is_ok()) << listener.error().message;
  Channel channel;
  ASSERT_TRUE(cipc_test::eventually([&] { return listener->accept(channel) == IoResult::kOk; }));
  Message hello;
  ASSERT_TRUE(cipc_test::receive_message(channel, &hello));
  Welcome w;
  w.instance_id = 0x77;
  w.memory_kind = MemoryKind::kHost;
  ASSERT_EQ(channel.send(Message{w}), IoResult::kOk);
  ASSERT_EQ(channel.send(std::vector<uint8_t>{1, 2, 3, 4, 5}), IoResult::kOk);
  cipc_test::eventually([&] { return done.load(); });
}

TEST_F(Client, ProducerBreakingTheProtocolFailsTheStreamWithoutReconnect) {
  std::atomic<bool> done{false};
  std::thread fake([&] { misbehaving_producer(path_, done); });
  auto c = client(config(false, 5000));
  ClientEvent ev = c->next();
  ASSERT_EQ(ev.kind, Kind::kAttached) << ev.error.message;
  ev = c->next();
  done = true;
  fake.join();
  ASSERT_EQ(ev.kind, Kind::kFailed);
  EXPECT_EQ(ev.failure, Failure::kMisbehaved);
  EXPECT_EQ(ev.error.code, ErrorCode::kProtocol);
}

TEST_F(Client, ProducerBreakingTheProtocolIsALossWithReconnect) {
  std::atomic<bool> done{false};
  std::thread fake([&] { misbehaving_producer(path_, done); });
  auto c = client(config(true));
  ASSERT_EQ(c->next().kind, Kind::kAttached);
  const ClientEvent ev = c->next();
  done = true;
  fake.join();
  EXPECT_EQ(ev.kind, Kind::kLost) << ev.error.message;
  EXPECT_EQ(ev.error.code, ErrorCode::kProtocol);
}

}  // namespace
}  // namespace cipc
