// SPDX-License-Identifier: LGPL-2.1-or-later
// GstBufferPool of persistent, exportable slots (DESIGN.md section 3). cudasink-ipc offers it
// upstream so frames are written straight into memory a consumer can map. Every pool is one
// generation: slots are numbered within it and consumers cache imports by (generation, index).
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <memory>

#include "memory.h"
#include "protocol.h"

G_BEGIN_DECLS

#define GST_TYPE_CIPC_SLOT_POOL (gst_cipc_slot_pool_get_type())
G_DECLARE_FINAL_TYPE(GstCipcSlotPool, gst_cipc_slot_pool, GST, CIPC_SLOT_POOL, GstBufferPool)

G_END_DECLS

GstBufferPool* gst_cipc_slot_pool_new(std::shared_ptr<cipc::MemoryBackend> backend,
                                      uint64_t generation);
uint64_t gst_cipc_slot_pool_generation(GstCipcSlotPool* pool);
// Slots allocated so far in this pool (persistent slots are allocated once each). Every slot
// retired under a stuck consumer is replaced by one with a new index, so this only grows.
guint gst_cipc_slot_pool_slots_allocated(GstCipcSlotPool* pool);
// Once this many indices are used, the pool's generation should be replaced by a new one (same
// caps) before indices reach cipc::kMaxSlots; the margin covers slots upstream allocates before
// it renegotiates. Slots at or past kMaxSlots are allocated but must never be sent.
constexpr guint kCipcSlotPoolRolloverAt = cipc::kMaxSlots - 256;
gboolean gst_cipc_slot_pool_needs_rollover(GstCipcSlotPool* pool);
// The video layout the pool was configured with; false before set_config.
gboolean gst_cipc_slot_pool_video_info(GstCipcSlotPool* pool, GstVideoInfo* info);
