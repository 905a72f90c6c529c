// SPDX-License-Identifier: LGPL-2.1-or-later
#include "consumer.h"

#include <unistd.h>

namespace cipc {
namespace {

// A poll() that returns sooner than this did not sleep: the message was already queued.
constexpr uint64_t kBacklogWaitNs = 5000;

// Turns a failed decode, or an ERROR message, into an Error that names both sides.
Error decode_failure(const DecodeError& e) {
  if (e.failure == DecodeFailure::kVersionMismatch)
    return Error{ErrorCode::kVersionMismatch,
                 "the producer speaks protocol version " + std::to_string(e.peer_version) +
                     ", this consumer speaks version " + std::to_string(kProtocolVersion)};
  return Error{ErrorCode::kProtocol, "the producer sent something unreadable: " + describe(e)};
}

Error from_error_message(const ErrorMessage& m) {
  ErrorCode code = ErrorCode::kProtocol;
  if (m.code <= static_cast<uint32_t>(ErrorCode::kOutOfResources))
    code = static_cast<ErrorCode>(m.code);
  return Error{code, "the producer refused this consumer: " + m.text};
}

}  // namespace

FrameClaim::FrameClaim(std::shared_ptr<ConsumerLink> link, const Frame& frame)
    : link_(std::move(link)),
      generation_(frame.generation),
      slot_(frame.slot),
      sequence_(frame.sequence) {
  ++link_->claims_outstanding;
}

FrameClaim::~FrameClaim() {
  --link_->claims_outstanding;
  // A child made by fork() inherited this claim: the frame is still the parent's, which reads it.
  // Checked before the lock, which another thread of the parent may have held at fork().
  if (!link_->in_owner()) return;
  Release m;
  m.generation = generation_;
  m.slot = slot_;
  m.sequence = sequence_;
  std::lock_guard<std::mutex> lock(link_->mutex);
  if (link_->open && link_->channel.send(Message{m}) == IoResult::kOk)
    ++link_->releases_sent;
  else
    ++link_->releases_lost;
}

Result<std::unique_ptr<Consumer>> Consumer::connect(const ConsumerConfig& config,
                                                    MemoryBackend& backend, Waker* waker) {
  std::shared_ptr<MemoryBackend> borrowed(&backend, [](MemoryBackend*) {});
  return connect(
      config,
      [borrowed](const Welcome&) -> Result<std::shared_ptr<MemoryBackend>> { return borrowed; },
      waker);
}

Result<std::unique_ptr<Consumer>> Consumer::connect(const ConsumerConfig& config,
                                                    BackendFactory backend_factory, Waker* waker) {
  if (config.max_in_flight < 1 || config.max_in_flight > kMaxInFlight)
    return Error{ErrorCode::kInvalidArgument,
                 "max-in-flight must be between 1 and " + std::to_string(kMaxInFlight)};
  const Status dir = check_private_socket_dir(config.socket_path, /*create=*/false);
  if (!dir) return dir.error();
  auto channel = Channel::connect(config.socket_path);
  if (!channel) return channel.error();
  // Who listens there: checked before anything is said or taken from it.
  auto creds = channel->peer_credentials();
  if (!creds) return creds.error();
  if (!config.allow_other_users && creds->uid != ::getuid())
    return Error{ErrorCode::kPermissionDenied,
                 "the producer at '" + config.socket_path + "' runs as uid " +
                     std::to_string(creds->uid) + " (pid " + std::to_string(creds->pid) +
                     "), not as this user (uid " + std::to_string(::getuid()) +
                     "); set allow-other-users=true on the consumer to trust another user's "
                     "producer"};
  auto link = std::make_shared<ConsumerLink>();
  link->channel = std::move(channel.value());

  Hello hello;
  hello.memory_kind = config.memory_kind;
  hello.max_in_flight = config.max_in_flight;
  hello.gpu_uuid = config.gpu_uuid;
  hello.pid = static_cast<uint32_t>(::getpid());
  std::string error;
  if (link->channel.send(Message{hello}, nullptr, 0, &error) != IoResult::kOk) {
    // A producer that refuses at once (e.g. out of descriptors) may have closed before our
    // HELLO went out; its ERROR saying why is still queued for us.
    Packet last;
    if (link->channel.receive(last) == IoResult::kOk) {
      DecodeResult said = decode(last.bytes.data(), last.bytes.size());
      if (said && said.message().type() == MessageType::kError)
        return from_error_message(std::get<ErrorMessage>(said.message().body));
    }
    return Error{ErrorCode::kClosed, "the producer closed the connection: " + error};
  }

  const uint64_t deadline = monotonic_ns() + uint64_t(config.handshake_timeout_ms) * 1000000;
  Packet packet;
  for (;;) {
    const uint64_t now = monotonic_ns();
    if (now >= deadline)
      return Error{ErrorCode::kTimeout, "the producer at '" + config.socket_path +
                                            "' did not answer within " +
                                            std::to_string(config.handshake_timeout_ms) + " ms"};
    const int wake_fd = waker ? waker->fd() : -1;
    if (!link->channel.wait_readable(static_cast<int>((deadline - now) / 1000000) + 1, wake_fd))
      continue;
    if (waker && waker->is_set()) return Error{ErrorCode::kInterrupted, "interrupted"};
    const IoResult r = link->channel.receive(packet, &error);
    if (r == IoResult::kWouldBlock) continue;
    if (r != IoResult::kOk)
      return Error{ErrorCode::kClosed, "the producer closed the connection during the handshake"};
    DecodeResult decoded = decode(packet.bytes.data(), packet.bytes.size());
    // Whatever makes us leave during the handshake, the producer is told why (ERROR).
    auto leave = [&link](Error e) {
      ErrorMessage m;
      m.code = static_cast<uint32_t>(e.code);
      m.text = ("consumer (pid " + std::to_string(::getpid()) + ") leaves: " + e.message)
                   .substr(0, kMaxErrorTextLength);
      link->channel.send(Message{m});
      return e;
    };
    if (!decoded) return leave(decode_failure(decoded.error()));
    Message& m = decoded.message();
    if (m.type() == MessageType::kError) return from_error_message(std::get<ErrorMessage>(m.body));
    if (m.type() != MessageType::kWelcome || !packet.fds.empty())
      return leave(Error{ErrorCode::kProtocol,
                         std::string("the producer answered HELLO with ") + to_string(m.type())});
    const Welcome& w = std::get<Welcome>(m.body);
    if (config.memory_kind != MemoryKind::kAny && w.memory_kind != config.memory_kind)
      return leave(Error{ErrorCode::kMemoryKindMismatch,
                         std::string("the producer shares ") + to_string(w.memory_kind) +
                             " memory, this consumer needs " + to_string(config.memory_kind)});
    auto backend = backend_factory(w);
    if (!backend) return leave(backend.error());
    if (w.memory_kind != backend.value()->kind())
      return leave(Error{ErrorCode::kMemoryKindMismatch,
                         std::string("the producer shares ") + to_string(w.memory_kind) +
                             " memory, which this consumer cannot import"});
    std::unique_ptr<Consumer> c(new Consumer(std::move(link), std::move(backend.value()), waker));
    c->welcome_ = w;
    return c;
  }
}

Consumer::Consumer(std::shared_ptr<ConsumerLink> link, std::shared_ptr<MemoryBackend> backend,
                   Waker* waker)
    : link_(std::move(link)), backend_(std::move(backend)), waker_(waker) {}

Consumer::~Consumer() {
  if (!link_->in_owner()) {
    // After fork(): the connection is the parent's. Close this process's descriptor only (no
    // BYE, no shutdown, which would end it for both); no lock, which a thread of the parent may
    // have held at fork().
    link_->open = false;
    link_->channel.close();
    return;
  }
  std::lock_guard<std::mutex> lock(link_->mutex);
  if (link_->open) link_->channel.send(Message{Bye{Bye::kShutdown}});
  link_->open = false;
  link_->channel.close();
}

ConsumerEvent Consumer::fail(ErrorCode code, const std::string& text) {
  {
    std::lock_guard<std::mutex> lock(link_->mutex);
    if (link_->open) {
      ErrorMessage m;
      m.code = static_cast<uint32_t>(code);
      m.text = text.substr(0, kMaxErrorTextLength);
      link_->channel.send(Message{m});
    }
    link_->open = false;
    link_->channel.shutdown();
  }
  ConsumerEvent e;
  e.kind = ConsumerEvent::Kind::kError;
  e.error = Error{code, text};
  return e;
}

ConsumerEvent Consumer::next(int timeout_ms) {
  if (!link_->in_owner()) {
    // A child made by fork(): what arrives is the parent's; reading it would take it from there.
    ConsumerEvent e;
    e.kind = ConsumerEvent::Kind::kError;
    e.error = Error{ErrorCode::kInvalidArgument,
                    "this connection was made by process " + std::to_string(link_->owner) +
                        " and belongs to it; process " + std::to_string(::getpid()) +
                        " (a child made by fork()) cannot read from it: connect anew"};
    return e;
  }
  const uint64_t deadline =
      timeout_ms < 0 ? UINT64_MAX : monotonic_ns() + uint64_t(timeout_ms) * 1000000;
  if (!pending_.empty()) {
    ConsumerEvent e = std::move(pending_.front());
    pending_.pop_front();
    return e;
  }
  Packet packet;
  // Paced frames arrive one at a time: a receive before waiting would find nothing (a wasted
  // system call per frame), so wait first unless the last message was already queued.
  bool wait_first = !backlog_;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(link_->mutex);
      if (!link_->open) {
        ConsumerEvent e;
        e.kind = ConsumerEvent::Kind::kClosed;
        e.error = Error{ErrorCode::kClosed, "the connection is closed"};
        return e;
      }
    }
    if (waker_ && waker_->is_set()) {
      ConsumerEvent e;
      e.kind = ConsumerEvent::Kind::kInterrupted;
      return e;
    }
    bool waited = false;
    if (wait_first) {
      const uint64_t before = monotonic_ns();
      const int wait_ms = deadline == UINT64_MAX ? -1
                          : before >= deadline
                              ? 0
                              : static_cast<int>((deadline - before + 999999) / 1000000);
      link_->channel.wait_readable(wait_ms, waker_ ? waker_->fd() : -1);
      // A wait that returned at once found the message queued: a backlog, as when unpaced.
      waited = monotonic_ns() - before > kBacklogWaitNs;
      if (waker_ && waker_->is_set()) continue;
    }
    std::string error;
    // The receive side is only used by this thread; the lock guards against concurrent close.
    const IoResult r = link_->channel.receive(packet, &error);
    if (r == IoResult::kOk) {
      backlog_ = !waited;
      ConsumerEvent event;
      if (handle(packet, event)) {
        // A frame that was waiting for us may be one the producer has given up on: a hang-up
        // behind it says so (one poll, only when behind, never for a paced frame).
        if (event.kind == ConsumerEvent::Kind::kFrame && backlog_ && link_->channel.peer_hung_up())
          return settle_backlog(std::move(event));
        return event;
      }
      wait_first = false;  // a SLOT or CAPS is usually followed at once by its FRAME
      continue;
    }
    if (r == IoResult::kClosed) return closed_without_eos();
    if (r == IoResult::kError) return receive_failed(error);
    if (!wait_first) empty_reads_.fetch_add(1, std::memory_order_relaxed);
    if (monotonic_ns() >= deadline) return ConsumerEvent{};
    wait_first = true;
  }
}

ConsumerEvent Consumer::closed_without_eos() {
  std::lock_guard<std::mutex> lock(link_->mutex);
  link_->open = false;
  ConsumerEvent e;
  e.kind = ConsumerEvent::Kind::kClosed;
  e.error = Error{ErrorCode::kClosed,
                  "it closed the connection without an end-of-stream: it stopped or crashed"};
  return e;
}

ConsumerEvent Consumer::receive_failed(const std::string& error) {
  if (link_->channel.last_error_is_local()) return fail(ErrorCode::kOutOfResources, error);
  return fail(ErrorCode::kProtocol, "bad message from the producer: " + error);
}

ConsumerEvent Consumer::settle_backlog(ConsumerEvent frame) {
  std::deque<ConsumerEvent> events;
  events.push_back(std::move(frame));
  size_t frames = 1;
  Packet packet;
  // Everything the producer sent is queued: this ends with its BYE or ERROR, or the hang-up.
  for (bool end = false; !end;) {
    std::string error;
    const IoResult r = link_->channel.receive(packet, &error);
    ConsumerEvent e;
    if (r == IoResult::kOk) {
      if (!handle(packet, e)) continue;
    } else if (r == IoResult::kClosed) {
      e = closed_without_eos();
    } else if (r == IoResult::kError) {
      e = receive_failed(error);
    } else {
      break;  // nothing more after all: hand out what came
    }
    end = e.kind == ConsumerEvent::Kind::kClosed || e.kind == ConsumerEvent::Kind::kError;
    frames += e.kind == ConsumerEvent::Kind::kFrame;
    events.push_back(std::move(e));
  }
  const ConsumerEvent::Parting parting = events.back().parting;
  const bool cut_off =
      parting == ConsumerEvent::Parting::kEvicted || parting == ConsumerEvent::Parting::kError;
  if (!cut_off) {
    pending_ = std::move(events);
    ConsumerEvent first = std::move(pending_.front());
    pending_.pop_front();
    return first;
  }
  // The producer gave up on these frames; handing them out now would look like a stream that
  // goes on. Their claims end with `events` (the connection is gone: nothing is sent).
  ConsumerEvent out = std::move(events.back());
  if (parting == ConsumerEvent::Parting::kEvicted && bye_reason_ == Bye::kTimeout)
    out.error.message =
        "the producer disconnected this consumer: it had not read the frames the producer sent "
        "it within the producer's release-timeout (" +
        std::to_string(frames) + " were still waiting to be read; they are dropped)";
  else
    out.error.message += " (" + std::to_string(frames) +
                         " frame(s) that came before were still waiting to be read; they are "
                         "dropped)";
  return out;
}

bool Consumer::handle(Packet& packet, ConsumerEvent& out) {
  DecodeResult decoded = decode(packet.bytes.data(), packet.bytes.size());
  if (!decoded) {
    const Error e = decode_failure(decoded.error());
    out = fail(e.code, e.message);
    return true;
  }
  Message& m = decoded.message();
  const MessageType type = m.type();
  if (packet.fds.size() != expected_fd_count(type)) {
    out = fail(ErrorCode::kProtocol, std::string("the producer sent ") +
                                         std::to_string(packet.fds.size()) +
                                         " file descriptor(s) with " + to_string(type));
    return true;
  }
  switch (type) {
    case MessageType::kCaps: return on_caps(std::get<Caps>(m.body), out);
    case MessageType::kSlot: return on_slot(std::get<Slot>(m.body), packet, out);
    case MessageType::kFrame: return on_frame(std::get<Frame>(m.body), out);
    case MessageType::kRetire: return on_retire(std::get<Retire>(m.body), out);
    case MessageType::kEos: return on_eos(out);
    case MessageType::kBye: return on_bye(std::get<Bye>(m.body), out);
    case MessageType::kError: return on_error(std::get<ErrorMessage>(m.body), out);
    default:
      out = fail(ErrorCode::kProtocol, std::string("the producer sent ") + to_string(type) +
                                           ", which only a consumer may send");
      return true;
  }
}

bool Consumer::on_caps(Caps& caps, ConsumerEvent& out) {
  has_caps_ = true;
  generation_ = caps.generation;
  frame_size_ = caps.frame_size;
  // Slots of older generations are never used again; frames still alive keep their own.
  for (auto it = slots_.begin(); it != slots_.end();)
    it = std::get<1>(it->first) != generation_ ? slots_.erase(it) : std::next(it);
  out.kind = ConsumerEvent::Kind::kCaps;
  out.caps = std::move(caps);
  return true;
}

bool Consumer::on_slot(const Slot& s, Packet& packet, ConsumerEvent& out) {
  if (!has_caps_ || s.generation != generation_) {
    out = fail(ErrorCode::kProtocol, "the producer sent a SLOT of generation " +
                                         std::to_string(s.generation) +
                                         " that its CAPS did not announce");
    return true;
  }
  const auto key = std::make_tuple(welcome_.instance_id, s.generation, s.index);
  if (slots_.count(key)) {
    out =
        fail(ErrorCode::kProtocol, "the producer sent slot " + std::to_string(s.index) + " twice");
    return true;
  }
  auto memory = backend_->import(std::move(packet.fds[0]), s.size,
                                 (s.flags & Slot::kHasEvent) ? &s.event : nullptr);
  if (!memory) {
    out = fail(memory.error().code,
               "could not import slot " + std::to_string(s.index) + ": " + memory.error().message);
    return true;
  }
  auto slot = std::make_shared<ImportedSlot>();
  slot->generation = s.generation;
  slot->index = s.index;
  slot->memory = std::move(memory.value());
  slots_.emplace(key, std::move(slot));
  ++slots_imported_;
  return false;
}

bool Consumer::on_frame(const Frame& f, ConsumerEvent& out) {
  auto it = slots_.find(std::make_tuple(welcome_.instance_id, f.generation, f.slot));
  if (!has_caps_ || f.generation != generation_ || it == slots_.end()) {
    out = fail(ErrorCode::kProtocol, "the producer sent a FRAME in slot " + std::to_string(f.slot) +
                                         " (generation " + std::to_string(f.generation) +
                                         ") it never shared");
    return true;
  }
  if (f.size > it->second->memory->size()) {
    out = fail(ErrorCode::kProtocol, "the producer sent a FRAME of " + std::to_string(f.size) +
                                         " bytes in a slot of " +
                                         std::to_string(it->second->memory->size()));
    return true;
  }
  ++frames_received_;
  out.kind = ConsumerEvent::Kind::kFrame;
  out.frame.info = f;
  out.frame.slot = it->second;
  out.frame.claim = std::make_shared<FrameClaim>(link_, f);
  return true;
}

bool Consumer::on_retire(const Retire& r, ConsumerEvent& out) {
  // Frames of ours still in that slot keep their own reference to the import; it is unmapped
  // when the last of them goes.
  if (slots_.erase(std::make_tuple(welcome_.instance_id, r.generation, r.slot)) == 0) {
    out = fail(ErrorCode::kProtocol, "the producer retired slot " + std::to_string(r.slot) +
                                         " (generation " + std::to_string(r.generation) +
                                         "), which it never shared");
    return true;
  }
  ++slots_retired_;
  return false;
}

bool Consumer::on_eos(ConsumerEvent& out) {
  out.kind = ConsumerEvent::Kind::kEos;
  return true;
}

bool Consumer::on_bye(const Bye& bye, ConsumerEvent& out) {
  std::lock_guard<std::mutex> lock(link_->mutex);
  link_->open = false;
  link_->channel.shutdown();
  out.kind = ConsumerEvent::Kind::kClosed;
  const uint32_t reason = bye.reason;
  bye_reason_ = reason;
  out.parting = reason == Bye::kShutdown ? ConsumerEvent::Parting::kStopped
                                         : ConsumerEvent::Parting::kEvicted;
  out.error = Error{ErrorCode::kClosed,
                    reason == Bye::kTimeout
                        ? "the producer disconnected this consumer: it held a frame longer "
                          "than the producer's release-timeout"
                    : reason == Bye::kProtocolError
                        ? "the producer disconnected this consumer for breaking the protocol"
                        : "the producer stopped"};
  return true;
}

bool Consumer::on_error(const ErrorMessage& error, ConsumerEvent& out) {
  std::lock_guard<std::mutex> lock(link_->mutex);
  link_->open = false;
  link_->channel.shutdown();
  out.kind = ConsumerEvent::Kind::kError;
  out.error = from_error_message(error);
  out.parting = ConsumerEvent::Parting::kError;
  return true;
}

ConsumerStats Consumer::stats() const {
  ConsumerStats s;
  s.frames_received = frames_received_;
  s.slots_imported = slots_imported_;
  s.slots_retired = slots_retired_;
  s.releases_sent = link_->releases_sent;
  s.releases_lost = link_->releases_lost;
  s.claims_outstanding = link_->claims_outstanding;
  s.empty_reads = empty_reads_;
  return s;
}

}  // namespace cipc
