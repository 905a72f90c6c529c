// SPDX-License-Identifier: LGPL-2.1-or-later
// How cudasrc-ipc hands a received frame downstream, one class per way behind one interface:
// the producer's slot itself (zero copies), a private device copy (io-mode=copy), one download
// into downstream's own buffer (system memory), one device-to-device copy into GStreamer CUDA
// memory (nvcodec), or GStreamer CUDA memory wrapping the slot (nvcodec, GStreamer 1.24 and later:
// srccudamemoryoutput.h), or one device-to-device copy into a GL texture (glcudainteropoutput.h).
// choose_src_output() says which the negotiated caps ask for; the element
// makes that output on set_caps and calls make() for every frame.
#pragma once

#include <gst/base/gstbasesrc.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include <atomic>
#include <memory>

// GStreamer's CUDA context (gst/cuda/gstcudacontext.h), for builds with nvcodec interop.
typedef struct _GstCudaContext GstCudaContext;

#include "consumer.h"
#ifdef CIPC_HAVE_CUDA
#include "cuda_api.h"
#include "deferred_releases.h"
#include "private_copies.h"
#endif

namespace cipc_gst {

enum class SrcOutputKind {
  kShared,          // the producer's slot itself (host memory, or CUDA memory with io-mode=import)
  kCopy,            // a private device copy (CUDA memory, io-mode=copy)
  kDownload,        // one device-to-host copy into downstream's buffer (CUDA producer, system caps)
  kGstCuda,         // one device-to-device copy into GStreamer CUDA memory (nvcodec downstream)
  kGstCudaWrapped,  // GStreamer CUDA memory wrapping the producer's slot (GStreamer >= 1.24)
  kGl,              // one device-to-device copy into a GL texture (glcudainteropoutput.h)
  kGlMemoryObject,  // the slot imported into GL, copied by GL into a texture
                    // (glmemoryobjectoutput.h)
};

// What decides the output: the producer's memory, the negotiated caps' memory feature, io-mode.
struct SrcOutputRequest {
  bool producer_cuda = false;  // the producer shares CUDA memory
  bool caps_cuda_ipc = false;  // memory:CUDAIPCMemory negotiated
  bool caps_gst_cuda = false;  // memory:CUDAMemory (GStreamer's) negotiated
  bool caps_gl = false;        // memory:GLMemory negotiated
  bool io_mode_copy = false;   // io-mode=copy
  // GstCudaMemory can wrap the slot: GStreamer >= 1.24, and the pipeline's CUDA context is the
  // primary one the slots are imported in (gst_cuda_can_wrap_device_memory(), is_primary_context).
  bool gst_cuda_can_wrap = false;
};

SrcOutputKind choose_src_output(const SrcOutputRequest& request);

// The GstVideoMeta every output puts on its buffer: the negotiated format, the planes where
// `layout` (the frame's, as validated) has them.
void add_layout_meta(GstBuffer* buffer, const GstVideoInfo& out_info, GstVideoInfo layout);
const char* describe(SrcOutputKind kind);  // for the log: "in the producer's slots", ...
// A buffer from the pool negotiated with downstream (activated on first use), for the outputs
// that copy into downstream's memory. Other than GST_FLOW_OK and GST_FLOW_FLUSHING, *why says
// what went wrong, for the caller's error.
GstFlowReturn acquire_from_negotiated_pool(GstBaseSrc* src, GstBuffer** out, const char** why);
// io-mode's description, saying what this build does with GStreamer's CUDA memory downstream.
const char* io_mode_description();

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

#ifdef CIPC_HAVE_CUDA
// Copies `frame` into `buffer`, a buffer of downstream's pool (download_into(), srccudacopies.h,
// with `map_flags`). On failure posts the element error, unrefs `buffer` and returns false.
bool copy_frame_into(GstBaseSrc* src, cipc::ReceivedFrame& frame, const GstVideoInfo& layout,
                     GstBuffer* buffer, const GstVideoInfo& out_info, SrcCudaSide* cuda,
                     GstMapFlags map_flags = GST_MAP_WRITE);
#endif

// The element's counters the outputs add to.
struct SrcOutputCounters {
  std::atomic<guint64>* downloads = nullptr;      // device-to-host copies
  std::atomic<guint64>* device_copies = nullptr;  // io-mode=copy and GStreamer CUDA memory
  std::atomic<guint64>* gl_copies = nullptr;      // GL's own copies from imported slots
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
  // Claims the output still holds for GPU reads it queued: those done go back now. Returns how
  // long the streaming thread may wait for the next message before calling again, in
  // milliseconds (-1: nothing pending). Only outputs whose reads nobody else watches hold any.
  virtual int collect_releases() { return -1; }
  // Leaving create() without a frame: every pending claim goes back once its reads are done.
  virtual void flush_releases() {}
};

// The output for `kind`, producing buffers of `out_info` (the negotiated caps). `cuda` must
// outlive it and be set up for a CUDA producer; kGstCudaWrapped needs `gst_cuda_context` (the
// pipeline's, our primary context's wrapper), which it references. nullptr for a CUDA output in
// a build without CUDA (never chosen there: the producer cannot be CUDA), and for
// kGstCudaWrapped where it cannot be made (the caller then asks for kGstCuda). kGl is made by
// make_gl_cuda_interop_output() (glcudainteropoutput.h), which needs the GL context; so is
// kGlMemoryObject.
std::unique_ptr<SrcOutput> make_src_output(SrcOutputKind kind, const GstVideoInfo& out_info,
                                           SrcCudaSide* cuda, SrcOutputCounters counters,
                                           GstCudaContext* gst_cuda_context = nullptr);

}  // namespace cipc_gst
