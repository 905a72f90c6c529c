// SPDX-License-Identifier: LGPL-2.1-or-later
#include "memory/pinnedmemory.h"

#include <memory>
#include <mutex>
#include <utility>

GST_DEBUG_CATEGORY_STATIC(gst_cipc_pinned_debug);
#define GST_CAT_DEFAULT gst_cipc_pinned_debug

void gst_cipc_pinned_init_debug() {
  static std::once_flag once;
  std::call_once(once, [] {
    GST_DEBUG_CATEGORY_INIT(gst_cipc_pinned_debug, "cudaipc-pinned", 0,
                            "cudaipc pinned, CUDA-mapped host memory");
  });
}

namespace {

struct GstCipcPinnedAllocator {
  GstAllocator parent;
  int device;
};
struct GstCipcPinnedAllocatorClass {
  GstAllocatorClass parent_class;
};

// One cudaHostAlloc block, shared by a memory and the sub-memories made from it.
struct PinnedBlock {
  cipc_cuda::PinnedHostBuffer host;
  cipc_cuda::DevicePtr device_ptr = 0;
};

struct PinnedMemory {
  GstMemory mem;
  std::shared_ptr<PinnedBlock>* block;
};

GType gst_cipc_pinned_allocator_get_type();
G_DEFINE_TYPE(GstCipcPinnedAllocator, gst_cipc_pinned_allocator, GST_TYPE_ALLOCATOR)

GstMemory* wrap(GstAllocator* allocator, GstMemory* parent, std::shared_ptr<PinnedBlock> block,
                GstMemoryFlags flags, gsize maxsize, gsize align, gsize offset, gsize size) {
  auto* mem = g_new0(PinnedMemory, 1);
  mem->block = new std::shared_ptr<PinnedBlock>(std::move(block));
  gst_memory_init(GST_MEMORY_CAST(mem), flags, allocator, parent, maxsize, align, offset, size);
  return GST_MEMORY_CAST(mem);
}

GstMemory* pinned_alloc(GstAllocator* allocator, gsize size, GstAllocationParams* params) {
  auto* self = reinterpret_cast<GstCipcPinnedAllocator*>(allocator);
  const gsize maxsize = size + params->prefix + params->padding;
  auto block = std::make_shared<PinnedBlock>();
  // cudaHostAlloc works on the current device: make ours current for it.
  cipc_cuda::Status s = cipc_cuda::set_device(self->device);
  if (s) s = cipc_cuda::PinnedHostBuffer::create(maxsize, &block->host);
  if (s) s = cipc_cuda::mapped_device_pointer(block->host.data(), &block->device_ptr);
  if (!s) {
    GST_WARNING_OBJECT(allocator,
                       "could not allocate %" G_GSIZE_FORMAT " bytes of pinned memory: %s", maxsize,
                       s.message().c_str());
    return nullptr;
  }
  // cudaHostAlloc returns page-aligned memory, which satisfies any alignment GStreamer asks for.
  return wrap(allocator, nullptr, std::move(block), params->flags, maxsize, params->align,
              params->prefix, size);
}

void pinned_free(GstAllocator*, GstMemory* memory) {
  auto* mem = reinterpret_cast<PinnedMemory*>(memory);
  delete mem->block;  // the last reference frees the host memory
  g_free(mem);
}

gpointer pinned_map(GstMemory* memory, gsize, GstMapFlags) {
  return (*reinterpret_cast<PinnedMemory*>(memory)->block)->host.data();
}

void pinned_unmap(GstMemory*) {}

GstMemory* pinned_share(GstMemory* memory, gssize offset, gssize size) {
  auto* mem = reinterpret_cast<PinnedMemory*>(memory);
  GstMemory* parent = memory->parent ? memory->parent : memory;
  if (size == -1) size = static_cast<gssize>(memory->size) - offset;
  return wrap(memory->allocator, parent, *mem->block,
              static_cast<GstMemoryFlags>(GST_MINI_OBJECT_FLAGS(parent) |
                                          GST_MINI_OBJECT_FLAG_LOCK_READONLY),
              memory->maxsize, memory->align, memory->offset + offset, size);
}

gboolean pinned_is_span(GstMemory* a, GstMemory* b, gsize* offset) {
  auto* ma = reinterpret_cast<PinnedMemory*>(a);
  auto* mb = reinterpret_cast<PinnedMemory*>(b);
  if (*ma->block != *mb->block || a->offset + a->size != b->offset) return FALSE;
  if (offset) *offset = a->offset;
  return TRUE;
}

void gst_cipc_pinned_allocator_class_init(GstCipcPinnedAllocatorClass* klass) {
  GstAllocatorClass* allocator_class = GST_ALLOCATOR_CLASS(klass);
  allocator_class->alloc = pinned_alloc;
  allocator_class->free = pinned_free;
  gst_cipc_pinned_init_debug();
}

void gst_cipc_pinned_allocator_init(GstCipcPinnedAllocator* self) {
  GstAllocator* alloc = GST_ALLOCATOR_CAST(self);
  alloc->mem_type = GST_CIPC_PINNED_MEMORY_TYPE;
  alloc->mem_map = pinned_map;
  alloc->mem_unmap = pinned_unmap;
  alloc->mem_share = pinned_share;
  alloc->mem_is_span = pinned_is_span;
  self->device = 0;
}

}  // namespace

GstAllocator* gst_cipc_pinned_allocator_new(int device) {
  auto* self = static_cast<GstCipcPinnedAllocator*>(
      g_object_new(gst_cipc_pinned_allocator_get_type(), nullptr));
  self->device = device < 0 ? 0 : device;
  gst_object_ref_sink(self);
  return GST_ALLOCATOR_CAST(self);
}

gboolean gst_cipc_pinned_memory_device_ptr(GstMemory* mem, cipc_cuda::DevicePtr* device_ptr) {
  if (mem == nullptr || !gst_memory_is_type(mem, GST_CIPC_PINNED_MEMORY_TYPE)) return FALSE;
  *device_ptr = (*reinterpret_cast<PinnedMemory*>(mem)->block)->device_ptr + mem->offset;
  return TRUE;
}

GstBufferPool* gst_cipc_pinned_pool_new(int device, GstCaps* caps, guint size, guint min_buffers) {
  GstBufferPool* pool = gst_buffer_pool_new();
  GstAllocator* allocator = gst_cipc_pinned_allocator_new(device);
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, size, min_buffers, 0);
  GstAllocationParams params;
  gst_allocation_params_init(&params);
  gst_buffer_pool_config_set_allocator(config, allocator, &params);
  gst_object_unref(allocator);
  if (!gst_buffer_pool_set_config(pool, config)) {
    gst_object_unref(pool);
    return nullptr;
  }
  return pool;
}
