// SPDX-License-Identifier: LGPL-2.1-or-later
// Interop with GStreamer's own CUDA library (gstreamer-cuda-1.0, the nvcodec elements): one
// GstCudaContext per device and process, wrapping the primary context that all of this project's
// CUDA work runs in, shared through GStreamer's context mechanism ("gst.cuda.context"); and the
// recognition of GstCudaMemory (caps feature memory:CUDAMemory). Built only with
// gstreamer-cuda-1.0 (CIPC_HAVE_GST_CUDA); without it the elements simply do not offer
// memory:CUDAMemory.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <mutex>
#include <string>

#ifdef CIPC_HAVE_GST_CUDA
#ifndef GST_USE_UNSTABLE_API
#define GST_USE_UNSTABLE_API
#endif
#include <gst/cuda/gstcudabufferpool.h>
#include <gst/cuda/gstcudacontext.h>
#include <gst/cuda/gstcudamemory.h>
#include <gst/cuda/gstcudautils.h>

namespace cipc_gst {

// The process-wide GstCudaContext wrapping `device`'s primary context (a new reference), or
// nullptr with `why`. CUDAIPC_SHARE_CUDA_CONTEXT=0 in the environment turns sharing off (for
// measuring what a second context costs): the elements then keep to themselves.
GstCudaContext* shared_cuda_context(int device, std::string* why);
bool cuda_context_sharing_enabled();
// Registers the "cudaipc-cuda-interop" debug category (plugin_init calls it, so that
// --gst-debug-help lists it before any interop happened).
void init_cuda_interop_debug();
// Whether `context` wraps `device`'s primary context, the one this project's CUDA work (slot
// imports among it) runs in.
bool is_primary_context(GstCudaContext* context, int device);

// The element's context for `device`: one the application set (set_context) or a neighbour
// answers (context query), else the application's answer to NEED_CONTEXT, else the shared
// primary-context wrapper, announced with HAVE_CONTEXT so that the nvcodec elements of the
// pipeline take it instead of creating contexts of their own. False with `why` on failure.
// `*uses_primary` says whether the context found is our primary context (else the process has
// two contexts on the device, and copies go between them).
bool ensure_cuda_context(GstElement* element, int device, GstCudaContext** context,
                         bool* uses_primary, std::string* why);
// For the element's set_context vfunc and its query handlers (CONTEXT queries).
void set_cuda_context(GstElement* element, GstContext* context, int device,
                      GstCudaContext** current);
bool answer_cuda_context_query(GstElement* element, GstQuery* query, GstCudaContext* context);

// An element's share in the process's CUDA context: the GstCudaContext the application or a
// neighbour gave it (set_context), else the primary-context wrapper, created on first demand.
// Thread-safe: context queries and set_context arrive on any thread. Each CUDA element holds one.
class ElementCudaContext {
 public:
  ElementCudaContext() = default;
  ~ElementCudaContext();
  ElementCudaContext(const ElementCudaContext&) = delete;
  ElementCudaContext& operator=(const ElementCudaContext&) = delete;

  // A new reference, or nullptr (sharing turned off, or no context: logged on `element`).
  GstCudaContext* get(GstElement* element, int device);
  // A GST_QUERY_CONTEXT for "gst.cuda.context", answered with get(); false for any other query.
  bool answer_query(GstElement* element, GstQuery* query, int device);
  // The element's set_context vfunc.
  void set(GstElement* element, GstContext* context, int device);
  // The context given or made so far (a new reference), or nullptr; creates none.
  GstCudaContext* held();
  // Keeps `*context` (taking the reference and clearing it) unless one is already held.
  void adopt(GstCudaContext** context);

 private:
  std::mutex lock_;
  GstCudaContext* context_ = nullptr;
};

// Registers GStreamer's CUDA allocator (GST_CUDA_MEMORY_TYPE_NAME). In 1.22 nothing in the
// library does until the nvcodec plugin loads, and a process with only our elements then gets
// GstCudaBufferPools that refuse every configuration ("CudaAllocator is unavailable").
void register_gst_cuda_allocator();
// gst_cuda_buffer_pool_new(), with the allocator registered first.
GstBufferPool* new_gst_cuda_buffer_pool(GstCudaContext* context);

bool caps_have_gst_cuda_memory(const GstCaps* caps);
bool buffer_is_gst_cuda_memory(GstBuffer* buffer);

// The same caps with the memory:CUDAMemory feature (a new reference).
GstCaps* caps_with_gst_cuda_memory(const GstCaps* caps);

}  // namespace cipc_gst
#endif  // CIPC_HAVE_GST_CUDA
