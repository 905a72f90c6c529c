// SPDX-License-Identifier: LGPL-2.1-or-later
#include "slot_ring.h"

#include <atomic>
#include <chrono>

namespace cipc_publish {

class SlotRing::Hold final : public cipc::FrameHold {
 public:
  Hold(std::shared_ptr<SlotRing> ring, LentSlot slot)
      : ring_(std::move(ring)), slot_(std::move(slot)) {}
  ~Hold() override { ring_->returned(slot_.generation, slot_.index, retired_.load()); }
  // A consumer may still read the slot: it must never be written again.
  void retire() override { retired_.store(true); }

 private:
  std::shared_ptr<SlotRing> ring_;
  LentSlot slot_;
  std::atomic<bool> retired_{false};
};

SlotRing::SlotRing(std::shared_ptr<cipc::MemoryBackend> backend, uint32_t pool_size)
    : backend_(std::move(backend)), pool_size_(pool_size < 1 ? 1 : pool_size) {}

bool SlotRing::add_slot_locked(std::string* why) {
  SlotGeneration& g = *current_;
  uint32_t index = 0;
  if (g.indices.take(&index) != SlotIndices::Taken::kSendable) {
    *why = "slot indices of generation " + std::to_string(g.number) + " are used up";
    return false;
  }
  auto memory = backend_->allocate(g.layout.size);
  if (!memory) {
    *why = "could not allocate shareable slot " + std::to_string(index + 1) + " of " +
           std::to_string(g.layout.size) + " bytes: " + memory.error().message;
    return false;
  }
  g.slots.emplace(index, std::move(memory.value()));
  free_.push_back(index);
  ++live_slots_;
  ++slots_allocated_;
  return true;
}

bool SlotRing::start_generation(const FrameLayout& layout, std::string* why) {
  // Allocated outside the lock: a CUDA allocation of a 4K slot takes milliseconds.
  auto g = std::make_shared<SlotGeneration>();
  g->layout = layout;
  std::map<uint32_t, std::shared_ptr<cipc::SlotMemory>> slots;
  for (uint32_t i = 0; i < pool_size_; ++i) {
    uint32_t index = 0;
    g->indices.take(&index);
    auto memory = backend_->allocate(layout.size);
    if (!memory) {
      *why = "could not allocate shareable slot " + std::to_string(i + 1) + " of " +
             std::to_string(pool_size_) + " (" + std::to_string(layout.size) +
             " bytes each): " + memory.error().message;
      return false;
    }
    slots.emplace(index, std::move(memory.value()));
  }
  std::lock_guard<std::mutex> guard(lock_);
  g->number = next_generation_++;
  g->slots = std::move(slots);
  current_ = std::move(g);
  free_.clear();
  for (const auto& entry : current_->slots) free_.push_back(entry.first);
  live_slots_ = pool_size_;
  slots_allocated_ += pool_size_;
  ++generations_;
  returned_cv_.notify_all();
  return true;
}

SlotRing::Wait SlotRing::acquire(int timeout_ms, const std::function<void()>& before_wait,
                                 LentSlot* out, std::string* why) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool asked = false;
  std::unique_lock<std::mutex> guard(lock_);
  for (;;) {
    if (closed_) return Wait::kClosed;
    if (interrupted_) return Wait::kInterrupted;
    if (!current_) {
      *why = "no frame format is set";
      return Wait::kFailed;
    }
    if (free_.empty() && live_slots_ < pool_size_ && !add_slot_locked(why)) return Wait::kFailed;
    if (!free_.empty()) {
      out->generation = current_;
      out->index = free_.front();
      out->memory = current_->slots.at(out->index).get();
      free_.pop_front();
      return Wait::kLent;
    }
    if (!asked && before_wait) {
      // Every slot is out: the producer reads its consumers' RELEASEs at once from now on.
      asked = true;
      guard.unlock();
      before_wait();
      guard.lock();
      continue;
    }
    if (timeout_ms < 0) {
      returned_cv_.wait(guard);
    } else if (returned_cv_.wait_until(guard, deadline) == std::cv_status::timeout &&
               free_.empty() && !closed_ && !interrupted_) {
      return Wait::kTimeout;
    }
  }
}

std::shared_ptr<cipc::FrameHold> SlotRing::hold(const LentSlot& slot) {
  return std::make_shared<Hold>(shared_from_this(), slot);
}

void SlotRing::give_back(const LentSlot& slot) {
  returned(slot.generation, slot.index, false);
}

void SlotRing::returned(const std::shared_ptr<SlotGeneration>& generation, uint32_t index,
                        bool retired) {
  std::shared_ptr<cipc::SlotMemory> freed;  // dropped after the lock: unmapping takes time
  std::lock_guard<std::mutex> guard(lock_);
  const bool current = generation == current_;
  if (current && !retired && !closed_) {
    free_.push_back(index);
    returned_cv_.notify_all();
    return;
  }
  auto it = generation->slots.find(index);
  if (it != generation->slots.end()) {
    freed = std::move(it->second);
    generation->slots.erase(it);
  }
  if (current && retired) {
    ++slots_retired_;
    --live_slots_;  // acquire() makes its replacement, with a new index
    returned_cv_.notify_all();
  }
}

void SlotRing::interrupt() {
  std::lock_guard<std::mutex> guard(lock_);
  interrupted_ = true;
  returned_cv_.notify_all();
}

void SlotRing::clear_interrupt() {
  std::lock_guard<std::mutex> guard(lock_);
  interrupted_ = false;
}

void SlotRing::close() {
  std::lock_guard<std::mutex> guard(lock_);
  closed_ = true;
  returned_cv_.notify_all();
}

bool SlotRing::needs_rollover() const {
  std::lock_guard<std::mutex> guard(lock_);
  return current_ && current_->indices.needs_rollover();
}

std::shared_ptr<SlotGeneration> SlotRing::current() const {
  std::lock_guard<std::mutex> guard(lock_);
  return current_;
}

std::map<uint32_t, std::weak_ptr<const cipc::SlotMemory>> SlotRing::slots_of(
    const SlotGeneration& generation) const {
  std::lock_guard<std::mutex> guard(lock_);
  std::map<uint32_t, std::weak_ptr<const cipc::SlotMemory>> slots;
  for (const auto& entry : generation.slots) slots.emplace(entry.first, entry.second);
  return slots;
}

uint64_t SlotRing::slots_allocated() const {
  std::lock_guard<std::mutex> guard(lock_);
  return slots_allocated_;
}

uint64_t SlotRing::slots_retired() const {
  std::lock_guard<std::mutex> guard(lock_);
  return slots_retired_;
}

uint64_t SlotRing::generations() const {
  std::lock_guard<std::mutex> guard(lock_);
  return generations_;
}

}  // namespace cipc_publish
