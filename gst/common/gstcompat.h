// SPDX-License-Identifier: LGPL-2.1-or-later
// What differs between the GStreamer versions the plugin builds against, in one place: each
// `#if` names the version that brought the difference. Element code calls these, never
// GST_CHECK_VERSION itself.
#pragma once

#include <gst/gst.h>

#ifdef CIPC_HAVE_GST_CUDA
#include "common/gstcudainterop.h"  // GStreamer's CUDA headers, as the plugin includes them

namespace cipc_gst {

// The CUDA stream (a CUstream) that may still be writing GstCudaMemory `mem`, or nullptr when
// its content is complete. Since GStreamer 1.24 nvcodec elements push memory their own stream is
// still writing (GST_CUDA_MEMORY_TRANSFER_NEED_SYNC), and a reader orders its work after that
// stream (or calls gst_cuda_memory_sync()). In 1.22 GstCudaMemory has no stream: the elements
// synchronise before pushing.
inline void* gst_cuda_memory_pending_stream(GstMemory* mem) {
#if GST_CHECK_VERSION(1, 24, 0)
  if (mem == nullptr || !gst_is_cuda_memory(mem) ||
      !GST_MEMORY_FLAG_IS_SET(mem, GST_CUDA_MEMORY_TRANSFER_NEED_SYNC))
    return nullptr;
  GstCudaStream* stream = gst_cuda_memory_get_stream(GST_CUDA_MEMORY_CAST(mem));
  return stream ? static_cast<void*>(gst_cuda_stream_get_handle(stream)) : nullptr;
#else
  (void)mem;
  return nullptr;
#endif
}

// Waits on the CPU until GstCudaMemory `mem` is complete (the fallback where the GPU cannot
// order a copy after its stream). Nothing to wait for before GStreamer 1.24 (see above).
inline void gst_cuda_memory_wait_complete(GstMemory* mem) {
#if GST_CHECK_VERSION(1, 24, 0)
  if (mem != nullptr && gst_is_cuda_memory(mem)) gst_cuda_memory_sync(GST_CUDA_MEMORY_CAST(mem));
#else
  (void)mem;
#endif
}

// Whether GstCudaMemory can wrap device memory GStreamer did not allocate, with a notify when it
// is freed: gst_cuda_allocator_alloc_wrapped() and GstCudaStream came with GStreamer 1.24. Before
// that cudasrc-ipc copies each frame into GstCudaMemory of downstream's pool.
constexpr bool gst_cuda_can_wrap_device_memory() {
#if GST_CHECK_VERSION(1, 24, 0)
  return true;
#else
  return false;
#endif
}

// A GstCudaStream (GStreamer 1.24) on a context, owned: the stream that wrapped memory is ordered
// on. Empty (handle() nullptr) before 1.24 or when the stream could not be made.
class GstCudaStreamRef {
 public:
  GstCudaStreamRef() = default;
  explicit GstCudaStreamRef(GstCudaContext* context) {
#if GST_CHECK_VERSION(1, 24, 0)
    stream_ = gst_cuda_stream_new(context);
#else
    (void)context;
#endif
  }
  ~GstCudaStreamRef() {
#if GST_CHECK_VERSION(1, 24, 0)
    if (stream_) gst_cuda_stream_unref(stream_);
#endif
  }
  GstCudaStreamRef(const GstCudaStreamRef&) = delete;
  GstCudaStreamRef& operator=(const GstCudaStreamRef&) = delete;
  // The CUstream, or nullptr.
  void* handle() const {
#if GST_CHECK_VERSION(1, 24, 0)
    return stream_ ? static_cast<void*>(gst_cuda_stream_get_handle(stream_)) : nullptr;
#else
    return nullptr;
#endif
  }

 private:
  friend GstMemory* gst_cuda_memory_wrap_readonly(GstCudaContext*, const GstCudaStreamRef&,
                                                  const GstVideoInfo&, guint64, gpointer,
                                                  GDestroyNotify);
#if GST_CHECK_VERSION(1, 24, 0)
  GstCudaStream* stream_ = nullptr;
#endif
};

// Read-only GstCudaMemory laid out as `info` around device memory at `ptr`, whose readers first
// order their work after `stream` (GST_CUDA_MEMORY_TRANSFER_NEED_SYNC: GPU-side when they use
// that stream, gst_cuda_memory_sync() otherwise). `notify(user_data)` runs when it is freed, with
// `context` current. nullptr before GStreamer 1.24 (then `notify` is not called).
inline GstMemory* gst_cuda_memory_wrap_readonly(GstCudaContext* context,
                                                const GstCudaStreamRef& stream,
                                                const GstVideoInfo& info, guint64 ptr,
                                                gpointer user_data, GDestroyNotify notify) {
#if GST_CHECK_VERSION(1, 24, 0)
  if (stream.stream_ == nullptr) return nullptr;
  GstMemory* mem = gst_cuda_allocator_alloc_wrapped(
      nullptr, context, stream.stream_, &info, static_cast<CUdeviceptr>(ptr), user_data, notify);
  if (mem == nullptr) return nullptr;
  GST_MINI_OBJECT_FLAG_SET(mem, GST_MEMORY_FLAG_READONLY);
  GST_MINI_OBJECT_FLAG_SET(mem, GST_CUDA_MEMORY_TRANSFER_NEED_SYNC);
  return mem;
#else
  (void)context, (void)stream, (void)info, (void)ptr, (void)user_data, (void)notify;
  return nullptr;
#endif
}

// Whether GstCudaMemory can be exportable: VMM allocations (GST_CUDA_MEMORY_ALLOC_MMAP) whose
// handle gst_cuda_memory_export() hands out as a POSIX file descriptor came with GStreamer 1.24.
// Before that cudasink-ipc copies GstCudaMemory into its own slots.
constexpr bool gst_cuda_can_export_memory() {
#if GST_CHECK_VERSION(1, 24, 0)
  return true;
#else
  return false;
#endif
}

// Whether `context` can allocate exportable memory (its "virtual-memory" and "os-handle"
// properties, GStreamer 1.24); false before 1.24.
inline bool gst_cuda_context_can_export(GstCudaContext* context) {
#if GST_CHECK_VERSION(1, 24, 0)
  gboolean virtual_memory = FALSE, os_handle = FALSE;
  g_object_get(context, "virtual-memory", &virtual_memory, "os-handle", &os_handle, nullptr);
  return virtual_memory && os_handle;
#else
  (void)context;
  return false;
#endif
}

// Asks a GstCudaBufferPool configuration for exportable memory (GST_CUDA_MEMORY_ALLOC_MMAP,
// GStreamer 1.24); false before 1.24.
inline bool gst_cuda_pool_config_request_exportable(GstStructure* config) {
#if GST_CHECK_VERSION(1, 24, 0)
  gst_buffer_pool_config_set_cuda_alloc_method(config, GST_CUDA_MEMORY_ALLOC_MMAP);
  return true;
#else
  (void)config;
  return false;
#endif
}

// The POSIX file descriptor of exportable GstCudaMemory `mem` (owned by the memory: dup it to
// keep it), or -1 when `mem` is not GstCudaMemory allocated exportable (another allocation
// method, a decoder's own surface), or before GStreamer 1.24.
inline int gst_cuda_memory_export_fd(GstMemory* mem) {
#if GST_CHECK_VERSION(1, 24, 0)
  if (mem == nullptr || !gst_is_cuda_memory(mem)) return -1;
  auto* cmem = GST_CUDA_MEMORY_CAST(mem);
  if (gst_cuda_memory_get_alloc_method(cmem) != GST_CUDA_MEMORY_ALLOC_MMAP) return -1;
  int fd = -1;
  return gst_cuda_memory_export(cmem, &fd) ? fd : -1;
#else
  (void)mem;
  return -1;
#endif
}

}  // namespace cipc_gst
#endif  // CIPC_HAVE_GST_CUDA
