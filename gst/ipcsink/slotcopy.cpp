// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ipcsink/slotcopy.h"

#include <gst/video/video.h>

#include <mutex>

#ifdef CIPC_HAVE_CUDA
#include "common/cudaplanecopy.h"
#include "cuda_slots.h"
#include "memory/pinnedmemory.h"
#include "recycled_events.h"
#include "release_worker.h"
#include "waker.h"  // cipc::monotonic_ns
#endif
#include "common/frameplanes.h"
#include "common/gstcompat.h"
#include "common/gstcudainterop.h"

namespace cipc_gst {

struct SlotCopier::Cuda {
#ifdef CIPC_HAVE_CUDA
  int device = -1;
  cipc_cuda::Stream stream;
  // "This frame's copy is done" events: one is free again once the release worker has dropped
  // its reference.
  std::unique_ptr<cipc_cuda::RecycledEvents> copy_done;
  // Recorded on the stream still writing an input (GStreamer CUDA memory), waited for on ours.
  cipc_cuda::Event input_written;
  // Offered upstream for system-memory frames (upload_pool()), for `upload_caps`.
  std::mutex upload_lock;
  GstBufferPool* upload_pool = nullptr;
  GstCaps* upload_caps = nullptr;
  ~Cuda() {
    if (upload_pool) {
      gst_buffer_pool_set_active(upload_pool, FALSE);
      gst_object_unref(upload_pool);
    }
    if (upload_caps) gst_caps_unref(upload_caps);
  }
#endif
};

#ifdef CIPC_HAVE_CUDA
// Upstream's buffer (and its mapping) while the GPU copy still reads it.
struct SlotCopier::HeldInput {
  GstBuffer* buffer = nullptr;
  GstVideoFrame frame;
  bool mapped = false;
  ~HeldInput() {
    if (mapped) gst_video_frame_unmap(&frame);
    if (buffer) gst_buffer_unref(buffer);
  }
};
#endif

SlotCopier::~SlotCopier() = default;

std::unique_ptr<SlotCopier> SlotCopier::create(int cuda_device, std::string* error) {
  std::unique_ptr<SlotCopier> copier(new SlotCopier());
  if (cuda_device < 0) return copier;
#ifdef CIPC_HAVE_CUDA
  copier->cuda_ = std::make_unique<Cuda>();
  copier->cuda_->device = cuda_device;
  copier->cuda_->copy_done = std::make_unique<cipc_cuda::RecycledEvents>(cuda_device);
  const cipc_cuda::Status s = cipc_cuda::Stream::create(cuda_device, &copier->cuda_->stream);
  if (!s) {
    *error = "could not create a CUDA stream: " + s.message();
    return nullptr;
  }
  return copier;
#else
  *error = "this build has no CUDA support";
  return nullptr;
#endif
}

bool SlotCopier::cpu_copy(const GstVideoInfo& info, GstBuffer* buffer, GstBuffer* slot,
                          std::string* error) {
  GstVideoFrame in, out;
  if (!gst_video_frame_map(&in, &info, buffer, GST_MAP_READ)) {
    *error = "could not read the incoming frame";
    return false;
  }
  if (!gst_video_frame_map(&out, &info, slot, GST_MAP_WRITE)) {
    gst_video_frame_unmap(&in);
    *error = "could not map a shareable slot";
    return false;
  }
  const bool copied = copy_video_frame(&out, &in);
  gst_video_frame_unmap(&out);
  gst_video_frame_unmap(&in);
  if (!copied) *error = "the incoming frame's planes could not be copied into a slot";
  return copied;
}

#ifdef CIPC_HAVE_CUDA
// A GstVideoInfo with the plane layout of `buffer`'s video meta (if it has one).
static GstVideoInfo layout_of(const GstVideoInfo& info, GstBuffer* buffer) {
  GstVideoInfo layout = info;
  if (const GstVideoMeta* meta = gst_buffer_get_video_meta(buffer)) {
    for (guint i = 0; i < meta->n_planes; ++i) {
      layout.offset[i] = meta->offset[i];
      layout.stride[i] = meta->stride[i];
    }
  }
  return layout;
}

// An upload runs asynchronously only from page-locked memory: our pinned pool's, or pooled
// upstream memory locked here once for its life (its pool hands the same memory back frame after
// frame). Anything else is pageable; the driver stages it synchronously, and it is counted.
bool SlotCopier::note_upload_source(GstBuffer* buffer, const GstVideoFrame& frame) {
  GstMemory* mem = gst_buffer_n_memory(buffer) == 1 ? gst_buffer_peek_memory(buffer, 0) : nullptr;
  cipc_cuda::DevicePtr pinned = 0;
  if (mem && gst_cipc_pinned_memory_device_ptr(mem, &pinned)) return false;
  if (mem && buffer->pool && register_host_memory_once(mem, frame.map[0].data, frame.map[0].size))
    return false;
  ++pageable_uploads_;
  return true;
}

// Our copy of GStreamer CUDA memory waits on the GPU for the stream still writing it; where the
// event cannot go on that stream (another CUDA context), the CPU waits instead.
cipc_cuda::Status SlotCopier::order_after_writer(GstMemory* mem, cipc_cuda::StreamHandle stream) {
#ifdef CIPC_HAVE_GST_CUDA
  void* writer = gst_cuda_memory_pending_stream(mem);
  if (writer == nullptr) return cipc_cuda::Status::ok();
  cipc_cuda::Status s;
  if (!cuda_->input_written.valid())
    s = cipc_cuda::Event::create_local(cuda_->device, &cuda_->input_written);
  if (s) s = cuda_->input_written.record(writer);
  if (s) return cuda_->input_written.wait(stream);
  gst_cuda_memory_wait_complete(mem);
#else
  (void)mem;
  (void)stream;
#endif
  return cipc_cuda::Status::ok();
}

bool SlotCopier::cuda_copy(const GstVideoInfo& info, GstBuffer* buffer, GstBuffer* slot,
                           std::string* error) {
  cipc_slots::CudaSlotMemory* dst = cuda_slot_of(gst_buffer_peek_memory(slot, 0));
  if (dst == nullptr) {
    *error = "the slot is not CUDA memory";
    return false;
  }
  GstMemory* in_mem =
      gst_buffer_n_memory(buffer) == 1 ? gst_buffer_peek_memory(buffer, 0) : nullptr;
  const GstCudaIpcMemoryInfo* in_cuda = gst_cuda_ipc_memory_get_info(in_mem);
  const cipc_cuda::StreamHandle stream = cuda_->stream.handle();
  cipc_cuda::Status status = dst->begin_write(stream);
  auto held = std::make_shared<HeldInput>();
  GstVideoFrame& in = held->frame;
  bool& mapped = held->mapped;
  PlanePointers src;
  GstMemory* pending_mem = nullptr;  // GStreamer CUDA memory whose writer may still be running
  bool pageable = false;             // the driver stages the copy: it returns once it has read it
  if (status && in_cuda) {
    // Another element's CUDA memory: one device-to-device copy, after its writer.
    if (!in_cuda->wait_ready(in_mem, stream))
      status = cipc_cuda::Status::failure("waiting for the input frame on the GPU failed");
    src = planes_at(in_cuda->device_ptr + in_mem->offset, layout_of(info, buffer));
  } else if (status) {
    GstMapFlags flags = GST_MAP_READ;
    bool on_device = false;  // GStreamer's CUDA memory, mapped as device pointers
#ifdef CIPC_HAVE_GST_CUDA
    // GStreamer's CUDA memory (nvcodec): mapped as device pointers, so the copy stays on the GPU.
    on_device = buffer_is_gst_cuda_memory(buffer);
    if (on_device) flags = static_cast<GstMapFlags>(GST_MAP_READ | GST_MAP_CUDA);
#endif
    mapped = gst_video_frame_map(&in, &info, buffer, flags);
    if (!mapped) {
      status = cipc_cuda::Status::failure("could not map the incoming frame");
    } else {
      src = planes_of(in);
      if (on_device)
        pending_mem = in_mem;
      else
        pageable = note_upload_source(buffer, in);
    }
  }
  if (status && pending_mem) status = order_after_writer(pending_mem, stream);
  // A slot is one allocation, and so is an input of one memory: one 1D copy where the layouts
  // agree, the simplest copy for the driver to stage from pageable memory.
  const uint64_t copy_start_ns = pageable ? cipc::monotonic_ns() : 0;
  if (status)
    status = copy_planes_async(info, planes_at(dst->ptr(), layout_of(info, slot)), src, stream,
                               in_mem != nullptr);
  if (pageable) pageable_upload_ns_ += cipc::monotonic_ns() - copy_start_ns;
  if (status) status = dst->end_write(stream);
  if (!status) {
    *error = status.message();
    // Part of the copy may be queued: upstream's buffer goes (with `held`) only after it.
    (void)cuda_->stream.synchronize();
    return false;
  }
  return release_after_copy(std::move(held), buffer, error);
}

bool SlotCopier::release_after_copy(std::shared_ptr<HeldInput> held, GstBuffer* buffer,
                                    std::string* error) {
  // Consumers wait for the slot on the GPU (its readiness event, recorded after the copy); only
  // upstream's buffer must outlive the copy. Kept by reference and let go by the release worker
  // once the copy is done, so this streaming thread never waits for the GPU.
  std::shared_ptr<cipc_cuda::Event> done;
  cipc_cuda::Status s = cuda_->copy_done->next(&done);
  if (s) s = done->record(cuda_->stream.handle());
  if (!s) {
    // No event: wait here instead; `held` then goes when this returns, the copy complete.
    s = cuda_->stream.synchronize();
    if (!s) *error = s.message();
    return static_cast<bool>(s);
  }
  held->buffer = gst_buffer_ref(buffer);
  cipc_slots::drop_when_done(std::move(done), std::move(held));
  return true;
}
#else
bool SlotCopier::cuda_copy(const GstVideoInfo&, GstBuffer*, GstBuffer*, std::string* error) {
  *error = "this build has no CUDA support";
  return false;
}
#endif

GstBufferPool* SlotCopier::upload_pool(GstCaps* caps, guint size) {
#ifdef CIPC_HAVE_CUDA
  if (!cuda_ || caps == nullptr || size == 0) return nullptr;
  std::lock_guard<std::mutex> lock(cuda_->upload_lock);
  if (!cuda_->upload_pool || !gst_caps_is_equal(caps, cuda_->upload_caps)) {
    if (cuda_->upload_pool) {
      gst_buffer_pool_set_active(cuda_->upload_pool, FALSE);
      gst_clear_object(&cuda_->upload_pool);
    }
    if (cuda_->upload_caps) gst_caps_unref(cuda_->upload_caps);
    cuda_->upload_caps = nullptr;
    // Two frames: one upstream writes while the previous one uploads; it grows as needed.
    cuda_->upload_pool = gst_cipc_pinned_pool_new(cuda_->device, caps, size, 2);
    if (!cuda_->upload_pool) return nullptr;
    cuda_->upload_caps = gst_caps_ref(caps);
  }
  return static_cast<GstBufferPool*>(gst_object_ref(cuda_->upload_pool));
#else
  (void)caps;
  (void)size;
  return nullptr;
#endif
}

GstBuffer* SlotCopier::copy(const SlotPoolGenerations& pools, GstBuffer* buffer,
                            std::string* error) {
  GstBufferPool* pool = pools.pool();
  if (!gst_buffer_pool_is_active(pool) && !gst_buffer_pool_set_active(pool, TRUE)) {
    *error = "could not allocate shareable memory";
    return nullptr;
  }
  GstBuffer* slot = nullptr;
  if (gst_buffer_pool_acquire_buffer(pool, &slot, nullptr) != GST_FLOW_OK) {
    *error = "no free shareable slot";
    return nullptr;
  }
  const bool copied = cuda_ ? cuda_copy(pools.info(), buffer, slot, error)
                            : cpu_copy(pools.info(), buffer, slot, error);
  if (!copied) {
    gst_buffer_unref(slot);
    return nullptr;
  }
  gst_buffer_copy_into(
      slot, buffer,
      static_cast<GstBufferCopyFlags>(GST_BUFFER_COPY_FLAGS | GST_BUFFER_COPY_TIMESTAMPS), 0, -1);
  return slot;
}

}  // namespace cipc_gst
