// SPDX-License-Identifier: LGPL-2.1-or-later
// A publisher without GStreamer: what libcudaipc's cudaipc_writer_* and Python's cudaipc.Writer
// are made of. It serves a socket with cipc::Producer (consumers cannot tell it from
// cudasink-ipc), lends the caller its own exportable slots one at a time (acquire), and sends a
// slot once the caller's writes into it are done (publish: readiness recorded on the caller's
// CUDA stream, no CPU wait), or takes it back unsent (abandon). Frames consumers still hold stay
// valid after the writer is gone.
//
// Threads: any thread may call any member; acquires may wait concurrently. A Loan may be
// published, abandoned or dropped on any thread, also after the Writer is closed or destroyed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "frame_layout.h"
#include "producer.h"
#include "slot_backend.h"
#include "slot_ring.h"

namespace cipc_publish {

enum class Backpressure {
  kDrop,   // a consumer with no room for a frame misses it; the writer never waits for one
  kBlock,  // acquire() waits until every consumer can take one more frame
};

struct WriterConfig {
  // socket_path (required), socket_mode, allow_other_users, max_in_flight, release_timeout_ms,
  // instance_id: as cudasink-ipc's properties. memory_kind, sync_mode and gpu_uuid are set here.
  cipc::ProducerConfig producer;
  cipc::MemoryKind memory = cipc::MemoryKind::kCuda;
  int cuda_device = -1;  // -1: device 0
  cipc::SyncMode sync_mode = cipc::SyncMode::kGpuEvents;
  uint32_t pool_size = 4;
  Backpressure backpressure = Backpressure::kDrop;
  bool live = true;  // frames are marked live (consumers drop what was made before they started)
  FrameLayout format;
};

struct WriterStats {
  uint64_t frames_published = 0;
  uint64_t frames_sent = 0;     // FRAME messages, summed over consumers
  uint64_t frames_dropped = 0;  // deliveries consumers missed (no room for the frame)
  uint64_t frames_abandoned = 0;
  uint64_t acquire_timeouts = 0;
  uint64_t copies = 0;  // publish_copy(): one full-frame copy each
  uint64_t consumers = 0;
  uint64_t consumers_total = 0;
  uint64_t consumers_evicted = 0;  // disconnected for holding a frame past release-timeout
  uint64_t slots_allocated = 0;
  uint64_t slots_retired = 0;
  uint64_t generations = 0;
  bool cuda_mps = false;
};

// What the calls say. kEnded: end_stream() was called; kClosed: the writer is closed.
enum class Code {
  kOk,
  kTimeout,
  kInterrupted,
  kEnded,
  kClosed,
  kInvalid,
  kBusy,  // another producer serves the socket path
  kCuda,
  kSystem,
  kUnsupported,
  kNoDevice,
};

struct Outcome {
  Code code = Code::kOk;
  std::string message;
  static Outcome ok() { return {}; }
  explicit operator bool() const { return code == Code::kOk; }
};

class Writer;
struct WriterCore;

struct PublishOptions {
  void* cuda_stream = nullptr;  // the writes to wait for; nullptr: the legacy default stream
  uint64_t pts_ns = cipc::kNoTimestamp;  // CLOCK_MONOTONIC; kNoTimestamp: the publish time
  uint64_t duration_ns = cipc::kNoTimestamp;
  uint32_t flags = 0;  // cipc::Frame::kDiscont, kDeltaUnit, kGap
};

// A slot lent to the caller: write the frame into data(), then publish it. Dropping a Loan that
// was neither published nor abandoned abandons it.
class Loan {
 public:
  ~Loan();
  Loan(const Loan&) = delete;
  Loan& operator=(const Loan&) = delete;

  void* data() const { return slot_.memory->data(); }  // host pointer, or CUdeviceptr
  size_t capacity() const { return slot_.memory->size(); }
  const FrameLayout& layout() const { return slot_.generation->layout; }
  cipc::MemoryKind memory_kind() const { return slot_.memory->kind(); }
  uint64_t generation() const { return slot_.generation->number; }
  uint32_t index() const { return slot_.index; }
  bool done() const { return done_; }

  // Sends the slot to every consumer with room once the writes queued on options.cuda_stream
  // are done (CUDA: readiness recorded on that stream; the CPU does not wait). Uses the loan up
  // whatever the outcome; a slot of a format set_format() replaced is not sent (kInvalid).
  Outcome publish(const PublishOptions& options);
  // Gives the slot back unsent.
  void abandon();

 private:
  friend class Writer;
  Loan(std::shared_ptr<WriterCore> core, LentSlot slot)
      : core_(std::move(core)), slot_(std::move(slot)) {}
  std::shared_ptr<WriterCore> core_;
  LentSlot slot_;
  bool done_ = false;
};

class Writer {
 public:
  // Opens the memory backend, allocates the first generation's slots and serves the socket.
  static Outcome open(const WriterConfig& config, cipc::ProducerObserver* observer,
                      std::unique_ptr<Writer>* out);
  // Says BYE to every consumer; frames they hold stay valid. Loans still out can only be
  // abandoned (publishing them says kClosed).
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // A free slot of the current format. kTimeout when none came within `timeout_ms` (< 0:
  // forever): consumers hold every slot (or, with kBlock, a consumer has no room).
  Outcome acquire(int timeout_ms, std::unique_ptr<Loan>* out);
  // Copies a frame (rows of `src_stride` bytes in plane 0, the other planes after it as the
  // format lays them out, scaled to that stride; 0: the slot's own layout) into a slot and
  // publishes it. `src` is a host pointer or (CUDA) any address CUDA can copy from. One copy,
  // counted; on the GPU for CUDA memory, ordered on `options.cuda_stream`.
  Outcome publish_copy(const void* src, size_t src_stride, int timeout_ms,
                       const PublishOptions& options);
  // A new format: a new generation of slots, announced to consumers at once.
  Outcome set_format(const FrameLayout& layout);
  // Tells every consumer the stream ended (EOS); acquire() says kEnded from then on.
  Outcome end_stream();
  // Waits until a consumer is attached: kOk, kTimeout, kInterrupted, kEnded or kClosed.
  Outcome wait_for_consumer(int timeout_ms);
  // Makes an acquire() in progress, or the next one, return kInterrupted. Any thread.
  void interrupt();

  WriterStats stats() const;
  FrameLayout format() const;
  int cuda_device() const;
  const std::string& socket_path() const;

 private:
  explicit Writer(std::shared_ptr<WriterCore> core) : core_(std::move(core)) {}
  std::shared_ptr<WriterCore> core_;
};

}  // namespace cipc_publish
