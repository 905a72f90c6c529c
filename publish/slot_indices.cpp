// SPDX-License-Identifier: LGPL-2.1-or-later
#include "slot_indices.h"

namespace cipc_publish {

// Beyond any real use: the guard against the counter wrapping around.
constexpr uint32_t kIndexLimit = UINT32_MAX / 2;

SlotIndices::Taken SlotIndices::take(uint32_t* index, bool* first_past_limit) {
  uint32_t next = next_.load();
  do {
    if (next >= kIndexLimit) return Taken::kExhausted;
  } while (!next_.compare_exchange_weak(next, next + 1));
  *index = next;
  if (first_past_limit) *first_past_limit = next == cipc::kMaxSlots;
  return sendable(next) ? Taken::kSendable : Taken::kPastLimit;
}

}  // namespace cipc_publish
