// SPDX-License-Identifier: LGPL-2.1-or-later
#include "common/gstcudainterop.h"

#ifdef CIPC_HAVE_GST_CUDA
#include <gst/cuda/gstcudaloader.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "cuda_api.h"

GST_DEBUG_CATEGORY_STATIC(cipc_cuda_interop_debug);
#define GST_CAT_DEFAULT cipc_cuda_interop_debug

namespace cipc_gst {

void init_cuda_interop_debug() {
  static std::once_flag once;
  std::call_once(once, [] {
    GST_DEBUG_CATEGORY_INIT(cipc_cuda_interop_debug, "cudaipc-cuda-interop", 0,
                            "cudaipc: GStreamer CUDA context and memory interop");
  });
}

namespace {

// Contexts of all elements of this process, by device: kept for the process's lifetime, as
// the primary contexts they wrap are.
std::mutex g_contexts_mutex;
std::map<int, GstCudaContext*> g_contexts;

}  // namespace

bool cuda_context_sharing_enabled() {
  const char* v = std::getenv("CUDAIPC_SHARE_CUDA_CONTEXT");
  return !(v && v[0] == '0');
}

GstCudaContext* shared_cuda_context(int device, std::string* why) {
  init_cuda_interop_debug();
  std::lock_guard<std::mutex> lock(g_contexts_mutex);
  auto it = g_contexts.find(device);
  if (it != g_contexts.end()) return static_cast<GstCudaContext*>(gst_object_ref(it->second));
  if (!gst_cuda_load_library()) {
    *why = "GStreamer's CUDA library could not load the CUDA driver";
    return nullptr;
  }
  void* handle = nullptr;
  int driver_device = 0;
  const cipc_cuda::Status s = cipc_cuda::primary_context(device, &handle, &driver_device);
  if (!s) {
    *why = s.message();
    return nullptr;
  }
  GstCudaContext* context = gst_cuda_context_new_wrapped(static_cast<CUcontext>(handle),
                                                         static_cast<CUdevice>(driver_device));
  if (!context) {
    *why = "gst_cuda_context_new_wrapped failed for device " + std::to_string(device);
    return nullptr;
  }
  gst_object_ref_sink(context);
  GST_INFO("device %d: sharing the primary context %p as %" GST_PTR_FORMAT, device, handle,
           context);
  g_contexts.emplace(device, context);
  return static_cast<GstCudaContext*>(gst_object_ref(context));
}

void register_gst_cuda_allocator() {
  gst_cuda_memory_init_once();  // idempotent; later versions do it in GstCudaContext's class
}

GstBufferPool* new_gst_cuda_buffer_pool(GstCudaContext* context) {
  register_gst_cuda_allocator();
  return gst_cuda_buffer_pool_new(context);
}

bool is_primary_context(GstCudaContext* context, int device) {
  std::lock_guard<std::mutex> lock(g_contexts_mutex);
  auto it = g_contexts.find(device);
  if (it != g_contexts.end() && it->second == context) return true;
  void* handle = nullptr;
  int driver_device = 0;
  if (!cipc_cuda::primary_context(device, &handle, &driver_device)) return false;
  return gst_cuda_context_get_handle(context) == handle;
}

static void query_neighbours(GstElement* element, int device, GstCudaContext** context) {
  GstQuery* query = gst_query_new_context(GST_CUDA_CONTEXT_TYPE);
  GstIterator* pads = gst_element_iterate_pads(element);
  GValue item = G_VALUE_INIT;
  bool done = false;
  while (!done && !*context) {
    switch (gst_iterator_next(pads, &item)) {
      case GST_ITERATOR_OK: {
        GstPad* pad = GST_PAD(g_value_get_object(&item));
        if (gst_pad_peer_query(pad, query)) {
          GstContext* found = nullptr;
          gst_query_parse_context(query, &found);
          if (found) gst_cuda_handle_set_context(element, found, device, context);
        }
        g_value_reset(&item);
        break;
      }
      case GST_ITERATOR_RESYNC: gst_iterator_resync(pads); break;
      default: done = true; break;
    }
  }
  g_value_unset(&item);
  gst_iterator_free(pads);
  gst_query_unref(query);
}

bool ensure_cuda_context(GstElement* element, int device, GstCudaContext** context,
                         bool* uses_primary, std::string* why) {
  init_cuda_interop_debug();
  *uses_primary = true;
  if (!cuda_context_sharing_enabled()) return true;  // *context stays null: not shared
  if (device < 0) device = 0;
  if (!*context) query_neighbours(element, device, context);
  if (!*context) {
    // The application may set one from its bus sync handler (synchronously, so check after).
    gst_element_post_message(
        element, gst_message_new_need_context(GST_OBJECT(element), GST_CUDA_CONTEXT_TYPE));
  }
  if (!*context) {
    *context = shared_cuda_context(device, why);
    if (!*context) return false;
    gst_element_post_message(
        element,
        gst_message_new_have_context(GST_OBJECT(element), gst_context_new_cuda_context(*context)));
  }
  *uses_primary = is_primary_context(*context, device);
  if (!*uses_primary)
    GST_WARNING_OBJECT(element,
                       "the pipeline's CUDA context %" GST_PTR_FORMAT
                       " is not device %d's primary context: frames are copied between the two",
                       *context, device);
  return true;
}

void set_cuda_context(GstElement* element, GstContext* context, int device,
                      GstCudaContext** current) {
  if (!cuda_context_sharing_enabled()) return;
  gst_cuda_handle_set_context(element, context, device < 0 ? 0 : device, current);
}

bool answer_cuda_context_query(GstElement* element, GstQuery* query, GstCudaContext* context) {
  if (GST_QUERY_TYPE(query) != GST_QUERY_CONTEXT || !context) return false;
  return gst_cuda_handle_context_query(element, query, context);
}

ElementCudaContext::~ElementCudaContext() {
  gst_clear_object(&context_);
}

GstCudaContext* ElementCudaContext::get(GstElement* element, int device) {
  if (!cuda_context_sharing_enabled()) return nullptr;
  std::lock_guard<std::mutex> lock(lock_);
  if (!context_) {
    std::string why;
    context_ = shared_cuda_context(device < 0 ? 0 : device, &why);
    if (!context_) {
      GST_DEBUG_OBJECT(element, "no CUDA context to share: %s", why.c_str());
      return nullptr;
    }
  }
  return static_cast<GstCudaContext*>(gst_object_ref(context_));
}

bool ElementCudaContext::answer_query(GstElement* element, GstQuery* query, int device) {
  if (GST_QUERY_TYPE(query) != GST_QUERY_CONTEXT) return false;
  const gchar* type = nullptr;
  if (!gst_query_parse_context_type(query, &type) || g_strcmp0(type, GST_CUDA_CONTEXT_TYPE) != 0)
    return false;
  GstCudaContext* context = get(element, device);
  const bool answered = context && answer_cuda_context_query(element, query, context);
  gst_clear_object(&context);
  return answered;
}

void ElementCudaContext::set(GstElement* element, GstContext* context, int device) {
  std::lock_guard<std::mutex> lock(lock_);
  set_cuda_context(element, context, device, &context_);
}

GstCudaContext* ElementCudaContext::held() {
  std::lock_guard<std::mutex> lock(lock_);
  return context_ ? static_cast<GstCudaContext*>(gst_object_ref(context_)) : nullptr;
}

void ElementCudaContext::adopt(GstCudaContext** context) {
  std::lock_guard<std::mutex> lock(lock_);
  if (!context_) std::swap(context_, *context);
  gst_clear_object(context);
}

bool caps_have_gst_cuda_memory(const GstCaps* caps) {
  for (guint i = 0; caps && i < gst_caps_get_size(caps); ++i) {
    GstCapsFeatures* f = gst_caps_get_features(caps, i);
    if (f && gst_caps_features_contains(f, GST_CAPS_FEATURE_MEMORY_CUDA_MEMORY)) return true;
  }
  return false;
}

bool buffer_is_gst_cuda_memory(GstBuffer* buffer) {
  return gst_buffer_n_memory(buffer) > 0 && gst_is_cuda_memory(gst_buffer_peek_memory(buffer, 0));
}

GstCaps* caps_with_gst_cuda_memory(const GstCaps* caps) {
  GstCaps* out = gst_caps_copy(caps);
  for (guint i = 0; i < gst_caps_get_size(out); ++i)
    gst_caps_set_features(out, i,
                          gst_caps_features_new(GST_CAPS_FEATURE_MEMORY_CUDA_MEMORY, nullptr));
  return out;
}

}  // namespace cipc_gst
#endif  // CIPC_HAVE_GST_CUDA
