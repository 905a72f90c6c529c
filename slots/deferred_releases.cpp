// SPDX-License-Identifier: LGPL-2.1-or-later
#include "deferred_releases.h"

#include <utility>

#include "waker.h"  // cipc::monotonic_ns

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

void DeferredReleases::add(CudaRegion& region, std::shared_ptr<void> keepalive) {
  if (collect() >= max_pending_) {
    hand_on(entries_.front());
    entries_.erase(entries_.begin());
  }
  entries_.push_back(Entry{&region, std::move(keepalive), cipc::monotonic_ns()});
}

size_t DeferredReleases::collect() {
  if (entries_.empty()) return 0;
  const uint64_t now = cipc::monotonic_ns();
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
