// SPDX-License-Identifier: LGPL-2.1-or-later
// The consumer side (used by cudasrc-ipc): connects, says HELLO, imports each slot once, and turns
// FRAME messages into ReceivedFrames whose claim sends RELEASE when its last owner lets go - from
// whatever thread that happens on, for as long as the connection lives.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "channel.h"
#include "memorybackend.h"
#include "process_identity.h"
#include "protocol.h"
#include "status.h"
#include "waker.h"

namespace cipc {

struct ConsumerConfig {
  std::string socket_path;
  MemoryKind memory_kind = MemoryKind::kAny;
  uint32_t max_in_flight = 4;
  GpuUuid gpu_uuid{};
  int handshake_timeout_ms = 2000;
  // Attach to a producer that runs as another user. Off: such a producer is refused before
  // HELLO (SO_PEERCRED), so that nobody can pose as the producer at a shared path.
  bool allow_other_users = false;
};

// A slot mapped into this process. Shared by every frame that lives in it; stays mapped while
// any of them is alive, even after the connection or the producer is gone.
struct ImportedSlot {
  uint64_t generation = 0;
  uint32_t index = 0;
  std::unique_ptr<SlotMemory> memory;
};

// The connection as seen by claims, which may outlive the Consumer object. It belongs to the
// process that connected: a child made by fork() inherits the socket and every claim, but what
// it does with them must not reach the producer (a RELEASE would hand the parent's frames back to
// be overwritten, a BYE would end the parent's connection). There, claims and the connection are
// dropped silently: nothing is sent, shut down or read on the inherited socket.
struct ConsumerLink {
  std::mutex mutex;
  Channel channel;
  bool open = true;
  const pid_t owner = this_process_id();
  // False in a process other than the one that connected (a child after fork()). Asked twice per
  // frame: no system call (process_identity.h).
  bool in_owner() const { return this_process_id() == owner; }
  std::atomic<uint64_t> releases_sent{0};
  std::atomic<uint64_t> releases_lost{0};  // connection gone or socket full
  std::atomic<uint64_t> claims_outstanding{0};
};

// One frame's claim on its slot. Destroying it sends RELEASE (only in the process that connected).
class FrameClaim {
 public:
  FrameClaim(std::shared_ptr<ConsumerLink> link, const Frame& frame);
  ~FrameClaim();
  FrameClaim(const FrameClaim&) = delete;
  FrameClaim& operator=(const FrameClaim&) = delete;

 private:
  std::shared_ptr<ConsumerLink> link_;
  uint64_t generation_;
  uint32_t slot_;
  uint64_t sequence_;
};

struct ReceivedFrame {
  Frame info;
  std::shared_ptr<const ImportedSlot> slot;
  std::shared_ptr<FrameClaim> claim;

  // The slot and the claim in one owner, for work that must keep both until the GPU has read
  // the slot (dropping it sends RELEASE, then lets the slot go); the claim moves out of here.
  std::shared_ptr<void> take_hold() {
    return std::make_shared<
        std::pair<std::shared_ptr<const ImportedSlot>, std::shared_ptr<FrameClaim>>>(
        slot, std::move(claim));
  }
};

struct ConsumerEvent {
  enum class Kind { kFrame, kCaps, kEos, kClosed, kTimeout, kInterrupted, kError };
  Kind kind = Kind::kTimeout;
  ReceivedFrame frame;                  // kFrame
  Caps caps;                            // kCaps
  Error error{ErrorCode::kClosed, {}};  // kClosed (why) and kError (what went wrong)
  // kClosed and kError: what the producer said as it left, so that callers can tell a producer
  // that stops from one that cut this consumer off.
  enum class Parting {
    kNothing,  // the connection just closed (a crash, a kill), or this consumer found a fault
    kStopped,  // BYE shutdown: the producer is stopping
    kEvicted,  // BYE release-timeout or protocol-error: the producer disconnected this consumer
    kError,    // ERROR: the producer disconnected this consumer and said why
  };
  Parting parting = Parting::kNothing;
};

struct ConsumerStats {
  uint64_t frames_received = 0;
  uint64_t slots_imported = 0;
  uint64_t slots_retired = 0;  // imports dropped on the producer's RETIRE
  uint64_t releases_sent = 0;
  uint64_t releases_lost = 0;
  uint64_t claims_outstanding = 0;
  uint64_t empty_reads = 0;  // receives that found nothing: a system call spent for no message
};

// Picks the memory backend once the producer has said (WELCOME) what it shares; an Error
// refuses the producer (e.g. no CUDA device, or not the producer's GPU).
using BackendFactory = std::function<Result<std::shared_ptr<MemoryBackend>>(const Welcome&)>;

class Consumer {
 public:
  // Connects and completes the handshake. `waker` (optional, not owned) interrupts the wait.
  static Result<std::unique_ptr<Consumer>> connect(const ConsumerConfig& config,
                                                   BackendFactory backend_factory,
                                                   Waker* waker = nullptr);
  // The same with one fixed backend (not owned; must outlive the Consumer).
  static Result<std::unique_ptr<Consumer>> connect(const ConsumerConfig& config,
                                                   MemoryBackend& backend, Waker* waker = nullptr);
  // Says BYE; outstanding claims then release nothing (the producer reclaims). In a process other
  // than the one that connected (after fork()) it only closes this process's descriptor.
  ~Consumer();
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  // Waits for the next caps, frame or end. timeout_ms < 0: no timeout. Frames that were still
  // queued when the producer disconnected this consumer (it had stopped reading them) are not
  // handed out: the disconnection is, at once. In a process other than the one that connected it
  // reads nothing (the messages are the connecting process's) and returns kError
  // (kInvalidArgument) saying so.
  ConsumerEvent next(int timeout_ms);

  const Welcome& welcome() const { return welcome_; }
  uint64_t instance_id() const { return welcome_.instance_id; }
  MemoryBackend& backend() const { return *backend_; }
  ConsumerStats stats() const;

 private:
  Consumer(std::shared_ptr<ConsumerLink> link, std::shared_ptr<MemoryBackend> backend,
           Waker* waker);
  ConsumerEvent fail(ErrorCode code, const std::string& text);
  // Returns true when `out` holds an event for the caller.
  bool handle(Packet& packet, ConsumerEvent& out);
  // One per message a producer may send; each returns what handle() returns.
  bool on_caps(Caps& caps, ConsumerEvent& out);
  bool on_slot(const Slot& s, Packet& packet, ConsumerEvent& out);
  bool on_frame(const Frame& f, ConsumerEvent& out);
  bool on_retire(const Retire& r, ConsumerEvent& out);
  bool on_eos(ConsumerEvent& out);
  bool on_bye(const Bye& bye, ConsumerEvent& out);
  bool on_error(const ErrorMessage& error, ConsumerEvent& out);
  // `frame` came from a backlog and the producer has hung up: reads what it said last. After an
  // eviction (or its ERROR) that is what next() returns, and the frames queued before it are
  // dropped unread; otherwise (it stopped, or vanished) they are handed out first.
  ConsumerEvent settle_backlog(ConsumerEvent frame);
  ConsumerEvent closed_without_eos();
  // A receive that failed with `error`: out of descriptors here, or a bad message from there.
  ConsumerEvent receive_failed(const std::string& error);

  std::shared_ptr<ConsumerLink> link_;
  std::shared_ptr<MemoryBackend> backend_;
  Waker* waker_;
  Welcome welcome_;
  bool has_caps_ = false;
  uint64_t generation_ = 0;
  uint64_t frame_size_ = 0;
  // Import cache: each slot is imported once per (producer instance, generation, index).
  std::map<std::tuple<uint64_t, uint64_t, uint32_t>, std::shared_ptr<ImportedSlot>> slots_;
  std::atomic<uint64_t> frames_received_{0};  // read by stats() from other threads
  std::atomic<uint64_t> slots_imported_{0};
  std::atomic<uint64_t> slots_retired_{0};
  std::atomic<uint64_t> empty_reads_{0};
  bool backlog_ = true;                   // the last message was queued before next() looked for it
  std::deque<ConsumerEvent> pending_;     // read by settle_backlog(), for the next next() calls
  uint32_t bye_reason_ = Bye::kShutdown;  // of the producer's BYE, once it came
};

}  // namespace cipc
