// SPDX-License-Identifier: LGPL-2.1-or-later
#include "common/cudaframes.h"

#include <mutex>

#include "common/framing.h"
#include "cuda_slots.h"
#include "memory/slotmemory.h"

GST_DEBUG_CATEGORY_STATIC(cipc_cuda_frames_debug);
#define GST_CAT_DEFAULT cipc_cuda_frames_debug

namespace cipc_gst {

cipc_cuda::Status copy_planes_async(const GstVideoInfo& info, const PlanePointers& dst,
                                    const PlanePointers& src, cipc_cuda::StreamHandle stream) {
  cipc_cuda::Status s;
  for (guint p = 0; s && p < GST_VIDEO_INFO_N_PLANES(&info); ++p) {
    const gint row_bytes = MIN(src.stride[p], dst.stride[p]);
    s = cipc_cuda::copy_2d_async(const_cast<void*>(dst.data[p]), dst.stride[p], src.data[p],
                                 src.stride[p], row_bytes, plane_rows(info, p), stream);
  }
  return s;
}

PlanePointers planes_of(const GstVideoFrame& frame) {
  PlanePointers planes;
  for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES(&frame); ++p) {
    planes.data[p] = GST_VIDEO_FRAME_PLANE_DATA(&frame, p);
    planes.stride[p] = GST_VIDEO_FRAME_PLANE_STRIDE(&frame, p);
  }
  return planes;
}

PlanePointers planes_at(cipc_cuda::DevicePtr base, const GstVideoInfo& layout) {
  PlanePointers planes;
  for (guint p = 0; p < GST_VIDEO_INFO_N_PLANES(&layout); ++p) {
    planes.data[p] = reinterpret_cast<const void*>(base + layout.offset[p]);
    planes.stride[p] = layout.stride[p];
  }
  return planes;
}

void init_cuda_frames_debug() {
  static std::once_flag once;
  std::call_once(once, [] {
    GST_DEBUG_CATEGORY_INIT(cipc_cuda_frames_debug, "cudaipc-frames", 0,
                            "cudaipc CUDA frame copies");
  });
}

bool register_host_memory_once(GstMemory* mem, void* data, size_t size) {
  static const GQuark quark = [] {
    init_cuda_frames_debug();
    return g_quark_from_static_string("cudaipc-host-registration");
  }();
  if (auto* known = static_cast<cipc_cuda::HostRegistration*>(
          gst_mini_object_get_qdata(GST_MINI_OBJECT_CAST(mem), quark)))
    return known->ptr() != nullptr;
  auto* reg = new cipc_cuda::HostRegistration();
  const cipc_cuda::Status s = cipc_cuda::HostRegistration::create(data, size, reg);
  if (!s) GST_INFO("host memory cannot be page-locked, copying it as is: %s", s.message().c_str());
  gst_mini_object_set_qdata(GST_MINI_OBJECT_CAST(mem), quark, reg, [](gpointer p) {
    delete static_cast<cipc_cuda::HostRegistration*>(p);
  });
  return reg->ptr() != nullptr;
}

GstMemory* private_copy_of(cipc_slots::PrivateCopies& copies, cipc::ReceivedFrame& frame,
                           cipc_cuda::StreamHandle stream, std::string* error,
                           cipc_slots::DeferredReleases* deferred) {
  cipc_slots::CudaSlotMemory* slot = cipc_slots::cuda_slot_of(frame.slot->memory.get());
  if (slot == nullptr) {
    *error = "the frame is not in CUDA memory";
    return nullptr;
  }
  auto copy =
      cipc_slots::copy_frame(copies, *slot, frame.info.size, stream, frame.take_hold(), deferred);
  if (!copy) {
    *error = copy.error().message;
    return nullptr;
  }
  auto binding = std::make_shared<GstCipcSlotBinding>();
  bind_cuda_region(*binding, *copy.value());
  const size_t bytes = copy.value()->bytes();
  binding->keepalive = std::move(copy.value());
  GstMemory* mem = gst_cipc_slot_memory_new(std::move(binding), bytes, frame.info.size, false);
  if (mem == nullptr) *error = "no slot memory allocator";
  return mem;
}

bool download_into(cipc::ReceivedFrame& frame, const GstVideoInfo& layout, GstBuffer* dst,
                   const GstVideoInfo& dst_info, cipc_cuda::StreamHandle stream, std::string* error,
                   GstMapFlags map_flags) {
  cipc_slots::CudaSlotMemory* slot = cipc_slots::cuda_slot_of(frame.slot->memory.get());
  if (slot == nullptr) {
    *error = "the frame is not in CUDA memory";
    return false;
  }
  GstVideoFrame out;
  if (!gst_video_frame_map(&out, &dst_info, dst, map_flags)) {
    *error = "could not map a downstream buffer";
    return false;
  }
  if (map_flags == GST_MAP_WRITE && gst_buffer_n_memory(dst) == 1)
    register_host_memory_once(gst_buffer_peek_memory(dst, 0), out.map[0].data, out.map[0].size);
  cipc_cuda::Status s = slot->wait_ready(stream);
  if (s) s = copy_planes_async(layout, planes_of(out), planes_at(slot->ptr(), layout), stream);
  if (s) s = cipc_cuda::synchronize_stream(stream);  // the CPU reads it next
  gst_video_frame_unmap(&out);
  if (!s) {
    *error = s.message();
    return false;
  }
  frame.claim.reset();  // the slot is free again
  return true;
}

}  // namespace cipc_gst
