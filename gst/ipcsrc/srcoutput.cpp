// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ipcsrc/srcoutput.h"

#include <mutex>
#include <string>

#ifdef CIPC_HAVE_CUDA
#include "ipcsrc/srccudacopies.h"
#endif
#include "common/gstcudainterop.h"
#include "memory/slotmemory.h"
#ifdef CIPC_HAVE_GST_CUDA
#include "common/gstcompat.h"
#include "ipcsrc/srccudamemoryoutput.h"
#endif

// Errors and logs go to cudasrc-ipc's own category (the element registers it).
GST_DEBUG_CATEGORY_STATIC(cipc_src_output_debug);
#define GST_CAT_DEFAULT cipc_src_output_debug

namespace cipc_gst {

void add_layout_meta(GstBuffer* buffer, const GstVideoInfo& out_info, GstVideoInfo layout) {
  gst_buffer_add_video_meta_full(buffer, GST_VIDEO_FRAME_FLAG_NONE,
                                 GST_VIDEO_INFO_FORMAT(&out_info), GST_VIDEO_INFO_WIDTH(&layout),
                                 GST_VIDEO_INFO_HEIGHT(&layout), GST_VIDEO_INFO_N_PLANES(&layout),
                                 layout.offset, layout.stride);
}

SrcOutputKind choose_src_output(const SrcOutputRequest& r) {
  if (!r.producer_cuda) return SrcOutputKind::kShared;  // host slots go downstream as they are
  // io-mode=copy asks for the slot back at once: a copy into downstream's memory gives that.
  if (r.caps_gst_cuda)
    return r.gst_cuda_can_wrap && !r.io_mode_copy ? SrcOutputKind::kGstCudaWrapped
                                                  : SrcOutputKind::kGstCuda;
  if (r.caps_gl) return SrcOutputKind::kGl;  // the copy into the texture frees the slot at once
  if (!r.caps_cuda_ipc) return SrcOutputKind::kDownload;
  return r.io_mode_copy ? SrcOutputKind::kCopy : SrcOutputKind::kShared;
}

const char* describe(SrcOutputKind kind) {
  switch (kind) {
    case SrcOutputKind::kShared: return "in the producer's slots";
    case SrcOutputKind::kCopy: return "as private device copies";
    case SrcOutputKind::kDownload: return "by download into downstream buffers";
    case SrcOutputKind::kGstCuda: return "as copies into GStreamer CUDA memory";
    case SrcOutputKind::kGstCudaWrapped: return "as GStreamer CUDA memory wrapping the slots";
    case SrcOutputKind::kGl: return "as copies into GL textures (CUDA-OpenGL interop)";
    case SrcOutputKind::kGlMemoryObject:
      return "as GL copies from slots imported into GL (GL_EXT_memory_object_fd)";
  }
  return "?";
}

GstFlowReturn acquire_from_negotiated_pool(GstBaseSrc* src, GstBuffer** out, const char** why) {
  GstBufferPool* pool = gst_base_src_get_buffer_pool(src);
  if (!pool) {
    *why = "no buffer pool was negotiated";
    return GST_FLOW_ERROR;
  }
  if (!gst_buffer_pool_is_active(pool)) gst_buffer_pool_set_active(pool, TRUE);
  const GstFlowReturn ret = gst_buffer_pool_acquire_buffer(pool, out, nullptr);
  gst_object_unref(pool);
  *why = gst_flow_get_name(ret);
  return ret;
}

const char* io_mode_description() {
#ifdef CIPC_HAVE_GST_CUDA
  if (cipc_gst::gst_cuda_can_wrap_device_memory())
    return "For CUDA memory output: hand downstream the producer's slot (import), or a private "
           "device copy that releases the slot once the copy has read it, by the next frame "
           "(copy). GStreamer CUDA memory (memory:CUDAMemory) downstream gets the slot wrapped "
           "with import (this build: GStreamer 1.24 or later), a copy with copy. System-memory "
           "output is always one download into downstream's buffer";
  return "For CUDA memory output: hand downstream the producer's slot (import), or a private "
         "device copy that releases the slot once the copy has read it, by the next frame (copy). "
         "GStreamer CUDA memory (memory:CUDAMemory) downstream always gets a device copy (this "
         "build: GStreamer before 1.24 cannot wrap the slot). System-memory output is always one "
         "download into downstream's buffer";
#else
  return "For CUDA memory output: hand downstream the producer's slot (import), or a private "
         "device copy that releases the slot once the copy has read it, by the next frame (copy). "
         "System-memory output is always one download into downstream's buffer";
#endif
}

namespace {

void init_category() {
  static std::once_flag once;
  std::call_once(once, [] {
    GST_DEBUG_CATEGORY_GET(cipc_src_output_debug, "cudaipc-src");
    if (!cipc_src_output_debug)
      GST_DEBUG_CATEGORY_INIT(cipc_src_output_debug, "cudaipc-src", 0, "cudasrc-ipc element");
  });
}

// The producer's slot itself: the buffer's memory keeps the frame's claim until downstream
// drops it. Zero copies.
class SharedSlotOutput final : public SrcOutput {
 public:
  explicit SharedSlotOutput(const GstVideoInfo& out_info) : out_info_(out_info) {}
  SrcOutputKind kind() const override { return SrcOutputKind::kShared; }
  GstFlowReturn make(GstBaseSrc* src, cipc::ReceivedFrame& frame, const GstVideoInfo& layout,
                     GstBuffer** out) override {
    GstMemory* mem =
        gst_cipc_slot_memory_new_imported(frame.slot, std::move(frame.claim), frame.info.size);
    if (mem == nullptr) {
      GST_ELEMENT_ERROR(src, RESOURCE, FAILED,
                        ("Could not wrap a shared frame: no slot allocator."), (nullptr));
      return GST_FLOW_ERROR;
    }
    *out = gst_buffer_new();
    gst_buffer_append_memory(*out, mem);
    add_layout_meta(*out, out_info_, layout);
    return GST_FLOW_OK;
  }

 private:
  const GstVideoInfo out_info_;
};

#ifdef CIPC_HAVE_CUDA
// io-mode=copy: a private device copy; the slot is released as soon as the copy has read it.
class PrivateCopyOutput final : public SrcOutput {
 public:
  PrivateCopyOutput(const GstVideoInfo& out_info, SrcCudaSide* cuda, SrcOutputCounters counters)
      : out_info_(out_info), cuda_(cuda), counters_(counters) {}
  SrcOutputKind kind() const override { return SrcOutputKind::kCopy; }
  GstFlowReturn make(GstBaseSrc* src, cipc::ReceivedFrame& frame, const GstVideoInfo& layout,
                     GstBuffer** out) override {
    std::string error;
    GstMemory* mem = private_copy_of(*cuda_->copies, frame, cuda_->stream.handle(), &error,
                                     cuda_->deferred.get());
    if (mem == nullptr) {
      GST_ELEMENT_ERROR(src, RESOURCE, READ, ("Could not copy a frame on the GPU."),
                        ("%s", error.c_str()));
      return GST_FLOW_ERROR;
    }
    *out = gst_buffer_new();
    gst_buffer_append_memory(*out, mem);
    add_layout_meta(*out, out_info_, layout);
    ++*counters_.device_copies;
    return GST_FLOW_OK;
  }

 private:
  const GstVideoInfo out_info_;
  SrcCudaSide* cuda_;
  SrcOutputCounters counters_;
};

// One copy into a buffer of downstream's pool: device-to-host for system memory (ximagesink,
// videoconvert: the buffer keeps downstream's own layout), device-to-device for GStreamer CUDA
// memory (mapped with GST_MAP_CUDA; the buffer gets the producer's layout).
class CopyIntoDownstreamOutput final : public SrcOutput {
 public:
  CopyIntoDownstreamOutput(SrcOutputKind kind, const GstVideoInfo& out_info, SrcCudaSide* cuda,
                           SrcOutputCounters counters)
      : kind_(kind), out_info_(out_info), cuda_(cuda), counters_(counters) {}
  SrcOutputKind kind() const override { return kind_; }
  GstFlowReturn make(GstBaseSrc* src, cipc::ReceivedFrame& frame, const GstVideoInfo& layout,
                     GstBuffer** out) override {
    GstBuffer* buffer = nullptr;
    const char* why = nullptr;
    const GstFlowReturn ret = acquire_from_negotiated_pool(src, &buffer, &why);
    if (ret == GST_FLOW_FLUSHING) return ret;
    if (ret != GST_FLOW_OK) {
      GST_ELEMENT_ERROR(src, RESOURCE, NO_SPACE_LEFT,
                        ("Could not get a buffer to download a frame into."), ("%s", why));
      return GST_FLOW_ERROR;
    }
    const bool to_host = kind_ == SrcOutputKind::kDownload;
    GstMapFlags flags = GST_MAP_WRITE;
#ifdef CIPC_HAVE_GST_CUDA
    if (!to_host) flags = static_cast<GstMapFlags>(GST_MAP_WRITE | GST_MAP_CUDA);
#endif
    if (!copy_frame_into(src, frame, layout, buffer, out_info_, cuda_, flags))
      return GST_FLOW_ERROR;
    if (to_host) {
      ++*counters_.downloads;
    } else {
      add_layout_meta(buffer, out_info_, layout);
      ++*counters_.device_copies;
    }
    *out = buffer;
    return GST_FLOW_OK;
  }

 private:
  const SrcOutputKind kind_;
  const GstVideoInfo out_info_;
  SrcCudaSide* cuda_;
  SrcOutputCounters counters_;
};
#endif

}  // namespace

#ifdef CIPC_HAVE_CUDA
bool copy_frame_into(GstBaseSrc* src, cipc::ReceivedFrame& frame, const GstVideoInfo& layout,
                     GstBuffer* buffer, const GstVideoInfo& out_info, SrcCudaSide* cuda,
                     GstMapFlags map_flags) {
  std::string error;
  if (download_into(frame, layout, buffer, out_info, cuda->stream.handle(), &error, map_flags))
    return true;
  gst_buffer_unref(buffer);
  init_category();  // the GL output calls this too: the error is logged in our category
  GST_ELEMENT_ERROR(src, RESOURCE, READ, ("Could not copy a frame from the GPU."),
                    ("%s", error.c_str()));
  return false;
}
#endif

std::unique_ptr<SrcOutput> make_src_output(SrcOutputKind kind, const GstVideoInfo& out_info,
                                           SrcCudaSide* cuda, SrcOutputCounters counters,
                                           GstCudaContext* gst_cuda_context) {
  init_category();
  switch (kind) {
    case SrcOutputKind::kShared: return std::make_unique<SharedSlotOutput>(out_info);
#ifdef CIPC_HAVE_CUDA
    case SrcOutputKind::kCopy: return std::make_unique<PrivateCopyOutput>(out_info, cuda, counters);
    case SrcOutputKind::kDownload:
    case SrcOutputKind::kGstCuda:
      return std::make_unique<CopyIntoDownstreamOutput>(kind, out_info, cuda, counters);
#endif
#ifdef CIPC_HAVE_GST_CUDA
    case SrcOutputKind::kGstCudaWrapped:
      // Frames GstCudaMemory cannot describe are copied, as kGstCuda does.
      return make_src_cuda_memory_output(out_info, gst_cuda_context,
                                         std::make_unique<CopyIntoDownstreamOutput>(
                                             SrcOutputKind::kGstCuda, out_info, cuda, counters));
#endif
    default: break;
  }
  (void)cuda;
  (void)counters;
  (void)gst_cuda_context;
  return nullptr;
}

}  // namespace cipc_gst
