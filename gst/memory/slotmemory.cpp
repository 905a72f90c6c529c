// SPDX-License-Identifier: LGPL-2.1-or-later
#include "memory/slotmemory.h"

#include <new>

#ifdef CIPC_HAVE_CUDA
#include "cuda_slots.h"
#include "staging.h"
#endif

GST_DEBUG_CATEGORY_STATIC(cipc_slot_memory_debug);
#define GST_CAT_DEFAULT cipc_slot_memory_debug

namespace {

struct GstCipcSlotAllocator {
  GstAllocator parent;
};
struct GstCipcSlotAllocatorClass {
  GstAllocatorClass parent_class;
};

GType gst_cipc_slot_allocator_get_type();
G_DEFINE_TYPE(GstCipcSlotAllocator, gst_cipc_slot_allocator, GST_TYPE_ALLOCATOR)

GstMemory* slot_alloc(GstAllocator*, gsize, GstAllocationParams*) {
  // Slot memory only comes from a slot pool or an import; generic allocation is not offered.
  return nullptr;
}

GstMemory* make_memory(GstMemory* parent, std::shared_ptr<GstCipcSlotBinding> binding,
                       GstMemoryFlags flags, gsize maxsize, gsize offset, gsize size) {
  GstAllocator* allocator = gst_cipc_slot_allocator_get();
  if (allocator == nullptr) return nullptr;
  auto* mem = g_new0(GstCipcSlotMemory, 1);
  mem->cuda = binding->has_cuda ? &binding->cuda : nullptr;
  mem->binding = new std::shared_ptr<GstCipcSlotBinding>(std::move(binding));
  gst_memory_init(GST_MEMORY_CAST(mem), flags, allocator, parent, maxsize, 0, offset, size);
  return GST_MEMORY_CAST(mem);
}

void slot_free(GstAllocator*, GstMemory* memory) {
  auto* mem = reinterpret_cast<GstCipcSlotMemory*>(memory);
#ifdef CIPC_HAVE_CUDA
  // The last memory of a frame whose GPU reads were recorded: RELEASE once they are done.
  std::shared_ptr<GstCipcSlotBinding>& binding = *mem->binding;
  if (binding.use_count() == 1 && binding->claim && binding->release_recorded && binding->region)
    binding->region->drop_after_reads(std::move(binding));
#endif
  delete mem->binding;  // the last binding reference drops the claim: RELEASE goes out
  g_free(mem);
}

gpointer slot_map(GstMemory* memory, GstMapInfo* info, gsize) {
  auto* mem = reinterpret_cast<GstCipcSlotMemory*>(memory);
  GstCipcSlotBinding& b = **mem->binding;
  return b.cpu_access ? b.cpu_access->map(info->flags) : b.data;
}

void slot_unmap(GstMemory* memory, GstMapInfo* info) {
  auto* mem = reinterpret_cast<GstCipcSlotMemory*>(memory);
  GstCipcSlotBinding& b = **mem->binding;
  if (b.cpu_access) b.cpu_access->unmap((info->flags & GST_MAP_WRITE) != 0);
}

GstMemory* slot_share(GstMemory* memory, gssize offset, gssize size) {
  auto* mem = reinterpret_cast<GstCipcSlotMemory*>(memory);
  GstMemory* parent = memory->parent ? memory->parent : memory;
  if (size == -1) size = static_cast<gssize>(memory->size) - offset;
  return make_memory(parent, *mem->binding,
                     static_cast<GstMemoryFlags>(GST_MINI_OBJECT_FLAGS(parent) |
                                                 GST_MINI_OBJECT_FLAG_LOCK_READONLY),
                     memory->maxsize, memory->offset + offset, size);
}

void gst_cipc_slot_allocator_class_init(GstCipcSlotAllocatorClass* klass) {
  GstAllocatorClass* allocator_class = GST_ALLOCATOR_CLASS(klass);
  allocator_class->alloc = slot_alloc;
  allocator_class->free = slot_free;
}

void gst_cipc_slot_allocator_init(GstCipcSlotAllocator* self) {
  GstAllocator* alloc = GST_ALLOCATOR_CAST(self);
  alloc->mem_type = GST_CIPC_SLOT_MEMORY_TYPE;
  alloc->mem_map_full = slot_map;
  alloc->mem_unmap_full = slot_unmap;
  alloc->mem_share = slot_share;
  GST_OBJECT_FLAG_SET(self, GST_ALLOCATOR_FLAG_CUSTOM_ALLOC);
}

}  // namespace

GstAllocator* gst_cipc_slot_allocator_get() {
  // Made once: the type cannot be registered when another copy of this code in the process
  // already took its name (get_type() then returns 0, and must not be asked again).
  static GstAllocator* allocator = []() -> GstAllocator* {
    GST_DEBUG_CATEGORY_INIT(cipc_slot_memory_debug, "cudaipc-slots", 0, "cudaipc slot memory");
    const GType type = gst_cipc_slot_allocator_get_type();
    if (type == 0) {
      GST_ERROR("could not register the %s allocator type", GST_CIPC_SLOT_MEMORY_TYPE);
      return nullptr;
    }
    auto* a = GST_ALLOCATOR_CAST(g_object_new(type, nullptr));
    if (a == nullptr) return nullptr;
    gst_object_ref_sink(a);
    GST_OBJECT_FLAG_SET(a, GST_OBJECT_FLAG_MAY_BE_LEAKED);
    gst_allocator_register(GST_CIPC_SLOT_MEMORY_TYPE, GST_ALLOCATOR_CAST(gst_object_ref(a)));
    return a;
  }();
  return allocator;
}

GstMemory* gst_cipc_slot_memory_new_producer(std::shared_ptr<cipc::SlotMemory> slot,
                                             uint64_t generation, uint32_t index, gsize size,
                                             const void* owner) {
  auto binding = std::make_shared<GstCipcSlotBinding>();
  binding->owner = owner;
  binding->data = static_cast<uint8_t*>(slot->data());
  binding->producer_slot = std::move(slot);
  binding->generation = generation;
  binding->index = index;
#ifdef CIPC_HAVE_CUDA
  if (auto* cuda = cipc_slots::cuda_slot_of(binding->producer_slot.get()))
    cipc_gst::bind_cuda_region(*binding, *cuda);
#endif
  const gsize maxsize = binding->producer_slot->size();
  return make_memory(nullptr, std::move(binding), static_cast<GstMemoryFlags>(0), maxsize, 0, size);
}

GstMemory* gst_cipc_slot_memory_new_imported(std::shared_ptr<const cipc::ImportedSlot> slot,
                                             std::shared_ptr<cipc::FrameClaim> claim, gsize size) {
  auto binding = std::make_shared<GstCipcSlotBinding>();
  binding->data = static_cast<uint8_t*>(slot->memory->data());
  binding->generation = slot->generation;
  binding->index = slot->index;
  const gsize maxsize = slot->memory->size();
#ifdef CIPC_HAVE_CUDA
  if (auto* cuda = cipc_slots::cuda_slot_of(slot->memory.get()))
    cipc_gst::bind_cuda_region(*binding, *cuda);
#endif
  binding->imported_slot = std::move(slot);
  binding->claim = std::move(claim);
  // Read-only: the slot is shared with the producer and every other consumer.
  return make_memory(nullptr, std::move(binding), GST_MEMORY_FLAG_READONLY, maxsize, 0, size);
}

GstMemory* gst_cipc_slot_memory_new(std::shared_ptr<GstCipcSlotBinding> binding, gsize maxsize,
                                    gsize size, bool readonly) {
  return make_memory(nullptr, std::move(binding),
                     readonly ? GST_MEMORY_FLAG_READONLY : static_cast<GstMemoryFlags>(0), maxsize,
                     0, size);
}

bool gst_cipc_caps_have_cuda_memory(GstCaps* caps, guint index) {
  if (caps == nullptr || index >= gst_caps_get_size(caps)) return false;
  GstCapsFeatures* f = gst_caps_get_features(caps, index);
  return f && gst_caps_features_contains(f, GST_CAPS_FEATURE_MEMORY_CUDA_IPC);
}

gboolean gst_is_cipc_slot_memory(GstMemory* mem) {
  return mem != nullptr && gst_memory_is_type(mem, GST_CIPC_SLOT_MEMORY_TYPE);
}

const GstCipcSlotBinding* gst_cipc_slot_memory_binding(GstMemory* mem) {
  if (!gst_is_cipc_slot_memory(mem)) return nullptr;
  return reinterpret_cast<GstCipcSlotMemory*>(mem)->binding->get();
}

#ifdef CIPC_HAVE_CUDA
namespace cipc_gst {
namespace {

// GStreamer's map/unmap of a CUDA region, through the slots layer's staging copy.
class StagingAccess final : public GstCipcCpuAccess {
 public:
  explicit StagingAccess(cipc_slots::CudaRegion& region) : staging_(region) {}
  uint8_t* map(GstMapFlags flags) override {
    std::string error;
    uint8_t* data = staging_.map((flags & GST_MAP_READ) != 0, (flags & GST_MAP_WRITE) != 0, &error);
    if (!data) GST_ERROR("%s", error.c_str());
    return data;
  }
  void unmap(bool) override {
    std::string error;
    if (!staging_.unmap(&error)) GST_ERROR("%s", error.c_str());
  }

 private:
  cipc_slots::StagingCopy staging_;
};

gboolean table_wait_ready(GstMemory* mem, gpointer stream) {
  cipc_slots::CudaRegion* region = cuda_region_of(mem);
  return region && region->wait_ready(stream).ok();
}

gboolean table_record_release(GstMemory* mem, gpointer stream) {
  const GstCipcSlotBinding* b = gst_cipc_slot_memory_binding(mem);
  cipc_slots::CudaRegion* region = b ? b->region : nullptr;
  if (!region || !region->record_release(stream).ok()) return FALSE;
  // An imported slot's claim now waits for these reads before RELEASE (see slot_free()).
  if (b->claim) b->release_recorded = true;
  return TRUE;
}

gboolean table_begin_write(GstMemory* mem, gpointer stream) {
  cipc_slots::CudaRegion* region = cuda_region_of(mem);
  return region && region->begin_write(stream).ok();
}

gboolean table_end_write(GstMemory* mem, gpointer stream) {
  cipc_slots::CudaRegion* region = cuda_region_of(mem);
  return region && region->end_write(stream).ok();
}

}  // namespace

void bind_cuda_region(GstCipcSlotBinding& binding, cipc_slots::CudaRegion& region) {
  binding.has_cuda = true;
  binding.region = &region;
  binding.data = nullptr;
  binding.cuda.struct_size = sizeof(GstCudaIpcMemoryInfo);
  binding.cuda.device = region.device();
  binding.cuda.device_ptr = region.ptr();
  binding.cuda.slot_size = region.bytes();
  binding.cuda.wait_ready = table_wait_ready;
  binding.cuda.record_release = table_record_release;
  binding.cuda.begin_write = table_begin_write;
  binding.cuda.end_write = table_end_write;
  binding.cpu_access = std::make_unique<StagingAccess>(region);
}

cipc_slots::CudaRegion* cuda_region_of(GstMemory* mem) {
  const GstCipcSlotBinding* b = gst_cipc_slot_memory_binding(mem);
  return b ? b->region : nullptr;
}

cipc_slots::CudaSlotMemory* cuda_slot_of(GstMemory* mem) {
  const GstCipcSlotBinding* b = gst_cipc_slot_memory_binding(mem);
  if (!b || !b->has_cuda) return nullptr;
  return cipc_slots::cuda_slot_of(b->producer_slot   ? b->producer_slot.get()
                                  : b->imported_slot ? b->imported_slot->memory.get()
                                                     : nullptr);
}

}  // namespace cipc_gst
#endif
