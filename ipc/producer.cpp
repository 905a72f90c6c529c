// SPDX-License-Identifier: LGPL-2.1-or-later
#include "producer.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <random>

namespace cipc {
namespace {

constexpr size_t kMaxSessions = 64;  // attached consumers
// Connections that have not said HELLO yet, counted apart from the consumers: an honest consumer
// says it at once, so a few suffice, and a flood of silent ones holds no more descriptors.
constexpr size_t kMaxWaitingConnections = 32;
constexpr int kMaxMessagesPerWakeup = 256;  // fairness between consumers under a flood
// What publish() reads per consumer: a consumer sends one RELEASE (and maybe a FENCE) per frame,
// so this keeps up with any honest one while a flood cannot stall the streaming thread.
constexpr int kMaxMessagesPerPublish = 32;
// Slots offered ahead of their frames go while less than this is unread in the consumer's socket
// (about 40 SLOTs): a pool's first round still goes ahead of its frames within a few frames,
// while a consumer that does not read holds few of this user's descriptors in flight (the kernel
// bounds them all by RLIMIT_NOFILE: ETOOMANYREFS) and leaves its socket's room (SO_SNDBUF,
// about 208 KiB) to CAPS, FRAME and RETIRE, which must not find it full for slots not needed yet.
constexpr size_t kOfferUnreadBytes = 32 * 1024;
constexpr uint64_t kAcceptBackoffNs = 200 * 1000000ull;  // after accept() failed for want of fds
// A poll() that returns this much later than its timeout means the producer did not run.
constexpr uint64_t kStoppedAfterNs = 200 * 1000000ull;
// How often the I/O thread checks that the socket file at the path is still ours (one lstat).
constexpr uint64_t kPathCheckNs = 1000 * 1000000ull;
// While frames keep coming, how often the I/O thread looks whether they stopped (and the RELEASEs
// queued since are its to read): at least lazy_release_ms apart. The release-timeout's looks
// (every release_timeout_ms / 4, 500 ms by default) fall on the same wake-ups.
constexpr uint64_t kLazyRelookNs = 500 * 1000000ull;

UniqueFd open_reserve_fd() {
  return UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
}

uint64_t random_instance_id() {
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return id;
}

std::string who(pid_t pid) {
  return "consumer (pid " + std::to_string(pid) + ")";
}

}  // namespace

Result<std::unique_ptr<Producer>> Producer::start(const ProducerConfig& config,
                                                  ProducerObserver* observer) {
  if (config.max_in_flight < 1 || config.max_in_flight > kMaxInFlight)
    return Error{ErrorCode::kInvalidArgument,
                 "max-in-flight must be between 1 and " + std::to_string(kMaxInFlight)};
  std::unique_ptr<Producer> p(new Producer(config, observer));
  if (!p->wake_.valid()) return system_error("eventfd()", errno);
  auto listener = Listener::bind(config.socket_path, config.socket_mode);
  if (!listener) return listener.error();
  p->listener_ = std::move(listener.value());
  p->reserve_fd_ = open_reserve_fd();
  p->thread_ = std::thread([raw = p.get()] { raw->run(); });
  return p;
}

Producer::Producer(const ProducerConfig& config, ProducerObserver* observer)
    : config_(config),
      observer_(observer),
      instance_id_(config.instance_id ? config.instance_id : random_instance_id()) {}

Producer::~Producer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.wake();
  attached_cv_.notify_all();
  room_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  Deferred deferred;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& entry : sessions_) {
      Session& s = *entry.second;
      if (!s.dead && s.ready) s.channel.send(Message{Bye{Bye::kShutdown}});
      drop(s, "producer stopped", false, true, deferred);
    }
    sessions_.clear();
  }
  deferred.attached.clear();
  deferred.detached.clear();  // the owner is tearing us down; it does not want callbacks now
  finish(deferred);
  listener_.close();
}

void Producer::run() {
  pthread_setname_np(pthread_self(), "cipc-producer");  // named in per-thread figures
  const std::shared_ptr<void> scope = config_.io_thread_scope ? config_.io_thread_scope() : nullptr;
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  for (;;) {
    int timeout;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      // poll() skips a negative fd: the listener rests while accept() cannot succeed.
      const bool accepting = accept_paused_until_ <= monotonic_ns();
      fds.assign({{accepting ? listener_.fd() : -1, POLLIN, 0}, {wake_.fd(), POLLIN, 0}});
      ids.clear();
      const uint64_t now = monotonic_ns();
      // While publish() reads the attached consumers' messages, only their hang-ups wake us.
      const bool lazy = lazy_until_ns_ > now;
      for (auto& entry : sessions_) {
        if (entry.second->dead) continue;
        const short events = lazy && entry.second->ready ? POLLRDHUP : POLLIN;
        fds.push_back({entry.second->channel.fd(), events, 0});
        ids.push_back(entry.first);
      }
      timeout = next_timeout_ms(now);
      if (lazy) {
        // Each publish() pushes the phase's end on. Looking at every end it had when this thread
        // went to sleep woke it once per lazy_release_ms for nothing while frames flowed (0.19
        // wake-ups per frame at 60 fps): once a look found frames still coming, look less often.
        if (lazy_look_ns_ == 0)
          lazy_look_ns_ = lazy_until_ns_;
        else if (lazy_look_ns_ <= now)
          lazy_look_ns_ = std::max(
              lazy_until_ns_,
              now + std::max<uint64_t>(kLazyRelookNs, uint64_t{config_.lazy_release_ms} * 1000000));
        const int until_look = static_cast<int>((lazy_look_ns_ - now) / 1000000 + 1);
        timeout = timeout < 0 ? until_look : std::min(timeout, until_look);
      } else {
        lazy_look_ns_ = 0;
      }
      // A set waker ends this poll at once: not asleep yet (its wake-up reads every consumer).
      io_sleeps_lazily_ = lazy && !wake_.is_set();
    }
    const uint64_t poll_started = monotonic_ns();
    const int r = ::poll(fds.data(), fds.size(), timeout);
    const uint64_t poll_ended = monotonic_ns();
    if (r < 0 && errno != EINTR) {
      // Nothing sensible left to do; avoid spinning.
      ::usleep(10000);
    }
    Deferred deferred;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      io_sleeps_lazily_ = false;
      if (stopping_) return;
      wake_.clear();
      // Woken far later than asked: the process was stopped (SIGSTOP, a debugger) or starved.
      // Consumers could not have their RELEASEs read meanwhile: that time is not theirs.
      if (timeout >= 0) {
        const uint64_t asked = poll_started + uint64_t(timeout) * 1000000;
        if (poll_ended > asked + kStoppedAfterNs) forgive(poll_ended - asked);
      }
      if (r > 0 && (fds[0].revents & POLLIN)) accept_all(deferred);
      for (size_t i = 0; i < ids.size(); ++i) {
        // Attached consumers are read on every wake-up: in the lazy phase their messages do
        // not wake us, and a deadline must not fire on a RELEASE that is already queued.
        auto it = sessions_.find(ids[i]);
        if (it == sessions_.end() || it->second->dead) continue;
        if ((r > 0 && fds[i + 2].revents != 0) || it->second->ready)
          service(*it->second, deferred, kMaxMessagesPerWakeup);
      }
      for (auto& entry : sessions_) {
        Session& s = *entry.second;
        if (s.broken && !s.dead)
          drop(s, who(s.pid) + " stopped accepting messages", false, false, deferred);
      }
      check_deadlines(monotonic_ns(), deferred);
      // Our socket file removed (a /tmp cleaner) or replaced: published again, or said why not.
      std::string path_news = listener_.check_published_due(monotonic_ns(), kPathCheckNs);
      if (!path_news.empty()) deferred.warnings.push_back(std::move(path_news));
      // Erase only here, after every loop over sessions_ is done.
      for (auto it = sessions_.begin(); it != sessions_.end();)
        it = it->second->dead ? sessions_.erase(it) : std::next(it);
    }
    finish(deferred);
  }
}

void Producer::accept_all(Deferred& deferred) {
  for (;;) {
    Channel channel;
    std::string error;
    int accept_errno = 0;
    const IoResult r = listener_.accept(channel, &error, &accept_errno);
    if (r == IoResult::kWouldBlock) return;
    if (r != IoResult::kOk) {
      const bool out_of_fds = accept_errno == EMFILE || accept_errno == ENFILE;
      if (!descriptor_shortage_) {
        descriptor_shortage_ = true;
        deferred.warnings.push_back(
            "cannot accept more consumers: " + error +
            (out_of_fds ? "; the consumers already attached are still served, new ones are "
                          "refused until descriptors are freed"
                        : ""));
      }
      if (out_of_fds && refuse_for_lack_of_descriptors()) continue;
      // Never spin on a listener that stays readable while accept() keeps failing.
      accept_paused_until_ = monotonic_ns() + kAcceptBackoffNs;
      return;
    }
    descriptor_shortage_ = false;
    auto session = std::make_unique<Session>();
    session->id = next_session_id_++;
    session->channel = std::move(channel);
    session->connected_ns = monotonic_ns();
    auto creds = session->channel.peer_credentials();
    if (creds) session->pid = creds->pid;
    Session& s = *session;
    sessions_.emplace(s.id, std::move(session));
    if (!creds) {
      reject(s, ErrorCode::kSystem, creds.error().message, deferred);
    } else if (!config_.allow_other_users && creds->uid != ::getuid()) {
      s.refusal_code = ErrorCode::kPermissionDenied;
      s.refusal = "consumer runs as uid " + std::to_string(creds->uid) +
                  " but this producer runs as uid " + std::to_string(::getuid()) +
                  " and does not allow other users";
    }
    limit_waiting(deferred);
  }
}

void Producer::limit_waiting(Deferred& deferred) {
  size_t waiting = 0;
  for (const auto& entry : sessions_)
    if (!entry.second->ready && !entry.second->dead) ++waiting;
  const uint64_t now = monotonic_ns();
  // By id: the oldest first.
  for (auto it = sessions_.begin(); waiting > kMaxWaitingConnections && it != sessions_.end();
       ++it) {
    Session& s = *it->second;
    if (s.ready || s.dead) continue;
    --waiting;
    service(s, deferred, 1);  // its HELLO may be queued: then it attaches (or is refused)
    if (s.ready || s.dead) continue;
    reject_unheard(s,
                   who(s.pid) + " connected but never said HELLO before " +
                       std::to_string(kMaxWaitingConnections) +
                       " newer connections that had not said it either came (at most that many "
                       "may wait to say it)",
                   now, deferred);
  }
}

void Producer::reject_unheard(Session& session, const std::string& text, uint64_t now,
                              Deferred& deferred) {
  const size_t reports = deferred.detached.size();
  reject(session, ErrorCode::kTimeout, text, deferred);
  if (deferred.detached.size() == reports) return;
  if (now < unheard_report_at_ns_) {
    deferred.detached.pop_back();  // counted instead, and reported with the others
    ++unheard_unreported_;
    return;
  }
  unheard_report_at_ns_ = now + uint64_t{config_.unheard_report_ms} * 1000000;
}

void Producer::report_unheard(uint64_t now, Deferred& deferred) {
  if (unheard_unreported_ == 0 || now < unheard_report_at_ns_) return;
  deferred.warnings.push_back(
      std::to_string(unheard_unreported_) + " more connection(s) to " + config_.socket_path +
      " were closed in the last " + std::to_string(config_.unheard_report_ms) +
      " ms without saying HELLO (each said nothing for hello-timeout, " +
      std::to_string(config_.hello_timeout_ms) + " ms, or was the oldest of more than " +
      std::to_string(kMaxWaitingConnections) +
      " such connections): something connects to the socket and does not speak the protocol");
  unheard_unreported_ = 0;
  unheard_report_at_ns_ = now + uint64_t{config_.unheard_report_ms} * 1000000;
}

bool Producer::refuse_for_lack_of_descriptors() {
  if (!reserve_fd_) reserve_fd_ = open_reserve_fd();
  if (!reserve_fd_) return false;
  reserve_fd_.reset();
  Channel channel;
  const IoResult r = listener_.accept(channel);
  if (r == IoResult::kOk) {
    ErrorMessage m;
    m.code = static_cast<uint32_t>(ErrorCode::kOutOfResources);
    m.text = ("the producer cannot take another consumer: " + describe_descriptor_limit())
                 .substr(0, kMaxErrorTextLength);
    channel.send(Message{m});
    channel.close();
    ++stats_.consumers_rejected;
  }
  reserve_fd_ = open_reserve_fd();
  return r == IoResult::kOk && reserve_fd_.valid();
}

void Producer::read_attached(Deferred& deferred, std::optional<uint64_t> just_sent) {
  bool dropped = false;
  for (auto& entry : sessions_) {
    Session& s = *entry.second;
    if (!s.ready || s.dead) continue;
    // A consumer that holds only the frame just sent has nothing queued for us but (rarely) an
    // ERROR or BYE: the next publish reads it, when that frame is a claim it could release.
    std::optional<size_t> until_claims;
    if (just_sent && s.claims.count(*just_sent)) until_claims = 1;
    service(s, deferred, kMaxMessagesPerPublish, until_claims);
    dropped = dropped || s.dead;
  }
  if (dropped) wake_.wake();  // the I/O thread erases dropped sessions
}

void Producer::service(Session& session, Deferred& deferred, int max_messages,
                       std::optional<size_t> until_claims) {
  Packet packet;
  for (int i = 0; i < max_messages && !session.dead; ++i) {
    if (until_claims && session.claims.size() <= *until_claims) return;
    std::string error;
    const IoResult r = session.channel.receive(packet, &error);
    if (r == IoResult::kWouldBlock) {
      ++stats_.empty_reads;
      return;
    }
    if (r == IoResult::kClosed) {
      const size_t held = session.claims.size();
      drop(session,
           who(session.pid) + " hung up" +
               (held ? " holding " + std::to_string(held) + " frame(s); they are reclaimed" : ""),
           false, false, deferred);
      return;
    }
    if (r == IoResult::kError) {
      reject(session, ErrorCode::kProtocol, error, deferred);
      return;
    }
    DecodeResult decoded = decode(packet.bytes.data(), packet.bytes.size());
    if (!decoded) {
      const DecodeError& e = decoded.error();
      if (e.failure == DecodeFailure::kVersionMismatch) {
        reject(session, ErrorCode::kVersionMismatch,
               who(session.pid) + " speaks protocol version " + std::to_string(e.peer_version) +
                   ", this producer speaks version " + std::to_string(kProtocolVersion),
               deferred);
      } else {
        reject(session, ErrorCode::kProtocol,
               who(session.pid) + " sent something unreadable: " + describe(e), deferred);
      }
      return;
    }
    Message& message = decoded.message();
    if (packet.fds.size() != expected_fd_count(message.type())) {
      reject(session, ErrorCode::kProtocol,
             who(session.pid) + " sent " + std::to_string(packet.fds.size()) +
                 " file descriptor(s) with " + to_string(message.type()),
             deferred);
      return;
    }
    handle(session, message, deferred);
  }
}

void Producer::handle(Session& session, Message& message, Deferred& deferred) {
  const MessageType type = message.type();
  if (type == MessageType::kHello) {
    if (session.ready) {
      reject(session, ErrorCode::kProtocol, who(session.pid) + " sent HELLO twice", deferred);
      return;
    }
    handshake(session, std::get<Hello>(message.body), deferred);
    return;
  }
  // A consumer that leaves without releasing may still read those slots through frames its
  // application keeps: they are retired, never rewritten under it.
  if (type == MessageType::kBye) {
    drop(session, who(session.pid) + " said goodbye", false, true, deferred);
    return;
  }
  if (type == MessageType::kError) {
    drop(session, who(session.pid) + " reported: " + std::get<ErrorMessage>(message.body).text,
         true, true, deferred);
    return;
  }
  if (!session.ready) {
    reject(session, ErrorCode::kProtocol,
           who(session.pid) + " sent " + to_string(type) + " before HELLO", deferred);
    return;
  }
  switch (type) {
    case MessageType::kRelease: {
      const auto& m = std::get<Release>(message.body);
      auto it = session.claims.find(m.sequence);
      if (it == session.claims.end() || it->second.generation != m.generation ||
          it->second.slot != m.slot) {
        reject(session, ErrorCode::kProtocol,
               who(session.pid) + " released a frame it does not hold (generation " +
                   std::to_string(m.generation) + ", slot " + std::to_string(m.slot) +
                   ", sequence " + std::to_string(m.sequence) + ")",
               deferred);
        return;
      }
      if (m.flags & Release::kFenceRecorded) {
        auto fence = session.fences.find({m.generation, m.slot});
        if (fence == session.fences.end()) {
          reject(session, ErrorCode::kProtocol,
                 who(session.pid) + " released slot " + std::to_string(m.slot) +
                     " behind a fence it never sent",
                 deferred);
          return;
        }
      }
      deferred.holds.push_back(std::move(it->second.hold));
      session.claims.erase(it);
      session.released_any = true;
      --stats_.claims_outstanding;
      ++stats_.releases;
      room_cv_.notify_all();
      return;
    }
    case MessageType::kFence: {
      // A consumer's release event for a slot it was given. This implementation neither sends
      // nor waits on such fences (reserved: docs/protocol.md, "FENCE"); they are still checked.
      const auto& m = std::get<Fence>(message.body);
      if (!session.slots_sent.count({m.generation, m.slot})) {
        reject(session, ErrorCode::kProtocol,
               who(session.pid) + " sent a FENCE for slot " + std::to_string(m.slot) +
                   " it was never given",
               deferred);
        return;
      }
      session.fences[{m.generation, m.slot}] = m.event;
      return;
    }
    case MessageType::kEos: return;  // meaningless from a consumer, harmless
    default:
      reject(session, ErrorCode::kProtocol,
             who(session.pid) + " sent " + to_string(type) + ", which only a producer may send",
             deferred);
  }
}

void Producer::handshake(Session& session, const Hello& hello, Deferred& deferred) {
  if (!session.refusal.empty()) {
    reject(session, session.refusal_code, session.refusal, deferred);
    return;
  }
  if (hello.memory_kind != MemoryKind::kAny && hello.memory_kind != config_.memory_kind) {
    reject(session, ErrorCode::kMemoryKindMismatch,
           std::string("producer shares ") + to_string(config_.memory_kind) +
               " memory but the consumer asked for " + to_string(hello.memory_kind) + " memory",
           deferred);
    return;
  }
  const GpuUuid zero{};
  if (config_.memory_kind == MemoryKind::kCuda && hello.gpu_uuid != zero &&
      config_.gpu_uuid != zero && hello.gpu_uuid != config_.gpu_uuid) {
    reject(session, ErrorCode::kGpuMismatch,
           "producer and consumer use different GPUs; CUDA memory can only be shared on one GPU",
           deferred);
    return;
  }
  size_t attached = 0;
  for (const auto& entry : sessions_)
    if (entry.second.get() != &session && entry.second->ready && !entry.second->dead) ++attached;
  if (attached >= kMaxSessions) {
    reject(session, ErrorCode::kUnsupported,
           "too many consumers (at most " + std::to_string(kMaxSessions) + ")", deferred);
    return;
  }
  if (slot_budget_ != 0) {
    uint32_t consumers = 0;
    for (const auto& entry : sessions_) {
      const Session& other = *entry.second;
      if (&other != &session && other.ready && !other.dead) ++consumers;
    }
    if (consumers >= slot_budget_) {
      reject(session, ErrorCode::kUnsupported,
             "the producer's pool leaves consumers " + std::to_string(slot_budget_) +
                 " slots and it already serves " + std::to_string(consumers) +
                 " consumer(s), each of which may keep a frame until a newer one comes; another "
                 "consumer would starve the writer. " +
                 config_.pool_advice,
             deferred);
      return;
    }
  }
  const uint32_t granted = std::min(hello.max_in_flight, config_.max_in_flight);
  session.max_in_flight = granted;
  Welcome w;
  w.instance_id = instance_id_;
  w.memory_kind = config_.memory_kind;
  w.sync_mode = config_.sync_mode;
  w.max_in_flight = session.max_in_flight;
  w.gpu_uuid = config_.gpu_uuid;
  if (session.channel.send(Message{w}) != IoResult::kOk) {
    drop(session, who(session.pid) + " went away during the handshake", false, false, deferred);
    return;
  }
  session.ready = true;
  if (has_caps_) send_caps(session, deferred);
  if (eos_) session.channel.send(Message{Eos{}});
  ++stats_.consumers;
  ++stats_.consumers_total;
  deferred.attached.emplace_back(session.id, session.pid);
  attached_cv_.notify_all();
}

void Producer::reject(Session& session, ErrorCode code, const std::string& text,
                      Deferred& deferred) {
  if (session.dead) return;
  ErrorMessage m;
  m.code = static_cast<uint32_t>(code);
  m.text = text.substr(0, kMaxErrorTextLength);
  session.channel.send(Message{m});
  ++stats_.consumers_rejected;
  drop(session, text, true, false, deferred);
}

void Producer::drop(Session& session, const std::string& reason, bool problem, bool retire,
                    Deferred& deferred) {
  if (session.dead) return;
  session.dead = true;
  const bool refused = !session.ready && problem;
  if (session.ready) --stats_.consumers;
  session.ready = false;
  std::set<std::pair<uint64_t, uint32_t>> retired;
  for (auto& entry : session.claims) {
    if (retire) {
      entry.second.hold->retire();
      retired.insert({entry.second.generation, entry.second.slot});
    }
    deferred.holds.push_back(std::move(entry.second.hold));
    --stats_.claims_outstanding;
  }
  session.claims.clear();
  session.channel.close();
  room_cv_.notify_all();
  deferred.detached.push_back({session.id, reason, problem, refused});
  stats_.slots_retired += retired.size();
  if (!stopping_ && !retired.empty()) announce_retired(retired);
}

void Producer::announce_retired(const std::set<std::pair<uint64_t, uint32_t>>& slots) {
  for (const auto& key : slots) offered_.erase(key);  // never published again
  for (auto& entry : sessions_) {
    Session& s = *entry.second;
    if (s.dead || !s.ready) continue;
    for (const auto& key : slots)
      if (s.slots_sent.erase(key)) s.retire_pending.insert(key);
    if (!s.retire_pending.empty() && !s.broken) flush_retired(s);
  }
}

void Producer::retire_slot(uint64_t generation, uint32_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return;
  const std::pair<uint64_t, uint32_t> key{generation, index};
  for (auto& entry : sessions_) entry.second->fences.erase(key);
  announce_retired({key});
}

bool Producer::flush_retired(Session& session) {
  while (!session.retire_pending.empty()) {
    const auto key = *session.retire_pending.begin();
    const IoResult r = session.channel.send(Message{Retire{key.first, key.second}});
    if (r == IoResult::kWouldBlock) return false;
    if (r != IoResult::kOk) {
      session.broken = true;
      wake_.wake();
      return false;
    }
    session.retire_pending.erase(session.retire_pending.begin());
    ++stats_.retire_notices;
  }
  return true;
}

void Producer::need_back(Session& session, uint64_t now) {
  // Claims are started in sequence order, so the ones not running yet are the newest.
  for (auto it = session.claims.rbegin(); it != session.claims.rend() && it->second.needed_ns == 0;
       ++it)
    it->second.needed_ns = now;
}

void Producer::forgive(uint64_t gap_ns) {
  for (auto& entry : sessions_)
    for (auto& claim : entry.second->claims)
      if (claim.second.needed_ns != 0) claim.second.needed_ns += gap_ns;
}

uint64_t Producer::release_deadline(const Session& session) const {
  if (config_.release_timeout_ms == 0) return UINT64_MAX;
  uint64_t needed = UINT64_MAX;
  for (const auto& claim : session.claims)
    if (claim.second.needed_ns != 0) needed = std::min(needed, claim.second.needed_ns);
  return needed == UINT64_MAX ? needed : needed + uint64_t{config_.release_timeout_ms} * 1000000;
}

bool Producer::still_starting(const Session& session, uint64_t now) const {
  if (session.released_any || config_.startup_grace_ms == 0) return false;
  const uint64_t grace_ns =
      (uint64_t{config_.startup_grace_ms} + config_.release_timeout_ms) * 1000000;
  if (now - session.connected_ns > grace_ns) return false;
  return session.channel.peer_has_unread();
}

bool Producer::writer_waits_on(const Session& session) const {
  return (room_waiters_ != 0 && session.claims.size() >= session.max_in_flight) ||
         (slot_wait_ && !session.claims.empty());
}

bool Producer::writer_starves_others(uint64_t now) const {
  if (room_waiters_ == 0 && !slot_wait_) return false;
  for (const auto& entry : sessions_) {
    const Session& s = *entry.second;
    if (!s.ready || s.dead || s.broken || !s.has_caps) continue;
    if (s.claims.size() < s.max_in_flight && !still_starting(s, now)) return true;
  }
  return false;
}

void Producer::check_deadlines(uint64_t now, Deferred& deferred) {
  const uint64_t hello_ns = uint64_t{config_.hello_timeout_ms} * 1000000;
  const bool starving = writer_starves_others(now);
  for (auto& entry : sessions_) {
    Session& s = *entry.second;
    if (s.dead) continue;
    if (!s.ready) {
      if (now - s.connected_ns > hello_ns)
        reject_unheard(s,
                       who(s.pid) + " connected but never said HELLO (hello-timeout, " +
                           std::to_string(config_.hello_timeout_ms) + " ms)",
                       now, deferred);
      continue;
    }
    const uint64_t deadline = release_deadline(s);
    if (deadline == UINT64_MAX) continue;
    const bool starting = still_starting(s, now);
    // Still starting up, but the writer waits on it while others go without frames: the grace
    // would hold them all up (issue 43: 34 s); release-timeout alone applies.
    const bool holds_up_others = starting && starving && writer_waits_on(s);
    if (starting && !holds_up_others) {
      // Not keeping frames but not reading yet: its clocks start again at every look, so that
      // once it reads them it has the whole release-timeout to import the slots and give them
      // back.
      for (auto& claim : s.claims)
        if (claim.second.needed_ns != 0) claim.second.needed_ns = now;
      continue;
    }
    if (now <= deadline) continue;
    // Say what happened: a consumer that never read what it was sent kept no frame.
    const bool unread = !s.released_any && s.channel.peer_has_unread();
    const std::string timeout = std::to_string(config_.release_timeout_ms) + " ms";
    std::string what;
    if (!unread) {
      what = " kept a frame for longer than release-timeout (" + timeout +
             ") after the producer needed it back";
    } else {
      what = " attached " + std::to_string((now - s.connected_ns) / 1000000) +
             " ms ago but has not read the frames sent to it, nor released any";
      if (holds_up_others)
        what += "; the writer waited release-timeout (" + timeout +
                ") for it while the other consumers went without frames";
      else if (config_.startup_grace_ms != 0)
        what += ", within its start-up grace (" + std::to_string(config_.startup_grace_ms) +
                " ms) plus release-timeout (" + timeout + ")";
      else
        what += ", within release-timeout (" + timeout + ")";
    }
    s.channel.send(Message{Bye{Bye::kTimeout}});
    ++stats_.consumers_timed_out;
    // Retire: the stuck consumer may still read these slots, so they must never be reused.
    drop(s,
         who(s.pid) + what + "; disconnected, " + std::to_string(s.claims.size()) +
             " slot(s) retired",
         true, true, deferred);
  }
  report_unheard(now, deferred);
}

int Producer::next_timeout_ms(uint64_t now) const {
  uint64_t deadline = UINT64_MAX;
  for (const auto& entry : sessions_) {
    const Session& s = *entry.second;
    if (s.dead) continue;
    // publish() starts claims' clocks without waking this thread (a syscall per frame); instead,
    // while consumers are attached, look at least four times per release-timeout.
    if (s.ready && config_.release_timeout_ms)
      deadline = std::min(deadline,
                          now + std::max<uint64_t>(config_.release_timeout_ms / 4, 10) * 1000000);
    if (!s.ready)
      deadline = std::min(deadline, s.connected_ns + uint64_t{config_.hello_timeout_ms} * 1000000);
    else
      deadline = std::min(deadline, release_deadline(s));  // restarted by check_deadlines()
  }
  if (accept_paused_until_ > now) deadline = std::min(deadline, accept_paused_until_);
  deadline = std::min(deadline, listener_.next_check_ns());
  if (unheard_unreported_ != 0) deadline = std::min(deadline, unheard_report_at_ns_);
  if (deadline == UINT64_MAX) return -1;
  if (deadline <= now) return 0;
  return static_cast<int>(std::min<uint64_t>((deadline - now) / 1000000 + 1, 60000));
}

void Producer::send_caps(Session& session, Deferred& deferred) {
  if (session.channel.send(Message{caps_}) != IoResult::kOk) {
    session.broken = true;
    wake_.wake();
    return;
  }
  session.has_caps = true;
  session.caps_generation = caps_.generation;
  for (auto it = session.slots_sent.begin(); it != session.slots_sent.end();)
    it = it->first != caps_.generation ? session.slots_sent.erase(it) : std::next(it);
  for (auto it = session.fences.begin(); it != session.fences.end();)
    it = it->first.first != caps_.generation ? session.fences.erase(it) : std::next(it);
  // The new CAPS makes the consumer drop every older slot by itself.
  for (auto it = session.retire_pending.begin(); it != session.retire_pending.end();)
    it = it->first != caps_.generation ? session.retire_pending.erase(it) : std::next(it);
  share_offered(session, deferred);
}

IoResult Producer::give_slot(Session& session, uint64_t generation, uint32_t index,
                             const SlotMemory& memory) {
  Slot m;
  m.generation = generation;
  m.index = index;
  m.size = memory.size();
  if (memory.event_handle(&m.event)) m.flags |= Slot::kHasEvent;
  const int fd = memory.export_fd();
  const IoResult r = session.channel.send(Message{m}, &fd, 1);
  if (r != IoResult::kOk) return r;
  session.slots_sent.insert({generation, index});
  ++stats_.slots_exported;
  return r;
}

void Producer::share_offered(Session& session, Deferred& deferred) {
  session.offers_pending = false;
  if (!session.has_caps || session.broken) return;
  const uint64_t generation = session.caps_generation;
  for (auto it = offered_.lower_bound({generation, 0});
       it != offered_.end() && it->first.first == generation;) {
    if (session.slots_sent.count(it->first)) {
      ++it;
      continue;
    }
    std::shared_ptr<const SlotMemory> memory = it->second.lock();
    if (!memory) {  // its pool freed it
      it = offered_.erase(it);
      continue;
    }
    if (session.channel.unread_bytes() >= kOfferUnreadBytes) {
      session.offers_pending = true;  // tried again with its next frame
      deferred.memories.push_back(std::move(memory));
      return;
    }
    const IoResult r = give_slot(session, it->first.first, it->first.second, *memory);
    deferred.memories.push_back(std::move(memory));
    if (r == IoResult::kWouldBlock) {  // or descriptors in flight (ETOOMANYREFS)
      session.offers_pending = true;
      return;
    }
    if (r != IoResult::kOk) {
      session.broken = true;
      wake_.wake();
      return;
    }
    ++it;
  }
}

void Producer::offer_slot(uint64_t generation, uint32_t index,
                          std::weak_ptr<const SlotMemory> memory) {
  Deferred deferred;  // finished after the lock: the memory may be freed meanwhile
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || index >= kMaxSlots) return;
    if (has_caps_ && generation < caps_.generation) return;  // an old pool's: not published
    // Older generations' slots are not published any more.
    offered_.erase(offered_.begin(), offered_.lower_bound({generation, 0}));
    offered_[{generation, index}] = std::move(memory);
    for (auto& entry : sessions_) {
      Session& s = *entry.second;
      if (s.ready && !s.dead && s.caps_generation == generation) share_offered(s, deferred);
    }
  }
  finish(deferred);
}

void Producer::finish(Deferred& deferred) {
  deferred.holds.clear();  // may return buffers to their pool: done without our lock
  if (!observer_) return;
  for (auto& a : deferred.attached) observer_->on_consumer_attached(a.first, a.second);
  for (auto& d : deferred.detached) {
    if (d.refused)
      observer_->on_consumer_refused(d.id, d.reason);
    else
      observer_->on_consumer_detached(d.id, d.reason, d.problem);
  }
  for (auto& w : deferred.warnings) observer_->on_warning(w);
}

void Producer::set_caps(uint64_t generation, const std::string& caps, uint64_t frame_size) {
  Deferred deferred;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    caps_.generation = generation;
    caps_.caps = caps;
    caps_.frame_size = frame_size;
    has_caps_ = true;
    eos_ = false;
    slot_wait_ = false;  // a new pool
    // Slots offered before this caps, of older generations, are not published any more.
    offered_.erase(offered_.begin(), offered_.lower_bound({generation, 0}));
    for (auto& entry : sessions_)
      if (entry.second->ready && !entry.second->dead && !entry.second->broken)
        send_caps(*entry.second, deferred);
  }
  finish(deferred);
}

size_t Producer::publish(const SlotRef& slot, Frame frame, const std::shared_ptr<FrameHold>& hold) {
  Deferred deferred;
  size_t delivered = publish_locked(slot, std::move(frame), hold, deferred);
  finish(deferred);  // releases read above may return buffers to their pool: without our lock
  return delivered;
}

size_t Producer::publish_locked(const SlotRef& slot, Frame frame,
                                const std::shared_ptr<FrameHold>& hold, Deferred& deferred) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool lazy = config_.lazy_release_ms != 0;
  slot_wait_ = false;  // the writer had its slot
  ++stats_.frames_published;
  eos_ = false;
  frame.generation = slot.generation;
  frame.slot = slot.index;
  frame.sequence = next_sequence_++;
  frame.send_time = monotonic_ns();
  const std::vector<uint8_t> frame_bytes = encode(Message{frame});
  // Something newer exists now: every frame a consumer holds is needed back, whether or not this
  // one reaches it.
  for (auto& entry : sessions_)
    if (entry.second->ready && !entry.second->dead) need_back(*entry.second, frame.send_time);
  size_t delivered = 0;
  bool wake = false;
  for (auto& entry : sessions_) {
    Session& s = *entry.second;
    if (!s.ready || s.dead || s.broken) continue;
    if (!s.retire_pending.empty()) flush_retired(s);
    // A consumer at its limit may have released since: read that before dropping the frame.
    if (lazy && s.claims.size() >= s.max_in_flight) {
      service(s, deferred, kMaxMessagesPerPublish, s.max_in_flight - 1);
      if (s.dead) {
        wake = true;
        continue;
      }
    }
    if (!s.has_caps || s.caps_generation != slot.generation || s.claims.size() >= s.max_in_flight) {
      ++stats_.frames_dropped;
      continue;
    }
    if (!s.slots_sent.count({slot.generation, slot.index})) {
      // Not offered, or the socket was full when it was: now, just before its first frame.
      const IoResult r = give_slot(s, slot.generation, slot.index, *slot.memory);
      if (r == IoResult::kWouldBlock) {
        ++stats_.frames_dropped;
        continue;
      }
      if (r != IoResult::kOk) {
        s.broken = wake = true;
        continue;
      }
    }
    const IoResult r = s.channel.send(frame_bytes);
    if (r == IoResult::kWouldBlock) {
      ++stats_.frames_dropped;
      continue;
    }
    if (r != IoResult::kOk) {
      s.broken = wake = true;
      continue;
    }
    s.claims.emplace(frame.sequence, Claim{slot.generation, slot.index, hold, 0});
    ++stats_.claims_outstanding;
    ++stats_.frames_sent;
    ++delivered;
    // Offered slots that did not fit before: after the frame, which they must not delay; the
    // consumer imports them while it waits for the next one.
    if (s.offers_pending) {
      share_offered(s, deferred);
      wake |= s.broken;
    }
  }
  // RELEASEs queued since the last frame are read here, after the frame is out, instead of by a
  // wake-up of the I/O thread.
  if (lazy) {
    read_attached(deferred, frame.sequence);
    const uint64_t now = monotonic_ns();
    // A lazy phase begins: the I/O thread still polls for RELEASEs, and would wake for the
    // first one anyway. Wake it now, so that it polls for hang-ups only from here on.
    if (lazy_until_ns_ <= now) wake = true;
    lazy_until_ns_ = now + uint64_t{config_.lazy_release_ms} * 1000000;
  }
  if (wake) wake_.wake();
  return delivered;
}

void Producer::send_eos() {
  std::lock_guard<std::mutex> lock(mutex_);
  eos_ = true;
  slot_wait_ = false;
  for (auto& entry : sessions_) {
    Session& s = *entry.second;
    if (!s.ready || s.dead || s.broken) continue;
    if (s.channel.send(Message{Eos{}}) != IoResult::kOk) {
      s.broken = true;
      wake_.wake();
    }
  }
}

bool Producer::wait_for_consumer(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto ready = [this] { return flush_holders_ || stopping_ || stats_.consumers > 0; };
  if (timeout_ms < 0)
    attached_cv_.wait(lock, ready);
  else
    attached_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready);
  return !flush_holders_ && !stopping_ && stats_.consumers > 0;
}

Producer::Room Producer::wait_for_room(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto room = [this] {
    for (const auto& entry : sessions_) {
      const Session& s = *entry.second;
      if (!s.ready || s.dead || s.broken || !s.has_caps) continue;
      if (s.claims.size() >= s.max_in_flight) return false;
    }
    return true;
  };
  auto done = [&] { return flush_holders_ || stopping_ || room(); };
  if (!done() && lazy_until_ns_) {
    // Releases may be queued unread (lazy phase): take them before deciding to wait.
    Deferred deferred;
    read_attached(deferred);
    lock.unlock();
    finish(deferred);
    lock.lock();
  }
  if (!done()) {
    ++stats_.backpressure_waits;
    // The writer now waits for these consumers: what they hold is needed back.
    const uint64_t now = monotonic_ns();
    for (auto& entry : sessions_) {
      Session& s = *entry.second;
      if (s.ready && !s.dead && s.claims.size() >= s.max_in_flight) need_back(s, now);
    }
    // Only a RELEASE ends this wait: the I/O thread must read them as they come.
    lazy_until_ns_ = 0;
    wake_.wake();
    ++room_waiters_;  // the start-up grace must not hold up the others (check_deadlines)
    bool in_time = true;
    if (timeout_ms < 0)
      room_cv_.wait(lock, done);
    else
      in_time = room_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), done);
    --room_waiters_;
    if (!in_time) return Room::kTimeout;
  }
  return flush_holders_ || stopping_ ? Room::kFlushing : Room::kReady;
}

void Producer::read_releases_now() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // A writer waits for a slot: every claim holds one it may be waiting for.
    const uint64_t now = monotonic_ns();
    for (auto& entry : sessions_)
      if (entry.second->ready && !entry.second->dead) need_back(*entry.second, now);
    slot_wait_ = true;  // until the next publish()
    if (lazy_until_ns_ == 0) return;
    lazy_until_ns_ = 0;
  }
  wake_.wake();
}

void Producer::set_slot_budget(uint32_t slots) {
  std::lock_guard<std::mutex> lock(mutex_);
  slot_budget_ = slots;
}

void Producer::set_flushing(bool flushing, FlushHolder holder) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (flushing) {
      flush_holders_ |= unsigned(holder);
      slot_wait_ = false;  // the wait for a slot ends too
    } else {
      flush_holders_ &= ~unsigned(holder);
    }
  }
  attached_cv_.notify_all();
  room_cv_.notify_all();
}

bool Producer::io_thread_sleeps_lazily() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return io_sleeps_lazily_;
}

ProducerStats Producer::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

size_t Producer::consumer_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_.consumers;
}

}  // namespace cipc
