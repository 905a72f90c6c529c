// SPDX-License-Identifier: LGPL-2.1-or-later
#include "gst_cudaipc_peer.h"

#include <dlfcn.h>
#include <gst/app/gstappsrc.h>

#include <fstream>
#include <sstream>

#include "common/gstcudainterop.h"
#include "gst_pipeline_util.h"

namespace cipc_bench {

namespace {

constexpr const char* kFrameMeta = "CudaipcBenchFrame";

// What came with GstCudaStream (1.24), found in the GStreamer CUDA library loaded at run time.
struct StreamApi {
  void* (*memory_get_stream)(GstCudaMemory*) = nullptr;
  void* (*stream_get_handle)(void*) = nullptr;
  StreamApi() {
    memory_get_stream = reinterpret_cast<void* (*)(GstCudaMemory*)>(
        dlsym(RTLD_DEFAULT, "gst_cuda_memory_get_stream"));
    stream_get_handle =
        reinterpret_cast<void* (*)(void*)>(dlsym(RTLD_DEFAULT, "gst_cuda_stream_get_handle"));
  }
};

const StreamApi& stream_api() {
  static const StreamApi api;
  return api;
}

// ": <the pipeline's first error>", or nothing when it left none.
std::string bus_error(GstElement* pipeline) {
  GstBus* bus = gst_element_get_bus(pipeline);
  const std::string why = cipc_test::pop_bus_error(bus);
  gst_object_unref(bus);
  return why.empty() ? why : ": " + why;
}

}  // namespace

void register_frame_meta() {
  static const gchar* tags[] = {nullptr};
  if (!gst_meta_get_info(kFrameMeta))
    gst_meta_register_custom(kFrameMeta, tags, nullptr, nullptr, nullptr);
}

void tag_frame(GstBuffer* buffer, uint64_t index) {
  GstCustomMeta* meta = gst_buffer_add_custom_meta(buffer, kFrameMeta);
  if (meta)
    gst_structure_set(gst_custom_meta_get_structure(meta), "index", G_TYPE_UINT64, guint64(index),
                      nullptr);
}

bool frame_tag(GstBuffer* buffer, uint64_t* index) {
  GstCustomMeta* meta = gst_buffer_get_custom_meta(buffer, kFrameMeta);
  guint64 value = 0;
  if (!meta || !gst_structure_get_uint64(gst_custom_meta_get_structure(meta), "index", &value))
    return false;
  *index = value;
  return true;
}

int accepted_connections(const std::string& path) {
  // "Num RefCount Protocol Flags Type St Inode Path": St 03 is a connected socket.
  std::ifstream table("/proc/net/unix");
  std::string line;
  int n = 0;
  std::getline(table, line);  // the header
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string num, refs, protocol, flags, type, state, inode, where;
    if (fields >> num >> refs >> protocol >> flags >> type >> state >> inode >> where &&
        state == "03" && where == path)
      ++n;
  }
  return n;
}

MemoryContextScope::MemoryContextScope(GstMemory* mem) {
  if (!mem || !gst_is_cuda_memory(mem)) return;
  GstCudaMemory* cuda = GST_CUDA_MEMORY_CAST(mem);
  if (!cuda->context || !gst_cuda_context_push(cuda->context)) return;
  entered_ = true;
  const StreamApi& api = stream_api();
  if (api.memory_get_stream && api.stream_get_handle)
    if (void* stream = api.memory_get_stream(cuda)) stream_ = api.stream_get_handle(stream);
}

MemoryContextScope::~MemoryContextScope() {
  if (entered_) gst_cuda_context_pop(nullptr);
}

PeerIpcSink::~PeerIpcSink() {
  if (pool_) {
    gst_buffer_pool_set_active(pool_, FALSE);
    gst_object_unref(pool_);
  }
  if (pipeline_) {
    gst_element_set_state(pipeline_, GST_STATE_NULL);
    gst_object_unref(appsrc_);
    gst_object_unref(pipeline_);
  }
}

bool PeerIpcSink::start(const std::string& socket, const GstVideoInfo& info, unsigned slots,
                        int device, std::string* error) {
  socket_ = socket;
  GstCaps* caps = gst_video_info_to_caps(&info);
  gst_caps_set_features(caps, 0, gst_caps_features_new("memory:CUDAMemory", nullptr));
  gchar* caps_text = gst_caps_to_string(caps);
  const std::string launch = std::string(
                                 "appsrc name=in format=time block=true max-buffers=2 "
                                 "caps=\"") +
                             caps_text + "\" ! cudaipcsink name=sink sync=false async=false " +
                             "enable-last-sample=false cuda-device-id=" + std::to_string(device) +
                             " address=" + socket;
  g_free(caps_text);
  GError* err = nullptr;
  pipeline_ = cipc_test::parse_or_null(launch, &err);
  if (!pipeline_) {
    *error = std::string("appsrc ! cudaipcsink: ") + (err ? err->message : "?") +
             " (cudaipcsink came with GStreamer 1.24)";
    g_clear_error(&err);
    gst_caps_unref(caps);
    return false;
  }
  appsrc_ = gst_bin_get_by_name(GST_BIN(pipeline_), "in");
  if (gst_element_set_state(pipeline_, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    *error = "cudaipcsink did not start" + bus_error(pipeline_);
    gst_caps_unref(caps);
    return false;
  }
  GstQuery* query = gst_query_new_allocation(caps, TRUE);
  GstPad* pad = gst_element_get_static_pad(appsrc_, "src");
  guint size = 0;
  if (gst_pad_peer_query(pad, query) && gst_query_get_n_allocation_pools(query) > 0)
    gst_query_parse_nth_allocation_pool(query, 0, &pool_, &size, nullptr, nullptr);
  gst_object_unref(pad);
  gst_query_unref(query);
  bool ok = pool_ != nullptr;
  if (ok) {
    GstStructure* config = gst_buffer_pool_get_config(pool_);
    gst_buffer_pool_config_set_params(config, caps, size ? size : guint(info.size), slots, slots);
    ok = gst_buffer_pool_set_config(pool_, config) && gst_buffer_pool_set_active(pool_, TRUE);
  }
  gst_caps_unref(caps);
  if (!ok) *error = "cudaipcsink proposed no CUDA pool that could be activated";
  return ok;
}

GstBuffer* PeerIpcSink::acquire() {
  GstBuffer* buffer = nullptr;
  return gst_buffer_pool_acquire_buffer(pool_, &buffer, nullptr) == GST_FLOW_OK ? buffer : nullptr;
}

bool PeerIpcSink::push(GstBuffer* buffer, std::string* error) {
  if (gst_app_src_push_buffer(GST_APP_SRC(appsrc_), buffer) == GST_FLOW_OK) return true;
  *error = "appsrc ! cudaipcsink: push failed" + bus_error(pipeline_);
  return false;
}

void PeerIpcSink::finish() {
  cipc_test::end_appsrc_stream(pipeline_, appsrc_);
}

}  // namespace cipc_bench
