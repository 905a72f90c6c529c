// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ipcsrc/srcnegotiation.h"

#include "memory/slotmemory.h"
#ifdef CIPC_HAVE_GST_CUDA
#include "common/gstcudainterop.h"
#endif
#ifdef CIPC_HAVE_GST_GL
#include "ipcsrc/gl/glcudainteropoutput.h"
#endif

namespace cipc_gst {

GstCaps* parse_producer_caps(const std::string& text) {
  (void)gst_video_multiview_flagset_get_type();
  (void)gst_video_multiview_flags_get_type();
  GstCaps* caps = gst_caps_from_string(text.c_str());
  if (caps) return caps;
  const size_t at = text.find(", multiview-flags=");
  if (at == std::string::npos) return nullptr;
  const size_t end = text.find(", ", at + 2);
  const std::string without =
      text.substr(0, at) + (end == std::string::npos ? "" : text.substr(end));
  GST_WARNING("caps did not parse; retrying without multiview-flags: %s", text.c_str());
  return gst_caps_from_string(without.c_str());
}

SrcCapsMemory src_caps_memory(const GstCaps* caps) {
  if (gst_cipc_caps_have_cuda_memory(const_cast<GstCaps*>(caps))) return SrcCapsMemory::kCudaIpc;
#ifdef CIPC_HAVE_GST_CUDA
  if (caps_have_gst_cuda_memory(caps)) return SrcCapsMemory::kGstCuda;
#endif
#ifdef CIPC_HAVE_GST_GL
  if (caps_have_gl_memory(caps)) return SrcCapsMemory::kGl;
#endif
  return SrcCapsMemory::kSystem;
}

GstCaps* src_output_caps(bool producer_cuda, GstCaps* producer_caps, bool offer_gl) {
  if (!producer_cuda) return gst_caps_ref(producer_caps);
  GstCaps* device = gst_caps_copy(producer_caps);
  gst_caps_set_features(device, 0,
                        gst_caps_features_new(GST_CAPS_FEATURE_MEMORY_CUDA_IPC, nullptr));
#ifdef CIPC_HAVE_GST_CUDA
  // After our own memory (zero copies), before system memory (a download).
  gst_caps_append(device, caps_with_gst_cuda_memory(producer_caps));
#endif
#ifdef CIPC_HAVE_GST_GL
  // Then GL textures (one copy on the GPU), before system memory (a download, then glupload).
  if (offer_gl) gst_caps_append(device, caps_with_gl_memory(producer_caps));
#else
  (void)offer_gl;
#endif
  GstCaps* system = gst_caps_copy(producer_caps);
  GstStructure* st0 = gst_caps_get_structure(system, 0);
  const gchar* format = gst_structure_get_string(st0, "format");
  const gchar* padded = !format                       ? nullptr
                        : g_str_equal(format, "BGRA") ? "BGRx"
                        : g_str_equal(format, "RGBA") ? "RGBx"
                                                      : nullptr;
  if (padded) {
    GValue list = G_VALUE_INIT, v = G_VALUE_INIT;
    g_value_init(&list, GST_TYPE_LIST);
    g_value_init(&v, G_TYPE_STRING);
    g_value_set_string(&v, format);
    gst_value_list_append_value(&list, &v);
    g_value_set_string(&v, padded);
    gst_value_list_append_value(&list, &v);
    gst_structure_take_value(st0, "format", &list);
    g_value_unset(&v);
  }
  gst_caps_append(device, system);
  return device;
}

void put_first_allocation_pool(GstQuery* query, GstBufferPool* pool, guint size, guint min,
                               guint max) {
  if (gst_query_get_n_allocation_pools(query) > 0)
    gst_query_set_nth_allocation_pool(query, 0, pool, size, min, max);
  else
    gst_query_add_allocation_pool(query, pool, size, min, max);
}

void decide_system_memory_pool(GstQuery* query, GstCaps* caps, const GstVideoInfo& info) {
  GstBufferPool* pool = nullptr;
  guint size = 0, min = 0, max = 0;
  if (gst_query_get_n_allocation_pools(query) > 0)
    gst_query_parse_nth_allocation_pool(query, 0, &pool, &size, &min, &max);
  if (!pool) pool = gst_video_buffer_pool_new();
  size = MAX(size, static_cast<guint>(GST_VIDEO_INFO_SIZE(&info)));
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, size, min, max);
  if (gst_query_find_allocation_meta(query, GST_VIDEO_META_API_TYPE, nullptr))
    gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
  gst_buffer_pool_set_config(pool, config);  // a pool that refuses keeps its own, checked on use
  put_first_allocation_pool(query, pool, size, min, max);
  gst_object_unref(pool);
}

#ifdef CIPC_HAVE_GST_CUDA
void decide_gst_cuda_pool(GstQuery* query, GstCaps* caps, const GstVideoInfo& info,
                          GstCudaContext* context) {
  GstBufferPool* pool = nullptr;
  guint size = 0, min = 0, max = 0;
  if (gst_query_get_n_allocation_pools(query) > 0)
    gst_query_parse_nth_allocation_pool(query, 0, &pool, &size, &min, &max);
  if (pool && !GST_IS_CUDA_BUFFER_POOL(pool)) gst_clear_object(&pool);
  if (!pool) {
    if (!context) return;
    pool = new_gst_cuda_buffer_pool(context);
  }
  size = MAX(size, static_cast<guint>(GST_VIDEO_INFO_SIZE(&info)));
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, size, min, max);
  gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
  if (!gst_buffer_pool_set_config(pool, config)) {
    // The pool pads rows to the device's pitch and says so by refusing with its own size: take
    // that (basesrc configures the pool again with the size in the query, which must be its own).
    config = gst_buffer_pool_get_config(pool);
    if (!gst_buffer_pool_set_config(pool, config))
      GST_WARNING_OBJECT(pool, "GStreamer's CUDA buffer pool refused its own configuration");
  }
  config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_get_params(config, nullptr, &size, nullptr, nullptr);
  gst_structure_free(config);
  put_first_allocation_pool(query, pool, size, min, max);
  gst_object_unref(pool);
}
#endif

}  // namespace cipc_gst
