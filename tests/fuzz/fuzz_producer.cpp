// SPDX-License-Identifier: LGPL-2.1-or-later
// libFuzzer target: the producer's state machine (ipc/producer.h) against hostile consumers.
//
// Each input starts a real Producer on a Unix socket (host memory, a few slots, short release
// and hello timeouts) and runs a fuzzer-chosen sequence of operations (fuzz_ops.h): raw
// consumer connections say HELLO or not, send messages of every type with input-chosen fields,
// raw datagrams and descriptors of every kind, release or fence frames they did or did not get,
// hang up or stall; meanwhile the streaming side publishes frames, changes caps and sends EOS.
//
// After the sequence every connection is closed and the target requires, within a bounded
// time, that the producer has no consumer and no outstanding claim left; then the producer is
// destroyed and the target requires that every frame hold it was given has been destroyed and
// that this process has exactly as many open descriptors as before the input. Crashes, hangs
// (libFuzzer -timeout), sanitizer reports and broken invariants all count as failures.
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "channel.h"
#include "fuzz_messages.h"
#include "fuzz_ops.h"
#include "fuzz_util.h"
#include "host_memory.h"
#include "memorybackend.h"
#include "producer.h"
#include "protocol.h"
#include "waker.h"

using cipc_fuzz::check;
using cipc_fuzz::Input;
using cipc_fuzz::ProducerOp;

namespace {

constexpr size_t kSlotBytes = 4096;
constexpr uint32_t kSlotsPerGeneration = 4;
constexpr size_t kMaxClients = 4;
constexpr int kMaxOps = 64;
constexpr int kStallBudgetMs = 12;  // per input: enough to pass the short timeouts, runs stay short
constexpr const char* kCaps = "video/x-raw, format=GRAY8, width=64, height=64";

struct HoldCounters {
  std::atomic<uint64_t> created{0};
  std::atomic<uint64_t> destroyed{0};
  std::atomic<uint64_t> retired{0};
};

// The sink's per-claim buffer reference: keeps the slot's memory alive and counts its life.
class CountingHold final : public cipc::FrameHold {
 public:
  CountingHold(std::shared_ptr<cipc::SlotMemory> memory, HoldCounters& counters)
      : memory_(std::move(memory)), counters_(counters) {
    ++counters_.created;
  }
  ~CountingHold() override { ++counters_.destroyed; }
  void retire() override { ++counters_.retired; }

 private:
  std::shared_ptr<cipc::SlotMemory> memory_;
  HoldCounters& counters_;
};

// Every drop must come with a reason for the logs.
class ReasonObserver final : public cipc::ProducerObserver {
 public:
  void on_consumer_detached(uint64_t, const std::string& reason, bool) override {
    check(!reason.empty(), "a consumer was dropped without a reason");
  }
};

struct Client {
  cipc::Channel channel;
  std::vector<cipc::Frame> frames;  // received, not yet released by us
  std::vector<cipc::Slot> slots;    // SLOT messages received
};

struct Run {
  std::unique_ptr<cipc::Producer> producer;
  cipc_slots::HostMemoryBackend backend;
  std::vector<std::shared_ptr<cipc::SlotMemory>> slots;
  uint64_t generation = 0;
  HoldCounters holds;
  std::vector<std::unique_ptr<Client>> clients;
  int stall_left_ms = kStallBudgetMs;
};

const cipc_fuzz::TempDir& temp_dir() {
  static const cipc_fuzz::TempDir dir;
  return dir;
}

void new_generation(Run& run) {
  ++run.generation;
  run.slots.clear();  // the old memory lives on in the holds of frames still claimed
  for (uint32_t i = 0; i < kSlotsPerGeneration; ++i) {
    auto m = run.backend.allocate(kSlotBytes);
    check(m.is_ok(), "slot allocation failed");
    run.slots.push_back(std::shared_ptr<cipc::SlotMemory>(std::move(m.value())));
  }
  run.producer->set_caps(run.generation, kCaps, kSlotBytes);
}

Client* pick_client(Run& run, Input& in) {
  const uint8_t which = in.u8();
  if (run.clients.empty()) return nullptr;
  return run.clients[which % run.clients.size()].get();
}

void send_bytes(Client& c, const std::vector<uint8_t>& bytes) {
  c.channel.send(bytes);  // a full socket or a closed peer is part of the game
}

void drain(Client& c) {
  cipc::Packet packet;
  for (int i = 0; i < 256; ++i) {
    if (c.channel.receive(packet) != cipc::IoResult::kOk) return;
    cipc::DecodeResult d = cipc::decode(packet.bytes.data(), packet.bytes.size());
    // The producer only ever sends what our own decoder accepts.
    check(d.is_ok(), "the producer sent an undecodable message: " +
                         (d.is_ok() ? std::string() : cipc::describe(d.error())));
    const cipc::Message& m = d.message();
    check(packet.fds.size() == cipc::expected_fd_count(m.type()),
          std::string("the producer sent the wrong number of descriptors with ") +
              cipc::to_string(m.type()));
    if (m.type() == cipc::MessageType::kFrame && c.frames.size() < 64)
      c.frames.push_back(std::get<cipc::Frame>(m.body));
    if (m.type() == cipc::MessageType::kSlot && c.slots.size() < 64)
      c.slots.push_back(std::get<cipc::Slot>(m.body));
  }
}

void publish(Run& run, uint32_t index) {
  if (run.slots.empty()) {
    // Before any caps: the sink has no pool yet, but a frame must still be handled (dropped).
    auto m = run.backend.allocate(kSlotBytes);
    check(m.is_ok(), "slot allocation failed");
    run.slots.push_back(std::shared_ptr<cipc::SlotMemory>(std::move(m.value())));
  }
  const auto& memory = run.slots[index % run.slots.size()];
  cipc::Frame f;
  f.size = kSlotBytes;
  f.n_planes = 1;
  f.plane_stride[0] = 64;
  run.producer->publish(
      cipc::SlotRef{run.generation, index % static_cast<uint32_t>(run.slots.size()), memory.get()},
      f, std::make_shared<CountingHold>(memory, run.holds));
}

void step(Run& run, Input& in) {
  const auto op = static_cast<ProducerOp>(in.u8() % static_cast<uint8_t>(ProducerOp::kCount));
  switch (op) {
    case ProducerOp::kConnect: {
      if (run.clients.size() >= kMaxClients) return;
      auto channel = cipc::Channel::connect(run.producer->socket_path());
      check(channel.is_ok(), "cannot connect to the producer: " +
                                 (channel.is_ok() ? std::string() : channel.error().message));
      auto c = std::make_unique<Client>();
      c->channel = std::move(channel.value());
      run.clients.push_back(std::move(c));
      return;
    }
    case ProducerOp::kHello: {
      Client* c = pick_client(run, in);
      cipc::Hello h;
      h.memory_kind = static_cast<cipc::MemoryKind>(in.u8() % 4);
      h.max_in_flight = in.u8() % 70;
      const uint16_t version = cipc_fuzz::input_version(in);
      if (c) send_bytes(*c, cipc::encode(cipc::Message{h}, version));
      return;
    }
    case ProducerOp::kReleaseReceived: {
      Client* c = pick_client(run, in);
      const uint8_t which = in.u8(), flags = in.u8(), fault = in.u8();
      if (!c || c->frames.empty()) return;
      const size_t i = which % c->frames.size();
      cipc::Release r;
      r.generation = c->frames[i].generation;
      r.slot = c->frames[i].slot;
      r.sequence = c->frames[i].sequence;
      r.flags = flags & cipc::Release::kFenceRecorded;
      switch (fault % 8) {
        case 1: ++r.generation; break;
        case 2: r.slot ^= 1; break;
        case 3: ++r.sequence; break;
        default: c->frames.erase(c->frames.begin() + static_cast<long>(i)); break;
      }
      send_bytes(*c, cipc::encode(cipc::Message{r}));
      return;
    }
    case ProducerOp::kFenceReceived: {
      Client* c = pick_client(run, in);
      const uint8_t which = in.u8(), fault = in.u8();
      if (!c) return;
      cipc::Fence f;
      if (!c->slots.empty()) {
        f.generation = c->slots[which % c->slots.size()].generation;
        f.slot = c->slots[which % c->slots.size()].index;
      }
      if (fault % 4 == 1) f.slot += 1;
      if (fault % 4 == 2) f.generation += 1;
      send_bytes(*c, cipc::encode(cipc::Message{f}));
      return;
    }
    case ProducerOp::kTypedMessage: {
      Client* c = pick_client(run, in);
      const cipc::Message m = cipc_fuzz::typed_message(in);
      const uint16_t version = cipc_fuzz::input_version(in);
      if (c) send_bytes(*c, cipc::encode(m, version));
      return;
    }
    case ProducerOp::kRawBytes: {
      Client* c = pick_client(run, in);
      const uint16_t length = in.u16();
      // Mostly small datagrams; sometimes one just over the limit, which must be refused.
      const size_t n = (length & 0x8000) ? cipc::kMaxMessageSize + (length & 0x3f) : length % 512;
      std::vector<uint8_t> bytes = in.bytes(n);
      bytes.resize(n, 0);
      if (c) send_bytes(*c, bytes);
      return;
    }
    case ProducerOp::kWithDescriptors: {
      Client* c = pick_client(run, in);
      const uint8_t count = in.u8() % 8, kind = in.u8();
      const cipc::Message m = cipc_fuzz::typed_message(in);
      if (!c) return;
      std::vector<cipc::UniqueFd> owned;
      std::vector<int> raw;
      for (uint8_t i = 0; i < count; ++i) {
        owned.push_back(cipc_fuzz::descriptor_of_kind(static_cast<uint8_t>(kind + i), kSlotBytes));
        if (owned.back().valid()) raw.push_back(owned.back().get());
      }
      cipc_fuzz::send_with_fds(c->channel.fd(), cipc::encode(m), raw);
      return;  // our copies close here; the producer must close its own
    }
    case ProducerOp::kPublish: publish(run, in.u8()); return;
    case ProducerOp::kNewCaps: new_generation(run); return;
    case ProducerOp::kEos: run.producer->send_eos(); return;
    case ProducerOp::kDrain: {
      Client* c = pick_client(run, in);
      if (c) drain(*c);
      return;
    }
    case ProducerOp::kClose: {
      const uint8_t which = in.u8();
      if (!run.clients.empty())
        run.clients.erase(run.clients.begin() + static_cast<long>(which % run.clients.size()));
      return;
    }
    case ProducerOp::kHalfClose: {
      Client* c = pick_client(run, in);
      if (c) ::shutdown(c->channel.fd(), SHUT_WR);
      return;
    }
    case ProducerOp::kStall: {
      const int ms = std::min<int>(in.u8() % 10, run.stall_left_ms);
      run.stall_left_ms -= ms;
      if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      return;
    }
    case ProducerOp::kAwaitReply: {
      Client* c = pick_client(run, in);
      if (!c) return;
      c->channel.wait_readable(1);
      drain(*c);
      return;
    }
    case ProducerOp::kCount: return;
  }
}

// Polls `done` for up to two seconds; the producer's I/O thread works asynchronously.
template <typename Pred>
bool within_two_seconds(Pred done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  static int serial = 0;
  const std::string path = temp_dir().file("p" + std::to_string(serial++ % 4) + ".sock");
  const int fds_before = cipc_fuzz::open_fd_count();
  ReasonObserver observer;
  {
    Run run;
    cipc::ProducerConfig config;
    config.socket_path = path;
    config.max_in_flight = 1 + in.u8() % 4;
    // Short timeouts (a few ms, reachable by kStall) or long ones (never reached in a run).
    const uint8_t release = in.u8(), hello = in.u8();
    config.release_timeout_ms = (release & 0x80) ? 1000 : 2 + release % 8;
    config.hello_timeout_ms = (hello & 0x80) ? 1000 : 2 + hello % 8;
    const uint8_t flags = in.u8();
    auto producer = cipc::Producer::start(config, &observer);
    check(producer.is_ok(), "Producer::start failed: " +
                                (producer.is_ok() ? std::string() : producer.error().message));
    run.producer = std::move(producer.value());
    if ((flags & 1) == 0) new_generation(run);

    for (int i = 0; i < kMaxOps && !in.empty(); ++i) step(run, in);

    // Everyone leaves: the producer must forget them and give back every claim.
    run.clients.clear();
    const bool quiet = within_two_seconds([&] {
      const cipc::ProducerStats s = run.producer->stats();
      return s.consumers == 0 && s.claims_outstanding == 0;
    });
    const cipc::ProducerStats s = run.producer->stats();
    check(quiet, "after every consumer hung up the producer still counts " +
                     std::to_string(s.consumers) + " consumer(s) and " +
                     std::to_string(s.claims_outstanding) + " claim(s)");
    if (getenv("CIPC_FUZZ_VERBOSE"))
      fprintf(stderr,
              "producer: published %llu, sent %llu, dropped %llu, releases %llu, consumers %llu, "
              "rejected %llu, timed out %llu, slots exported %llu\n",
              (unsigned long long)s.frames_published, (unsigned long long)s.frames_sent,
              (unsigned long long)s.frames_dropped, (unsigned long long)s.releases,
              (unsigned long long)s.consumers_total, (unsigned long long)s.consumers_rejected,
              (unsigned long long)s.consumers_timed_out, (unsigned long long)s.slots_exported);
    check(s.releases <= s.frames_sent, "more releases than frames sent");
    check(s.frames_sent <= s.frames_published * (s.consumers_total + 1),
          "more frames sent than published to the consumers there were");

    run.producer.reset();
    run.slots.clear();
    check(run.holds.created == run.holds.destroyed,
          "frame holds leaked: " + std::to_string(run.holds.created - run.holds.destroyed) +
              " of " + std::to_string(run.holds.created) +
              " still alive after the producer stopped");
  }
  const int fds_after = cipc_fuzz::open_fd_count();
  check(fds_after == fds_before, "descriptor leak: " + std::to_string(fds_before) +
                                     " open before, " + std::to_string(fds_after) + " after");
  return 0;
}
