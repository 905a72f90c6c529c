// SPDX-License-Identifier: LGPL-2.1-or-later
// The pool of exportable slots and its generations (gst/memory/slotpool): numbered slots with
// video meta, releases asked for before waiting, roll-over before the index limit, formats
// announced once, foreign memory's indices.
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "host_memory.h"
#include "memory/slotmemory.h"
#include "memory/slotpool.h"
#ifdef CIPC_HAVE_GST_CUDA
#include "common/gstcudainterop.h"
#endif
#include "glue_fixture.h"

namespace {

using namespace cipc_test;

TEST_F(Glue, SlotPoolAllocatesNumberedSlotsWithVideoMeta) {
  auto backend = std::make_shared<cipc_slots::HostMemoryBackend>();
  GstBufferPool* pool = gst_cipc_slot_pool_new(backend, 7);
  GstCaps* caps = gst_caps_from_string("video/x-raw,format=RGB,width=321,height=241");
  GstVideoInfo vi;
  gst_video_info_from_caps(&vi, caps);
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, 100, 2, 0);  // too small a size on purpose
  EXPECT_FALSE(gst_buffer_pool_set_config(pool, config)) << "a resized config is reported";
  config = gst_buffer_pool_get_config(pool);
  guint size = 0;
  gst_buffer_pool_config_get_params(config, nullptr, &size, nullptr, nullptr);
  EXPECT_EQ(size, GST_VIDEO_INFO_SIZE(&vi));
  ASSERT_TRUE(gst_buffer_pool_set_config(pool, config));
  ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE));

  GstBuffer* a = nullptr;
  GstBuffer* b = nullptr;
  ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &a, nullptr), GST_FLOW_OK);
  ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &b, nullptr), GST_FLOW_OK);
  const GstCipcSlotBinding* ba = gst_cipc_slot_memory_binding(gst_buffer_peek_memory(a, 0));
  const GstCipcSlotBinding* bb = gst_cipc_slot_memory_binding(gst_buffer_peek_memory(b, 0));
  ASSERT_TRUE(ba && bb);
  EXPECT_EQ(ba->generation, 7u);
  EXPECT_NE(ba->index, bb->index);
  EXPECT_GE(ba->producer_slot->size(), GST_VIDEO_INFO_SIZE(&vi));
  GstVideoMeta* meta = gst_buffer_get_video_meta(a);
  ASSERT_NE(meta, nullptr);
  EXPECT_EQ(meta->stride[0], GST_VIDEO_INFO_PLANE_STRIDE(&vi, 0));
  // Writable on the producer side: upstream writes frames into it.
  GstMapInfo map;
  ASSERT_TRUE(gst_buffer_map(a, &map, GST_MAP_WRITE));
  map.data[0] = 42;
  gst_buffer_unmap(a, &map);
  EXPECT_EQ(static_cast<uint8_t*>(ba->producer_slot->data())[0], 42);

  // A retired buffer (TAG_MEMORY) is not recycled: the next acquire gets a fresh slot.
  const uint32_t retired_index = ba->index;
  GST_BUFFER_FLAG_SET(a, GST_BUFFER_FLAG_TAG_MEMORY);
  gst_buffer_unref(a);
  gst_buffer_unref(b);
  EXPECT_EQ(gst_cipc_slot_pool_slots_allocated(GST_CIPC_SLOT_POOL(pool)), 2u);
  std::vector<GstBuffer*> again(2);
  for (auto& x : again) ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &x, nullptr), GST_FLOW_OK);
  for (auto* x : again)
    EXPECT_NE(gst_cipc_slot_memory_binding(gst_buffer_peek_memory(x, 0))->index, retired_index);
  EXPECT_EQ(gst_cipc_slot_pool_slots_allocated(GST_CIPC_SLOT_POOL(pool)), 3u);
  for (auto* x : again) gst_buffer_unref(x);
  gst_buffer_pool_set_active(pool, FALSE);
  gst_object_unref(pool);
  gst_caps_unref(caps);
}

// Each slot is told to the owner as it is made, with its generation, index and memory, before
// upstream can write a frame into it: the producer gives it to consumers ahead of that frame. A
// slot made again (after one was retired) is told too; recycled ones are not.
TEST_F(Glue, SlotPoolTellsOfEachSlotItMakesBeforeItIsWritten) {
  struct Told {
    uint64_t generation;
    guint index;
    std::weak_ptr<cipc::SlotMemory> memory;
  };
  std::vector<Told> told;
  CipcSlotPoolHooks hooks;
  hooks.on_allocated = [&](uint64_t generation, guint index,
                           const std::shared_ptr<cipc::SlotMemory>& memory) {
    told.push_back({generation, index, memory});
  };
  GstBufferPool* pool =
      gst_cipc_slot_pool_new(std::make_shared<cipc_slots::HostMemoryBackend>(), 4, hooks);
  GstCaps* caps = gst_caps_from_string("video/x-raw,format=GRAY8,width=64,height=4");
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, 256, 2, 0);
  ASSERT_TRUE(gst_buffer_pool_set_config(pool, config) && gst_buffer_pool_set_active(pool, TRUE));
  ASSERT_EQ(told.size(), 2u) << "the pool's minimum, made when it starts";

  std::vector<GstBuffer*> buffers(3);
  for (GstBuffer*& b : buffers)
    ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &b, nullptr), GST_FLOW_OK);
  ASSERT_EQ(told.size(), 3u) << "a third slot, made on demand";
  for (size_t i = 0; i < buffers.size(); ++i) {
    const GstCipcSlotBinding* binding =
        gst_cipc_slot_memory_binding(gst_buffer_peek_memory(buffers[i], 0));
    ASSERT_TRUE(binding);
    bool found = false;
    for (const Told& t : told)
      found |= t.generation == 4 && t.index == binding->index &&
               t.memory.lock() == binding->producer_slot;
    EXPECT_TRUE(found) << "slot " << binding->index << " was not told, or with other memory";
  }
  GST_BUFFER_FLAG_SET(buffers[0], GST_BUFFER_FLAG_TAG_MEMORY);  // retired: freed, not recycled
  for (GstBuffer* b : buffers) gst_buffer_unref(b);
  EXPECT_TRUE(told[0].memory.expired() || told[1].memory.expired() || told[2].memory.expired())
      << "the retired slot's memory is gone: the hook kept no reference";
  for (GstBuffer*& b : buffers)
    ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &b, nullptr), GST_FLOW_OK);
  EXPECT_EQ(told.size(), 4u) << "only the retired slot's replacement is new";
  EXPECT_EQ(told.back().index, 3u);
  for (GstBuffer* b : buffers) gst_buffer_unref(b);
  gst_buffer_pool_set_active(pool, FALSE);
  gst_object_unref(pool);
  gst_caps_unref(caps);
}

// A writer that finds every slot out (a pool with a maximum) tells the producer before it waits,
// so that RELEASEs the producer left for its next frame are read now; a writer that finds a free
// slot, or must not wait, tells nobody.
TEST_F(Glue, SlotPoolAboutToWaitForASlotAsksForReleasesFirst) {
  std::atomic<int> asked{0};
  GstBuffer* returned_by_hook = nullptr;
  std::mutex lock;
  CipcSlotPoolHooks hooks;
  hooks.before_wait = [&] {
    ++asked;
    // As the producer would on reading a RELEASE: a held slot goes back to the pool.
    std::lock_guard<std::mutex> guard(lock);
    if (returned_by_hook) gst_buffer_unref(returned_by_hook);
    returned_by_hook = nullptr;
  };
  GstBufferPool* pool =
      gst_cipc_slot_pool_new(std::make_shared<cipc_slots::HostMemoryBackend>(), 1, hooks);
  GstCaps* caps = gst_caps_from_string("video/x-raw,format=GRAY8,width=64,height=4");
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, 256, 2, 2);  // at most two slots
  ASSERT_TRUE(gst_buffer_pool_set_config(pool, config) && gst_buffer_pool_set_active(pool, TRUE));

  GstBuffer* slots[2] = {nullptr, nullptr};
  for (GstBuffer*& slot : slots)
    ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &slot, nullptr), GST_FLOW_OK);
  EXPECT_EQ(asked, 0) << "free slots were there";
  GstBufferPoolAcquireParams dontwait{};
  dontwait.flags = GST_BUFFER_POOL_ACQUIRE_FLAG_DONTWAIT;
  GstBuffer* c = nullptr;
  EXPECT_EQ(gst_buffer_pool_acquire_buffer(pool, &c, &dontwait), GST_FLOW_EOS);
  EXPECT_EQ(asked, 0) << "an acquire that may not wait does not ask";
  {
    std::lock_guard<std::mutex> guard(lock);
    returned_by_hook = slots[1];
  }
  ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &c, nullptr), GST_FLOW_OK)
      << "the slot the hook returned was taken";
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(c, slots[1]);
  gst_buffer_unref(slots[0]);
  gst_buffer_unref(c);
  gst_buffer_pool_set_active(pool, FALSE);
  gst_object_unref(pool);
  gst_caps_unref(caps);
}

// Retired slots are replaced under new indices: the pool asks for a roll-over before the
// protocol's index limit, and past that limit still allocates (upstream writing into it must
// not fail) - such slots are never sent; cudasink-ipc copies them into the next generation.
TEST_F(Glue, SlotPoolAsksForRolloverBeforeTheIndexLimitAndNeverFailsPastIt) {
  auto backend = std::make_shared<cipc_slots::HostMemoryBackend>();
  GstBufferPool* pool = gst_cipc_slot_pool_new(backend, 1);
  GstCaps* caps = gst_caps_from_string("video/x-raw,format=GRAY8,width=16,height=16");
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, 256, 1, 0);
  ASSERT_TRUE(gst_buffer_pool_set_config(pool, config));
  ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE));
  auto* slot_pool = GST_CIPC_SLOT_POOL(pool);
  static_assert(kCipcSlotPoolRolloverAt < cipc::kMaxSlots, "roll over before the limit");
  uint32_t last_index = 0;
  for (guint i = 0; i < cipc::kMaxSlots + 10; ++i) {
    EXPECT_EQ(gst_cipc_slot_pool_needs_rollover(slot_pool), i >= kCipcSlotPoolRolloverAt) << i;
    GstBuffer* b = nullptr;
    ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &b, nullptr), GST_FLOW_OK) << "slot " << i;
    last_index = gst_cipc_slot_memory_binding(gst_buffer_peek_memory(b, 0))->index;
    GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_TAG_MEMORY);  // retired: freed, replaced by a new index
    gst_buffer_unref(b);
  }
  EXPECT_EQ(last_index, cipc::kMaxSlots + 9);
  EXPECT_EQ(gst_cipc_slot_pool_slots_allocated(slot_pool), cipc::kMaxSlots + 10);
  EXPECT_TRUE(gst_cipc_slot_pool_needs_rollover(slot_pool));
  gst_buffer_pool_set_active(pool, FALSE);
  gst_object_unref(pool);
  gst_caps_unref(caps);
}

// Acquires a buffer from `pool` (activating it) and marks it retired, so the pool replaces it
// under a new index; repeated, this walks the pool's index space.
static void use_up_indices(GstBufferPool* pool, guint n) {
  if (!gst_buffer_pool_is_active(pool)) {
    ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE));
  }
  for (guint i = 0; i < n; ++i) {
    GstBuffer* b = nullptr;
    ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &b, nullptr), GST_FLOW_OK);
    GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_TAG_MEMORY);
    gst_buffer_unref(b);
  }
}

struct Announced {
  uint64_t generation = 0;
  std::string caps;
  uint64_t frame_size = 0;
  int count = 0;
};

TEST_F(Glue, PoolGenerationsAnnounceEachNewFormatOnceWithoutMemoryFeatures) {
  Announced seen;
  cipc_gst::SlotPoolGenerations pools(std::make_shared<cipc_slots::HostMemoryBackend>(), 3,
                                      [&](uint64_t g, const std::string& caps, uint64_t size) {
                                        seen = {g, caps, size, seen.count + 1};
                                      });
  std::string error;
  GstCaps* a = gst_caps_from_string(
      "video/x-raw(memory:CUDAIPCMemory),format=GRAY8,width=16,height=16,framerate=30/1");
  ASSERT_TRUE(pools.ensure(a, &error)) << error;
  EXPECT_EQ(seen.count, 1);
  EXPECT_EQ(seen.generation, 1u);
  EXPECT_EQ(seen.frame_size, 256u);
  EXPECT_EQ(seen.caps.find("memory:"), std::string::npos) << seen.caps;
  ASSERT_TRUE(pools.ensure(a, &error));
  EXPECT_EQ(seen.count, 1) << "the same caps keep the generation";
  GstCaps* b = gst_caps_from_string("video/x-raw,format=GRAY8,width=32,height=16");
  GstBufferPool* first = GST_BUFFER_POOL(gst_object_ref(pools.pool()));
  ASSERT_TRUE(pools.ensure(b, &error));
  EXPECT_EQ(seen.count, 2);
  EXPECT_EQ(pools.generation(), 2u);
  EXPECT_EQ(pools.info().width, 32);
  EXPECT_NE(pools.pool(), first);
  GstCaps* bad = gst_caps_from_string("audio/x-raw,format=S16LE");
  EXPECT_FALSE(pools.ensure(bad, &error));
  EXPECT_NE(error.find("not a raw video format"), std::string::npos) << error;
  EXPECT_EQ(pools.generation(), 2u) << "a refused format leaves the current pool";
  gst_object_unref(first);
  gst_caps_unref(bad);
  gst_caps_unref(b);
  gst_caps_unref(a);
}

// Issue 27 and issue 24 item 6: the sink hears the slot limit upstream configures on the pool it
// writes into, and that pool's flushing - from the current generation only: a replaced pool is
// deactivated (which flushes it) and its configuration says nothing about the pool in use.
TEST_F(Glue, PoolGenerationsPassOnTheCurrentPoolsLimitAndFlushingOnly) {
  std::vector<guint> limits;
  std::vector<bool> flushing;
  CipcSlotPoolHooks hooks;
  hooks.on_configured = [&](guint max_slots) { limits.push_back(max_slots); };
  hooks.on_flushing = [&](bool f) { flushing.push_back(f); };
  cipc_gst::SlotPoolGenerations pools(
      std::make_shared<cipc_slots::HostMemoryBackend>(), 3,
      [](uint64_t, const std::string&, uint64_t) {}, hooks);
  std::string error;
  GstCaps* a = gst_caps_from_string("video/x-raw,format=GRAY8,width=16,height=16");
  ASSERT_TRUE(pools.ensure(a, &error)) << error;
  EXPECT_EQ(limits, (std::vector<guint>{0})) << "the sink's own configuration: it grows";
  // Upstream takes the proposed pool and bounds it, as a writer that allocates ahead may.
  GstBufferPool* first = GST_BUFFER_POOL(gst_object_ref(pools.pool()));
  GstStructure* config = gst_buffer_pool_get_config(first);
  gst_buffer_pool_config_set_params(config, a, 256, 3, 5);
  ASSERT_TRUE(gst_buffer_pool_set_config(first, config));
  EXPECT_EQ(limits, (std::vector<guint>{0, 5}));
  ASSERT_TRUE(gst_buffer_pool_set_active(first, TRUE));
  flushing.clear();
  gst_buffer_pool_set_flushing(first, TRUE);
  gst_buffer_pool_set_flushing(first, FALSE);
  EXPECT_EQ(flushing, (std::vector<bool>{true, false}));

  GstCaps* b = gst_caps_from_string("video/x-raw,format=GRAY8,width=32,height=16");
  flushing.clear();
  ASSERT_TRUE(pools.ensure(b, &error)) << error;  // deactivates (and so flushes) the first
  EXPECT_EQ(flushing, (std::vector<bool>{false})) << "only the new pool's state: not flushing";
  EXPECT_EQ(limits, (std::vector<guint>{0, 5, 0}));
  config = gst_buffer_pool_get_config(first);
  gst_buffer_pool_config_set_params(config, a, 256, 3, 4);
  gst_buffer_pool_set_config(first, config);
  EXPECT_EQ(limits, (std::vector<guint>{0, 5, 0})) << "the replaced pool is not heard";
  gst_object_unref(first);
  gst_caps_unref(b);
  gst_caps_unref(a);
}

#ifdef CIPC_HAVE_GST_CUDA
// GStreamer 1.22 registers its CUDA allocator only when the nvcodec plugin loads; cudasrc-ipc's
// own GstCudaBufferPool (appsink downstream, no nvcodec element in the process) needs it
// registered, or the pool refuses its configuration. No GPU is needed to register it.
TEST_F(Glue, GstreamersCudaAllocatorIsRegisteredBeforeOurPoolsNeedIt) {
  cipc_gst::register_gst_cuda_allocator();
  GstAllocator* allocator = gst_allocator_find(GST_CUDA_MEMORY_TYPE_NAME);
  ASSERT_NE(allocator, nullptr) << GST_CUDA_MEMORY_TYPE_NAME << " is not registered";
  gst_object_unref(allocator);
}
#endif

// Issue 29: memory the pool did not allocate (an upstream GstCudaBufferPool's) is sent under an
// index of the current generation; indices it takes are never handed to the pool's own slots,
// count towards the roll-over, and run out at the protocol's limit instead of wrapping.
TEST_F(Glue, PoolGenerationsHandOutIndicesForForeignMemoryThatTheirSlotsNeverReuse) {
  auto backend = std::make_shared<cipc_slots::HostMemoryBackend>();
  cipc_gst::SlotPoolGenerations pools(backend, 2, nullptr);
  uint64_t generation = 0;
  uint32_t index = 0;
  EXPECT_FALSE(pools.take_index(&generation, &index)) << "no generation before the caps";
  std::string error;
  GstCaps* caps = gst_caps_from_string("video/x-raw,format=GRAY8,width=16,height=16");
  ASSERT_TRUE(pools.ensure(caps, &error)) << error;
  ASSERT_TRUE(gst_buffer_pool_set_active(pools.pool(), TRUE));  // allocates its 2 slots
  auto* slot_pool = GST_CIPC_SLOT_POOL(pools.pool());
  const guint preallocated = gst_cipc_slot_pool_slots_allocated(slot_pool);
  ASSERT_TRUE(pools.take_index(&generation, &index));
  EXPECT_EQ(generation, pools.generation());
  EXPECT_EQ(index, preallocated);
  // The pool's own slots, those it had and those it allocates after, never get that index.
  std::vector<GstBuffer*> held(4, nullptr);
  for (GstBuffer*& own : held) {
    ASSERT_EQ(gst_buffer_pool_acquire_buffer(pools.pool(), &own, nullptr), GST_FLOW_OK);
    EXPECT_NE(pools.current_slot(own)->index, index) << "the pool reused a taken index";
  }
  EXPECT_EQ(gst_cipc_slot_pool_slots_allocated(slot_pool), held.size() + 1);
  for (GstBuffer* own : held) {
    GST_BUFFER_FLAG_SET(own, GST_BUFFER_FLAG_TAG_MEMORY);  // freed: every later acquire allocates
    gst_buffer_unref(own);
  }

  use_up_indices(pools.pool(), kCipcSlotPoolRolloverAt - guint(held.size()) - 1);
  EXPECT_TRUE(gst_cipc_slot_pool_needs_rollover(slot_pool)) << "taken indices count";
  while (gst_cipc_slot_pool_slots_allocated(slot_pool) < cipc::kMaxSlots)
    ASSERT_TRUE(pools.take_index(&generation, &index));
  EXPECT_EQ(index, cipc::kMaxSlots - 1);
  EXPECT_FALSE(pools.take_index(&generation, &index)) << "past the limit nothing is sendable";
  bool rolled = false;
  ASSERT_TRUE(pools.roll_over_if_needed(&rolled, &error)) << error;
  ASSERT_TRUE(rolled);
  ASSERT_TRUE(pools.take_index(&generation, &index));
  EXPECT_EQ(generation, pools.generation());
  EXPECT_EQ(index, 0u) << "a new generation numbers from 0";
  gst_caps_unref(caps);
}

TEST_F(Glue, PoolGenerationsRollOverWithTheSameCapsAndTreatOldSlotsAsStale) {
  Announced seen;
  auto backend = std::make_shared<cipc_slots::HostMemoryBackend>();
  cipc_gst::SlotPoolGenerations pools(backend, 2,
                                      [&](uint64_t g, const std::string& caps, uint64_t size) {
                                        seen = {g, caps, size, seen.count + 1};
                                      });
  std::string error;
  GstCaps* caps = gst_caps_from_string("video/x-raw,format=GRAY8,width=16,height=16");
  ASSERT_TRUE(pools.ensure(caps, &error)) << error;
  bool rolled = true;
  ASSERT_TRUE(pools.roll_over_if_needed(&rolled, &error));
  EXPECT_FALSE(rolled) << "a fresh generation has indices left";

  GstBufferPool* old_pool = GST_BUFFER_POOL(gst_object_ref(pools.pool()));
  use_up_indices(old_pool, kCipcSlotPoolRolloverAt);
  GstBuffer* old_slot = nullptr;
  ASSERT_EQ(gst_buffer_pool_acquire_buffer(old_pool, &old_slot, nullptr), GST_FLOW_OK);
  EXPECT_TRUE(pools.current_slot(old_slot)) << "still the current generation";

  ASSERT_TRUE(pools.roll_over_if_needed(&rolled, &error)) << error;
  EXPECT_TRUE(rolled);
  EXPECT_EQ(pools.generation(), 2u);
  EXPECT_EQ(pools.rollovers(), 1u);
  EXPECT_EQ(seen.count, 2);
  EXPECT_TRUE(gst_caps_is_equal(pools.caps(), caps));
  EXPECT_TRUE(gst_buffer_pool_is_active(old_pool)) << "upstream may still write into it";
  EXPECT_FALSE(pools.current_slot(old_slot));
  EXPECT_TRUE(pools.stale_slot(old_slot));
  EXPECT_TRUE(pools.take_reconfigure());
  EXPECT_FALSE(pools.take_reconfigure()) << "upstream is asked once per generation";

  GstBuffer* fresh = nullptr;
  ASSERT_TRUE(gst_buffer_pool_set_active(pools.pool(), TRUE));
  ASSERT_EQ(gst_buffer_pool_acquire_buffer(pools.pool(), &fresh, nullptr), GST_FLOW_OK);
  EXPECT_TRUE(pools.current_slot(fresh));
  EXPECT_FALSE(pools.stale_slot(fresh));

  // Another backend's slot of the same generation number is foreign memory, neither current nor
  // stale (rg10tobgra's own exportable pool numbers its generations from 1 too).
  GstBufferPool* foreign =
      gst_cipc_slot_pool_new(std::make_shared<cipc_slots::HostMemoryBackend>(), 2);
  GstStructure* config = gst_buffer_pool_get_config(foreign);
  gst_buffer_pool_config_set_params(config, caps, 256, 1, 0);
  ASSERT_TRUE(gst_buffer_pool_set_config(foreign, config));
  ASSERT_TRUE(gst_buffer_pool_set_active(foreign, TRUE));
  GstBuffer* other = nullptr;
  ASSERT_EQ(gst_buffer_pool_acquire_buffer(foreign, &other, nullptr), GST_FLOW_OK);
  EXPECT_FALSE(pools.current_slot(other));
  EXPECT_FALSE(pools.stale_slot(other));

  gst_buffer_unref(other);
  gst_buffer_pool_set_active(foreign, FALSE);
  gst_object_unref(foreign);
  gst_buffer_unref(fresh);
  gst_buffer_unref(old_slot);
  gst_buffer_pool_set_active(old_pool, FALSE);
  gst_object_unref(old_pool);
  gst_caps_unref(caps);
}

}  // namespace
