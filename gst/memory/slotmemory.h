// SPDX-License-Identifier: LGPL-2.1-or-later
// GstMemory for slot memory, on both sides of the socket. On the producer it wraps a slot that
// the pool allocated (exportable); on the consumer it wraps an imported slot and owns the frame's
// claim, so the producer gets RELEASE exactly when the last GstMemory referring to it is freed.
#pragma once

#include <gst/gst.h>

#include <atomic>
#include <memory>

#include "consumer.h"
#include "cudaipc/gstcudaipcmemory.h"
#include "memorybackend.h"

#define GST_CIPC_SLOT_MEMORY_TYPE "CudaIpcSlotMemory"

namespace cipc_slots {
class CudaRegion;
class CudaSlotMemory;
}  // namespace cipc_slots

// How the CPU reaches a slot that is not host memory (CUDA): through a staging copy.
class GstCipcCpuAccess {
 public:
  virtual ~GstCipcCpuAccess() = default;
  // Returns a host pointer to the slot's bytes (downloaded first if `flags` has READ).
  virtual uint8_t* map(GstMapFlags flags) = 0;
  // `wrote`: upload the staging copy back (and mark the slot written).
  virtual void unmap(bool wrote) = 0;
};

// What a slot memory refers to. Shared (not copied) by gst_memory_share() children.
struct GstCipcSlotBinding {
  std::shared_ptr<cipc::SlotMemory> producer_slot;          // producer side
  std::shared_ptr<const cipc::ImportedSlot> imported_slot;  // consumer side
  std::shared_ptr<cipc::FrameClaim> claim;                  // consumer side
  uint64_t generation = 0;
  uint32_t index = 0;
  // Producer: who allocated the slot (the pool's memory backend). Generation numbers are only
  // unique per backend: rg10tobgra's own slots also start at generation 1.
  const void* owner = nullptr;
  uint8_t* data = nullptr;  // CPU address of the slot's first byte (host memory)
  // CUDA slots: the public description (gstcudaipcmemory.h) and the CPU fallback.
  bool has_cuda = false;
  GstCudaIpcMemoryInfo cuda{};
  cipc_slots::CudaRegion* region = nullptr;  // kept alive by the slot fields or keepalive
  // Consumer: a reader recorded its release on the GPU; the claim waits for it (slot_free()).
  mutable std::atomic<bool> release_recorded{false};
  std::unique_ptr<GstCipcCpuAccess> cpu_access;
  std::shared_ptr<void> keepalive;  // anything else the memory must keep alive
};

// Layout shared with GstCudaIpcMemory in the public header: `cuda` follows the GstMemory.
struct GstCipcSlotMemory {
  GstMemory parent;
  const GstCudaIpcMemoryInfo* cuda;
  std::shared_ptr<GstCipcSlotBinding>* binding;
};

// The process-wide allocator (registered under GST_CIPC_SLOT_MEMORY_TYPE by the plugin), or
// nullptr when it could not be created; the gst_cipc_slot_memory_new*() functions then return
// nullptr.
GstAllocator* gst_cipc_slot_allocator_get();

// Producer: wraps an exportable slot; the memory is writable.
// `owner` identifies the allocator of the slot (see GstCipcSlotBinding::owner).
GstMemory* gst_cipc_slot_memory_new_producer(std::shared_ptr<cipc::SlotMemory> slot,
                                             uint64_t generation, uint32_t index, gsize size,
                                             const void* owner);
// Consumer: wraps `size` bytes of an imported slot, read-only, owning the frame's claim.
GstMemory* gst_cipc_slot_memory_new_imported(std::shared_ptr<const cipc::ImportedSlot> slot,
                                             std::shared_ptr<cipc::FrameClaim> claim, gsize size);

// Any binding (e.g. a private device copy bound with bind_cuda_region()); READONLY when
// `readonly`.
GstMemory* gst_cipc_slot_memory_new(std::shared_ptr<GstCipcSlotBinding> binding, gsize maxsize,
                                    gsize size, bool readonly);

gboolean gst_is_cipc_slot_memory(GstMemory* mem);

// Whether structure `index` of `caps` carries the memory:CUDAIPCMemory feature (false for
// null or shorter caps).
bool gst_cipc_caps_have_cuda_memory(GstCaps* caps, guint index = 0);
// The binding of a slot memory, or nullptr for any other memory.
const GstCipcSlotBinding* gst_cipc_slot_memory_binding(GstMemory* mem);

// CUDA regions (builds with CUDA only). Fills binding.cuda (the public table) and
// binding.cpu_access for memory in `region`, which the binding keeps alive (producer_slot,
// imported_slot or keepalive).
namespace cipc_gst {
void bind_cuda_region(GstCipcSlotBinding& binding, cipc_slots::CudaRegion& region);
// The CUDA region behind a slot memory, or nullptr.
cipc_slots::CudaRegion* cuda_region_of(GstMemory* mem);
// The CUDA slot behind a slot memory (producer or imported), or nullptr.
cipc_slots::CudaSlotMemory* cuda_slot_of(GstMemory* mem);
}  // namespace cipc_gst
