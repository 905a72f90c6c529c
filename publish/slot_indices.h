// SPDX-License-Identifier: LGPL-2.1-or-later
// The numbering rules of a publisher's slots, shared by cudasink-ipc's pool and the writer:
// indices are never reused within a generation (consumers cache imports by generation and
// index), a generation is replaced by a new one before its indices reach the protocol's limit
// (roll-over), and how many slots consumers may hold between them so that the writer still has
// one to write the next frame into.
#pragma once

#include <atomic>
#include <cstdint>

#include "protocol.h"

namespace cipc_publish {

// Once this many indices are used, the generation should be replaced by a new one (same format)
// before indices reach cipc::kMaxSlots; the margin covers slots a writer allocates before it
// moves to the new generation. Slots at or past kMaxSlots may exist but must never be sent.
constexpr uint32_t kRolloverAt = cipc::kMaxSlots - 256;

// One generation's slot indices, taken from any thread.
class SlotIndices {
 public:
  enum class Taken { kSendable, kPastLimit, kExhausted };
  // The next index into `*index`. kPastLimit: a slot may still be made (the writer must not
  // fail) but not sent (the first one past the limit is worth a warning: `first_past_limit`).
  // kExhausted: beyond any real use; nothing is taken.
  Taken take(uint32_t* index, bool* first_past_limit = nullptr);
  bool needs_rollover() const { return next_.load() >= kRolloverAt; }
  uint32_t used() const { return next_.load(); }
  static bool sendable(uint32_t index) { return index < cipc::kMaxSlots; }

 private:
  std::atomic<uint32_t> next_{0};
};

// Consumers may hold all but this many slots of a bounded pool: the writer needs them to go on.
constexpr uint32_t kWriterSlots = 2;
// The slots consumers may hold between them when the pool a writer writes into holds at most
// `max_slots` (0: it grows as needed, and so does the budget); never less than one.
constexpr uint32_t consumer_slot_budget(uint32_t max_slots) {
  return max_slots == 0 ? 0 : max_slots > kWriterSlots ? max_slots - kWriterSlots : 1;
}

}  // namespace cipc_publish
