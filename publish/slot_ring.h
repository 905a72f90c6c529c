// SPDX-License-Identifier: LGPL-2.1-or-later
// A writer's ring of persistent, exportable slots, without GStreamer: one generation per frame
// format, its slots allocated up front (so that running out of memory is an error at open, not
// in the middle of a stream), lent to the writer one at a time and back in the ring once every
// consumer has released the frame in them. A slot retired under a stuck consumer is never written
// again and is replaced by one with a new index; a generation near the end of its indices is
// replaced by a new one of the same format (roll-over). Thread-safe; returns arrive from any
// thread (the producer's I/O thread, the release of a claim, a publish).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "frame_layout.h"
#include "memorybackend.h"
#include "producer.h"
#include "slot_indices.h"

namespace cipc_publish {

// One generation's slots. Owned by the ring while current, and by every frame still claimed in
// it, so a replaced generation's memory lives until its last frame is released.
struct SlotGeneration {
  uint64_t number = 0;
  FrameLayout layout;
  SlotIndices indices;
  std::map<uint32_t, std::shared_ptr<cipc::SlotMemory>> slots;  // by index; under the ring lock
};

// A slot between acquire() and its publish or return.
struct LentSlot {
  std::shared_ptr<SlotGeneration> generation;
  uint32_t index = 0;
  cipc::SlotMemory* memory = nullptr;  // alive while `generation` holds it
};

class SlotRing : public std::enable_shared_from_this<SlotRing> {
 public:
  enum class Wait { kLent, kTimeout, kInterrupted, kClosed, kFailed };

  SlotRing(std::shared_ptr<cipc::MemoryBackend> backend, uint32_t pool_size);
  SlotRing(const SlotRing&) = delete;
  SlotRing& operator=(const SlotRing&) = delete;

  // Replaces the current generation with a new one of `layout`, its pool_size slots allocated
  // now. Slots lent out or claimed in the old one stay valid; returned, they are freed. False
  // with `why` (the old generation stays current).
  bool start_generation(const FrameLayout& layout, std::string* why);
  // A free slot of the current generation, the one returned longest ago; waits up to
  // `timeout_ms` (< 0: forever) for one, calling `before_wait` (not under the lock) first.
  Wait acquire(int timeout_ms, const std::function<void()>& before_wait, LentSlot* out,
               std::string* why);
  // What keeps `slot` out of the ring while consumers hold the frame in it; the slot returns
  // when the last reference goes, unless the producer retired it first.
  std::shared_ptr<cipc::FrameHold> hold(const LentSlot& slot);
  // Returns a slot that was not published (abandoned, or published to nobody).
  void give_back(const LentSlot& slot);
  // Makes waiting and later acquires return kInterrupted until clear_interrupt().
  void interrupt();
  void clear_interrupt();
  // For good: acquire returns kClosed.
  void close();

  // Whether the current generation's indices are nearly used up (start a new generation).
  bool needs_rollover() const;
  std::shared_ptr<SlotGeneration> current() const;
  // The slots `generation` holds now, by index: what the producer offers consumers ahead of the
  // first frame in them (cipc::Producer::offer_slot).
  std::map<uint32_t, std::weak_ptr<const cipc::SlotMemory>> slots_of(
      const SlotGeneration& generation) const;
  uint64_t slots_allocated() const;
  uint64_t slots_retired() const;
  uint64_t generations() const;

 private:
  class Hold;
  void returned(const std::shared_ptr<SlotGeneration>& generation, uint32_t index, bool retired);
  // A new slot with a new index in the current generation (a retired one's replacement).
  bool add_slot_locked(std::string* why);

  const std::shared_ptr<cipc::MemoryBackend> backend_;
  const uint32_t pool_size_;
  mutable std::mutex lock_;
  std::condition_variable returned_cv_;
  std::shared_ptr<SlotGeneration> current_;
  std::deque<uint32_t> free_;  // the current generation's free slots, oldest first
  uint32_t live_slots_ = 0;    // the current generation's slots that are not retired
  uint64_t next_generation_ = 1;
  uint64_t slots_allocated_ = 0;
  uint64_t slots_retired_ = 0;
  uint64_t generations_ = 0;
  bool interrupted_ = false;
  bool closed_ = false;
};

}  // namespace cipc_publish
