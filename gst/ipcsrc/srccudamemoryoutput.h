// SPDX-License-Identifier: LGPL-2.1-or-later
// cudasrc-ipc's output for GStreamer CUDA memory with no copy (GStreamer 1.24 and later): each
// frame goes downstream as read-only GstCudaMemory that wraps the producer's slot as this process
// imported it. Its readers order their work after the frame's readiness (waited for on the
// GPU, on the memory's own GstCudaStream); the frame's claim goes back to the producer once the
// memory is freed and the GPU has finished what the process queued on the context's blocking
// streams until then (an event on the legacy default stream: no CPU wait). Frames whose planes
// GstCudaMemory cannot describe are copied as before GStreamer 1.24 (counted in device-copies).
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <memory>

#include "common/gstcudainterop.h"
#include "ipcsrc/srcoutput.h"

namespace cipc_gst {

// Whether GstCudaMemory (one row pitch, its first plane's stride, over size / pitch rows: what
// its CPU mapping and copies move) can describe a frame laid out as `layout`: the first plane's
// stride covers its row, and either every plane has that stride or the rows have no padding (one
// contiguous block of whole rows).
bool gst_cuda_memory_can_describe(const GstVideoInfo& layout);

// The output, on `context` (our primary context's wrapper: the slots are mapped there). `fallback`
// copies the frames that cannot be wrapped. nullptr before GStreamer 1.24 or when no GstCudaStream
// could be made on `context`.
std::unique_ptr<SrcOutput> make_src_cuda_memory_output(const GstVideoInfo& out_info,
                                                       GstCudaContext* context,
                                                       std::unique_ptr<SrcOutput> fallback);

}  // namespace cipc_gst
