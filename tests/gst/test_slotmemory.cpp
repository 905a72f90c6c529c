// SPDX-License-Identifier: LGPL-2.1-or-later
// Slot memory as a consumer sees it (gst/memory/slotmemory): read-only, sharing its claim.
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <memory>

#include "glue_fixture.h"
#include "host_memory.h"
#include "memory/slotmemory.h"

namespace {

using namespace cipc_test;

TEST_F(Glue, ImportedMemoryIsReadOnlyAndSharesItsClaim) {
  cipc_slots::HostMemoryBackend backend;
  auto slot = backend.allocate(4096);
  ASSERT_TRUE(slot);
  static_cast<uint8_t*>(slot.value()->data())[100] = 7;
  auto imported = std::make_shared<cipc::ImportedSlot>();
  auto mem = backend.import(cipc::UniqueFd(::dup(slot.value()->export_fd())), 4096, nullptr);
  ASSERT_TRUE(mem);
  imported->memory = std::move(mem.value());
  imported->index = 3;
  GstMemory* m = gst_cipc_slot_memory_new_imported(imported, nullptr, 1000);
  EXPECT_TRUE(GST_MEMORY_IS_READONLY(m));
  EXPECT_EQ(gst_memory_get_sizes(m, nullptr, nullptr), 1000u);
  GstMapInfo map;
  ASSERT_TRUE(gst_memory_map(m, &map, GST_MAP_READ));
  EXPECT_EQ(map.data[100], 7);
  gst_memory_unmap(m, &map);
  EXPECT_FALSE(gst_memory_map(m, &map, GST_MAP_WRITE));
  GstMemory* part = gst_memory_share(m, 100, 10);
  ASSERT_TRUE(gst_memory_map(part, &map, GST_MAP_READ));
  EXPECT_EQ(map.data[0], 7);
  gst_memory_unmap(part, &map);
  EXPECT_EQ(gst_cipc_slot_memory_binding(part)->index, 3u);
  EXPECT_EQ(imported.use_count(), 2) << "both memories share one binding";
  gst_memory_unref(m);
  EXPECT_EQ(imported.use_count(), 2) << "the shared part keeps the slot";
  gst_memory_unref(part);
  EXPECT_EQ(imported.use_count(), 1);
}

}  // namespace
