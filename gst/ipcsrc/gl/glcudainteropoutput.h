// SPDX-License-Identifier: LGPL-2.1-or-later
// cudasrc-ipc's output for GL memory (video/x-raw(memory:GLMemory): glimagesink, glcolorconvert,
// gldownload...): each frame is copied on the GPU from the producer's slot into a texture of
// downstream's GL pool through CUDA-OpenGL interop (the texture is registered with CUDA once and
// cached on its GstGLMemory), so the picture reaches the screen with no download. The copy waits
// for the producer's frame on the GPU; GL commands issued after it start only once it is done
// (the driver orders them), and a GL sync meta orders readers in other GL contexts. The frame's
// claim goes back to the producer once the copy has read the slot, without a CPU wait.
// Frames of 4 bytes per pixel only (RGBA, BGRA, RGBx, BGRx: one RGBA8 texture).
#pragma once

#include <gst/gl/gl.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include <memory>
#include <string>

#include "ipcsrc/srcenums.h"
#include "ipcsrc/srcoutput.h"

namespace cipc_slots {
class CudaSlotMemory;
}

namespace cipc_gst {

// Formats this output takes.
bool gl_output_supports(GstVideoFormat format);
// The producer's caps as GL memory (texture-target=2D), for the formats above: empty caps when
// the producer's format is not one of them.
GstCaps* caps_with_gl_memory(GstCaps* producer_caps);
bool caps_have_gl_memory(const GstCaps* caps);

// Puts a GL buffer pool on `context` for `caps` into an allocation query (downstream's own when
// it offered one on the same context), with the GL sync meta when downstream takes it.
bool decide_gl_pool(GstQuery* query, GstCaps* caps, GstGLContext* context);

// What a GL output writes one frame into: a buffer of the negotiated GL pool (owned by the
// caller), its texture memory, and the frame's CUDA slot.
struct GlFrameTarget {
  GstBuffer* buffer = nullptr;
  GstMemory* memory = nullptr;
  cipc_slots::CudaSlotMemory* slot = nullptr;
};
// Checks that `frame` can be output as GL memory of `out_info` and takes a texture for it:
// GST_FLOW_OK and *target, GST_FLOW_FLUSHING, or GST_FLOW_ERROR with the element error posted.
GstFlowReturn acquire_gl_target(GstBaseSrc* src, cipc::ReceivedFrame& frame,
                                const GstVideoInfo& out_info, GlFrameTarget* target);

// After a frame was written into `buffer`'s texture in `context`: readers in other GL contexts
// wait for what `context` queued (GstGLSyncMeta), on the GPU.
void set_gl_sync_point(GstBuffer* buffer, GstGLContext* context);

// The output for cudasrc-ipc's gl-import `way`, writing into textures of `context` (referenced)
// with `cuda`'s device and stream. memory-object: glmemoryobjectoutput.h. cuda-interop and auto
// copy with CUDA-OpenGL interop; where CUDA cannot register a texture (GL on another GPU, or a GL
// without CUDA interop), auto warns once and from then on fills the textures' system-memory side
// with a download, which GL uploads, and cuda-interop fails with an error naming the cause.
// nullptr with *why where the way cannot be made on this context.
std::unique_ptr<SrcOutput> make_gl_cuda_interop_output(const GstVideoInfo& out_info,
                                                       GstGLContext* context, SrcCudaSide* cuda,
                                                       SrcOutputCounters counters,
                                                       GstCipcGlImport way, std::string* why);

}  // namespace cipc_gst
