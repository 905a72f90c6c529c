// SPDX-License-Identifier: LGPL-2.1-or-later
// How cudasrc-ipc hands a received frame downstream, one class per way behind one interface:
// the producer's slot itself (zero copies), a private device copy (io-mode=copy), one download
// into downstream's own buffer (system memory), one device-to-device copy into GStreamer CUDA
// memory (nvcodec). choose_src_output() says which the negotiated caps ask for; the element
// makes that output on set_caps and calls make() for every frame.
#pragma once

#include <gst/base/gstbasesrc.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include <atomic>
#include <memory>

#include "consumer.h"
#ifdef CIPC_HAVE_CUDA
#include "cuda_api.h"
#include "deferred_releases.h"
#include "private_copies.h"
#endif

namespace cipc_gst {

enum class SrcOutputKind {
  kShared,    // the producer's slot itself (host memory, or CUDA memory with io-mode=import)
  kCopy,      // a private device copy (CUDA memory, io-mode=copy)
  kDownload,  // one device-to-host copy into downstream's buffer (CUDA producer, system caps)
  kGstCuda,   // one device-to-device copy into GStreamer CUDA memory (nvcodec downstream)
};

// What decides the output: the producer's memory, the negotiated caps' memory feature, io-mode.
struct SrcOutputRequest {
  bool producer_cuda = false;  // the producer shares CUDA memory
  bool caps_cuda_ipc = false;  // memory:CUDAIPCMemory negotiated
  bool caps_gst_cuda = false;  // memory:CUDAMemory (GStreamer's) negotiated
  bool io_mode_copy = false;   // io-mode=copy
};

SrcOutputKind choose_src_output(const SrcOutputRequest& request);
const char* describe(SrcOutputKind kind);  // for the log: "in the producer's slots", ...

// The GPU side of a CUDA producer: its device, a stream, and io-mode=copy's copies. The element
// owns it (choose_backend() fills it when a producer attaches); outputs use it per frame.
struct SrcCudaSide {
#ifdef CIPC_HAVE_CUDA
  int device = -1;
  cipc_cuda::Stream stream;
  std::shared_ptr<cipc_slots::PrivateCopies> copies;
  // io-mode=copy: claims the streaming thread releases itself once their copy is done.
  std::unique_ptr<cipc_slots::DeferredReleases> deferred;
#endif
};

// The element's counters the outputs add to.
struct SrcOutputCounters {
  std::atomic<guint64>* downloads = nullptr;      // device-to-host copies
  std::atomic<guint64>* device_copies = nullptr;  // io-mode=copy and GStreamer CUDA memory
};

class SrcOutput {
 public:
  virtual ~SrcOutput() = default;
  virtual SrcOutputKind kind() const = 0;
  // A buffer holding `frame`, whose planes lie as `layout` says, with a GstVideoMeta for the
  // format of the negotiated caps: GST_FLOW_OK and *out; otherwise an element error posted on
  // `src` (or GST_FLOW_FLUSHING). Timestamps, flags and other metas are the element's.
  virtual GstFlowReturn make(GstBaseSrc* src, cipc::ReceivedFrame& frame,
                             const GstVideoInfo& layout, GstBuffer** out) = 0;
};

// The output for `kind`, producing buffers of `out_info` (the negotiated caps). `cuda` must
// outlive it and be set up for a CUDA producer. nullptr for a CUDA output in a build without
// CUDA (never chosen there: the producer cannot be CUDA).
std::unique_ptr<SrcOutput> make_src_output(SrcOutputKind kind, const GstVideoInfo& out_info,
                                           SrcCudaSide* cuda, SrcOutputCounters counters);

}  // namespace cipc_gst
