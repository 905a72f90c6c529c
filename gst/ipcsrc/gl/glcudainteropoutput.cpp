// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ipcsrc/gl/glcudainteropoutput.h"

#include <string>
#include <utility>

#include "cuda_slots.h"
#include "gl_interop.h"
#include "ipcsrc/gl/glmemoryobjectoutput.h"
#include "ipcsrc/srcnegotiation.h"

// Logs go to cudasrc-ipc's own category.
GST_DEBUG_CATEGORY_STATIC(cipc_gl_output_debug);
#define GST_CAT_DEFAULT cipc_gl_output_debug

namespace cipc_gst {

bool gl_output_supports(GstVideoFormat format) {
  switch (format) {
    case GST_VIDEO_FORMAT_RGBA:
    case GST_VIDEO_FORMAT_BGRA:
    case GST_VIDEO_FORMAT_RGBx:
    case GST_VIDEO_FORMAT_BGRx: return true;
    default: return false;
  }
}

GstCaps* caps_with_gl_memory(GstCaps* producer_caps) {
  GstCaps* out = gst_caps_new_empty();
  for (guint i = 0; i < gst_caps_get_size(producer_caps); ++i) {
    const GstStructure* st = gst_caps_get_structure(producer_caps, i);
    const gchar* format = gst_structure_get_string(st, "format");
    if (!format || !gl_output_supports(gst_video_format_from_string(format))) continue;
    GstStructure* copy = gst_structure_copy(st);
    gst_structure_set(copy, "texture-target", G_TYPE_STRING, GST_GL_TEXTURE_TARGET_2D_STR, nullptr);
    gst_caps_append_structure_full(
        out, copy, gst_caps_features_new(GST_CAPS_FEATURE_MEMORY_GL_MEMORY, nullptr));
  }
  return out;
}

bool caps_have_gl_memory(const GstCaps* caps) {
  if (!caps || gst_caps_is_empty(caps) || gst_caps_is_any(caps)) return false;
  GstCapsFeatures* features = gst_caps_get_features(caps, 0);
  return features && gst_caps_features_contains(features, GST_CAPS_FEATURE_MEMORY_GL_MEMORY);
}

bool decide_gl_pool(GstQuery* query, GstCaps* caps, GstGLContext* context) {
  GstVideoInfo info;
  if (!gst_video_info_from_caps(&info, caps)) return false;
  GstBufferPool* pool = nullptr;
  guint size = info.size, min = 0, max = 0;
  if (gst_query_get_n_allocation_pools(query) > 0) {
    gst_query_parse_nth_allocation_pool(query, 0, &pool, &size, &min, &max);
    // Only a GL pool of our context makes textures we can write into.
    if (pool && (!GST_IS_GL_BUFFER_POOL(pool) || GST_GL_BUFFER_POOL(pool)->context != context))
      gst_clear_object(&pool);
  }
  if (!pool) pool = gst_gl_buffer_pool_new(context);
  size = MAX(size, guint(info.size));
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, size, min, max);
  gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
  if (gst_query_find_allocation_meta(query, GST_GL_SYNC_META_API_TYPE, nullptr))
    gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_GL_SYNC_META);
  const bool ok = gst_buffer_pool_set_config(pool, config);
  if (ok) put_first_allocation_pool(query, pool, size, min, max);
  gst_object_unref(pool);
  return ok;
}

GstFlowReturn acquire_gl_target(GstBaseSrc* src, cipc::ReceivedFrame& frame,
                                const GstVideoInfo& out_info, GlFrameTarget* target) {
  target->slot = cipc_slots::cuda_slot_of(frame.slot->memory.get());
  if (target->slot == nullptr || !gl_output_supports(GST_VIDEO_INFO_FORMAT(&out_info))) {
    GST_ELEMENT_ERROR(src, CORE, NEGOTIATION, ("Cannot output this frame as GL memory."),
                      ("GL output takes CUDA frames of RGBA, BGRA, RGBx or BGRx"));
    return GST_FLOW_ERROR;
  }
  GstBuffer* buffer = nullptr;
  const char* why = nullptr;
  const GstFlowReturn ret = acquire_from_negotiated_pool(src, &buffer, &why);
  if (ret == GST_FLOW_FLUSHING) return ret;
  GstMemory* memory = ret == GST_FLOW_OK ? gst_buffer_peek_memory(buffer, 0) : nullptr;
  if (ret != GST_FLOW_OK || !memory || !gst_is_gl_memory(memory)) {
    if (ret == GST_FLOW_OK) gst_buffer_unref(buffer);
    GST_ELEMENT_ERROR(
        src, RESOURCE, NO_SPACE_LEFT, ("Could not get a GL texture for a frame."),
        ("%s", ret != GST_FLOW_OK ? why : "the negotiated pool does not make GL memory"));
    return GST_FLOW_ERROR;
  }
  target->buffer = buffer;
  target->memory = memory;
  return GST_FLOW_OK;
}

void set_gl_sync_point(GstBuffer* buffer, GstGLContext* context) {
  GstGLSyncMeta* sync = gst_buffer_get_gl_sync_meta(buffer);
  if (!sync) sync = gst_buffer_add_gl_sync_meta(context, buffer);
  gst_gl_sync_meta_set_sync_point(sync, context);
}

namespace {

// A texture's CUDA registration, cached on its GstGLMemory for the memory's life. It is made
// and dropped in the GL thread (GL's objects belong to that context).
struct TextureRegistration {
  GstGLContext* context;  // referenced
  cipc_cuda::GlTextureTarget target;
};

GQuark registration_quark() {
  static const GQuark quark = g_quark_from_static_string("cudaipc-gl-texture-registration");
  return quark;
}

void drop_registration(gpointer data) {
  auto* reg = static_cast<TextureRegistration*>(data);
  GstGLContext* context = reg->context;
  gst_gl_context_thread_add(
      context, [](GstGLContext*, gpointer r) { delete static_cast<TextureRegistration*>(r); }, reg);
  gst_object_unref(context);
}

// What the GL thread does for one frame.
struct CopyJob {
  GstMemory* memory;
  cipc_slots::CudaSlotMemory* slot;
  const GstVideoInfo* layout;
  const GstVideoInfo* out_info;
  int device;
  cipc_cuda::StreamHandle stream;
  cipc_cuda::Status status;
  bool registered_now = false;
  bool registration_refused = false;  // CUDA cannot write this context's textures
};

// In the GL thread: the texture mapped for writing (GstGLMemory then knows its CPU copy, if
// any, is stale), registered once, the copy queued after the producer's frame, and the reads
// of the slot recorded for its release.
void copy_in_gl_thread(GstGLContext* context, gpointer data) {
  auto* job = static_cast<CopyJob*>(data);
  GstMapInfo map;
  if (!gst_memory_map(job->memory, &map, static_cast<GstMapFlags>(GST_MAP_WRITE | GST_MAP_GL))) {
    job->status = cipc_cuda::Status::failure("could not map a GL texture for writing");
    return;
  }
  const guint texture = *reinterpret_cast<const guint*>(map.data);
  auto* reg = static_cast<TextureRegistration*>(
      gst_mini_object_get_qdata(GST_MINI_OBJECT_CAST(job->memory), registration_quark()));
  cipc_cuda::Status s;
  if (!reg) {
    auto made = std::make_unique<TextureRegistration>();
    made->context = GST_GL_CONTEXT(gst_object_ref(context));
    s = cipc_cuda::GlTextureTarget::register_texture(
        job->device, texture, gst_gl_texture_target_to_gl(GST_GL_TEXTURE_TARGET_2D), &made->target);
    if (s) {
      reg = made.release();
      gst_mini_object_set_qdata(GST_MINI_OBJECT_CAST(job->memory), registration_quark(), reg,
                                drop_registration);
      job->registered_now = true;
    } else {
      gst_object_unref(made->context);
      made->context = nullptr;
      job->registration_refused = true;
    }
  }
  if (s) s = job->slot->wait_ready(job->stream);
  if (s) {
    const GstVideoInfo& layout = *job->layout;
    const size_t row_bytes = size_t(GST_VIDEO_INFO_WIDTH(job->out_info)) * 4;
    s = reg->target.copy_from(job->slot->ptr() + layout.offset[0], layout.stride[0], row_bytes,
                              GST_VIDEO_INFO_HEIGHT(job->out_info), job->stream);
  }
  if (s) s = job->slot->record_release(job->stream);
  gst_memory_unmap(job->memory, &map);
  job->status = s;
}

class GlInteropOutput final : public SrcOutput {
 public:
  GlInteropOutput(const GstVideoInfo& out_info, GstGLContext* context, SrcCudaSide* cuda,
                  SrcOutputCounters counters, bool fall_back_to_host)
      : out_info_(out_info),
        context_(GST_GL_CONTEXT(gst_object_ref(context))),
        cuda_(cuda),
        counters_(counters),
        may_fall_back_(fall_back_to_host) {}
  ~GlInteropOutput() override { gst_object_unref(context_); }
  SrcOutputKind kind() const override { return SrcOutputKind::kGl; }

  GstFlowReturn make(GstBaseSrc* src, cipc::ReceivedFrame& frame, const GstVideoInfo& layout,
                     GstBuffer** out) override {
    GlFrameTarget target;
    const GstFlowReturn ret = acquire_gl_target(src, frame, out_info_, &target);
    if (ret != GST_FLOW_OK) return ret;
    GstBuffer* buffer = target.buffer;
    GstMemory* memory = target.memory;
    cipc_slots::CudaSlotMemory* slot = target.slot;
    if (through_host_) return download(src, frame, layout, buffer, out);
    CopyJob job{memory, slot, &layout, &out_info_, cuda_->device, cuda_->stream.handle(), {}};
    gst_gl_context_thread_add(context_, copy_in_gl_thread, &job);
    if (!job.status && job.registration_refused && may_fall_back_) {
      GST_ELEMENT_WARNING(src, RESOURCE, SETTINGS,
                          ("CUDA cannot write into this GL context's textures (is GL running on "
                           "another GPU?): frames now reach GL through system memory, one "
                           "download each."),
                          ("%s", job.status.message().c_str()));
      through_host_ = true;
      return download(src, frame, layout, buffer, out);
    }
    if (!job.status) {
      gst_buffer_unref(buffer);
      GST_ELEMENT_ERROR(src, RESOURCE, WRITE,
                        ("Could not copy a frame into a GL texture through CUDA-OpenGL interop "
                         "(GL and CUDA must run on the same GPU)."),
                        ("%s", job.status.message().c_str()));
      return GST_FLOW_ERROR;
    }
    if (job.registered_now) GST_DEBUG("registered GL texture of %p with CUDA", memory);
    set_gl_sync_point(buffer, context_);
    // The slot goes back to the producer once the copy has read it.
    std::shared_ptr<void> keepalive = frame.take_hold();
    if (cuda_->deferred)
      cuda_->deferred->add(*slot, std::move(keepalive));
    else
      slot->drop_after_reads(std::move(keepalive));
    ++*counters_.device_copies;
    *out = buffer;
    return GST_FLOW_OK;
  }

 private:
  // The fallback: the frame downloaded into the texture's system-memory side (mapped without
  // GST_MAP_GL), which GstGLMemory uploads when GL next reads it.
  GstFlowReturn download(GstBaseSrc* src, cipc::ReceivedFrame& frame, const GstVideoInfo& layout,
                         GstBuffer* buffer, GstBuffer** out) {
    if (!copy_frame_into(src, frame, layout, buffer, out_info_, cuda_)) return GST_FLOW_ERROR;
    ++*counters_.downloads;
    *out = buffer;
    return GST_FLOW_OK;
  }

  const GstVideoInfo out_info_;
  GstGLContext* context_;
  SrcCudaSide* cuda_;
  SrcOutputCounters counters_;
  const bool may_fall_back_;
  bool through_host_ = false;  // CUDA could not register this context's textures
};

}  // namespace

std::unique_ptr<SrcOutput> make_gl_cuda_interop_output(const GstVideoInfo& out_info,
                                                       GstGLContext* context, SrcCudaSide* cuda,
                                                       SrcOutputCounters counters,
                                                       GstCipcGlImport way, std::string* why) {
  if (!cipc_gl_output_debug) GST_DEBUG_CATEGORY_GET(cipc_gl_output_debug, "cudaipc-src");
  if (!context || !cuda) {
    *why = "no GL context";
    return nullptr;
  }
  if (way == GST_CIPC_GL_IMPORT_MEMORY_OBJECT) {
    cipc_cuda::DeviceInfo gpu;
    const cipc_cuda::Status queried = cipc_cuda::query_device(cuda->device, &gpu);
    if (!queried) {
      *why = queried.message();
      return nullptr;
    }
    return make_gl_memory_object_output(out_info, context, gpu.uuid, counters, why);
  }
  return std::make_unique<GlInteropOutput>(out_info, context, cuda, counters,
                                           way == GST_CIPC_GL_IMPORT_AUTO);
}

}  // namespace cipc_gst
