// SPDX-License-Identifier: LGPL-2.1-or-later
// What cudasrc-ipc offers downstream for a producer's caps, and the buffer pool it puts into
// downstream's allocation query for the memory the negotiated caps ask for. The element calls
// these from get_caps/negotiate and decide_allocation; they need no element.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <string>

// GStreamer's CUDA context (gst/cuda/gstcudacontext.h), for builds with nvcodec interop.
typedef struct _GstCudaContext GstCudaContext;

namespace cipc_gst {

// The producer's caps string (CAPS message) as caps, or nullptr. Flag-set fields
// (multiview-flags) only parse once their GType exists in this process; should one still not
// parse, it is left out rather than the whole format refused (consumers only need format, size,
// layout and rate).
GstCaps* parse_producer_caps(const std::string& text);

// The memory negotiated caps ask for.
enum class SrcCapsMemory {
  kCudaIpc,  // memory:CUDAIPCMemory: the producer's slot (ours)
  kGstCuda,  // memory:CUDAMemory: GStreamer's CUDA memory (nvcodec)
  kGl,       // memory:GLMemory: GL textures
  kSystem,   // system memory
};
SrcCapsMemory src_caps_memory(const GstCaps* caps);

// The caps cudasrc-ipc can output for `producer_caps`, in order of preference. A host producer's
// caps as they are; for a CUDA producer: the slot itself (memory:CUDAIPCMemory), GStreamer CUDA
// memory (builds with nvcodec interop), GL textures (builds with GL, when `offer_gl`; 4-byte
// formats only), then system memory through one download, with BGRx offered for BGRA (and RGBx
// for RGBA) since the alpha byte is just carried.
GstCaps* src_output_caps(bool producer_cuda, GstCaps* producer_caps, bool offer_gl);

// Downloads go into downstream's pool; downstream without one (appsink, fakesink) gets a video
// pool sized for the frame (GstBaseSrc's default would be sized 0).
void decide_system_memory_pool(GstQuery* query, GstCaps* caps, const GstVideoInfo& info);
// Puts `pool` first in an allocation query: in place of downstream's first pool where it
// offered one, else as the only one.
void put_first_allocation_pool(GstQuery* query, GstBufferPool* pool, guint size, guint min,
                               guint max);

#ifdef CIPC_HAVE_GST_CUDA
// GStreamer CUDA memory downstream: its GstCudaBufferPool if it offers one, else one on
// `context` (the shared one; nullptr leaves the query to GstBaseSrc, and create() reports it).
void decide_gst_cuda_pool(GstQuery* query, GstCaps* caps, const GstVideoInfo& info,
                          GstCudaContext* context);
#endif

}  // namespace cipc_gst
