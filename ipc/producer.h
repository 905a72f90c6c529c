// SPDX-License-Identifier: LGPL-2.1-or-later
// The producer side (served by cudasink-ipc): accepts consumers on a Unix socket, hands each of
// them the current caps, every slot once (as soon as it exists), and frames as claims; takes claims
// back on RELEASE, on hang-up and on release timeout. An I/O thread owns the listening socket,
// handshakes and hang-ups; publish() runs on the caller's (streaming) thread and never blocks on a
// consumer. While frames flow, publish() also reads the consumers' RELEASEs itself (non-blocking),
// so the I/O thread is not woken once per frame for them (see lazy_release_ms).
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "channel.h"
#include "memorybackend.h"
#include "protocol.h"
#include "status.h"
#include "waker.h"

namespace cipc {

struct ProducerConfig {
  std::string socket_path;
  unsigned socket_mode = 0600;
  bool allow_other_users = false;  // otherwise peers must run under our uid (SO_PEERCRED)
  uint32_t max_in_flight = 4;      // frames one consumer may hold; it gets no more beyond that
  // A claim the producer needs back (a newer frame was published, or a writer waits for room) and
  // that is still held this long disconnects its consumer; 0: never. Time in which nothing newer
  // existed, or in which the producer itself did not run (SIGSTOP), does not count.
  uint32_t release_timeout_ms = 2000;
  // Start-up: for this long (plus release_timeout_ms) after a consumer attached, while it has
  // released nothing and has not even read the frames sent to it, it is still starting up (a
  // CUDA context takes seconds when many processes start at once: on an H200, 2.3 s for 16 and
  // 15 s for 64 started together), not keeping frames: the release clocks of its frames start again
  // from each such look, so it has the whole release_timeout_ms once it reads them. One that read
  // its frames, or released any before, has release_timeout_ms alone; one that never reads goes
  // once the grace is over. The grace never holds up the others longer than release_timeout_ms:
  // while a writer waits on such a consumer (backpressure, or a pool with every slot out) and a
  // consumer past its start-up goes without frames meanwhile, release_timeout_ms alone applies.
  uint32_t startup_grace_ms = 30000;
  uint32_t hello_timeout_ms = 5000;  // a connection that says nothing is dropped after this
  // Connections closed before they said HELLO (hello_timeout_ms ran out, or too many waited to
  // say it) are reported one by one at most once per this long; the others are counted, and
  // reported together in one warning at the end of it.
  uint32_t unheard_report_ms = 10000;
  // For this long after a publish() the I/O thread leaves consumers' messages (RELEASE, FENCE)
  // to the next publish() and wakes only for hang-ups and deadlines: a wake-up per frame saved.
  // read_releases_now() ends it early (a writer waiting for a free slot); 0: always read them at
  // once on the I/O thread.
  uint32_t lazy_release_ms = 100;
  // What a consumer turned away by the slot budget (set_slot_budget) is told to do about it.
  std::string pool_advice = "Let upstream grow the pool, or raise its size";
  MemoryKind memory_kind = MemoryKind::kHost;
  SyncMode sync_mode = SyncMode::kNone;
  GpuUuid gpu_uuid{};
  uint64_t instance_id = 0;  // 0: pick a random one
  // Made when the I/O thread starts and dropped when it ends. Claims that end on that thread
  // (a hang-up, a timeout, a RELEASE it reads) destroy their FrameHold there; the CUDA backend
  // uses this to park the slot destructions it would otherwise make behind the application's
  // back (cuda/deferred_destruction.h: a driver lock the application's launches wait on).
  std::function<std::shared_ptr<void>()> io_thread_scope;
};

// What keeps a published frame's slot out of the pool while consumers hold it. The producer
// keeps one shared reference per outstanding claim; the slot is free again when the last one
// goes. retire() is called first when a claim ends without the consumer's RELEASE (timeout,
// shutdown): the consumer may still read the slot, so it must not be written again.
class FrameHold {
 public:
  virtual ~FrameHold() = default;
  virtual void retire() = 0;
};

struct SlotRef {
  uint64_t generation = 0;
  uint32_t index = 0;
  const SlotMemory* memory = nullptr;  // alive as long as the FrameHold published with it
};

struct ProducerStats {
  uint64_t frames_published = 0;    // publish() calls
  uint64_t frames_sent = 0;         // FRAME messages delivered, summed over consumers
  uint64_t frames_dropped = 0;      // frames a consumer did not get (max-in-flight, full socket)
  uint64_t backpressure_waits = 0;  // wait_for_room() calls that had to wait
  uint64_t releases = 0;
  uint64_t claims_outstanding = 0;
  uint64_t consumers = 0;        // attached now
  uint64_t consumers_total = 0;  // ever attached
  uint64_t consumers_timed_out = 0;
  uint64_t consumers_rejected = 0;  // refused at handshake or dropped for protocol errors
  uint64_t slots_exported = 0;      // SLOT messages sent
  uint64_t slots_retired = 0;       // slots taken out of the pool under a consumer that left
  uint64_t retire_notices = 0;      // RETIRE messages sent to the other consumers
  uint64_t empty_reads = 0;  // receives from a consumer that found nothing (a wasted system call)
};

// Notifications from the I/O thread. Called with no producer lock held; must not call back into
// Producer methods that take its lock from inside on_* if they could deadlock (they cannot: the
// lock is released before the call).
class ProducerObserver {
 public:
  virtual ~ProducerObserver() = default;
  virtual void on_consumer_attached(uint64_t id, pid_t pid) {
    (void)id;
    (void)pid;
  }
  // `problem`: the consumer misbehaved or was refused (as opposed to leaving normally).
  virtual void on_consumer_detached(uint64_t id, const std::string& reason, bool problem) {
    (void)id;
    (void)reason;
    (void)problem;
  }
  // A connection turned away before it attached (another user, too many consumers, a bad
  // HELLO): not a consumer that was disconnected.
  virtual void on_consumer_refused(uint64_t id, const std::string& reason) {
    on_consumer_detached(id, reason, true);
  }
  // Something the user should hear about once (e.g. the process ran out of descriptors).
  virtual void on_warning(const std::string& text) { (void)text; }
};

class Producer {
 public:
  static Result<std::unique_ptr<Producer>> start(const ProducerConfig& config,
                                                 ProducerObserver* observer = nullptr);
  // Says BYE to every consumer, drops (and retires) all claims, removes the socket file.
  ~Producer();
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  // New stream format (new pool generation): sent now to attached consumers, later to new ones.
  void set_caps(uint64_t generation, const std::string& caps, uint64_t frame_size);
  // Hands `frame` (in `slot`) to every ready consumer that has room. Each delivery keeps a
  // reference to `hold` until released. Returns how many consumers got it.
  size_t publish(const SlotRef& slot, Frame frame, const std::shared_ptr<FrameHold>& hold);
  void send_eos();
  // The slots consumers may keep between them (0: no limit), what a bounded pool upstream writes
  // into leaves them. A consumer releases what it is sent as it goes, except (often) the last
  // frame, which its sink keeps until a newer one replaces it: with as many consumers as slots,
  // each keeping a different one, the writer has no slot for that newer frame. So at most `slots`
  // consumers are admitted; the next is refused, saying why. Consumers already attached stay.
  void set_slot_budget(uint32_t slots);
  // A slot of `generation` that will never be published again: its memory belongs to someone
  // else (an upstream element's pool) who is freeing it. Every consumer that imported it is told
  // to drop its import (RETIRE). Frames in it may still be claimed: the consumer keeps such a
  // frame's import until it releases it. Thread-safe; never blocks on a consumer.
  void retire_slot(uint64_t generation, uint32_t index);

  // A slot of `generation` that frames will be published in (its pool made it): every consumer
  // that has this generation's caps is given it now (SLOT), and one that attaches later right
  // after CAPS, rather than just before the first frame in it - so that no consumer imports a
  // slot (hundreds of microseconds for CUDA memory) between a frame's send and its arrival, and
  // not all at once in a pool's first round. A full socket (or a descriptor limit: ETOOMANYREFS)
  // leaves the rest to go just before their first frame, as without an offer. Only a weak
  // reference is kept: memory its pool has freed is not offered. Slots of older generations
  // are forgotten. Thread-safe; never blocks on a consumer.
  void offer_slot(uint64_t generation, uint32_t index, std::weak_ptr<const SlotMemory> memory);

  // Blocks until at least one consumer is attached; false on timeout or while flushing.
  bool wait_for_consumer(int timeout_ms);
  // Backpressure: blocks until every attached consumer can take one more frame (it holds fewer
  // than its max in flight), so that the next publish() reaches all of them. A consumer that
  // stops releasing still leaves at release-timeout, which ends the wait. kFlushing: interrupted
  // by set_flushing(true) or shutdown; kTimeout after timeout_ms (< 0: none).
  enum class Room { kReady, kFlushing, kTimeout };
  Room wait_for_room(int timeout_ms);
  // Makes the I/O thread read consumers' messages as they arrive again, until the next
  // publish(): for a writer about to wait for a slot that only a RELEASE can free. Never blocks.
  void read_releases_now();
  // Who interrupts the waits above: the element (unlock, a flush, a state change) and, apart
  // from it, whoever writes the frames (upstream flushing the buffer pool it takes slots from,
  // as a source does to deliver a forced EOS). The waits stay interrupted while either holds.
  enum class FlushHolder : unsigned { kElement = 1, kWriter = 2 };
  void set_flushing(bool flushing, FlushHolder holder = FlushHolder::kElement);

  ProducerStats stats() const;
  // Whether the I/O thread is asleep in the lazy phase now, where a RELEASE does not wake it
  // (tests wait for this before they count on publish() being the one to read).
  bool io_thread_sleeps_lazily() const;
  size_t consumer_count() const;
  uint64_t instance_id() const { return instance_id_; }
  const std::string& socket_path() const { return config_.socket_path; }

 private:
  struct Claim {
    uint64_t generation;
    uint32_t slot;
    std::shared_ptr<FrameHold> hold;
    // When the producer began to need this claim back, on the monotonic clock; 0: not yet. A
    // consumer may keep its newest frame as long as nothing newer exists (a video sink's last
    // buffer): release-timeout counts from here, never from the send.
    uint64_t needed_ns = 0;
  };
  struct SlotKeyHash {
    size_t operator()(const std::pair<uint64_t, uint32_t>& key) const {
      return std::hash<uint64_t>()(key.first * 0x9E3779B97F4A7C15ull ^ key.second);
    }
  };
  struct Session {
    uint64_t id = 0;
    Channel channel;
    pid_t pid = 0;
    bool ready = false;  // HELLO answered
    // Set at accept when the peer may not attach (other uid, too many): told in answer to its
    // HELLO, so the refusal reaches it instead of a bare connection reset.
    ErrorCode refusal_code = ErrorCode::kInvalidArgument;
    std::string refusal;
    bool broken = false;  // a send failed; the I/O thread drops it
    bool dead = false;    // dropped; erased by the I/O thread
    uint32_t max_in_flight = 1;
    uint64_t connected_ns = 0;
    bool released_any = false;  // past start-up: release-timeout alone applies
    uint64_t caps_generation = 0;
    bool has_caps = false;
    // Looked up for every consumer on every frame: hashed, not a tree of scattered nodes.
    std::unordered_set<std::pair<uint64_t, uint32_t>, SlotKeyHash> slots_sent;
    bool offers_pending = false;  // offered slots not sent yet: its socket was too full
    std::map<std::pair<uint64_t, uint32_t>, EventHandle> fences;  // FENCE handles by slot
    std::map<uint64_t, Claim> claims;                             // by sequence number
    // Retired slots this consumer still has to be told about (its socket was full).
    std::set<std::pair<uint64_t, uint32_t>> retire_pending;
  };
  // Work to finish after the lock is released: observer calls and hold destruction (which may
  // return buffers to a pool).
  struct Deferred {
    std::vector<std::shared_ptr<FrameHold>> holds;
    std::vector<std::pair<uint64_t, pid_t>> attached;
    struct Detached {
      uint64_t id;
      std::string reason;
      bool problem;
      bool refused;  // never attached
    };
    std::vector<Detached> detached;
    std::vector<std::string> warnings;
    // Offered slots used under the lock: if ours is the last reference, freed after it.
    std::vector<std::shared_ptr<const SlotMemory>> memories;
  };

  explicit Producer(const ProducerConfig& config, ProducerObserver* observer);
  size_t publish_locked(const SlotRef& slot, Frame frame, const std::shared_ptr<FrameHold>& hold,
                        Deferred& deferred);
  void run();
  void accept_all(Deferred& deferred);
  // At the descriptor limit: spends the reserve descriptor on one waiting connection to tell it
  // why it is refused. False when there is no reserve to spend.
  bool refuse_for_lack_of_descriptors();
  // Reads and handles up to `max_messages` of the session's queued messages, without blocking;
  // with `until_claims`, stops as soon as the session holds no more claims than that (what it
  // could still release is then nothing, or only frames it has just been sent).
  void service(Session& session, Deferred& deferred, int max_messages,
               std::optional<size_t> until_claims = std::nullopt);
  // service() for every attached consumer, on the calling thread (publish, wait_for_room). After
  // publish (`just_sent`: that frame's sequence), a consumer that was sent the frame is read only
  // while it holds more than that one: otherwise it has nothing to release, and a receive would
  // find nothing - one wasted system call per frame.
  void read_attached(Deferred& deferred, std::optional<uint64_t> just_sent = std::nullopt);
  void handle(Session& session, Message& message, Deferred& deferred);
  void handshake(Session& session, const Hello& hello, Deferred& deferred);
  void reject(Session& session, ErrorCode code, const std::string& text, Deferred& deferred);
  void drop(Session& session, const std::string& reason, bool problem, bool retire,
            Deferred& deferred);
  // Starts the release-timeout clock of the session's claims that do not run yet.
  static void need_back(Session& session, uint64_t now);
  // The producer did not run for `gap_ns` (stopped, or starved): shifts every running clock by
  // it, so that a consumer is not blamed for time in which we could not read its RELEASEs.
  void forgive(uint64_t gap_ns);
  void check_deadlines(uint64_t now, Deferred& deferred);
  // A consumer that has released nothing yet, attached less than startup_grace_ms plus
  // release_timeout_ms ago, with packets sent to it still unread: not stuck, still starting up.
  bool still_starting(const Session& session, uint64_t now) const;
  // Whether a waiting writer waits for this consumer: it holds all the frames it may hold
  // (wait_for_room), or any slot of a pool with none left (read_releases_now).
  bool writer_waits_on(const Session& session) const;
  // Whether a consumer past its start-up, which could take a frame now, gets none because the
  // writer waits: then no start-up grace holds for the consumers the writer waits on.
  bool writer_starves_others(uint64_t now) const;
  // More than kMaxWaitingConnections connections have not said HELLO: closes the oldest of them
  // (after reading a HELLO it may have sent meanwhile), so that a flood of silent connections
  // neither locks consumers out nor takes the descriptors the slot pool needs.
  void limit_waiting(Deferred& deferred);
  // Closes a connection that never said HELLO. Reported like any refusal, except that within
  // unheard_report_ms of the last such report it is only counted (report_unheard says how many).
  void reject_unheard(Session& session, const std::string& text, uint64_t now, Deferred& deferred);
  void report_unheard(uint64_t now, Deferred& deferred);
  // The earliest release deadline among the session's claims; UINT64_MAX: none runs.
  uint64_t release_deadline(const Session& session) const;
  int next_timeout_ms(uint64_t now) const;
  void send_caps(Session& session, Deferred& deferred);
  // SLOT for (generation, index) to `session` (its descriptor with it) and the record of it.
  IoResult give_slot(Session& session, uint64_t generation, uint32_t index,
                     const SlotMemory& memory);
  // Gives `session` the offered slots of its caps generation it does not have, while little is
  // unread in its socket (kOfferUnreadBytes): the rest go after a later frame, or before their own.
  void share_offered(Session& session, Deferred& deferred);
  // Tells every other consumer that was given one of `slots` to drop its import.
  void announce_retired(const std::set<std::pair<uint64_t, uint32_t>>& slots);
  // Sends what `session` still has to hear of retired slots; false if its socket is full.
  bool flush_retired(Session& session);
  void finish(Deferred& deferred);

  const ProducerConfig config_;
  ProducerObserver* const observer_;
  const uint64_t instance_id_;
  Listener listener_;
  UniqueFd reserve_fd_;               // kept open so a refusal can still be accepted and explained
  uint64_t accept_paused_until_ = 0;  // accept() failed: the listener is not polled until then
  bool descriptor_shortage_ = false;  // said once per episode
  Waker wake_;
  std::thread thread_;

  mutable std::mutex mutex_;
  std::condition_variable attached_cv_;
  std::condition_variable room_cv_;  // a claim ended or a consumer left
  bool stopping_ = false;
  unsigned flush_holders_ = 0;  // FlushHolder bits
  bool eos_ = false;
  bool has_caps_ = false;
  uint32_t slot_budget_ = 0;  // set_slot_budget(); 0: unlimited
  // Until then consumers' messages wait for publish() (lazy_release_ms); 0: read at once.
  uint64_t lazy_until_ns_ = 0;
  // When the I/O thread next looks whether the lazy phase ended (0: not in one); see run().
  uint64_t lazy_look_ns_ = 0;
  bool io_sleeps_lazily_ = false;  // the I/O thread's current poll() leaves RELEASEs queued
  Caps caps_;
  // offer_slot(): the slots of the newest generation offered, by (generation, index).
  std::map<std::pair<uint64_t, uint32_t>, std::weak_ptr<const SlotMemory>> offered_;
  // A writer waits: in wait_for_room() (how many), or for a pool slot (read_releases_now(),
  // until the next publish).
  unsigned room_waiters_ = 0;
  bool slot_wait_ = false;
  // Connections closed before HELLO: until then only counted; how many are not reported yet.
  uint64_t unheard_report_at_ns_ = 0;
  uint64_t unheard_unreported_ = 0;
  uint64_t next_session_id_ = 1;
  uint64_t next_sequence_ = 1;
  std::map<uint64_t, std::unique_ptr<Session>> sessions_;
  ProducerStats stats_;
};

}  // namespace cipc
