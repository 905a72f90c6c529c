// SPDX-License-Identifier: LGPL-2.1-or-later
// libFuzzer target: the consumer's state machine (ipc/consumer.h) against a hostile producer.
//
// Each input connects a real Consumer (host memory) to a fake producer that the target plays:
// the handshake is answered with a WELCOME, a damaged one, an ERROR, another message or
// garbage (fuzz_ops.h HandshakeAnswer); then a fuzzer-chosen sequence sends CAPS, SLOT (with a
// sealed memfd of the announced size or a lying, unsealed, foreign or missing descriptor),
// FRAME, EOS, BYE, ERROR, raw datagrams and consumer-only messages, while the application side
// asks for events, reads every byte of each frame it gets, holds frames and lets them go in any
// order, or destroys the consumer early.
//
// Invariants: no crash, hang or sanitizer report; every frame's bytes are readable for as long
// as the frame is held, even after the consumer is gone; every RELEASE the consumer sends
// names a frame it delivered and had not released yet; after the input this process has
// exactly as many open descriptors as before.
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "channel.h"
#include "consumer.h"
#include "fuzz_messages.h"
#include "fuzz_ops.h"
#include "fuzz_util.h"
#include "host_memory.h"
#include "memorybackend.h"
#include "protocol.h"

using cipc_fuzz::check;
using cipc_fuzz::ConsumerOp;
using cipc_fuzz::HandshakeAnswer;
using cipc_fuzz::Input;

namespace {

constexpr int kMaxOps = 64;
constexpr size_t kMaxHeld = 16;
constexpr size_t kMaxMemfd = 1 << 16;

using FrameKey = std::tuple<uint64_t, uint32_t, uint64_t>;  // generation, slot, sequence

struct Listening {
  cipc_fuzz::TempDir dir;
  std::string path = dir.file("producer.sock");
  cipc::Listener listener;
  Listening() {
    auto l = cipc::Listener::bind(path, 0600);
    check(l.is_ok(), "cannot bind the fake producer");
    listener = std::move(l.value());
  }
};

Listening& listening() {
  static Listening* l = new Listening();  // lives for the whole process, as libFuzzer does
  return *l;
}

// Reads every byte the frame says it holds: ASan or a SIGBUS would catch a mapping that does
// not cover it.
uint64_t touch(const cipc::ReceivedFrame& f) {
  const auto* p = static_cast<const uint8_t*>(f.slot->memory->data());
  check(f.info.size <= f.slot->memory->size(), "a frame larger than its slot was delivered");
  uint64_t sum = 0;
  for (uint64_t i = 0; i < f.info.size; i += 61) sum += p[i];
  if (f.info.size) sum += p[f.info.size - 1];
  return sum;
}

struct Session {
  cipc::Channel producer_end;  // the fake producer's side
  std::unique_ptr<cipc::Consumer> consumer;
  std::vector<cipc::ReceivedFrame> held;
  std::set<FrameKey> delivered;  // frames handed to the application and not released yet
  uint64_t sequence = 0;
};

void send(Session& s, const cipc::Message& m, const std::vector<int>& fds = {}) {
  cipc_fuzz::send_with_fds(s.producer_end.fd(), cipc::encode(m), fds);
}

// What the consumer said: every RELEASE must name a frame it delivered and still counts.
void drain_consumer(Session& s) {
  cipc::Packet packet;
  for (int i = 0; i < 256; ++i) {
    if (s.producer_end.receive(packet) != cipc::IoResult::kOk) return;
    cipc::DecodeResult d = cipc::decode(packet.bytes.data(), packet.bytes.size());
    check(d.is_ok(), "the consumer sent an undecodable message");
    check(packet.fds.empty(), "the consumer sent descriptors");
    const cipc::Message& m = d.message();
    if (m.type() != cipc::MessageType::kRelease) continue;
    const auto& r = std::get<cipc::Release>(m.body);
    const FrameKey key{r.generation, r.slot, r.sequence};
    check(s.delivered.erase(key) == 1,
          "the consumer released a frame it never delivered, or released it twice (slot " +
              std::to_string(r.slot) + ", sequence " + std::to_string(r.sequence) + ")");
  }
}

bool handshake(Session& s, Input& in) {
  cipc::ConsumerConfig config;
  config.socket_path = listening().path;
  config.max_in_flight = 1 + in.u8() % cipc::kMaxInFlight;
  config.handshake_timeout_ms = 100;
  const auto answer =
      static_cast<HandshakeAnswer>(in.u8() % static_cast<uint8_t>(HandshakeAnswer::kCount));

  auto shared_backend = std::make_shared<cipc_slots::HostMemoryBackend>();
  cipc::Result<std::unique_ptr<cipc::Consumer>> result =
      cipc::Error{cipc::ErrorCode::kClosed, "not run"};
  std::thread connecting([&] {
    result = cipc::Consumer::connect(config,
                                     [shared_backend](const cipc::Welcome&)
                                         -> cipc::Result<std::shared_ptr<cipc::MemoryBackend>> {
                                       return std::shared_ptr<cipc::MemoryBackend>(shared_backend);
                                     });
  });

  pollfd p{listening().listener.fd(), POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&p, 1, 5000);  // libFuzzer's SIGALRM (-timeout) may interrupt it
  } while (ready < 0 && errno == EINTR);
  check(ready == 1, "the consumer never connected");
  check(listening().listener.accept(s.producer_end) == cipc::IoResult::kOk, "accept failed");
  s.producer_end.wait_readable(5000);
  cipc::Packet hello;
  check(s.producer_end.receive(hello) == cipc::IoResult::kOk, "no HELLO");
  cipc::DecodeResult d = cipc::decode(hello.bytes.data(), hello.bytes.size());
  check(d.is_ok() && d.message().type() == cipc::MessageType::kHello, "the consumer opened badly");

  switch (answer) {
    case HandshakeAnswer::kWelcome: {
      cipc::Welcome w;
      w.instance_id = in.u64();
      w.memory_kind = cipc::MemoryKind::kHost;
      w.max_in_flight = 1 + in.u8() % cipc::kMaxInFlight;
      w.sync_mode = static_cast<cipc::SyncMode>(in.u8() % 3);
      send(s, cipc::Message{w});
      break;
    }
    case HandshakeAnswer::kWelcomeFields: {
      cipc::Welcome w;
      w.memory_kind = static_cast<cipc::MemoryKind>(in.u8() % 4);
      w.sync_mode = static_cast<cipc::SyncMode>(in.u8() % 4);
      w.max_in_flight = in.u32() % 100;
      const uint16_t version = in.u16() % 3;
      cipc_fuzz::send_with_fds(s.producer_end.fd(), cipc::encode(cipc::Message{w}, version), {});
      break;
    }
    case HandshakeAnswer::kError: {
      cipc::ErrorMessage e;
      e.code = in.u32();
      e.text = cipc_fuzz::input_string(in, 255);
      send(s, cipc::Message{e});
      break;
    }
    case HandshakeAnswer::kOtherMessage: send(s, cipc_fuzz::typed_message(in)); break;
    case HandshakeAnswer::kRawBytes: {
      const std::vector<uint8_t> raw = in.bytes(in.u16() % 300);
      cipc_fuzz::send_with_fds(s.producer_end.fd(), raw, {});
      break;
    }
    case HandshakeAnswer::kWelcomeWithFd:
    case HandshakeAnswer::kCount: {
      cipc::Welcome w;
      cipc::UniqueFd fd = cipc_fuzz::sealed_memfd(4096);
      send(s, cipc::Message{w}, {fd.get()});
      break;
    }
  }
  connecting.join();
  if (!result.is_ok()) return false;
  s.consumer = std::move(result.value());
  return true;
}

void step(Session& s, Input& in) {
  const auto op = static_cast<ConsumerOp>(in.u8() % static_cast<uint8_t>(ConsumerOp::kCount));
  switch (op) {
    case ConsumerOp::kCaps: {
      cipc::Caps c;
      c.generation = in.u8() % 3;
      c.frame_size = in.u32() % (kMaxMemfd + 2);
      c.caps = cipc_fuzz::input_string(in, 64);
      send(s, cipc::Message{c});
      return;
    }
    case ConsumerOp::kSlot: {
      cipc::Slot m;
      m.generation = in.u8() % 3;
      m.index = in.u16() % 8;
      m.size = in.u32() % (kMaxMemfd + 2);
      const uint8_t kind = in.u8();
      const int8_t delta = static_cast<int8_t>(in.u8());
      // Mostly a memfd of the announced size; sometimes it lies about the size.
      int64_t real = static_cast<int64_t>(m.size) + ((kind & 0x80) ? delta : 0);
      if (real < 0) real = 0;
      if (real > static_cast<int64_t>(kMaxMemfd)) real = kMaxMemfd;
      std::vector<cipc::UniqueFd> owned;
      const int count = (kind & 0x40) ? (kind & 0x20 ? 2 : 0) : 1;
      for (int i = 0; i < count; ++i)
        owned.push_back(
            cipc_fuzz::descriptor_of_kind((kind & 0x10) ? kind : 0, static_cast<size_t>(real)));
      std::vector<int> raw;
      for (auto& fd : owned)
        if (fd.valid()) raw.push_back(fd.get());
      send(s, cipc::Message{m}, raw);
      return;
    }
    case ConsumerOp::kFrame: {
      cipc::Frame f;
      f.generation = in.u8() % 3;
      f.slot = in.u16() % 8;
      f.size = in.u32() % (kMaxMemfd + 2);
      f.n_planes = in.u8() % 5;
      for (uint32_t i = 0; i < f.n_planes; ++i) {
        f.plane_offset[i] = f.size ? in.u32() % f.size : 0;
        f.plane_stride[i] = static_cast<int32_t>(in.u16());
      }
      f.sequence = ++s.sequence;
      send(s, cipc::Message{f});
      return;
    }
    case ConsumerOp::kEos: send(s, cipc::Message{cipc::Eos{}}); return;
    case ConsumerOp::kBye: {
      cipc::Bye b;
      b.reason = in.u8() % 3;
      send(s, cipc::Message{b});
      return;
    }
    case ConsumerOp::kError: {
      cipc::ErrorMessage e;
      e.code = in.u32();
      e.text = cipc_fuzz::input_string(in, 255);
      send(s, cipc::Message{e});
      return;
    }
    case ConsumerOp::kRawBytes: {
      const std::vector<uint8_t> raw = in.bytes(in.u16() % 300);
      cipc_fuzz::send_with_fds(s.producer_end.fd(), raw, {});
      return;
    }
    case ConsumerOp::kTypedMessage: send(s, cipc_fuzz::typed_message(in)); return;
    case ConsumerOp::kNext: {
      if (!s.consumer) return;
      cipc::ConsumerEvent e = s.consumer->next(0);
      if (e.kind == cipc::ConsumerEvent::Kind::kFrame) {
        check(e.frame.slot && e.frame.slot->memory && e.frame.claim, "an incomplete frame");
        touch(e.frame);
        const FrameKey key{e.frame.info.generation, e.frame.info.slot, e.frame.info.sequence};
        check(s.delivered.insert(key).second, "the same frame was delivered twice");
        if (s.held.size() < kMaxHeld) s.held.push_back(std::move(e.frame));
      } else if (e.kind == cipc::ConsumerEvent::Kind::kClosed ||
                 e.kind == cipc::ConsumerEvent::Kind::kError) {
        check(!e.error.message.empty(), "the connection ended without a reason");
      }
      return;
    }
    case ConsumerOp::kDropFrame: {
      const uint8_t which = in.u8();
      if (!s.held.empty()) s.held.erase(s.held.begin() + static_cast<long>(which % s.held.size()));
      return;
    }
    case ConsumerOp::kDrain: drain_consumer(s); return;
    case ConsumerOp::kDestroy: s.consumer.reset(); return;
    case ConsumerOp::kCount: return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  listening();  // bound once, before the descriptor count
  const int fds_before = cipc_fuzz::open_fd_count();
  {
    Session s;
    if (handshake(s, in)) {
      for (int i = 0; i < kMaxOps && !in.empty(); ++i) step(s, in);
      drain_consumer(s);
      if (getenv("CIPC_FUZZ_VERBOSE") && s.consumer) {
        const cipc::ConsumerStats st = s.consumer->stats();
        fprintf(stderr,
                "consumer: frames %llu, slots imported %llu, releases sent %llu, held %zu\n",
                (unsigned long long)st.frames_received, (unsigned long long)st.slots_imported,
                (unsigned long long)st.releases_sent, s.held.size());
      }
      s.consumer.reset();
      // The application may keep frames after the consumer is gone: still readable.
      for (const auto& f : s.held) touch(f);
      s.held.clear();
    }
  }
  const int fds_after = cipc_fuzz::open_fd_count();
  check(fds_after == fds_before, "descriptor leak: " + std::to_string(fds_before) +
                                     " open before, " + std::to_string(fds_after) + " after");
  return 0;
}
