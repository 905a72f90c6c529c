// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ipcsrc/srccudamemoryoutput.h"

#include <string>
#include <utility>

#include "common/gstcompat.h"
#include "common/gstcudainterop.h"
#include "cuda_slots.h"

// Logs go to cudasrc-ipc's own category (srcoutput.cpp finds it before this output is made).
GST_DEBUG_CATEGORY_STATIC(cipc_wrapped_output_debug);
#define GST_CAT_DEFAULT cipc_wrapped_output_debug

namespace cipc_gst {

bool gst_cuda_memory_can_describe(const GstVideoInfo& layout) {
  const gint pitch = GST_VIDEO_INFO_PLANE_STRIDE(&layout, 0);
  const gint row = GST_VIDEO_INFO_COMP_WIDTH(&layout, 0) * GST_VIDEO_INFO_COMP_PSTRIDE(&layout, 0);
  const gsize size = GST_VIDEO_INFO_SIZE(&layout);
  if (pitch <= 0 || pitch < row || size < gsize(pitch)) return false;
  // Rows with no padding make one contiguous block: any plane strides fit in it.
  if (pitch == row && size % gsize(pitch) == 0) return true;
  for (guint i = 1; i < GST_VIDEO_INFO_N_PLANES(&layout); ++i)
    if (GST_VIDEO_INFO_PLANE_STRIDE(&layout, i) != pitch) return false;
  return true;
}

namespace {

// What a wrapped GstCudaMemory keeps alive: the imported slot (its mapping) and the frame's
// claim, which goes back to the producer when this is dropped.
struct WrappedFrame {
  std::shared_ptr<const cipc::ImportedSlot> slot;
  std::shared_ptr<cipc::FrameClaim> claim;
};

// GstCudaMemory's notify, on the thread that frees the memory, with the context current.
// Downstream's reads were queued on GStreamer's CUDA streams of this context, which are blocking
// streams: an event recorded on the legacy default stream completes after all of them, and the
// claim waits for it (the slot's usual release path: a short poll, then the release worker).
void release_wrapped(gpointer data) {
  auto* frame = static_cast<WrappedFrame*>(data);
  auto keepalive = std::make_shared<WrappedFrame>(std::move(*frame));
  delete frame;
  cipc_slots::CudaSlotMemory* slot = cipc_slots::cuda_slot_of(keepalive->slot->memory.get());
  if (slot == nullptr) return;
  const cipc_cuda::Status s = slot->record_release(cipc_cuda::legacy_default_stream());
  if (!s) {
    // The context is failing; what it still reads no longer matters to the producer's memory.
    GST_WARNING("could not order the release of a wrapped frame after its readers: %s",
                s.message().c_str());
    return;
  }
  slot->drop_after_reads(std::move(keepalive));
}

class WrappedGstCudaOutput final : public SrcOutput {
 public:
  WrappedGstCudaOutput(const GstVideoInfo& out_info, GstCudaContext* context,
                       std::unique_ptr<SrcOutput> fallback)
      : out_info_(out_info),
        context_(static_cast<GstCudaContext*>(gst_object_ref(context))),
        stream_(context),
        fallback_(std::move(fallback)) {}
  ~WrappedGstCudaOutput() override { gst_object_unref(context_); }
  bool ready() const { return stream_.handle() != nullptr; }
  SrcOutputKind kind() const override { return SrcOutputKind::kGstCudaWrapped; }

  GstFlowReturn make(GstBaseSrc* src, cipc::ReceivedFrame& frame, const GstVideoInfo& layout,
                     GstBuffer** out) override {
    cipc_slots::CudaSlotMemory* slot = cipc_slots::cuda_slot_of(frame.slot->memory.get());
    if (slot == nullptr || !gst_cuda_memory_can_describe(layout)) {
      if (!warned_) {
        GST_INFO_OBJECT(src, "frame planes GstCudaMemory cannot describe: copying them");
        warned_ = true;
      }
      return fallback_->make(src, frame, layout, out);
    }
    const cipc_cuda::Status s = slot->wait_ready(stream_.handle());
    if (!s) {
      GST_ELEMENT_ERROR(src, RESOURCE, READ,
                        ("Could not order GStreamer CUDA memory after the producer's frame."),
                        ("%s", s.message().c_str()));
      return GST_FLOW_ERROR;
    }
    GstVideoInfo info = out_info_;
    for (guint i = 0; i < GST_VIDEO_INFO_N_PLANES(&layout); ++i) {
      info.offset[i] = layout.offset[i];
      info.stride[i] = layout.stride[i];
    }
    info.size = GST_VIDEO_INFO_SIZE(&layout);
    auto* held = new WrappedFrame{frame.slot, std::move(frame.claim)};
    GstMemory* mem =
        gst_cuda_memory_wrap_readonly(context_, stream_, info, slot->ptr(), held, release_wrapped);
    if (mem == nullptr) {
      delete held;  // the claim goes back now: nothing downstream reads the frame
      GST_ELEMENT_ERROR(src, RESOURCE, FAILED,
                        ("Could not wrap a received frame as GStreamer CUDA memory."), (nullptr));
      return GST_FLOW_ERROR;
    }
    *out = gst_buffer_new();
    gst_buffer_append_memory(*out, mem);
    add_layout_meta(*out, out_info_, layout);
    return GST_FLOW_OK;
  }

 private:
  const GstVideoInfo out_info_;
  GstCudaContext* context_;
  GstCudaStreamRef stream_;
  std::unique_ptr<SrcOutput> fallback_;
  bool warned_ = false;
};

}  // namespace

std::unique_ptr<SrcOutput> make_src_cuda_memory_output(const GstVideoInfo& out_info,
                                                       GstCudaContext* context,
                                                       std::unique_ptr<SrcOutput> fallback) {
  if (!cipc_wrapped_output_debug) GST_DEBUG_CATEGORY_GET(cipc_wrapped_output_debug, "cudaipc-src");
  if (!gst_cuda_can_wrap_device_memory() || context == nullptr || !fallback) return nullptr;
  auto output = std::make_unique<WrappedGstCudaOutput>(out_info, context, std::move(fallback));
  if (!output->ready()) return nullptr;
  return output;
}

}  // namespace cipc_gst
