// SPDX-License-Identifier: LGPL-2.1-or-later
/**
 * SECTION:element-cudasink-ipc
 * @title: cudasink-ipc
 *
 * Serves video frames to other processes over a Unix socket without copying them. The sink
 * offers upstream a pool of persistent shareable slots; upstream writes frames straight into
 * them, and each frame crosses to every attached cudasrc-ipc as a reference to its slot (the
 * slot's memory is shared once per consumer as a file descriptor). A slot returns to the pool
 * when every consumer has released it.
 *
 * Buffers that are not in the pool are copied into a slot (copy-policy=copy-if-needed, counted
 * in the stats property) or refused (copy-policy=require-zero-copy).
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 videotestsrc is-live=true ! video/x-raw,width=1920,height=1080 ! \
 *     cudasink-ipc socket-path=/tmp/cam0.sock memory=host
 * gst-launch-1.0 cudasrc-ipc socket-path=/tmp/cam0.sock ! videoconvert ! autovideosink
 * ]|
 *
 * Since: 0.1
 */
#include "gstcudasinkipc.h"

#include <gst/video/video.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#ifdef CIPC_HAVE_CUDA
#include "cudaslot.h"
#endif
#include "enums.h"
#include "framing.h"
#include "producer.h"
#include "slotmemory.h"
#include "slotpool.h"

GST_DEBUG_CATEGORY_STATIC(gst_cuda_sink_ipc_debug);
#define GST_CAT_DEFAULT gst_cuda_sink_ipc_debug

enum {
  PROP_0,
  PROP_SOCKET_PATH,
  PROP_SOCKET_MODE,
  PROP_ALLOW_OTHER_USERS,
  PROP_MEMORY,
  PROP_MAX_IN_FLIGHT,
  PROP_RELEASE_TIMEOUT,
  PROP_WAIT_FOR_CONSUMER,
  PROP_COPY_POLICY,
  PROP_POOL_SIZE,
  PROP_CUDA_DEVICE_ID,
  PROP_SYNC_MODE,
  PROP_NUM_CONSUMERS,
  PROP_STATS,
};

#define DEFAULT_SOCKET_PATH "/tmp/cudaipc.sock"
#define DEFAULT_SOCKET_MODE 0600
#define DEFAULT_ALLOW_OTHER_USERS FALSE
#ifdef CIPC_HAVE_CUDA
#define DEFAULT_MEMORY GST_CIPC_MEMORY_CUDA
#else
#define DEFAULT_MEMORY GST_CIPC_MEMORY_HOST
#endif
#define DEFAULT_CUDA_DEVICE_ID -1
#define DEFAULT_SYNC_MODE GST_CIPC_SYNC_GPU_EVENTS
#define DEFAULT_MAX_IN_FLIGHT 4
#define DEFAULT_RELEASE_TIMEOUT 2000
#define DEFAULT_WAIT_FOR_CONSUMER FALSE
#define DEFAULT_COPY_POLICY GST_CIPC_COPY_IF_NEEDED
#define DEFAULT_POOL_SIZE 6

namespace {

struct Settings {
  std::string socket_path = DEFAULT_SOCKET_PATH;
  guint socket_mode = DEFAULT_SOCKET_MODE;
  gboolean allow_other_users = DEFAULT_ALLOW_OTHER_USERS;
  GstCipcMemory memory = DEFAULT_MEMORY;
  guint max_in_flight = DEFAULT_MAX_IN_FLIGHT;
  guint release_timeout = DEFAULT_RELEASE_TIMEOUT;
  gboolean wait_for_consumer = DEFAULT_WAIT_FOR_CONSUMER;
  GstCipcCopyPolicy copy_policy = DEFAULT_COPY_POLICY;
  guint pool_size = DEFAULT_POOL_SIZE;
  gint cuda_device_id = DEFAULT_CUDA_DEVICE_ID;
  GstCipcSyncMode sync_mode = DEFAULT_SYNC_MODE;
};

// Keeps a published buffer (and so its slot) out of the pool while consumers hold it.
class BufferHold final : public cipc::FrameHold {
 public:
  explicit BufferHold(GstBuffer* buffer) : buffer_(buffer) {}
  ~BufferHold() override { gst_buffer_unref(buffer_); }
  // The pool frees a TAG_MEMORY buffer instead of recycling it: a retired slot is never
  // written again while a stuck consumer may still read it.
  void retire() override { GST_BUFFER_FLAG_SET(buffer_, GST_BUFFER_FLAG_TAG_MEMORY); }

 private:
  GstBuffer* buffer_;
};

class SinkObserver final : public cipc::ProducerObserver {
 public:
  explicit SinkObserver(GstElement* element) : element_(element) {}
  void on_consumer_attached(uint64_t id, pid_t pid) override {
    GST_INFO_OBJECT(element_, "consumer %" G_GUINT64_FORMAT " (pid %d) attached", id, (int)pid);
  }
  void on_consumer_detached(uint64_t id, const std::string& reason, bool problem) override {
    if (problem) {
      GST_ELEMENT_WARNING(element_, RESOURCE, READ,
                          ("A consumer was disconnected: %s.", reason.c_str()), (nullptr));
    } else {
      GST_INFO_OBJECT(element_, "consumer %" G_GUINT64_FORMAT " detached: %s", id, reason.c_str());
    }
  }

 private:
  GstElement* element_;
};

// Streaming state; created in start(), gone after stop().
struct State {
  std::shared_ptr<cipc::MemoryBackend> backend;
#ifdef CIPC_HAVE_CUDA
  std::shared_ptr<cipc_gst::CudaMemoryBackend> cuda;  // memory=cuda
  cipc_cuda::Stream stream;                           // for uploads of foreign buffers
#endif
  std::unique_ptr<SinkObserver> observer;
  std::unique_ptr<cipc::Producer> producer;
  GstBufferPool* pool = nullptr;  // the current generation's pool
  GstCaps* pool_caps = nullptr;
  GstVideoInfo info;
  uint64_t generation = 0;
  // The first generation with the current caps (roll-overs keep the caps).
  uint64_t caps_generation = 0;
  // Upstream was told (RECONFIGURE) to leave a pool this generation replaced.
  bool reconfigure_sent = false;
  cipc_gst::ClockOffset clock_offset;
  bool warned_copy = false;
  bool cuda_memory = false;  // memory=cuda
};

}  // namespace

struct _GstCudaSinkIpc {
  GstBaseSink parent;
  Settings* settings;  // under the object lock
  State* state;        // streaming thread, start/stop; `producer` also under producer_lock
  std::mutex* producer_lock;
  std::atomic<guint64> frames_rendered;
  std::atomic<guint64> copies;
  std::atomic<guint64> pool_generation;  // mirrors state->generation for the stats property
  std::atomic<guint64> pool_rollovers;
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE(
    "sink", GST_PAD_SINK, GST_PAD_ALWAYS,
    GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE_WITH_FEATURES(GST_CAPS_FEATURE_MEMORY_CUDA_IPC,
                                                      GST_VIDEO_FORMATS_ALL) ";"
                        GST_VIDEO_CAPS_MAKE(GST_VIDEO_FORMATS_ALL)));

G_DEFINE_TYPE(GstCudaSinkIpc, gst_cuda_sink_ipc, GST_TYPE_BASE_SINK)
GST_ELEMENT_REGISTER_DEFINE(cudasink_ipc, "cudasink-ipc", GST_RANK_NONE, GST_TYPE_CUDA_SINK_IPC)

static Settings snapshot_settings(GstCudaSinkIpc* self) {
  GST_OBJECT_LOCK(self);
  Settings s = *self->settings;
  GST_OBJECT_UNLOCK(self);
  return s;
}

static GstStructure* make_stats(GstCudaSinkIpc* self) {
  cipc::ProducerStats p;
  {
    std::lock_guard<std::mutex> lock(*self->producer_lock);
    if (self->state->producer) p = self->state->producer->stats();
  }
  return gst_structure_new(
      "cudasink-ipc-stats", "frames-rendered", G_TYPE_UINT64, self->frames_rendered.load(),
      "frames-sent", G_TYPE_UINT64, p.frames_sent, "frames-dropped", G_TYPE_UINT64,
      p.frames_dropped, "copies", G_TYPE_UINT64, self->copies.load(), "consumers", G_TYPE_UINT64,
      p.consumers, "consumers-total", G_TYPE_UINT64, p.consumers_total, "consumers-timed-out",
      G_TYPE_UINT64, p.consumers_timed_out, "consumers-rejected", G_TYPE_UINT64,
      p.consumers_rejected, "releases", G_TYPE_UINT64, p.releases, "claims-outstanding",
      G_TYPE_UINT64, p.claims_outstanding, "slots-exported", G_TYPE_UINT64, p.slots_exported,
      "pool-generation", G_TYPE_UINT64, self->pool_generation.load(), "pool-rollovers",
      G_TYPE_UINT64, self->pool_rollovers.load(), nullptr);
}

static void gst_cuda_sink_ipc_set_property(GObject* object, guint prop_id, const GValue* value,
                                           GParamSpec* pspec) {
  auto* self = GST_CUDA_SINK_IPC(object);
  GST_OBJECT_LOCK(self);
  Settings& s = *self->settings;
  switch (prop_id) {
    case PROP_SOCKET_PATH: {
      const gchar* path = g_value_get_string(value);
      s.socket_path = path ? path : DEFAULT_SOCKET_PATH;
      break;
    }
    case PROP_SOCKET_MODE: s.socket_mode = g_value_get_uint(value); break;
    case PROP_ALLOW_OTHER_USERS: s.allow_other_users = g_value_get_boolean(value); break;
    case PROP_MEMORY: s.memory = static_cast<GstCipcMemory>(g_value_get_enum(value)); break;
    case PROP_MAX_IN_FLIGHT: s.max_in_flight = g_value_get_uint(value); break;
    case PROP_RELEASE_TIMEOUT: s.release_timeout = g_value_get_uint(value); break;
    case PROP_WAIT_FOR_CONSUMER: s.wait_for_consumer = g_value_get_boolean(value); break;
    case PROP_COPY_POLICY:
      s.copy_policy = static_cast<GstCipcCopyPolicy>(g_value_get_enum(value));
      break;
    case PROP_POOL_SIZE: s.pool_size = g_value_get_uint(value); break;
    case PROP_CUDA_DEVICE_ID: s.cuda_device_id = g_value_get_int(value); break;
    case PROP_SYNC_MODE: s.sync_mode = static_cast<GstCipcSyncMode>(g_value_get_enum(value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK(self);
}

static void gst_cuda_sink_ipc_get_property(GObject* object, guint prop_id, GValue* value,
                                           GParamSpec* pspec) {
  auto* self = GST_CUDA_SINK_IPC(object);
  if (prop_id == PROP_STATS) {
    g_value_take_boxed(value, make_stats(self));
    return;
  }
  if (prop_id == PROP_NUM_CONSUMERS) {
    std::lock_guard<std::mutex> lock(*self->producer_lock);
    g_value_set_uint(value, self->state->producer ? self->state->producer->consumer_count() : 0);
    return;
  }
  GST_OBJECT_LOCK(self);
  const Settings& s = *self->settings;
  switch (prop_id) {
    case PROP_SOCKET_PATH: g_value_set_string(value, s.socket_path.c_str()); break;
    case PROP_SOCKET_MODE: g_value_set_uint(value, s.socket_mode); break;
    case PROP_ALLOW_OTHER_USERS: g_value_set_boolean(value, s.allow_other_users); break;
    case PROP_MEMORY: g_value_set_enum(value, s.memory); break;
    case PROP_MAX_IN_FLIGHT: g_value_set_uint(value, s.max_in_flight); break;
    case PROP_RELEASE_TIMEOUT: g_value_set_uint(value, s.release_timeout); break;
    case PROP_WAIT_FOR_CONSUMER: g_value_set_boolean(value, s.wait_for_consumer); break;
    case PROP_COPY_POLICY: g_value_set_enum(value, s.copy_policy); break;
    case PROP_POOL_SIZE: g_value_set_uint(value, s.pool_size); break;
    case PROP_CUDA_DEVICE_ID: g_value_set_int(value, s.cuda_device_id); break;
    case PROP_SYNC_MODE: g_value_set_enum(value, s.sync_mode); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK(self);
}

static gboolean gst_cuda_sink_ipc_start(GstBaseSink* sink) {
  auto* self = GST_CUDA_SINK_IPC(sink);
  const Settings s = snapshot_settings(self);
  State& st = *self->state;
  cipc::ProducerConfig config;
  if (s.memory == GST_CIPC_MEMORY_CUDA) {
#ifdef CIPC_HAVE_CUDA
    cipc_cuda::DeviceInfo info;
    cipc_cuda::Status status = cipc_gst::open_device(s.cuda_device_id, &info);
    if (!status) {
      GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND,
                        ("No usable CUDA device for memory=cuda: %s.", status.message().c_str()),
                        ("set memory=host to share host memory instead"));
      return FALSE;
    }
    GstCipcSyncMode sync = s.sync_mode;
    if (sync == GST_CIPC_SYNC_GPU_EVENTS && !info.ipc_events_supported) {
      GST_ELEMENT_WARNING(self, RESOURCE, SETTINGS,
                          ("CUDA device %d cannot share events between processes; falling back to "
                           "sync-mode=cpu.",
                           info.ordinal),
                          (nullptr));
      sync = GST_CIPC_SYNC_CPU;
    }
    st.cuda = std::make_shared<cipc_gst::CudaMemoryBackend>(
        info.ordinal,
        sync == GST_CIPC_SYNC_CPU ? cipc_gst::SyncMode::kCpu : cipc_gst::SyncMode::kGpuEvents);
    status = cipc_cuda::Stream::create(info.ordinal, &st.stream);
    if (!status) {
      GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("Could not create a CUDA stream."),
                        ("%s", status.message().c_str()));
      st.cuda.reset();
      return FALSE;
    }
    st.backend = st.cuda;
    config.sync_mode = sync == GST_CIPC_SYNC_CPU ? cipc::SyncMode::kCpu : cipc::SyncMode::kGpuEvents;
    std::copy(info.uuid.begin(), info.uuid.end(), config.gpu_uuid.begin());
    GST_INFO_OBJECT(self, "CUDA device %d (%s), sync-mode %s", info.ordinal, info.name.c_str(),
                    sync == GST_CIPC_SYNC_CPU ? "cpu" : "gpu-events");
#else
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                      ("memory=cuda is not available: this cudaipc plugin was built without the "
                       "CUDA toolkit; use memory=host."),
                      (nullptr));
    return FALSE;
#endif
  } else {
    st.backend = std::make_shared<cipc::HostMemoryBackend>();
  }
  st.observer = std::make_unique<SinkObserver>(GST_ELEMENT(self));
  config.socket_path = s.socket_path;
  config.socket_mode = s.socket_mode;
  config.allow_other_users = s.allow_other_users;
  config.max_in_flight = s.max_in_flight;
  config.release_timeout_ms = s.release_timeout;
  config.memory_kind = st.backend->kind();
  auto producer = cipc::Producer::start(config, st.observer.get());
  if (!producer) {
    const cipc::Error& e = producer.error();
    if (e.code == cipc::ErrorCode::kAddressInUse) {
      GST_ELEMENT_ERROR(self, RESOURCE, BUSY,
                        ("Another producer is already serving '%s'.", s.socket_path.c_str()),
                        ("%s", e.message.c_str()));
    } else {
      GST_ELEMENT_ERROR(self, RESOURCE, OPEN_READ_WRITE,
                        ("Could not serve frames on socket '%s'.", s.socket_path.c_str()),
                        ("%s", e.message.c_str()));
    }
    st.observer.reset();
    st.backend.reset();
#ifdef CIPC_HAVE_CUDA
    st.cuda.reset();
    st.stream = cipc_cuda::Stream();
#endif
    return FALSE;
  }
  {
    std::lock_guard<std::mutex> lock(*self->producer_lock);
    st.producer = std::move(producer.value());
  }
  self->frames_rendered = 0;
  self->copies = 0;
  self->pool_generation = 0;
  self->pool_rollovers = 0;
  st.warned_copy = false;
  st.cuda_memory = s.memory == GST_CIPC_MEMORY_CUDA;
  st.generation = 0;
  st.caps_generation = 0;
  GST_INFO_OBJECT(self, "serving %s memory on %s (instance %016" G_GINT64_MODIFIER "x)",
                  cipc::to_string(config.memory_kind), s.socket_path.c_str(),
                  st.producer->instance_id());
  return TRUE;
}

// `deactivate` = false leaves the pool to whoever else still uses it (upstream): it is freed when
// the last of them lets go.
static void drop_pool(State& st, bool deactivate = true) {
  if (st.pool) {
    if (deactivate) gst_buffer_pool_set_active(st.pool, FALSE);
    gst_object_unref(st.pool);
    st.pool = nullptr;
  }
  gst_clear_caps(&st.pool_caps);
}

static gboolean gst_cuda_sink_ipc_stop(GstBaseSink* sink) {
  auto* self = GST_CUDA_SINK_IPC(sink);
  State& st = *self->state;
  std::unique_ptr<cipc::Producer> producer;
  {
    std::lock_guard<std::mutex> lock(*self->producer_lock);
    producer = std::move(st.producer);
  }
  producer.reset();  // says BYE, returns every held buffer, removes the socket file
  drop_pool(st);
  st.observer.reset();
  st.backend.reset();
#ifdef CIPC_HAVE_CUDA
  st.cuda.reset();
  st.stream = cipc_cuda::Stream();
#endif
  st.clock_offset.reset();
  return TRUE;
}

// memory=host accepts system memory only; memory=cuda both (system memory is uploaded).
static GstCaps* gst_cuda_sink_ipc_get_caps(GstBaseSink* sink, GstCaps* filter) {
  auto* self = GST_CUDA_SINK_IPC(sink);
  GstCaps* caps = gst_pad_get_pad_template_caps(GST_BASE_SINK_PAD(sink));
  if (snapshot_settings(self).memory != GST_CIPC_MEMORY_CUDA) {
    GstCaps* system = gst_caps_new_empty();
    for (guint i = 0; i < gst_caps_get_size(caps); ++i) {
      if (gst_cipc_caps_have_cuda_memory(caps, i)) continue;
      gst_caps_append_structure(system, gst_structure_copy(gst_caps_get_structure(caps, i)));
    }
    gst_caps_unref(caps);
    caps = system;
  }
  if (filter) {
    GstCaps* tmp = gst_caps_intersect_full(filter, caps, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref(caps);
    caps = tmp;
  }
  return caps;
}

// Makes a new pool for `caps` the current generation, telling consumers about it. The previous
// pool is deactivated when `deactivate_old`; either way its buffers that consumers still hold
// stay valid until released.
static gboolean new_generation(GstCudaSinkIpc* self, GstCaps* caps, const GstVideoInfo& info,
                               bool deactivate_old) {
  State& st = *self->state;
  const Settings s = snapshot_settings(self);
  drop_pool(st, deactivate_old);
  GstBufferPool* pool = gst_cipc_slot_pool_new(st.backend, ++st.generation);
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, GST_VIDEO_INFO_SIZE(&info), s.pool_size, 0);
  gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
  if (!gst_buffer_pool_set_config(pool, config)) {
    gst_object_unref(pool);
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Could not configure the shareable buffer pool."),
                      ("caps %" GST_PTR_FORMAT, caps));
    return FALSE;
  }
  st.pool = pool;
  st.pool_caps = gst_caps_ref(caps);
  st.info = info;
  st.reconfigure_sent = false;
  if (deactivate_old) st.caps_generation = st.generation;
  self->pool_generation = st.generation;
  // Consumers get the format without the memory feature: how they receive it is theirs to say.
  GstCaps* plain = gst_caps_copy(caps);
  gst_caps_set_features(plain, 0, nullptr);
  gchar* text = gst_caps_to_string(plain);
  gst_caps_unref(plain);
  st.producer->set_caps(st.generation, text, GST_VIDEO_INFO_SIZE(&info));
  GST_DEBUG_OBJECT(self, "generation %" G_GUINT64_FORMAT ": %s", st.generation, text);
  g_free(text);
  return TRUE;
}

// Makes the pool for `caps` the current generation, telling consumers about the new format.
static gboolean ensure_pool(GstCudaSinkIpc* self, GstCaps* caps) {
  State& st = *self->state;
  if (st.pool && st.pool_caps && gst_caps_is_equal(caps, st.pool_caps)) return TRUE;
  GstVideoInfo info;
  if (!gst_video_info_from_caps(&info, caps)) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("Not a raw video format: %" GST_PTR_FORMAT, caps),
                      (nullptr));
    return FALSE;
  }
  return new_generation(self, caps, info, true);
}

// Every slot retired under a stuck consumer is replaced by one with a new index, and indices are
// never reused within a generation (consumers cache imports by index). Before they run out, the
// same caps start a new generation: consumers drop the old generation's imports (frames they
// still hold keep theirs). The old pool is not deactivated, since upstream may still be writing
// into it; render() copies such frames and asks upstream to renegotiate.
static gboolean roll_over(GstCudaSinkIpc* self) {
  State& st = *self->state;
  GST_INFO_OBJECT(self, "generation %" G_GUINT64_FORMAT " used %u slot indices: starting a new one",
                  st.generation, gst_cipc_slot_pool_slots_allocated(GST_CIPC_SLOT_POOL(st.pool)));
  GstCaps* caps = gst_caps_ref(st.pool_caps);
  const GstVideoInfo info = st.info;
  const gboolean ok = new_generation(self, caps, info, false);
  gst_caps_unref(caps);
  if (ok) ++self->pool_rollovers;
  return ok;
}

static gboolean gst_cuda_sink_ipc_set_caps(GstBaseSink* sink, GstCaps* caps) {
  auto* self = GST_CUDA_SINK_IPC(sink);
  if (!self->state->producer) return FALSE;
  return ensure_pool(self, caps);
}

static gboolean gst_cuda_sink_ipc_propose_allocation(GstBaseSink* sink, GstQuery* query) {
  auto* self = GST_CUDA_SINK_IPC(sink);
  GstCaps* caps = nullptr;
  gboolean need_pool = FALSE;
  gst_query_parse_allocation(query, &caps, &need_pool);
  if (caps == nullptr || !self->state->producer || !ensure_pool(self, caps)) return FALSE;
  const Settings s = snapshot_settings(self);
  gst_query_add_allocation_meta(query, GST_VIDEO_META_API_TYPE, nullptr);
  // CUDA slots are only offered to upstream that writes CUDA memory: a CPU writer would go
  // through a staging copy on every map, which is slower than the counted upload in render().
  if (self->state->cuda_memory && !gst_cipc_caps_have_cuda_memory(caps)) return TRUE;
  // Offered even when need_pool is FALSE: writing into this pool is what avoids a copy.
  gst_query_add_allocation_pool(query, self->state->pool, GST_VIDEO_INFO_SIZE(&self->state->info),
                                s.pool_size, 0);
  return TRUE;
}

// A buffer in a slot of one of our own pools. Another element's slots (rg10tobgra's own pool
// when downstream offered none) have generation numbers of their own: they are foreign memory.
static const GstCipcSlotBinding* producer_slot_of(State& st, GstBuffer* buffer) {
  if (gst_buffer_n_memory(buffer) != 1) return nullptr;
  const GstCipcSlotBinding* b = gst_cipc_slot_memory_binding(gst_buffer_peek_memory(buffer, 0));
  return b && b->producer_slot && b->owner == st.backend.get() ? b : nullptr;
}

// A buffer already in one of the current generation's slots: sendable as is.
static const GstCipcSlotBinding* current_slot(State& st, GstBuffer* buffer) {
  const GstCipcSlotBinding* b = producer_slot_of(st, buffer);
  if (b == nullptr || b->generation != st.generation || b->index >= cipc::kMaxSlots) return nullptr;
  return b;
}

// A buffer in a slot of a generation that a roll-over replaced (same caps), or past the index
// limit: upstream still writes into a pool of ours that is no longer current.
static bool stale_slot(State& st, GstBuffer* buffer) {
  const GstCipcSlotBinding* b = producer_slot_of(st, buffer);
  return b && b->generation >= st.caps_generation && b->generation <= st.generation &&
         !current_slot(st, buffer);
}

#ifdef CIPC_HAVE_CUDA
// memory=cuda: one upload (system memory input) or one device copy (CUDA memory from elsewhere)
// straight into the slot, on the sink's stream. Synchronised before returning, since upstream
// may reuse its buffer as soon as render() returns.
static bool upload_into_slot(GstCudaSinkIpc* self, GstBuffer* buffer, GstBuffer* slot) {
  State& st = *self->state;
  cipc_gst::CudaSlotMemory* dst = cipc_gst::cuda_slot_of(gst_buffer_peek_memory(slot, 0));
  const GstVideoMeta* dst_meta = gst_buffer_get_video_meta(slot);
  GstMemory* in_mem = gst_buffer_n_memory(buffer) == 1 ? gst_buffer_peek_memory(buffer, 0) : nullptr;
  const GstCudaIpcMemoryInfo* in_cuda = gst_cuda_ipc_memory_get_info(in_mem);
  const GstVideoMeta* in_meta = gst_buffer_get_video_meta(buffer);
  const cipc_cuda::StreamHandle stream = st.stream.handle();
  cipc_cuda::Status status = dst->begin_write(stream);
  GstVideoFrame in;
  bool mapped = false;
  if (status && in_cuda) {
    if (!in_cuda->wait_ready(in_mem, stream)) status = cipc_cuda::Status::failure("waiting for the input frame");
  } else if (status) {
    mapped = gst_video_frame_map(&in, &st.info, buffer, GST_MAP_READ);
    if (!mapped) status = cipc_cuda::Status::failure("could not map the incoming frame");
  }
  for (guint p = 0; status && p < GST_VIDEO_INFO_N_PLANES(&st.info); ++p) {
    const void* src;
    gint src_stride;
    if (in_cuda) {
      src = reinterpret_cast<const void*>(in_cuda->device_ptr + in_mem->offset +
                                          (in_meta ? in_meta->offset[p] : GST_VIDEO_INFO_PLANE_OFFSET(&st.info, p)));
      src_stride = in_meta ? in_meta->stride[p] : GST_VIDEO_INFO_PLANE_STRIDE(&st.info, p);
    } else {
      src = GST_VIDEO_FRAME_PLANE_DATA(&in, p);
      src_stride = GST_VIDEO_FRAME_PLANE_STRIDE(&in, p);
    }
    void* dst_plane = reinterpret_cast<void*>(dst->ptr() + dst_meta->offset[p]);
    status = cipc_cuda::copy_2d_async(dst_plane, dst_meta->stride[p], src, src_stride,
                                      MIN(src_stride, dst_meta->stride[p]),
                                      cipc_gst::plane_rows(st.info, p), stream);
  }
  if (status) status = dst->end_write(stream);
  if (status) status = st.stream.synchronize();
  if (mapped) gst_video_frame_unmap(&in);
  if (!status) {
    GST_ELEMENT_ERROR(self, RESOURCE, WRITE, ("Could not copy a frame into CUDA memory."),
                      ("%s", status.message().c_str()));
    return false;
  }
  return true;
}
#endif

// memory=host: a CPU copy of the frame into the slot.
static bool cpu_copy_into_slot(GstCudaSinkIpc* self, GstBuffer* buffer, GstBuffer* slot) {
  State& st = *self->state;
  GstVideoFrame in, out;
  if (!gst_video_frame_map(&in, &st.info, buffer, GST_MAP_READ)) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Could not read an incoming frame."), (nullptr));
    return false;
  }
  if (!gst_video_frame_map(&out, &st.info, slot, GST_MAP_WRITE)) {
    gst_video_frame_unmap(&in);
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Could not map a shareable slot."), (nullptr));
    return false;
  }
  const gboolean copied = gst_video_frame_copy(&out, &in);
  gst_video_frame_unmap(&out);
  gst_video_frame_unmap(&in);
  if (!copied)
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Could not copy a frame into shareable memory."),
                      (nullptr));
  return copied;
}

// A buffer that is not in the current pool: copied into a slot (and counted).
static GstBuffer* copy_into_slot(GstCudaSinkIpc* self, GstBuffer* buffer) {
  State& st = *self->state;
  if (!gst_buffer_pool_is_active(st.pool) && !gst_buffer_pool_set_active(st.pool, TRUE)) {
    GST_ELEMENT_ERROR(self, RESOURCE, NO_SPACE_LEFT, ("Could not allocate shareable memory."),
                      (nullptr));
    return nullptr;
  }
  GstBuffer* slot = nullptr;
  if (gst_buffer_pool_acquire_buffer(st.pool, &slot, nullptr) != GST_FLOW_OK) return nullptr;
#ifdef CIPC_HAVE_CUDA
  const bool copied = st.cuda ? upload_into_slot(self, buffer, slot) : cpu_copy_into_slot(self, buffer, slot);
#else
  const bool copied = cpu_copy_into_slot(self, buffer, slot);
#endif
  if (!copied) {
    gst_buffer_unref(slot);
    return nullptr;
  }
  gst_buffer_copy_into(slot, buffer,
                       static_cast<GstBufferCopyFlags>(GST_BUFFER_COPY_FLAGS |
                                                       GST_BUFFER_COPY_TIMESTAMPS),
                       0, -1);
  ++self->copies;
  return slot;
}

static gchar* upstream_name(GstBaseSink* sink) {
  GstPad* peer = gst_pad_get_peer(GST_BASE_SINK_PAD(sink));
  GstElement* parent = peer ? gst_pad_get_parent_element(peer) : nullptr;
  gchar* name = parent ? gst_element_get_name(parent)
                : peer ? gst_pad_get_name(peer)
                       : g_strdup("(unlinked)");
  if (parent) gst_object_unref(parent);
  if (peer) gst_object_unref(peer);
  return name;
}

static GstFlowReturn wait_for_consumer(GstCudaSinkIpc* self) {
  cipc::Producer& producer = *self->state->producer;
  while (producer.consumer_count() == 0) {
    if (producer.wait_for_consumer(-1)) break;
    // Interrupted by unlock(): let basesink handle the state change, then wait again.
    const GstFlowReturn ret = gst_base_sink_wait_preroll(GST_BASE_SINK(self));
    if (ret != GST_FLOW_OK) return ret;
  }
  return GST_FLOW_OK;
}

static uint32_t wire_flags(GstBuffer* buffer) {
  uint32_t flags = 0;
  if (GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DISCONT)) flags |= cipc::Frame::kDiscont;
  if (GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT)) flags |= cipc::Frame::kDeltaUnit;
  if (GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_GAP)) flags |= cipc::Frame::kGap;
  return flags;
}

static GstFlowReturn gst_cuda_sink_ipc_render(GstBaseSink* sink, GstBuffer* buffer) {
  auto* self = GST_CUDA_SINK_IPC(sink);
  State& st = *self->state;
  if (!st.producer || !st.pool) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("Received a frame before its format."), (nullptr));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  // The two settings that may change while playing, without copying the others per frame.
  GST_OBJECT_LOCK(self);
  const bool wait = self->settings->wait_for_consumer;
  const GstCipcCopyPolicy copy_policy = self->settings->copy_policy;
  GST_OBJECT_UNLOCK(self);
  if (wait) {
    const GstFlowReturn ret = wait_for_consumer(self);
    if (ret != GST_FLOW_OK) return ret;
  }

  if (gst_cipc_slot_pool_needs_rollover(GST_CIPC_SLOT_POOL(st.pool)) && !roll_over(self))
    return GST_FLOW_ERROR;

  GstBuffer* slot_buffer = nullptr;
  if (current_slot(st, buffer)) {
    slot_buffer = gst_buffer_ref(buffer);
  } else if (stale_slot(st, buffer)) {
    // Our own doing (roll-over), so copied whatever the copy policy, and without the warning;
    // upstream is asked once to renegotiate, which gets it the current pool.
    if (!st.reconfigure_sent) {
      st.reconfigure_sent = true;
      GST_DEBUG_OBJECT(self, "upstream writes into a replaced pool: asking it to renegotiate");
      gst_pad_push_event(GST_BASE_SINK_PAD(sink), gst_event_new_reconfigure());
    }
    slot_buffer = copy_into_slot(self, buffer);
    if (slot_buffer == nullptr) return GST_FLOW_ERROR;
  } else if (copy_policy == GST_CIPC_REQUIRE_ZERO_COPY) {
    gchar* name = upstream_name(sink);
    GST_ELEMENT_ERROR(self, STREAM, FAILED,
                      ("Upstream element '%s' did not write into cudasink-ipc's shareable buffer "
                       "pool, and copy-policy=require-zero-copy forbids copying.",
                       name),
                      ("Use an upstream element that honours the allocation query, or set "
                       "copy-policy=copy-if-needed."));
    g_free(name);
    return GST_FLOW_ERROR;
  } else {
    if (!st.warned_copy) {
      st.warned_copy = true;
      gchar* name = upstream_name(sink);
      GST_ELEMENT_WARNING(self, STREAM, FORMAT,
                          ("Upstream element '%s' does not write into the shareable pool; every "
                           "frame is copied once (see the 'stats' property).",
                           name),
                          (nullptr));
      g_free(name);
    }
    slot_buffer = copy_into_slot(self, buffer);
    if (slot_buffer == nullptr) return GST_FLOW_ERROR;
  }
  const GstCipcSlotBinding* binding = current_slot(st, slot_buffer);
  if (binding == nullptr) {  // not expected: copies land in the current pool, below the limit
    gst_buffer_unref(slot_buffer);
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Could not place a frame in a shareable slot."),
                      (nullptr));
    return GST_FLOW_ERROR;
  }

  cipc::Frame frame;
  frame.flags = wire_flags(buffer);
  GstClock* clock = gst_element_get_clock(GST_ELEMENT(self));
  const GstClockTime base_time = gst_element_get_base_time(GST_ELEMENT(self));
  const gint64 offset = st.clock_offset.get(clock);
  if (clock) gst_object_unref(clock);
  const GstSegment* segment = &sink->segment;
  frame.pts = cipc_gst::running_time_to_monotonic(
      gst_segment_to_running_time(segment, GST_FORMAT_TIME, GST_BUFFER_PTS(buffer)), base_time,
      offset);
  frame.dts = cipc_gst::running_time_to_monotonic(
      gst_segment_to_running_time(segment, GST_FORMAT_TIME, GST_BUFFER_DTS(buffer)), base_time,
      offset);
  frame.duration = GST_BUFFER_DURATION_IS_VALID(buffer) ? GST_BUFFER_DURATION(buffer)
                                                        : cipc::kNoTimestamp;
  frame.offset = GST_BUFFER_OFFSET_IS_VALID(buffer) ? GST_BUFFER_OFFSET(buffer) : cipc::kNoTimestamp;
  cipc_gst::describe_planes(slot_buffer, st.info, frame);

  cipc::SlotRef ref;
  ref.generation = binding->generation;
  ref.index = binding->index;
  ref.memory = binding->producer_slot.get();
  auto hold = std::make_shared<BufferHold>(slot_buffer);
  const size_t delivered = st.producer->publish(ref, frame, hold);
  ++self->frames_rendered;
  GST_LOG_OBJECT(self, "slot %u -> %zu consumer(s), pts %" GST_TIME_FORMAT, ref.index, delivered,
                 GST_TIME_ARGS(GST_BUFFER_PTS(buffer)));
  return GST_FLOW_OK;
}

static gboolean gst_cuda_sink_ipc_event(GstBaseSink* sink, GstEvent* event) {
  auto* self = GST_CUDA_SINK_IPC(sink);
  if (GST_EVENT_TYPE(event) == GST_EVENT_EOS && self->state->producer)
    self->state->producer->send_eos();
  return GST_BASE_SINK_CLASS(gst_cuda_sink_ipc_parent_class)->event(sink, event);
}

static gboolean gst_cuda_sink_ipc_unlock(GstBaseSink* sink) {
  auto* self = GST_CUDA_SINK_IPC(sink);
  std::lock_guard<std::mutex> lock(*self->producer_lock);
  if (self->state->producer) self->state->producer->set_flushing(true);
  return TRUE;
}

static gboolean gst_cuda_sink_ipc_unlock_stop(GstBaseSink* sink) {
  auto* self = GST_CUDA_SINK_IPC(sink);
  std::lock_guard<std::mutex> lock(*self->producer_lock);
  if (self->state->producer) self->state->producer->set_flushing(false);
  return TRUE;
}

static void gst_cuda_sink_ipc_finalize(GObject* object) {
  auto* self = GST_CUDA_SINK_IPC(object);
  delete self->state;
  delete self->settings;
  delete self->producer_lock;
  G_OBJECT_CLASS(gst_cuda_sink_ipc_parent_class)->finalize(object);
}

static void gst_cuda_sink_ipc_class_init(GstCudaSinkIpcClass* klass) {
  auto* object_class = G_OBJECT_CLASS(klass);
  auto* element_class = GST_ELEMENT_CLASS(klass);
  auto* sink_class = GST_BASE_SINK_CLASS(klass);
  object_class->set_property = gst_cuda_sink_ipc_set_property;
  object_class->get_property = gst_cuda_sink_ipc_get_property;
  object_class->finalize = gst_cuda_sink_ipc_finalize;

  const auto rw_ready = static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                                                 GST_PARAM_MUTABLE_READY);
  const auto rw_playing = static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                                                   GST_PARAM_MUTABLE_PLAYING);
  const auto ro = static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);

  g_object_class_install_property(
      object_class, PROP_SOCKET_PATH,
      g_param_spec_string("socket-path", "Socket path",
                          "Filesystem path of the Unix socket consumers connect to. A stale "
                          "socket left by a dead producer is replaced; a live one is an error",
                          DEFAULT_SOCKET_PATH, rw_ready));
  g_object_class_install_property(
      object_class, PROP_SOCKET_MODE,
      g_param_spec_uint("socket-mode", "Socket mode",
                        "Permission bits of the socket file (octal 0600 = owner only)", 0, 0777,
                        DEFAULT_SOCKET_MODE, rw_ready));
  g_object_class_install_property(
      object_class, PROP_ALLOW_OTHER_USERS,
      g_param_spec_boolean("allow-other-users", "Allow other users",
                           "Accept consumers running under another user id (checked with "
                           "SO_PEERCRED); by default only the producer's own user may attach",
                           DEFAULT_ALLOW_OTHER_USERS, rw_ready));
  g_object_class_install_property(
      object_class, PROP_MEMORY,
      g_param_spec_enum("memory", "Memory", "Where the shared slots live",
                        gst_cipc_sink_memory_get_type(), DEFAULT_MEMORY, rw_ready));
  g_object_class_install_property(
      object_class, PROP_MAX_IN_FLIGHT,
      g_param_spec_uint("max-in-flight", "Max in flight",
                        "Frames one consumer may hold at once; further frames skip that "
                        "consumer (counted as dropped) until it releases one",
                        1, cipc::kMaxInFlight, DEFAULT_MAX_IN_FLIGHT, rw_ready));
  g_object_class_install_property(
      object_class, PROP_RELEASE_TIMEOUT,
      g_param_spec_uint("release-timeout", "Release timeout",
                        "Milliseconds a consumer may hold a frame before it is disconnected "
                        "and its slots are retired (0 = wait forever)",
                        0, G_MAXUINT, DEFAULT_RELEASE_TIMEOUT, rw_ready));
  g_object_class_install_property(
      object_class, PROP_WAIT_FOR_CONSUMER,
      g_param_spec_boolean("wait-for-consumer", "Wait for consumer",
                           "Hold frames back (blocking upstream) until at least one consumer is "
                           "attached, instead of discarding them",
                           DEFAULT_WAIT_FOR_CONSUMER, rw_playing));
  g_object_class_install_property(
      object_class, PROP_COPY_POLICY,
      g_param_spec_enum("copy-policy", "Copy policy",
                        "What to do with buffers that upstream did not write into the "
                        "shareable pool",
                        gst_cipc_copy_policy_get_type(), DEFAULT_COPY_POLICY, rw_playing));
  g_object_class_install_property(
      object_class, PROP_POOL_SIZE,
      g_param_spec_uint("pool-size", "Pool size",
                        "Slots allocated up front in the shareable pool; more are added (and "
                        "kept) if consumers hold many frames",
                        2, 64, DEFAULT_POOL_SIZE, rw_ready));
  g_object_class_install_property(
      object_class, PROP_CUDA_DEVICE_ID,
      g_param_spec_int("cuda-device-id", "CUDA device id",
                       "CUDA device the slots are allocated on (memory=cuda); -1: device 0", -1,
                       G_MAXINT, DEFAULT_CUDA_DEVICE_ID, rw_ready));
  g_object_class_install_property(
      object_class, PROP_SYNC_MODE,
      g_param_spec_enum("sync-mode", "Sync mode",
                        "How writers and readers of CUDA slots are ordered: interprocess events "
                        "waited on by the GPU, or stream synchronisation on the CPU (automatic "
                        "fallback where the GPU cannot share events)",
                        gst_cipc_sync_mode_get_type(), DEFAULT_SYNC_MODE, rw_ready));
  g_object_class_install_property(
      object_class, PROP_NUM_CONSUMERS,
      g_param_spec_uint("num-consumers", "Number of consumers", "Consumers attached now", 0,
                        G_MAXUINT, 0, ro));
  g_object_class_install_property(
      object_class, PROP_STATS,
      g_param_spec_boxed("stats", "Statistics",
                         "frames-rendered, frames-sent (summed over consumers), frames-dropped, "
                         "copies, consumers, consumers-total, consumers-timed-out, "
                         "consumers-rejected, releases, claims-outstanding, slots-exported, "
                         "pool-generation, pool-rollovers",
                         GST_TYPE_STRUCTURE, ro));

  gst_element_class_set_static_metadata(
      element_class, "CUDA IPC sink", "Sink/Video/Hardware",
      "Shares video frames with other processes without copying them (cudasrc-ipc receives)",
      "gst-cudaipc developers");
  gst_element_class_add_static_pad_template(element_class, &sink_template);

  sink_class->start = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_start);
  sink_class->stop = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_stop);
  sink_class->set_caps = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_set_caps);
  sink_class->get_caps = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_get_caps);
  sink_class->propose_allocation = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_propose_allocation);
  sink_class->render = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_render);
  sink_class->event = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_event);
  sink_class->unlock = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_unlock);
  sink_class->unlock_stop = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_unlock_stop);

  GST_DEBUG_CATEGORY_INIT(gst_cuda_sink_ipc_debug, "cudasink-ipc", 0, "cudasink-ipc");
  gst_type_mark_as_plugin_api(gst_cipc_sink_memory_get_type(), static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(gst_cipc_sync_mode_get_type(), static_cast<GstPluginAPIFlags>(0));
}

static void gst_cuda_sink_ipc_init(GstCudaSinkIpc* self) {
  self->settings = new Settings();
  self->state = new State();
  self->producer_lock = new std::mutex();
  new (&self->frames_rendered) std::atomic<guint64>(0);
  new (&self->copies) std::atomic<guint64>(0);
  new (&self->pool_generation) std::atomic<guint64>(0);
  new (&self->pool_rollovers) std::atomic<guint64>(0);
  gst_base_sink_set_sync(GST_BASE_SINK(self), TRUE);
}
