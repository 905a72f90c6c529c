// SPDX-License-Identifier: LGPL-2.1-or-later
// CUDA helpers for video frames (builds with CUDA only): the one plane-by-plane copy every
// element uses to move a frame between host and device or device and device, the
// once-per-buffer page-locking of downstream memory that makes downloads into it fast, and the
// two ways cudasrc-ipc hands a received CUDA frame on when not as the producer's slot itself.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <memory>
#include <string>

#include "consumer.h"
#include "cuda_api.h"
#include "private_copies.h"

namespace cipc_gst {

// One side of a plane copy: each plane's first byte (host address, or a device address cast to
// a pointer) and its row stride in bytes.
struct PlanePointers {
  const void* data[GST_VIDEO_MAX_PLANES] = {};
  gint stride[GST_VIDEO_MAX_PLANES] = {};
};

// Queues the copy of every plane of a frame laid out as `info` says (rows per plane from the
// format; min(src, dst) stride bytes per row) on `stream`. The caller orders and waits.
cipc_cuda::Status copy_planes_async(const GstVideoInfo& info, const PlanePointers& dst,
                                    const PlanePointers& src, cipc_cuda::StreamHandle stream);

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

// io-mode=copy: slot memory wrapping a private device copy of `frame`, ordered on `stream` after
// the producer's write; the frame's claim goes (RELEASE) as soon as the copy has read the slot,
// with no CPU wait (through `deferred` when given: cipc_slots::copy_frame). nullptr with `error`.
GstMemory* private_copy_of(cipc_slots::PrivateCopies& copies, cipc::ReceivedFrame& frame,
                           cipc_cuda::StreamHandle stream, std::string* error,
                           cipc_slots::DeferredReleases* deferred = nullptr);

// System memory downstream: one device-to-host copy of `frame` (planes laid out as `layout`)
// into `dst`, a buffer of `dst_info`, on `stream`; waits for it, then drops the frame's claim.
// `map_flags` other than GST_MAP_WRITE (GStreamer's CUDA memory: GST_MAP_WRITE | GST_MAP_CUDA)
// map `dst` as device memory: the copy is then device-to-device, and still waited for, since
// GStreamer 1.22's CUDA memory carries no stream for downstream to order its work after.
bool download_into(cipc::ReceivedFrame& frame, const GstVideoInfo& layout, GstBuffer* dst,
                   const GstVideoInfo& dst_info, cipc_cuda::StreamHandle stream, std::string* error,
                   GstMapFlags map_flags = GST_MAP_WRITE);

}  // namespace cipc_gst
