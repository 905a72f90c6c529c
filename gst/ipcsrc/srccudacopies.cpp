// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ipcsrc/srccudacopies.h"

#include "common/cudaplanecopy.h"
#include "cuda_slots.h"
#include "memory/slotmemory.h"

namespace cipc_gst {

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
