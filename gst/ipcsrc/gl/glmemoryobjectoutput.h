// SPDX-License-Identifier: LGPL-2.1-or-later
// cudasrc-ipc's GL output with no CUDA copy (gl-import=memory-object): each producer slot is
// imported into downstream's GL context once as a memory object (glslotbuffer.h), cached
// until the producer retires it, and each frame is copied by GL on the GPU from that memory
// into a texture of downstream's GL pool. GL cannot wait on a CUDA event, so the streaming
// thread waits on the CPU until the producer's frame is complete before GL is asked to read
// it; the frame's claim goes back once a GL fence queued after the read has signalled, polled
// in the GL thread at each later frame (fencedreleases.h). Slots keep their descriptors open
// for this (one per imported slot). Frames of 4 bytes per pixel only, as glcudainteropoutput.h.
#pragma once

#include <gst/gl/gl.h>
#include <gst/video/video.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "ipcsrc/srcoutput.h"

namespace cipc_gst {

// The output, writing into textures of `context` (referenced), of frames in slots on the GPU
// with UUID `gpu`. nullptr with *why when the context cannot import memory objects
// (gl_memory_object_available()) or does not run on that GPU (gl_runs_on_device()).
std::unique_ptr<SrcOutput> make_gl_memory_object_output(const GstVideoInfo& out_info,
                                                        GstGLContext* context,
                                                        const std::array<uint8_t, 16>& gpu,
                                                        SrcOutputCounters counters,
                                                        std::string* why);

}  // namespace cipc_gst
