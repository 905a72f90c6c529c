// SPDX-License-Identifier: LGPL-2.1-or-later
#include "slotmemory.h"

#include <new>

#ifdef CIPC_HAVE_CUDA
#include "cudaslot.h"
#endif

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
  if (binding.use_count() == 1 && binding->claim && binding->release_recorded) {
    if (cipc_gst::CudaSlotMemory* slot = cipc_gst::cuda_slot_of(memory))
      cipc_gst::release_when_read(*slot, std::move(binding));
  }
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
  if (binding->producer_slot->kind() == cipc::MemoryKind::kCuda)
    cipc_gst::bind_cuda_region(*binding, static_cast<cipc_gst::CudaSlotMemory&>(*binding->producer_slot));
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
  if (slot->memory->kind() == cipc::MemoryKind::kCuda)
    cipc_gst::bind_cuda_region(*binding, static_cast<cipc_gst::CudaSlotMemory&>(*slot->memory));
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
