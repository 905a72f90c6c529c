// SPDX-License-Identifier: LGPL-2.1-or-later
// CUDA helpers for video frames (builds with CUDA only): the one plane-by-plane copy every
// element uses to move a frame between host and device or device and device, and the
// once-per-buffer page-locking of downstream memory that makes downloads into it fast.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include "common/frameplanes.h"
#include "cuda_api.h"

namespace cipc_gst {

// Queues the copy of every plane of a frame laid out as `info` says (rows per plane from the
// format; min(src, dst) stride bytes per row) on `stream`. The caller orders and waits.
// `one_allocation_each`: each side's planes lie in one allocation (a buffer of one memory, a
// slot); where the two layouts then agree (contiguous_span()), the frame goes as one 1D copy,
// which the driver stages from pageable host memory in one pass. (docs/performance.md sets the
// pageable upload against one 1D and one 2D copy of the frame measured in the same run.)
cipc_cuda::Status copy_planes_async(const GstVideoInfo& info, const PlanePointers& dst,
                                    const PlanePointers& src, cipc_cuda::StreamHandle stream,
                                    bool one_allocation_each = false);

// The planes of a mapped video frame.
PlanePointers planes_of(const GstVideoFrame& frame);
// The planes of device memory at `base` laid out by `layout` (offsets and strides).
PlanePointers planes_at(cipc_cuda::DevicePtr base, const GstVideoInfo& layout);

// Page-locks host memory (a pooled buffer's) once for the life of `mem` - its pool keeps it - so
// copies to or from it run at full speed and asynchronously. Memory that refuses is remembered
// (and copied as is). True if the memory is page-locked.
bool register_host_memory_once(GstMemory* mem, void* data, size_t size);
// Registers the "cudaipc-frames" debug category (plugin_init calls it, so that
// --gst-debug-help lists it before any frame was copied).
void init_cuda_frames_debug();

}  // namespace cipc_gst
