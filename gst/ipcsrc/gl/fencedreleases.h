// SPDX-License-Identifier: LGPL-2.1-or-later
// Frame claims held until the GPU work that reads their slots has finished, where that work is
// fenced by an API whose fences can only be queried from one thread (GL: a sync object needs
// its context current). The owner polls from that thread: reap() drops every claim whose fence
// has signalled (waiting a little for the oldest, if asked), add() bounds how many may wait,
// drain() waits for them all.
// Fences signal in the order they were queued (one GL context), so only the oldest is polled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>

namespace cipc_gst {

class FencedReleases {
 public:
  using Fence = void*;
  struct FenceOps {
    std::function<bool(Fence, uint64_t)> signalled;  // waiting at most that many nanoseconds
    std::function<void(Fence)> wait;  // until signalled (or failed: the claim goes anyway)
    std::function<void(Fence)> destroy;
  };

  FencedReleases(FenceOps ops, size_t max_pending);
  ~FencedReleases();  // drain()
  FencedReleases(const FencedReleases&) = delete;
  FencedReleases& operator=(const FencedReleases&) = delete;

  // Holds `keepalive` (a frame's claim) until `fence` has signalled. Past max_pending, waits for
  // the oldest: the producer's pool is finite, and a claim kept for a fence nobody polls would
  // starve it.
  void add(Fence fence, std::shared_ptr<void> keepalive);
  // Drops the claims whose fences have signalled, oldest first, stopping at the first that has
  // not after waiting up to `wait_ns` for it (0: a poll).
  void reap(uint64_t wait_ns = 0);
  // Waits for every fence and drops every claim.
  void drain();
  size_t pending() const { return pending_.size(); }

 private:
  struct Entry {
    Fence fence;
    std::shared_ptr<void> keepalive;
  };
  void drop_front();

  FenceOps ops_;
  size_t max_pending_;
  std::deque<Entry> pending_;
};

}  // namespace cipc_gst
