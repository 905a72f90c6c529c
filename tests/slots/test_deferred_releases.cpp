// SPDX-License-Identifier: LGPL-2.1-or-later
// DeferredReleases (io-mode=copy's releases by the receiving thread), driven through a region
// whose reads are done when the test says so: no GPU needed. A claim is a shared_ptr whose
// deleter counts the RELEASE; the release worker stands in as the region's drop_after_reads.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "deferred_releases.h"

namespace cs = cipc_slots;

namespace {

class FakeRegion : public cs::CudaRegion {
 public:
  int device() const override { return 0; }
  cipc_cuda::DevicePtr ptr() const override { return 0; }
  size_t bytes() const override { return 0; }
  cipc_cuda::Status begin_write(cipc_cuda::StreamHandle) override { return {}; }
  cipc_cuda::Status end_write(cipc_cuda::StreamHandle) override { return {}; }
  cipc_cuda::Status wait_ready(cipc_cuda::StreamHandle) override { return {}; }
  cipc_cuda::Status record_release(cipc_cuda::StreamHandle) override { return {}; }
  void drop_after_reads(std::shared_ptr<void> keepalive) override {
    ++handed_over;
    keepalive.reset();  // the worker would, once the reads are done
  }
  cipc_cuda::Status query_reads_done(bool* d) override {
    ++queries;
    if (fail_query) return cipc_cuda::Status::failure("cudaEventQuery: an illegal address");
    *d = done;
    return {};
  }
  bool done = false;
  bool fail_query = false;
  int queries = 0;
  int handed_over = 0;
};

// A claim: its release is the deleter running.
std::shared_ptr<void> claim(int* released) {
  return std::shared_ptr<void>(new int(0), [released](void* p) {
    ++*released;
    delete static_cast<int*>(p);
  });
}

TEST(DeferredReleases, AClaimGoesOnceItsReadsAreDoneAndNotBefore) {
  cs::DeferredReleases deferred;
  FakeRegion region;
  int released = 0;
  EXPECT_EQ(deferred.wait_ms(), -1) << "nothing pending: wait as long as you like";
  deferred.add(region, claim(&released));
  EXPECT_EQ(deferred.pending(), 1u);
  EXPECT_EQ(deferred.wait_ms(), 1) << "pending, no frame interval known yet: look again soon";
  EXPECT_EQ(deferred.collect(), 1u);
  EXPECT_EQ(released, 0) << "released while the copy still reads the slot";
  region.done = true;
  EXPECT_EQ(deferred.collect(), 0u);
  EXPECT_EQ(released, 1);
  EXPECT_EQ(region.handed_over, 0) << "the worker was not needed";
  EXPECT_EQ(deferred.released_here(), 1u);
  EXPECT_EQ(deferred.wait_ms(), -1);
}

// Paced frames: the receiving thread looks again when the next frame comes, so the timed look
// waits past it (1.5 intervals after the oldest claim) instead of waking the thread in between;
// it is short where no next frame can come (max-in-flight) and bounded by the give-up time.
TEST(DeferredReleases, TheTimedLookWaitsForTheNextFrameUnlessNoneCanCome) {
  constexpr uint64_t kMs = 1'000'000;
  constexpr uint64_t kInterval = 16'666'667;  // 60 fps
  cs::DeferredReleases deferred;
  FakeRegion first, second;
  int r1 = 0, r2 = 0;
  deferred.add(first, claim(&r1), 1000 * kMs);
  EXPECT_EQ(deferred.frame_interval_ns(), 0u);
  EXPECT_EQ(deferred.wait_ms(true, 1000 * kMs), 1) << "no interval known yet";
  first.done = true;
  deferred.add(second, claim(&r2), 1000 * kMs + kInterval);  // the next frame releases the first
  EXPECT_EQ(r1, 1);
  EXPECT_EQ(deferred.released_here(), 1u);
  EXPECT_EQ(deferred.frame_interval_ns(), kInterval);
  const uint64_t since = 1000 * kMs + kInterval;
  EXPECT_EQ(deferred.wait_ms(true, since + kMs / 10), 25)
      << "looks again 1.5 intervals after the claim came, after the next frame is due";
  EXPECT_EQ(deferred.wait_ms(true, since + 20 * kMs), 5);
  EXPECT_EQ(deferred.wait_ms(false, since + kMs / 10), 1)
      << "at max-in-flight no frame comes until a claim goes: look again soon";
  EXPECT_EQ(deferred.wait_ms(true, since + 30 * kMs), 1) << "overdue: every millisecond";
  EXPECT_EQ(deferred.collect(since + 30 * kMs), 1u) << "not done yet, not yet given up";
  EXPECT_EQ(r2, 0);
  second.done = true;
  EXPECT_EQ(deferred.collect(since + 31 * kMs), 0u);
  EXPECT_EQ(r2, 1);
  EXPECT_EQ(deferred.wait_ms(true, since + 31 * kMs), -1);
}

TEST(DeferredReleases, TheTimedLookStaysWithinOneMillisecondAndTheGiveUpTime) {
  constexpr uint64_t kMs = 1'000'000;
  FakeRegion regions[4];
  int released[4] = {};
  {
    cs::DeferredReleases slow;  // 1 fps: the look comes at the give-up time, not 1.5 s
    slow.add(regions[0], claim(&released[0]), 1000 * kMs);
    regions[0].done = true;
    slow.add(regions[1], claim(&released[1]), 2000 * kMs);
    EXPECT_EQ(slow.wait_ms(true, 2000 * kMs), 50);
  }
  {
    cs::DeferredReleases unpaced;  // frames 50 us apart: no look sooner than 1 ms
    unpaced.add(regions[2], claim(&released[2]), 1000 * kMs);
    unpaced.add(regions[3], claim(&released[3]), 1000 * kMs + 50'000);
    EXPECT_EQ(unpaced.wait_ms(true, 1000 * kMs + 50'000), 1);
  }
  for (int r : released) EXPECT_EQ(r, 1) << "every claim goes, here or by the worker";
}

TEST(DeferredReleases, OnlyTheFinishedOnesGoAndTheOthersKeepTheirOrder) {
  cs::DeferredReleases deferred;
  deferred.set_max_in_flight(8);
  FakeRegion first, second, third;
  int r1 = 0, r2 = 0, r3 = 0;
  deferred.add(first, claim(&r1));
  deferred.add(second, claim(&r2));
  deferred.add(third, claim(&r3));
  const int looked_at = first.queries;  // add() collects too
  second.done = true;
  EXPECT_EQ(deferred.collect(), 2u);
  EXPECT_EQ(r1 + r2 + r3, 1);
  EXPECT_EQ(r2, 1);
  third.done = true;
  EXPECT_EQ(deferred.collect(), 1u);
  EXPECT_EQ(r3, 1);
  first.done = true;
  EXPECT_EQ(deferred.collect(), 0u);
  EXPECT_EQ(r1, 1);
  EXPECT_EQ(first.queries - looked_at, 3) << "each pending claim is looked at once per collect()";
}

TEST(DeferredReleases, AClaimPendingTooLongGoesToTheWorkerInsteadOfBeingParked) {
  cs::DeferredReleases deferred(/*give_up_ns=*/2'000'000);
  FakeRegion region;
  int released = 0;
  deferred.add(region, claim(&released));
  EXPECT_EQ(deferred.collect(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(deferred.collect(), 0u);
  EXPECT_EQ(region.handed_over, 1);
  EXPECT_EQ(released, 1);
  EXPECT_EQ(deferred.handed_on(), 1u);
  EXPECT_EQ(deferred.released_here(), 0u);
}

TEST(DeferredReleases, AnEventThatCannotBeQueriedGoesToTheWorkerWhichReportsIt) {
  cs::DeferredReleases deferred;
  FakeRegion region;
  region.fail_query = true;
  int released = 0;
  deferred.add(region, claim(&released));
  EXPECT_EQ(deferred.collect(), 0u);
  EXPECT_EQ(region.handed_over, 1);
  EXPECT_EQ(released, 1) << "a failed query must not leak the frame";
}

// Unpaced frames outrun their copies: no more than max_pending claims wait here, the oldest
// goes the usual way, and whatever is done is released before that.
TEST(DeferredReleases, AtMostHalfOfMaxInFlightWaitHereTheOldestGoesOn) {
  cs::DeferredReleases deferred;
  deferred.set_max_in_flight(8);
  EXPECT_EQ(deferred.max_pending(), 4u);
  FakeRegion regions[6];
  int released[6] = {};
  for (int i = 0; i < 4; ++i) deferred.add(regions[i], claim(&released[i]));
  EXPECT_EQ(deferred.pending(), 4u);
  deferred.add(regions[4], claim(&released[4]));
  EXPECT_EQ(deferred.pending(), 4u);
  EXPECT_EQ(regions[0].handed_over, 1) << "the oldest goes on";
  EXPECT_EQ(released[0], 1);
  for (int i = 1; i < 5; ++i) EXPECT_EQ(released[i], 0) << i;
  regions[2].done = true;  // finished: released by add(), which then has room
  deferred.add(regions[5], claim(&released[5]));
  EXPECT_EQ(released[2], 1);
  EXPECT_EQ(regions[1].handed_over, 0) << "no hand-on while collecting made room";
  EXPECT_EQ(deferred.pending(), 4u);
  EXPECT_EQ(deferred.handed_on(), 1u);
  EXPECT_EQ(deferred.released_here(), 1u);
  deferred.set_max_in_flight(1);
  EXPECT_EQ(deferred.max_pending(), 1u) << "at least one may wait";
}

TEST(DeferredReleases, FlushAndDestructionHandEveryPendingClaimToTheWorker) {
  FakeRegion region;
  int released = 0;
  {
    cs::DeferredReleases deferred;
    deferred.add(region, claim(&released));
    deferred.add(region, claim(&released));
    deferred.flush();
    EXPECT_EQ(deferred.pending(), 0u);
    EXPECT_EQ(region.handed_over, 2);
    deferred.add(region, claim(&released));
  }
  EXPECT_EQ(region.handed_over, 3) << "destroyed with a claim pending";
  EXPECT_EQ(released, 3);
}

}  // namespace
