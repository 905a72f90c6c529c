// SPDX-License-Identifier: LGPL-2.1-or-later
// GstBufferPool of persistent, exportable slots. cudasink-ipc offers it upstream so frames are
// written straight into memory a consumer can map. Every pool is one generation: slots are
// numbered within it and consumers cache imports by (generation, index). SlotPoolGenerations
// keeps the current generation and replaces it on a caps change or before its indices run out.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "memory/slotmemory.h"
#include "memorybackend.h"
#include "protocol.h"
#include "slot_indices.h"

G_BEGIN_DECLS

#define GST_TYPE_CIPC_SLOT_POOL (gst_cipc_slot_pool_get_type())
G_DECLARE_FINAL_TYPE(GstCipcSlotPool, gst_cipc_slot_pool, GST, CIPC_SLOT_POOL, GstBufferPool)

G_END_DECLS

// Told once per pool when a slot cannot be allocated, with a sentence naming the size, how many
// slots the pool holds and the system's reason (e.g. out of memory). Called on the allocating
// thread (often upstream's streaming thread).
using CipcSlotPoolFailure = std::function<void(const std::string& what)>;
// Told when an acquire finds every slot out and is about to wait for one to come back: the
// producer then reads its consumers' RELEASEs at once (it may leave them to its next frame).
// Must not block. Called on the acquiring thread.
using CipcSlotPoolWait = std::function<void()>;
// Told when the pool starts (true) and stops (false) flushing: upstream's source does that while
// it stops its streaming thread, for a flush, a state change or a forced EOS (gst-launch-1.0 -e).
// A writer blocked on the sink's backpressure must then give up its frame. Must not block.
using CipcSlotPoolFlushing = std::function<void(bool flushing)>;
// Told of each shareable slot as the pool makes it, before any frame is written into it: the
// producer gives it to consumers ahead of its first frame. Must not block. Called on the
// allocating thread.
using CipcSlotPoolAllocated = std::function<void(uint64_t generation, guint index,
                                                 const std::shared_ptr<cipc::SlotMemory>& memory)>;
// Told the pool's slot limit whenever it is configured (by us, or by upstream from our proposal):
// `max_slots` 0 means it grows as needed. Called on the configuring thread; must not block.
using CipcSlotPoolConfigured = std::function<void(guint max_slots)>;

// What a pool tells its owner. Every member may be empty.
struct CipcSlotPoolHooks {
  CipcSlotPoolFailure on_failure;
  CipcSlotPoolWait before_wait;
  CipcSlotPoolFlushing on_flushing;
  CipcSlotPoolConfigured on_configured;
  CipcSlotPoolAllocated on_allocated;
};

GstBufferPool* gst_cipc_slot_pool_new(std::shared_ptr<cipc::MemoryBackend> backend,
                                      uint64_t generation, CipcSlotPoolHooks hooks = {});
uint64_t gst_cipc_slot_pool_generation(GstCipcSlotPool* pool);
// Slots allocated so far in this pool (persistent slots are allocated once each). Every slot
// retired under a stuck consumer is replaced by one with a new index, so this only grows.
guint gst_cipc_slot_pool_slots_allocated(GstCipcSlotPool* pool);
// Takes the next slot index of the pool's generation without allocating a slot: for memory made
// elsewhere that is sent as a slot of this generation (issue 29). Counts towards the roll-over.
// FALSE once the index space is exhausted.
gboolean gst_cipc_slot_pool_take_index(GstCipcSlotPool* pool, guint* index);
// Once kCipcSlotPoolRolloverAt indices are used, the pool's generation should be replaced by a new
// one (same caps) before indices reach cipc::kMaxSlots (publish/slot_indices.h: the numbering
// rules the writer shares). Slots at or past kMaxSlots are allocated but must never be sent.
constexpr guint kCipcSlotPoolRolloverAt = cipc_publish::kRolloverAt;
gboolean gst_cipc_slot_pool_needs_rollover(GstCipcSlotPool* pool);
// The video layout the pool was configured with; false before set_config.
gboolean gst_cipc_slot_pool_video_info(GstCipcSlotPool* pool, GstVideoInfo* info);

namespace cipc_gst {

// The sink's pools, one generation at a time. A new generation starts on a caps change (the old
// pool is deactivated; frames consumers hold stay valid until released) and, with the same caps,
// before the current one runs out of slot indices (roll-over: every slot retired under a stuck
// consumer takes a new index, and indices are never reused within a generation). After a
// roll-over upstream may still write into the replaced pool, which must not be deactivated under
// it: such frames are "stale" - copied by the sink - until upstream renegotiates.
class SlotPoolGenerations {
 public:
  // Told about every new generation: its number, caps (without memory features: how consumers
  // receive the frames is theirs to say) and frame size.
  using Announce =
      std::function<void(uint64_t generation, const std::string& caps, uint64_t frame_size)>;

  SlotPoolGenerations(std::shared_ptr<cipc::MemoryBackend> backend, guint pool_size,
                      Announce announce, CipcSlotPoolHooks hooks = {});
  ~SlotPoolGenerations();
  SlotPoolGenerations(const SlotPoolGenerations&) = delete;
  SlotPoolGenerations& operator=(const SlotPoolGenerations&) = delete;

  // `caps` as Announce is told them (and consumers read them in CAPS): without memory features.
  static std::string announced_caps(GstCaps* caps);

  // Makes a pool for `caps` the current generation unless it already is. False with `error`.
  bool ensure(GstCaps* caps, std::string* error);
  // Rolls over when the current generation is near its index limit; `rolled` says whether it did.
  bool roll_over_if_needed(bool* rolled, std::string* error);

  // The binding of a buffer in a slot of the current generation (sendable as is), else nullptr.
  // Slots of another backend (another element's exportable pool) are foreign memory, even when
  // their generation numbers match ours.
  const GstCipcSlotBinding* current_slot(GstBuffer* buffer) const;
  // A buffer in one of our slots that a roll-over replaced (same caps), or past the index limit.
  bool stale_slot(GstBuffer* buffer) const;
  // True once per generation: the caller should ask upstream to renegotiate (it writes stale).
  bool take_reconfigure();
  // A slot index of the current generation for memory the pool did not allocate (see
  // gst_cipc_slot_pool_take_index); false when there is no pool or no sendable index is left
  // (the caller copies the frame: a roll-over comes first).
  bool take_index(uint64_t* generation, uint32_t* index);

  GstBufferPool* pool() const { return pool_; }  // null before ensure()
  GstCaps* caps() const { return caps_; }
  const GstVideoInfo& info() const { return info_; }
  uint64_t generation() const { return generation_; }
  uint64_t rollovers() const { return rollovers_; }
  guint pool_size() const { return pool_size_; }
  const cipc::MemoryBackend* backend() const { return backend_.get(); }

 private:
  bool start_generation(GstCaps* caps, const GstVideoInfo& info, bool new_caps, std::string* error);
  const GstCipcSlotBinding* own_slot(GstBuffer* buffer) const;
  void drop_pool(bool deactivate);

  std::shared_ptr<cipc::MemoryBackend> backend_;
  guint pool_size_;
  Announce announce_;
  CipcSlotPoolHooks hooks_;
  // Only the current generation's flushing and configuration are passed on: a replaced pool is
  // deactivated (which flushes it) and says nothing about the pool upstream writes into now.
  struct CurrentGeneration {
    std::mutex lock;
    uint64_t generation = 0;  // the one passed on; 0: none
    CipcSlotPoolFlushing on_flushing;
    CipcSlotPoolConfigured on_configured;
  };
  std::shared_ptr<CurrentGeneration> current_ = std::make_shared<CurrentGeneration>();
  GstBufferPool* pool_ = nullptr;  // the current generation's
  GstCaps* caps_ = nullptr;
  GstVideoInfo info_;
  uint64_t generation_ = 0;
  uint64_t caps_generation_ = 0;  // the first generation with the current caps
  uint64_t rollovers_ = 0;
  bool reconfigure_sent_ = false;
};

}  // namespace cipc_gst
