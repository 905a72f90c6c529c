// SPDX-License-Identifier: LGPL-2.1-or-later
// FencedReleases (gst/ipcsrc/gl/fencedreleases.h), which holds a frame's claim until the GL read of
// its slot has finished: driven with fences of the test's own, so every ordering can be forced.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <vector>

#include "ipcsrc/gl/fencedreleases.h"

namespace {

// Fences the test signals by hand; waiting on one signals it (as a GPU finishing would).
struct FakeFences {
  std::vector<int> ids;     // storage: a fence is a pointer to one of these
  std::set<int> signalled;  // by id
  std::vector<int> waited, destroyed;
  std::vector<int> polled;
  std::vector<uint64_t> waits_ns;

  FakeFences() : ids(16) {
    for (int i = 0; i < 16; ++i) ids[i] = i;
  }
  cipc_gst::FencedReleases::Fence fence(int id) { return &ids[id]; }
  static int id_of(cipc_gst::FencedReleases::Fence f) { return *static_cast<int*>(f); }
  cipc_gst::FencedReleases::FenceOps ops() {
    return {[this](cipc_gst::FencedReleases::Fence f, uint64_t wait_ns) {
              polled.push_back(id_of(f));
              waits_ns.push_back(wait_ns);
              return signalled.count(id_of(f)) > 0;
            },
            [this](cipc_gst::FencedReleases::Fence f) {
              waited.push_back(id_of(f));
              signalled.insert(id_of(f));
            },
            [this](cipc_gst::FencedReleases::Fence f) { destroyed.push_back(id_of(f)); }};
  }
};

// A claim whose release the test can see: alive while the returned weak pointer is not expired.
std::shared_ptr<void> claim(std::vector<std::weak_ptr<void>>* seen) {
  auto c = std::make_shared<int>(0);
  seen->push_back(c);
  return c;
}

TEST(FencedReleases, ClaimsGoBackOnlyOnceTheirFenceSignalledOldestFirst) {
  FakeFences fences;
  std::vector<std::weak_ptr<void>> claims;
  cipc_gst::FencedReleases releases(fences.ops(), 8);
  for (int i = 0; i < 3; ++i) releases.add(fences.fence(i), claim(&claims));
  releases.reap();
  EXPECT_EQ(releases.pending(), 3u) << "no fence signalled: every claim is held";
  for (const auto& c : claims) EXPECT_FALSE(c.expired());

  // The second fence signalling alone frees nothing: GL signals in order, the first is not done.
  fences.signalled.insert(1);
  releases.reap();
  EXPECT_EQ(releases.pending(), 3u);
  EXPECT_FALSE(claims[1].expired());

  fences.signalled.insert(0);
  releases.reap();
  EXPECT_EQ(releases.pending(), 1u);
  EXPECT_TRUE(claims[0].expired());
  EXPECT_TRUE(claims[1].expired());
  EXPECT_FALSE(claims[2].expired()) << "its fence has not signalled";
  EXPECT_EQ(fences.destroyed, (std::vector<int>{0, 1}));
  EXPECT_TRUE(fences.waited.empty()) << "reap() never waits without end";

  // A bounded wait is passed on for the fence still pending.
  fences.waits_ns.clear();
  releases.reap(20000);
  EXPECT_EQ(fences.waits_ns, (std::vector<uint64_t>{20000}));
  EXPECT_FALSE(claims[2].expired());
}

TEST(FencedReleases, PastTheLimitTheOldestIsWaitedForSoThatThePoolNeverRunsDry) {
  FakeFences fences;
  std::vector<std::weak_ptr<void>> claims;
  cipc_gst::FencedReleases releases(fences.ops(), 2);
  releases.add(fences.fence(0), claim(&claims));
  releases.add(fences.fence(1), claim(&claims));
  EXPECT_TRUE(fences.waited.empty());
  releases.add(fences.fence(2), claim(&claims));
  EXPECT_EQ(fences.waited, (std::vector<int>{0}));
  EXPECT_EQ(releases.pending(), 2u);
  EXPECT_TRUE(claims[0].expired());
  EXPECT_FALSE(claims[1].expired());
}

TEST(FencedReleases, DrainAndDestructionWaitForEveryFenceAndGiveEveryClaimBack) {
  FakeFences fences;
  std::vector<std::weak_ptr<void>> claims;
  {
    cipc_gst::FencedReleases releases(fences.ops(), 8);
    releases.add(fences.fence(0), claim(&claims));
    releases.add(fences.fence(1), claim(&claims));
    releases.drain();
    EXPECT_EQ(releases.pending(), 0u);
    EXPECT_EQ(fences.waited, (std::vector<int>{0, 1}));
    releases.add(fences.fence(2), claim(&claims));
  }
  for (const auto& c : claims) EXPECT_TRUE(c.expired());
  EXPECT_EQ(fences.waited, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(fences.destroyed, (std::vector<int>{0, 1, 2})) << "no fence leaks";
}

TEST(FencedReleases, AFrameWithoutAFenceIsGivenBackAtTheNextReapWithoutPolling) {
  // GL may fail to make a fence (glFenceSync returns 0): the claim must not be kept for ever.
  FakeFences fences;
  std::vector<std::weak_ptr<void>> claims;
  cipc_gst::FencedReleases releases(fences.ops(), 8);
  releases.add(nullptr, claim(&claims));
  releases.add(fences.fence(3), claim(&claims));
  releases.reap();
  EXPECT_TRUE(claims[0].expired());
  EXPECT_FALSE(claims[1].expired());
  EXPECT_EQ(fences.polled, (std::vector<int>{3}));
  EXPECT_TRUE(fences.destroyed.empty()) << "a null fence is not destroyed";
}

}  // namespace
