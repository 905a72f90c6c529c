// SPDX-License-Identifier: LGPL-2.1-or-later
// What differs between the GStreamer versions the plugin builds against, in one place: each
// `#if` names the version that brought the difference. Element code calls these, never
// GST_CHECK_VERSION itself.
#pragma once

#include <gst/gst.h>

#ifdef CIPC_HAVE_GST_CUDA
#include "cudainterop.h"  // GStreamer's CUDA headers, as the plugin includes them

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

}  // namespace cipc_gst
#endif  // CIPC_HAVE_GST_CUDA
