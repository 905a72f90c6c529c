// SPDX-License-Identifier: LGPL-2.1-or-later
#include "common/cudaplanecopy.h"

#include <mutex>

#include "common/frameplanes.h"

GST_DEBUG_CATEGORY_STATIC(cipc_cuda_frames_debug);
#define GST_CAT_DEFAULT cipc_cuda_frames_debug

namespace cipc_gst {

cipc_cuda::Status copy_planes_async(const GstVideoInfo& info, const PlanePointers& dst,
                                    const PlanePointers& src, cipc_cuda::StreamHandle stream,
                                    bool one_allocation_each) {
  if (one_allocation_each) {
    if (const gsize span = contiguous_span(info, dst, src))
      return cipc_cuda::copy_async(const_cast<void*>(dst.data[0]), src.data[0], span, stream);
  }
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

}  // namespace cipc_gst
