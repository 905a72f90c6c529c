// SPDX-License-Identifier: LGPL-2.1-or-later
#include "deferred_releases.h"

#include <algorithm>
#include <utility>

namespace cipc_slots {

DeferredReleases::~DeferredReleases() {
  flush();
}

void DeferredReleases::hand_on(Entry& e) {
  e.region->drop_after_reads(std::move(e.keepalive));
  ++handed_on_;
}

void DeferredReleases::flush() {
  for (Entry& e : entries_) hand_on(e);
  entries_.clear();
}

void DeferredReleases::add(CudaRegion& region, std::shared_ptr<void> keepalive, uint64_t now_ns) {
  if (collect(now_ns) >= max_pending_) {
    hand_on(entries_.front());
    entries_.erase(entries_.begin());
  }
  if (last_add_ns_ != 0 && now_ns > last_add_ns_) interval_ns_ = now_ns - last_add_ns_;
  last_add_ns_ = now_ns;
  entries_.push_back(Entry{&region, std::move(keepalive), now_ns});
}

int DeferredReleases::wait_ms(bool next_frame_can_come, uint64_t now_ns) const {
  if (entries_.empty()) return -1;
  uint64_t look_after = kShortLookNs;
  if (next_frame_can_come && interval_ns_ > 0)
    look_after = std::clamp(interval_ns_ + interval_ns_ / 2, kShortLookNs,
                            std::max(give_up_ns_, kShortLookNs));
  const uint64_t due = entries_.front().since_ns + look_after;
  if (due <= now_ns) return 1;  // overdue: still looking every millisecond until give_up
  const uint64_t left_ns = due - now_ns;
  return static_cast<int>(std::min<uint64_t>((left_ns + 999'999) / 1'000'000, INT32_MAX));
}

size_t DeferredReleases::collect(uint64_t now) {
  if (entries_.empty()) return 0;
  size_t kept = 0;
  for (Entry& e : entries_) {
    bool done = false;
    const bool queried = e.region->query_reads_done(&done).is_ok();
    if (queried && done) {
      e.keepalive.reset();  // RELEASE goes out here
      ++released_here_;
    } else if (!queried || now - e.since_ns >= give_up_ns_) {
      hand_on(e);  // the worker waits (and reports a failed wait): never parked here
    } else {
      entries_[kept++] = std::move(e);
    }
  }
  entries_.resize(kept);
  return kept;
}

}  // namespace cipc_slots
