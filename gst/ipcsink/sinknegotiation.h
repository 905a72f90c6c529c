// SPDX-License-Identifier: LGPL-2.1-or-later
// What cudasink-ipc takes from upstream and which pool it offers upstream to write into: the caps
// its get_caps answers (the memories its memory setting accepts, display formats first where
// upstream has no preference) and, for negotiated caps, the kind of pool its propose_allocation
// puts into the allocation query. The element calls these from get_caps and propose_allocation
// and then acts on what they say (it owns the pools); they need no element and keep no state, so
// any thread may call them.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include "memory/slotmemory.h"
#ifdef CIPC_HAVE_GST_CUDA
#include "common/gstcudainterop.h"
#endif

// The sink pad's template: our slots (memory:CUDAIPCMemory), GStreamer's CUDA memory where the
// build has nvcodec interop (copied once on the GPU, or sent as it is from an exportable pool),
// and system memory.
#ifdef CIPC_HAVE_GST_CUDA
#define CIPC_SINK_GST_CUDA_CAPS \
  GST_VIDEO_CAPS_MAKE_WITH_FEATURES(GST_CAPS_FEATURE_MEMORY_CUDA_MEMORY, GST_VIDEO_FORMATS_ALL) ";"
#else
#define CIPC_SINK_GST_CUDA_CAPS
#endif
#define CIPC_SINK_TEMPLATE_CAPS                                                              \
  GST_VIDEO_CAPS_MAKE_WITH_FEATURES(GST_CAPS_FEATURE_MEMORY_CUDA_IPC, GST_VIDEO_FORMATS_ALL) \
  ";" CIPC_SINK_GST_CUDA_CAPS GST_VIDEO_CAPS_MAKE(GST_VIDEO_FORMATS_ALL)

namespace cipc_gst {

// `template_caps` as far as the slots take them (a new reference): host slots (`cuda_slots`
// false) system memory only; CUDA slots every memory (system memory is uploaded).
GstCaps* sink_memory_caps(GstCaps* template_caps, bool cuda_slots);

// Whether the first format `caps` offers has more than 8 bits per component: the mark of a list
// of everything an element can make (GStreamer orders formats deepest first), not a preference.
bool leads_with_a_deep_format(GstCaps* caps);

// `caps` with the formats every display sink takes (BGRx, BGRA, RGBx, RGBA) before each
// structure's own formats, in the same memory (a new reference).
GstCaps* prefer_display_formats(GstCaps* caps);

// What get_caps answers (a new reference): sink_memory_caps(), then upstream's order where it
// leads with a format of its own choosing (rg10tobgra: BGRA), display formats first where it
// lists everything it can make, deepest first (videotestsrc), or where there is no `filter`.
GstCaps* sink_input_caps(GstCaps* template_caps, GstCaps* filter, bool cuda_slots);

// The pool propose_allocation offers for negotiated `caps`.
enum class SinkPool {
  // memory:CUDAMemory (builds with nvcodec interop): GStreamer's exportable GstCudaBufferPool
  // (>= 1.24), whose frames are sent by reference; none where it cannot be made.
  kExportableGstCuda,
  // System memory into CUDA slots: pinned host memory, so that the upload is an asynchronous DMA
  // rather than a staged copy (a CPU writer in a CUDA slot would stage every map).
  kPinnedUpload,
  // Our slots: upstream writes straight into shared memory, no copy.
  kSlots,
};
SinkPool sink_pool_for(GstCaps* caps, bool cuda_slots);

}  // namespace cipc_gst
