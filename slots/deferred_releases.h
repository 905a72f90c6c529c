// SPDX-License-Identifier: LGPL-2.1-or-later
// io-mode=copy's releases, made by the consumer's own thread instead of the release worker.
//
// A frame copied into a private buffer may go back to the producer (RELEASE) once the copy has
// read its slot. That copy runs in the consumer's CUDA context, which the GPU time-slices with
// the producer's, so it is rarely done within the few microseconds a thread can afford to poll;
// handing it to the release worker then costs that thread's wake-up and the CUDA driver's
// (two to three per frame, 40-75 us of CPU each on the H200's VM). Instead the claim waits here
// and the thread that receives frames releases it when it wakes for the next frame - by then
// the copy is long done - so that a paced stream wakes that thread once per frame. Should the
// next frame be late, a timed look (wait_ms()) comes at 1.5 frame intervals after the claim (at
// least 1 ms, at most give_up_ns); and where no next frame can come until a claim goes (the
// consumer is at max-in-flight), the look comes after 1 ms. The price: a slot goes back to the
// producer up to one frame interval later than its copy finished. A claim still pending after
// give_up_ns goes to the release worker, so that none is ever parked (a producer short of slots,
// a consumer at max-in-flight).
// Unpaced, frames come faster than copies finish: at most max_pending claims wait here (half the
// frames this consumer may hold), so that they never hold the producer back; beyond that the
// oldest takes the usual way (drop_after_reads), by then mostly done and released at once.
// One thread uses an instance; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cuda_slots.h"
#include "waker.h"  // cipc::monotonic_ns

namespace cipc_slots {

class DeferredReleases {
 public:
  static constexpr uint64_t kDefaultGiveUpNs = 50'000'000;  // 50 ms: three frames at 60 fps
  // The look when no frame interval is known yet, or no next frame can come.
  static constexpr uint64_t kShortLookNs = 1'000'000;
  explicit DeferredReleases(uint64_t give_up_ns = kDefaultGiveUpNs) : give_up_ns_(give_up_ns) {}
  // Pending claims go to the release worker (drop_after_reads): none is lost.
  ~DeferredReleases();
  DeferredReleases(const DeferredReleases&) = delete;
  DeferredReleases& operator=(const DeferredReleases&) = delete;

  // Keeps `keepalive` (which owns the frame's claim and so `region`) until the reads recorded by
  // region.record_release() are done. Collects first; at max_pending, the oldest goes on.
  void add(CudaRegion& region, std::shared_ptr<void> keepalive) {
    add(region, std::move(keepalive), cipc::monotonic_ns());
  }
  void add(CudaRegion& region, std::shared_ptr<void> keepalive, uint64_t now_ns);
  // For a consumer allowed `max_in_flight` frames: max(1, max_in_flight / 2).
  void set_max_in_flight(uint32_t max_in_flight) {
    max_pending_ = max_in_flight / 2 > 1 ? max_in_flight / 2 : 1;
  }
  size_t max_pending() const { return max_pending_; }
  // Drops the claims whose reads are done, hands those pending for give_up_ns (or whose event
  // cannot be queried) to the release worker; returns how many are still pending here.
  size_t collect() { return collect(cipc::monotonic_ns()); }
  size_t collect(uint64_t now_ns);
  // Hands every pending claim to the release worker (the connection is gone, or a thread
  // other than the receiving one is about to wait).
  void flush();
  // How long the caller may wait for something else before calling collect() again, in
  // milliseconds; -1 when nothing is pending (wait as long as you like). `next_frame_can_come`:
  // the consumer holds fewer than max-in-flight frames, so the producer may send it the next
  // one, on whose arrival the caller collects anyway; then until 1.5 frame intervals after the
  // oldest claim came, else (or with no interval known yet) kShortLookNs.
  int wait_ms(bool next_frame_can_come, uint64_t now_ns) const;
  int wait_ms(bool next_frame_can_come = true) const {
    return wait_ms(next_frame_can_come, cipc::monotonic_ns());
  }
  // The time between the last two add() calls; 0 before the second.
  uint64_t frame_interval_ns() const { return interval_ns_; }
  size_t pending() const { return entries_.size(); }
  uint64_t released_here() const { return released_here_; }
  // Given to the slot's drop_after_reads (a short poll, then the release worker).
  uint64_t handed_on() const { return handed_on_; }

 private:
  struct Entry {
    CudaRegion* region;  // lives while keepalive does
    std::shared_ptr<void> keepalive;
    uint64_t since_ns;
  };
  // The slot's usual way: a short poll, then the release worker.
  void hand_on(Entry& e);
  uint64_t give_up_ns_;
  size_t max_pending_ = 2;  // set_max_in_flight() of the default 4
  std::vector<Entry> entries_;
  uint64_t last_add_ns_ = 0;
  uint64_t interval_ns_ = 0;
  uint64_t released_here_ = 0;
  uint64_t handed_on_ = 0;
};

}  // namespace cipc_slots
