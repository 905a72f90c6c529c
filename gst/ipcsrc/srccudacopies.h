// SPDX-License-Identifier: LGPL-2.1-or-later
// The two ways cudasrc-ipc hands a received CUDA frame on when not as the producer's slot itself
// (builds with CUDA only): a private device copy (io-mode=copy) and a download into downstream's
// buffer. Both copy with cudaplanecopy.h.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <string>

#include "consumer.h"
#include "cuda_api.h"
#include "private_copies.h"

namespace cipc_gst {

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
