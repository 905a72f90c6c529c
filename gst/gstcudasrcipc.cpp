// SPDX-License-Identifier: LGPL-2.1-or-later
/**
 * SECTION:element-cudasrc-ipc
 * @title: cudasrc-ipc
 *
 * Receives video frames that a cudasink-ipc in another process shares, without copying them.
 * Each slot of the producer's pool is imported once; every output buffer refers to the
 * producer's memory directly (read-only) and keeps the producer's slot claimed until the last
 * reference to it is dropped downstream.
 *
 * A live source: timestamps are the producer's, carried through CLOCK_MONOTONIC and converted
 * to this pipeline's running time. When the producer goes away the stream ends with EOS, or
 * with reconnect=true the source waits for a new producer at the same path and continues
 * (renegotiating if the format changed).
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 cudasrc-ipc socket-path=/tmp/cam0.sock reconnect=true ! videoconvert ! \
 *     autovideosink
 * ]|
 *
 * Since: 0.1
 */
#include "gstcudasrcipc.h"

#include <gst/video/video.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "consumer.h"
#ifdef CIPC_HAVE_CUDA
#include "cudaslot.h"
#endif
#include "enums.h"
#include "framing.h"
#include "slotmemory.h"

GST_DEBUG_CATEGORY_STATIC(gst_cuda_src_ipc_debug);
#define GST_CAT_DEFAULT gst_cuda_src_ipc_debug

enum {
  PROP_0,
  PROP_SOCKET_PATH,
  PROP_MEMORY,
  PROP_RECONNECT,
  PROP_RECONNECT_INTERVAL,
  PROP_CONNECT_TIMEOUT,
  PROP_MAX_IN_FLIGHT,
  PROP_PROCESSING_DEADLINE,
  PROP_STATS_INTERVAL,
  PROP_CUDA_DEVICE_ID,
  PROP_IO_MODE,
  PROP_STATS,
};

#define DEFAULT_SOCKET_PATH "/tmp/cudaipc.sock"
// Reference timestamp caps of the meta carrying the producer's send time.
#define CIPC_SEND_TIME_CAPS "timestamp/x-cudaipc-send-monotonic"
#define DEFAULT_MEMORY GST_CIPC_MEMORY_AUTO
#define DEFAULT_RECONNECT FALSE
#define DEFAULT_RECONNECT_INTERVAL 100
#define DEFAULT_CONNECT_TIMEOUT 5000
#define DEFAULT_MAX_IN_FLIGHT 4
#define DEFAULT_PROCESSING_DEADLINE (20 * GST_MSECOND)
#define DEFAULT_STATS_INTERVAL 0
#define DEFAULT_CUDA_DEVICE_ID -1
#define DEFAULT_IO_MODE GST_CIPC_IO_IMPORT

namespace {

struct Settings {
  std::string socket_path = DEFAULT_SOCKET_PATH;
  GstCipcMemory memory = DEFAULT_MEMORY;
  gboolean reconnect = DEFAULT_RECONNECT;
  guint reconnect_interval = DEFAULT_RECONNECT_INTERVAL;
  guint connect_timeout = DEFAULT_CONNECT_TIMEOUT;
  guint max_in_flight = DEFAULT_MAX_IN_FLIGHT;
  GstClockTime processing_deadline = DEFAULT_PROCESSING_DEADLINE;
  guint stats_interval = DEFAULT_STATS_INTERVAL;
  gint cuda_device_id = DEFAULT_CUDA_DEVICE_ID;
  GstCipcIoMode io_mode = DEFAULT_IO_MODE;
};

struct Counters {
  std::atomic<guint64> frames{0};
  std::atomic<guint64> frames_skipped{0};  // sequence gaps: frames the producer did not send us
  std::atomic<guint64> slots_imported{0};
  std::atomic<guint64> connects{0};
  std::atomic<guint64> caps_changes{0};
  std::atomic<guint64> latency_last_ns{0};
  std::atomic<guint64> downloads{0};      // device-to-host copies into downstream buffers
  std::atomic<guint64> device_copies{0};  // io-mode=copy
};

// Latency samples for one stats-interval message.
struct Window {
  std::vector<uint64_t> latency_ns;
  uint64_t start_ns = 0;
  uint64_t frames = 0;
};

// How frames leave the element, decided by the negotiated caps and io-mode.
enum class Output {
  kShared,    // the producer's slot itself (host memory, or CUDA memory with io-mode=import)
  kCopy,      // a private device copy (CUDA memory, io-mode=copy)
  kDownload,  // one device-to-host copy into downstream's buffer (CUDA producer, system caps)
};

struct State {
  Settings settings;  // as of start(): every property is fixed from READY on
  cipc::Waker waker;
  cipc_gst::ClockOffset clock_offset;
  Output output = Output::kShared;
  bool producer_cuda = false;  // the current producer shares CUDA memory
  GstVideoInfo out_info;       // what we output (format may be BGRx for the producer's BGRA)
#ifdef CIPC_HAVE_CUDA
  int device = -1;
  cipc_cuda::Stream stream;
  std::shared_ptr<cipc_gst::PrivateCopies> copies;  // io-mode=copy
#endif
  std::unique_ptr<cipc::Consumer> consumer;
  uint64_t instance_id = 0;
  uint64_t last_sequence = 0;
  bool discont = true;
  GstCaps* caps = nullptr;  // the producer's current caps, as negotiated downstream
  GstVideoInfo info;
  uint64_t slots_before = 0;  // slot imports of earlier connections
  Window window;
};

}  // namespace

struct _GstCudaSrcIpc {
  GstPushSrc parent;
  Settings* settings;  // under the object lock
  State* state;        // streaming thread and start/stop
  Counters* counters;
};

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE(
    "src", GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE_WITH_FEATURES(GST_CAPS_FEATURE_MEMORY_CUDA_IPC,
                                                      GST_VIDEO_FORMATS_ALL) ";"
                        GST_VIDEO_CAPS_MAKE(GST_VIDEO_FORMATS_ALL)));

G_DEFINE_TYPE(GstCudaSrcIpc, gst_cuda_src_ipc, GST_TYPE_PUSH_SRC)
GST_ELEMENT_REGISTER_DEFINE(cudasrc_ipc, "cudasrc-ipc", GST_RANK_NONE, GST_TYPE_CUDA_SRC_IPC)

static Settings snapshot_settings(GstCudaSrcIpc* self) {
  GST_OBJECT_LOCK(self);
  Settings s = *self->settings;
  GST_OBJECT_UNLOCK(self);
  return s;
}

static GstStructure* make_stats(GstCudaSrcIpc* self) {
  const Counters& c = *self->counters;
  return gst_structure_new("cudasrc-ipc-stats", "frames-received", G_TYPE_UINT64, c.frames.load(),
                           "frames-skipped", G_TYPE_UINT64, c.frames_skipped.load(),
                           "slots-imported", G_TYPE_UINT64, c.slots_imported.load(), "connects",
                           G_TYPE_UINT64, c.connects.load(), "caps-changes", G_TYPE_UINT64,
                           c.caps_changes.load(), "latency-last-ns", G_TYPE_UINT64,
                           c.latency_last_ns.load(), "downloads", G_TYPE_UINT64,
                           c.downloads.load(), "device-copies", G_TYPE_UINT64,
                           c.device_copies.load(), nullptr);
}

static void gst_cuda_src_ipc_set_property(GObject* object, guint prop_id, const GValue* value,
                                          GParamSpec* pspec) {
  auto* self = GST_CUDA_SRC_IPC(object);
  GST_OBJECT_LOCK(self);
  Settings& s = *self->settings;
  switch (prop_id) {
    case PROP_SOCKET_PATH: {
      const gchar* path = g_value_get_string(value);
      s.socket_path = path ? path : DEFAULT_SOCKET_PATH;
      break;
    }
    case PROP_MEMORY: s.memory = static_cast<GstCipcMemory>(g_value_get_enum(value)); break;
    case PROP_RECONNECT: s.reconnect = g_value_get_boolean(value); break;
    case PROP_RECONNECT_INTERVAL: s.reconnect_interval = g_value_get_uint(value); break;
    case PROP_CONNECT_TIMEOUT: s.connect_timeout = g_value_get_uint(value); break;
    case PROP_MAX_IN_FLIGHT: s.max_in_flight = g_value_get_uint(value); break;
    case PROP_PROCESSING_DEADLINE: s.processing_deadline = g_value_get_uint64(value); break;
    case PROP_STATS_INTERVAL: s.stats_interval = g_value_get_uint(value); break;
    case PROP_CUDA_DEVICE_ID: s.cuda_device_id = g_value_get_int(value); break;
    case PROP_IO_MODE: s.io_mode = static_cast<GstCipcIoMode>(g_value_get_enum(value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK(self);
}

static void gst_cuda_src_ipc_get_property(GObject* object, guint prop_id, GValue* value,
                                          GParamSpec* pspec) {
  auto* self = GST_CUDA_SRC_IPC(object);
  if (prop_id == PROP_STATS) {
    g_value_take_boxed(value, make_stats(self));
    return;
  }
  GST_OBJECT_LOCK(self);
  const Settings& s = *self->settings;
  switch (prop_id) {
    case PROP_SOCKET_PATH: g_value_set_string(value, s.socket_path.c_str()); break;
    case PROP_MEMORY: g_value_set_enum(value, s.memory); break;
    case PROP_RECONNECT: g_value_set_boolean(value, s.reconnect); break;
    case PROP_RECONNECT_INTERVAL: g_value_set_uint(value, s.reconnect_interval); break;
    case PROP_CONNECT_TIMEOUT: g_value_set_uint(value, s.connect_timeout); break;
    case PROP_MAX_IN_FLIGHT: g_value_set_uint(value, s.max_in_flight); break;
    case PROP_PROCESSING_DEADLINE: g_value_set_uint64(value, s.processing_deadline); break;
    case PROP_STATS_INTERVAL: g_value_set_uint(value, s.stats_interval); break;
    case PROP_CUDA_DEVICE_ID: g_value_set_int(value, s.cuda_device_id); break;
    case PROP_IO_MODE: g_value_set_enum(value, s.io_mode); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK(self);
}

static gboolean gst_cuda_src_ipc_start(GstBaseSrc* src) {
  auto* self = GST_CUDA_SRC_IPC(src);
  const Settings s = snapshot_settings(self);
  State& st = *self->state;
#ifndef CIPC_HAVE_CUDA
  if (s.memory == GST_CIPC_MEMORY_CUDA) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                      ("memory=cuda is not available: this cudaipc plugin was built without the "
                       "CUDA toolkit; use memory=auto or memory=host."),
                      (nullptr));
    return FALSE;
  }
#endif
  if (!st.waker.valid()) {
    GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("Could not create an eventfd."), (nullptr));
    return FALSE;
  }
  st.settings = s;
  st.waker.clear();
  st.output = Output::kShared;
  st.producer_cuda = false;
  st.discont = true;
  st.last_sequence = 0;
  st.instance_id = 0;
  st.slots_before = 0;
  st.window = Window();
  Counters& c = *self->counters;
  c.frames = c.frames_skipped = c.slots_imported = c.connects = c.caps_changes = 0;
  c.latency_last_ns = 0;
  c.downloads = c.device_copies = 0;
  return TRUE;
}

static gboolean gst_cuda_src_ipc_stop(GstBaseSrc* src) {
  auto* self = GST_CUDA_SRC_IPC(src);
  State& st = *self->state;
  st.consumer.reset();  // says BYE; frames still downstream stay valid until released
  st.clock_offset.reset();
  GST_OBJECT_LOCK(self);
  gst_clear_caps(&st.caps);
  GST_OBJECT_UNLOCK(self);
#ifdef CIPC_HAVE_CUDA
  st.copies.reset();
  st.stream = cipc_cuda::Stream();
  st.device = -1;
#endif
  return TRUE;
}

static gboolean gst_cuda_src_ipc_unlock(GstBaseSrc* src) {
  GST_CUDA_SRC_IPC(src)->state->waker.wake();
  return TRUE;
}

static gboolean gst_cuda_src_ipc_unlock_stop(GstBaseSrc* src) {
  GST_CUDA_SRC_IPC(src)->state->waker.clear();
  return TRUE;
}

// What we can output for the producer's caps: the producer's memory itself (CUDA: with the
// memory:CUDAIPCMemory feature, preferred), or - for a CUDA producer - system memory through one
// download, offering BGRx for BGRA (and RGBx for RGBA) since the alpha byte is just carried.
static GstCaps* output_caps(State& st, GstCaps* producer_caps) {
  if (!st.producer_cuda) return gst_caps_ref(producer_caps);
  GstCaps* device = gst_caps_copy(producer_caps);
  gst_caps_set_features(device, 0, gst_caps_features_new(GST_CAPS_FEATURE_MEMORY_CUDA_IPC, nullptr));
  GstCaps* system = gst_caps_copy(producer_caps);
  GstStructure* st0 = gst_caps_get_structure(system, 0);
  const gchar* format = gst_structure_get_string(st0, "format");
  const gchar* padded = !format ? nullptr
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

static GstCaps* gst_cuda_src_ipc_get_caps(GstBaseSrc* src, GstCaps* filter) {
  auto* self = GST_CUDA_SRC_IPC(src);
  GstCaps* caps = nullptr;
  GST_OBJECT_LOCK(self);
  if (self->state->caps) caps = output_caps(*self->state, self->state->caps);
  GST_OBJECT_UNLOCK(self);
  if (!caps) caps = gst_pad_get_pad_template_caps(GST_BASE_SRC_PAD(src));
  if (filter) {
    GstCaps* tmp = gst_caps_intersect_full(filter, caps, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref(caps);
    caps = tmp;
  }
  return caps;
}

// Downloads go into downstream's pool. Downstream without a pool (appsink, fakesink with system
// caps) gets a video pool sized for the frame: GstBaseSrc's default would be sized 0.
static gboolean gst_cuda_src_ipc_decide_allocation(GstBaseSrc* src, GstQuery* query) {
  GstCaps* caps = nullptr;
  gst_query_parse_allocation(query, &caps, nullptr);
  GstVideoInfo info;
  if (caps && !gst_cipc_caps_have_cuda_memory(caps) && gst_video_info_from_caps(&info, caps)) {
    GstBufferPool* pool = nullptr;
    guint size = 0, min = 0, max = 0;
    const bool offered = gst_query_get_n_allocation_pools(query) > 0;
    if (offered) gst_query_parse_nth_allocation_pool(query, 0, &pool, &size, &min, &max);
    if (!pool) pool = gst_video_buffer_pool_new();
    size = MAX(size, static_cast<guint>(GST_VIDEO_INFO_SIZE(&info)));
    GstStructure* config = gst_buffer_pool_get_config(pool);
    gst_buffer_pool_config_set_params(config, caps, size, min, max);
    if (gst_query_find_allocation_meta(query, GST_VIDEO_META_API_TYPE, nullptr))
      gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
    gst_buffer_pool_set_config(pool, config);  // a pool that refuses keeps its own, checked on use
    if (offered)
      gst_query_set_nth_allocation_pool(query, 0, pool, size, min, max);
    else
      gst_query_add_allocation_pool(query, pool, size, min, max);
    gst_object_unref(pool);
  }
  return GST_BASE_SRC_CLASS(gst_cuda_src_ipc_parent_class)->decide_allocation(src, query);
}

// Caps come from the producer, in create(); until then there is nothing to negotiate.
static gboolean gst_cuda_src_ipc_negotiate(GstBaseSrc* src) {
  auto* self = GST_CUDA_SRC_IPC(src);
  GstCaps* offer = nullptr;
  GST_OBJECT_LOCK(self);
  if (self->state->caps) offer = output_caps(*self->state, self->state->caps);
  GST_OBJECT_UNLOCK(self);
  if (!offer) return TRUE;
  GstCaps* caps = gst_pad_peer_query_caps(GST_BASE_SRC_PAD(src), offer);
  gst_caps_unref(offer);
  if (gst_caps_is_empty(caps)) {
    gst_caps_unref(caps);
    return FALSE;
  }
  caps = gst_caps_fixate(caps);
  const gboolean ok = gst_base_src_set_caps(src, caps);
  gst_caps_unref(caps);
  return ok;
}

static gboolean gst_cuda_src_ipc_set_caps(GstBaseSrc* src, GstCaps* caps) {
  auto* self = GST_CUDA_SRC_IPC(src);
  State& st = *self->state;
  if (!gst_video_info_from_caps(&st.out_info, caps)) return FALSE;
  const bool device = gst_cipc_caps_have_cuda_memory(caps);
  st.output = !st.producer_cuda                           ? Output::kShared
              : !device                                   ? Output::kDownload
              : st.settings.io_mode == GST_CIPC_IO_COPY ? Output::kCopy
                                                          : Output::kShared;
  GST_INFO_OBJECT(self, "output %s: %" GST_PTR_FORMAT,
                  st.output == Output::kDownload ? "by download into downstream buffers"
                  : st.output == Output::kCopy   ? "as private device copies"
                                                 : "in the producer's slots",
                  caps);
  return TRUE;
}

static gboolean gst_cuda_src_ipc_query(GstBaseSrc* src, GstQuery* query) {
  auto* self = GST_CUDA_SRC_IPC(src);
  if (GST_QUERY_TYPE(query) == GST_QUERY_LATENCY) {
    const Settings s = snapshot_settings(self);
    gst_query_set_latency(query, TRUE, s.processing_deadline, GST_CLOCK_TIME_NONE);
    return TRUE;
  }
  return GST_BASE_SRC_CLASS(gst_cuda_src_ipc_parent_class)->query(src, query);
}

// Sleeps `ms` unless unlock() comes first. Returns false when interrupted.
static bool pause_interruptible(State& st, guint ms) {
  pollfd p{st.waker.fd(), POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(ms)) == 0;
}

// Once the producer has said what it shares: host memory maps anywhere; CUDA memory needs the
// producer's own GPU, found by UUID (or named by cuda-device-id, which must be that GPU).
static cipc::Result<std::shared_ptr<cipc::MemoryBackend>> choose_backend(GstCudaSrcIpc* self,
                                                                          const Settings& s,
                                                                          const cipc::Welcome& w) {
  State& st = *self->state;
  st.producer_cuda = w.memory_kind == cipc::MemoryKind::kCuda;
  if (!st.producer_cuda) return std::shared_ptr<cipc::MemoryBackend>(std::make_shared<cipc::HostMemoryBackend>());
#ifdef CIPC_HAVE_CUDA
  cipc_cuda::Uuid uuid;
  std::copy(w.gpu_uuid.begin(), w.gpu_uuid.end(), uuid.begin());
  int device = s.cuda_device_id;
  if (device < 0) {
    device = cipc_cuda::find_device(uuid);
    if (device < 0) {
      std::string why;
      if (cipc_cuda::device_count(&why) <= 0)
        return cipc::Error{cipc::ErrorCode::kUnsupported,
                           "the producer shares CUDA memory but this process has no CUDA device (" +
                               why + ")"};
      return cipc::Error{cipc::ErrorCode::kGpuMismatch,
                         "the producer's GPU is not visible to this process (check "
                         "CUDA_VISIBLE_DEVICES); CUDA memory can only be shared on one GPU"};
    }
  }
  cipc_cuda::DeviceInfo info;
  cipc_cuda::Status status = cipc_gst::open_device(device, &info);
  if (!status) return cipc::Error{cipc::ErrorCode::kUnsupported, status.message()};
  if (info.uuid != uuid)
    return cipc::Error{cipc::ErrorCode::kGpuMismatch,
                       "cuda-device-id=" + std::to_string(device) +
                           " is not the GPU the producer uses; CUDA memory can only be shared "
                           "on one GPU"};
  if (st.device != device || !st.stream.handle()) {
    st.stream = cipc_cuda::Stream();
    status = cipc_cuda::Stream::create(device, &st.stream);
    if (!status) return cipc::Error{cipc::ErrorCode::kSystem, status.message()};
    st.copies = cipc_gst::PrivateCopies::create(device);
    st.device = device;
  }
  return std::shared_ptr<cipc::MemoryBackend>(std::make_shared<cipc_gst::CudaMemoryBackend>(
      device, w.sync_mode == cipc::SyncMode::kCpu ? cipc_gst::SyncMode::kCpu
                                                   : cipc_gst::SyncMode::kGpuEvents));
#else
  (void)s;
  return cipc::Error{cipc::ErrorCode::kUnsupported,
                     "the producer shares CUDA memory but this cudaipc plugin was built without "
                     "CUDA"};
#endif
}

static GstFlowReturn connect_to_producer(GstCudaSrcIpc* self, const Settings& s, bool again) {
  State& st = *self->state;
  cipc::ConsumerConfig config;
  config.socket_path = s.socket_path;
  config.memory_kind = s.memory == GST_CIPC_MEMORY_HOST   ? cipc::MemoryKind::kHost
                       : s.memory == GST_CIPC_MEMORY_CUDA ? cipc::MemoryKind::kCuda
                                                          : cipc::MemoryKind::kAny;
  config.max_in_flight = s.max_in_flight;
  const bool forever = s.reconnect || s.connect_timeout == 0;
  const uint64_t deadline = cipc::monotonic_ns() + uint64_t(s.connect_timeout) * 1000000;
  for (;;) {
    auto consumer = cipc::Consumer::connect(
        config, [self, &s](const cipc::Welcome& w) { return choose_backend(self, s, w); },
        &st.waker);
    if (consumer) {
      st.consumer = std::move(consumer.value());
      ++self->counters->connects;
      if (st.consumer->instance_id() != st.instance_id) {
        if (st.instance_id != 0)
          GST_INFO_OBJECT(self, "new producer instance %016" G_GINT64_MODIFIER "x: import cache flushed",
                          st.consumer->instance_id());
        st.instance_id = st.consumer->instance_id();
      }
      st.last_sequence = 0;
      st.discont = true;
      GST_INFO_OBJECT(self, "attached to %s (%s memory, %u frames in flight)", s.socket_path.c_str(),
                      cipc::to_string(st.consumer->welcome().memory_kind),
                      st.consumer->welcome().max_in_flight);
      return GST_FLOW_OK;
    }
    const cipc::Error& e = consumer.error();
    if (e.code == cipc::ErrorCode::kInterrupted) return GST_FLOW_FLUSHING;
    const bool transient = e.code == cipc::ErrorCode::kConnectFailed ||
                           e.code == cipc::ErrorCode::kClosed || e.code == cipc::ErrorCode::kTimeout;
    if (!transient) {
      GST_ELEMENT_ERROR(self, RESOURCE, OPEN_READ,
                        ("Could not attach to the producer at '%s': %s.", s.socket_path.c_str(),
                         e.message.c_str()),
                        (nullptr));
      return GST_FLOW_ERROR;
    }
    if (!forever && cipc::monotonic_ns() >= deadline) {
      GST_ELEMENT_ERROR(self, RESOURCE, OPEN_READ,
                        ("No producer is serving '%s'.", s.socket_path.c_str()),
                        ("%s; waited %u ms (connect-timeout)%s", e.message.c_str(),
                         s.connect_timeout, again ? " after the producer went away" : ""));
      return GST_FLOW_ERROR;
    }
    GST_LOG_OBJECT(self, "waiting for a producer: %s", e.message.c_str());
    if (!pause_interruptible(st, MAX(s.reconnect_interval, 1u))) return GST_FLOW_FLUSHING;
  }
}

// The slot memory allocator could not be created (gst_cipc_slot_allocator_get()).
static GstFlowReturn no_slot_allocator(GstCudaSrcIpc* self) {
  GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("Could not wrap a shared frame: no slot allocator."),
                    (nullptr));
  return GST_FLOW_ERROR;
}

static GstFlowReturn apply_caps(GstCudaSrcIpc* self, const cipc::Caps& message) {
  State& st = *self->state;
  GstCaps* caps = gst_caps_from_string(message.caps.c_str());
  GstVideoInfo info;
  if (!caps || !gst_video_info_from_caps(&info, caps)) {
    if (caps) gst_caps_unref(caps);
    GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("The producer announced a format that is not raw video."),
                      ("caps: %s", message.caps.c_str()));
    return GST_FLOW_ERROR;
  }
  if (st.caps && gst_caps_is_equal(caps, st.caps)) {
    gst_caps_unref(caps);
    return GST_FLOW_OK;
  }
  GST_OBJECT_LOCK(self);
  gst_caps_replace(&st.caps, caps);
  GST_OBJECT_UNLOCK(self);
  st.info = info;
  ++self->counters->caps_changes;
  if (!gst_base_src_negotiate(GST_BASE_SRC(self))) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION,
                      ("Downstream does not accept the producer's format %s.", message.caps.c_str()),
                      (nullptr));
    gst_caps_unref(caps);
    return GST_FLOW_NOT_NEGOTIATED;
  }
  gst_caps_unref(caps);
  return GST_FLOW_OK;
}

static void post_stats(GstCudaSrcIpc* self, Window& w, uint64_t now) {
  auto& v = w.latency_ns;
  std::sort(v.begin(), v.end());
  auto pick = [&](double q) -> double {
    if (v.empty()) return 0;
    return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))] / 1000.0;
  };
  const double seconds = (now - w.start_ns) / 1e9;
  GstStructure* s = gst_structure_new(
      "cudasrc-ipc-stats", "fps", G_TYPE_DOUBLE, seconds > 0 ? w.frames / seconds : 0.0,
      "latency-p50-us", G_TYPE_DOUBLE, pick(0.50), "latency-p99-us", G_TYPE_DOUBLE, pick(0.99),
      "latency-max-us", G_TYPE_DOUBLE, v.empty() ? 0.0 : v.back() / 1000.0, "frames",
      G_TYPE_UINT64, self->counters->frames.load(), "frames-skipped", G_TYPE_UINT64,
      self->counters->frames_skipped.load(), nullptr);
  gst_element_post_message(GST_ELEMENT(self), gst_message_new_element(GST_OBJECT(self), s));
  w = Window();
  w.start_ns = now;
}

#ifdef CIPC_HAVE_CUDA
static GstFlowReturn cuda_failure(GstCudaSrcIpc* self, const char* what, const cipc_cuda::Status& s) {
  GST_ELEMENT_ERROR(self, RESOURCE, READ, ("%s", what), ("%s", s.message().c_str()));
  return GST_FLOW_ERROR;
}

// io-mode=copy: a private device copy, ordered on the GPU after the producer's write; the slot
// is released at once, behind a release fence (no CPU wait).
static GstFlowReturn copy_on_device(GstCudaSrcIpc* self, cipc::ReceivedFrame& frame, GstBuffer** out) {
  State& st = *self->state;
  auto* slot = static_cast<cipc_gst::CudaSlotMemory*>(frame.slot->memory.get());
  auto copy = st.copies->acquire(frame.info.size);
  if (!copy) {
    GST_ELEMENT_ERROR(self, RESOURCE, NO_SPACE_LEFT, ("Could not allocate a frame copy on the GPU."),
                      ("%s", copy.error().message.c_str()));
    return GST_FLOW_ERROR;
  }
  cipc_gst::PrivateCopies::Copy& dst = *copy.value();
  const cipc_cuda::StreamHandle stream = st.stream.handle();
  cipc_cuda::Status s = dst.begin_write(stream);
  if (s) s = slot->wait_ready(stream);
  if (s) s = cipc_cuda::copy_2d_async(reinterpret_cast<void*>(dst.ptr()), frame.info.size,
                                      reinterpret_cast<const void*>(slot->ptr()), frame.info.size,
                                      frame.info.size, 1, stream);
  if (s) s = dst.end_write(stream);
  if (s) s = slot->record_release(stream);
  if (!s) return cuda_failure(self, "Could not copy a frame on the GPU.", s);
  // RELEASE as soon as the copy has read the slot, without this thread waiting for it.
  cipc_gst::release_when_read(
      *slot, std::make_shared<std::pair<std::shared_ptr<const cipc::ImportedSlot>,
                                        std::shared_ptr<cipc::FrameClaim>>>(frame.slot,
                                                                           std::move(frame.claim)));

  auto binding = std::make_shared<GstCipcSlotBinding>();
  cipc_gst::bind_cuda_region(*binding, dst);
  binding->keepalive = copy.value();
  GstMemory* mem =
      gst_cipc_slot_memory_new(std::move(binding), dst.bytes(), frame.info.size, false);
  if (mem == nullptr) return no_slot_allocator(self);
  *out = gst_buffer_new();
  gst_buffer_append_memory(*out, mem);
  ++self->counters->device_copies;
  return GST_FLOW_OK;
}

// System memory downstream (ximagesink...): one device-to-host copy per frame, written straight
// into a buffer of downstream's pool; the slot is released as soon as the copy is done.
static GstFlowReturn download(GstCudaSrcIpc* self, cipc::ReceivedFrame& frame, const GstVideoInfo& layout,
                              GstBuffer** out) {
  State& st = *self->state;
  GstBufferPool* pool = gst_base_src_get_buffer_pool(GST_BASE_SRC(self));
  GstBuffer* buffer = nullptr;
  GstFlowReturn ret = GST_FLOW_ERROR;
  const bool had_pool = pool != nullptr;
  if (pool) {
    if (!gst_buffer_pool_is_active(pool)) gst_buffer_pool_set_active(pool, TRUE);
    ret = gst_buffer_pool_acquire_buffer(pool, &buffer, nullptr);
    gst_object_unref(pool);
  }
  if (ret == GST_FLOW_FLUSHING) return ret;
  if (ret != GST_FLOW_OK) {
    GST_ELEMENT_ERROR(self, RESOURCE, NO_SPACE_LEFT,
                      ("Could not get a buffer to download a frame into."),
                      ("%s", had_pool ? gst_flow_get_name(ret) : "no buffer pool was negotiated"));
    return GST_FLOW_ERROR;
  }
  GstVideoFrame dst;
  if (!gst_video_frame_map(&dst, &st.out_info, buffer, GST_MAP_WRITE)) {
    gst_buffer_unref(buffer);
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Could not map a downstream buffer."), (nullptr));
    return GST_FLOW_ERROR;
  }
  if (gst_buffer_n_memory(buffer) == 1)
    cipc_gst::register_host_memory_once(gst_buffer_peek_memory(buffer, 0), dst.map[0].data, dst.map[0].size);
  auto* slot = static_cast<cipc_gst::CudaSlotMemory*>(frame.slot->memory.get());
  const cipc_cuda::StreamHandle stream = st.stream.handle();
  cipc_cuda::Status s = slot->wait_ready(stream);
  for (guint p = 0; s && p < GST_VIDEO_INFO_N_PLANES(&layout); ++p) {
    const gint src_stride = layout.stride[p];
    const gint dst_stride = GST_VIDEO_FRAME_PLANE_STRIDE(&dst, p);
    s = cipc_cuda::copy_2d_async(GST_VIDEO_FRAME_PLANE_DATA(&dst, p), dst_stride,
                                 reinterpret_cast<const void*>(slot->ptr() + layout.offset[p]),
                                 src_stride, MIN(src_stride, dst_stride),
                                 cipc_gst::plane_rows(layout, p), stream);
  }
  if (s) s = st.stream.synchronize();  // the CPU reads it next; the slot is then free again
  gst_video_frame_unmap(&dst);
  if (!s) {
    gst_buffer_unref(buffer);
    return cuda_failure(self, "Could not copy a frame from the GPU.", s);
  }
  frame.claim.reset();
  ++self->counters->downloads;
  *out = buffer;
  return GST_FLOW_OK;
}
#endif

static GstFlowReturn make_buffer(GstCudaSrcIpc* self, cipc::ReceivedFrame& frame, GstBuffer** out) {
  State& st = *self->state;
  const cipc::Frame& info = frame.info;
  GstVideoInfo layout;
  std::string why;
  if (!cipc_gst::validate_planes(info, st.info, &layout, &why)) {
    GST_ELEMENT_ERROR(self, STREAM, DECODE, ("The producer sent a frame that does not fit its format."),
                      ("%s", why.c_str()));
    return GST_FLOW_ERROR;
  }
  GstBuffer* buffer = nullptr;
  GstFlowReturn ret = GST_FLOW_OK;
  switch (st.output) {
    case Output::kShared: {
      GstMemory* mem =
          gst_cipc_slot_memory_new_imported(frame.slot, std::move(frame.claim), info.size);
      if (mem == nullptr) return no_slot_allocator(self);
      buffer = gst_buffer_new();
      gst_buffer_append_memory(buffer, mem);
      break;
    }
#ifdef CIPC_HAVE_CUDA
    case Output::kCopy:
      ret = copy_on_device(self, frame, &buffer);
      break;
    case Output::kDownload:
      ret = download(self, frame, layout, &buffer);
      break;
#else
    default:
      ret = GST_FLOW_ERROR;
      break;
#endif
  }
  if (ret != GST_FLOW_OK) return ret;
  if (st.output != Output::kDownload)
    gst_buffer_add_video_meta_full(buffer, GST_VIDEO_FRAME_FLAG_NONE,
                                   GST_VIDEO_INFO_FORMAT(&st.out_info), GST_VIDEO_INFO_WIDTH(&layout),
                                   GST_VIDEO_INFO_HEIGHT(&layout), GST_VIDEO_INFO_N_PLANES(&layout),
                                   layout.offset, layout.stride);

  GstClock* clock = gst_element_get_clock(GST_ELEMENT(self));
  const GstClockTime base_time = gst_element_get_base_time(GST_ELEMENT(self));
  const gint64 offset = st.clock_offset.get(clock);
  if (clock) gst_object_unref(clock);
  GST_BUFFER_PTS(buffer) = cipc_gst::monotonic_to_running_time(info.pts, base_time, offset);
  GST_BUFFER_DTS(buffer) = cipc_gst::monotonic_to_running_time(info.dts, base_time, offset);
  GST_BUFFER_DURATION(buffer) = info.duration == cipc::kNoTimestamp ? GST_CLOCK_TIME_NONE : info.duration;
  GST_BUFFER_OFFSET(buffer) = info.offset == cipc::kNoTimestamp ? GST_BUFFER_OFFSET_NONE : info.offset;
  // When the producer sent the frame (CLOCK_MONOTONIC), for applications measuring latency.
  static GstCaps* send_time_caps = gst_caps_new_empty_simple(CIPC_SEND_TIME_CAPS);
  gst_buffer_add_reference_timestamp_meta(buffer, send_time_caps, info.send_time,
                                          GST_CLOCK_TIME_NONE);

  // Frames the producer sent others but not us (we were at max-in-flight) show as a gap.
  if (st.last_sequence && info.sequence > st.last_sequence + 1) {
    self->counters->frames_skipped += info.sequence - st.last_sequence - 1;
    st.discont = true;
  }
  st.last_sequence = info.sequence;
  if (st.discont || (info.flags & cipc::Frame::kDiscont)) GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_DISCONT);
  if (info.flags & cipc::Frame::kDeltaUnit) GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT);
  if (info.flags & cipc::Frame::kGap) GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_GAP);
  st.discont = false;
  *out = buffer;
  return GST_FLOW_OK;
}

static GstFlowReturn gst_cuda_src_ipc_create(GstPushSrc* push, GstBuffer** out) {
  auto* self = GST_CUDA_SRC_IPC(push);
  State& st = *self->state;
  const Settings& s = st.settings;
  for (;;) {
    if (!st.consumer) {
      const GstFlowReturn ret = connect_to_producer(self, s, self->counters->connects > 0);
      if (ret != GST_FLOW_OK) return ret;
    }
    cipc::ConsumerEvent ev = st.consumer->next(-1);
    self->counters->slots_imported = st.slots_before + st.consumer->stats().slots_imported;
    switch (ev.kind) {
      case cipc::ConsumerEvent::Kind::kCaps: {
        const GstFlowReturn ret = apply_caps(self, ev.caps);
        if (ret != GST_FLOW_OK) return ret;
        continue;
      }
      case cipc::ConsumerEvent::Kind::kFrame: {
        const GstFlowReturn ret = make_buffer(self, ev.frame, out);
        if (ret != GST_FLOW_OK) return ret;
        const uint64_t now = cipc::monotonic_ns();
        const uint64_t latency = now > ev.frame.info.send_time ? now - ev.frame.info.send_time : 0;
        ++self->counters->frames;
        self->counters->latency_last_ns = latency;
        if (s.stats_interval > 0) {
          Window& w = st.window;
          if (w.start_ns == 0) w.start_ns = now;
          w.latency_ns.push_back(latency);
          ++w.frames;
          if (now - w.start_ns >= uint64_t(s.stats_interval) * 1000000) post_stats(self, w, now);
        }
        return GST_FLOW_OK;
      }
      case cipc::ConsumerEvent::Kind::kEos:
        GST_INFO_OBJECT(self, "producer sent EOS");
        return GST_FLOW_EOS;
      case cipc::ConsumerEvent::Kind::kInterrupted:
      case cipc::ConsumerEvent::Kind::kTimeout:
        return GST_FLOW_FLUSHING;
      case cipc::ConsumerEvent::Kind::kClosed:
      case cipc::ConsumerEvent::Kind::kError: {
        const bool protocol = ev.kind == cipc::ConsumerEvent::Kind::kError;
        st.slots_before += st.consumer->stats().slots_imported;
        st.consumer.reset();
        if (protocol && ev.error.code != cipc::ErrorCode::kProtocol) {
          // Version, memory kind or GPU mismatch: waiting would not change it.
          GST_ELEMENT_ERROR(self, RESOURCE, READ,
                            ("Cannot receive from the producer at '%s': %s.", s.socket_path.c_str(),
                             ev.error.message.c_str()),
                            (nullptr));
          return GST_FLOW_ERROR;
        }
        if (s.reconnect) {
          GST_ELEMENT_WARNING(self, RESOURCE, READ,
                              ("Lost the producer at '%s' (%s); waiting for it to come back.",
                               s.socket_path.c_str(), ev.error.message.c_str()),
                              (nullptr));
          st.discont = true;
          continue;
        }
        if (protocol) {
          GST_ELEMENT_ERROR(self, RESOURCE, READ,
                            ("The producer at '%s' misbehaved: %s.", s.socket_path.c_str(),
                             ev.error.message.c_str()),
                            (nullptr));
          return GST_FLOW_ERROR;
        }
        GST_ELEMENT_WARNING(self, RESOURCE, READ,
                            ("The producer at '%s' went away (%s); ending the stream. Set "
                             "reconnect=true to wait for it instead.",
                             s.socket_path.c_str(), ev.error.message.c_str()),
                            (nullptr));
        return GST_FLOW_EOS;
      }
    }
  }
}

static void gst_cuda_src_ipc_finalize(GObject* object) {
  auto* self = GST_CUDA_SRC_IPC(object);
  delete self->state;
  delete self->settings;
  delete self->counters;
  G_OBJECT_CLASS(gst_cuda_src_ipc_parent_class)->finalize(object);
}

static void gst_cuda_src_ipc_class_init(GstCudaSrcIpcClass* klass) {
  auto* object_class = G_OBJECT_CLASS(klass);
  auto* element_class = GST_ELEMENT_CLASS(klass);
  auto* basesrc_class = GST_BASE_SRC_CLASS(klass);
  auto* pushsrc_class = GST_PUSH_SRC_CLASS(klass);
  object_class->set_property = gst_cuda_src_ipc_set_property;
  object_class->get_property = gst_cuda_src_ipc_get_property;
  object_class->finalize = gst_cuda_src_ipc_finalize;

  const auto rw_ready = static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                                                 GST_PARAM_MUTABLE_READY);
  const auto ro = static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);

  g_object_class_install_property(
      object_class, PROP_SOCKET_PATH,
      g_param_spec_string("socket-path", "Socket path",
                          "Filesystem path of the Unix socket a cudasink-ipc serves",
                          DEFAULT_SOCKET_PATH, rw_ready));
  g_object_class_install_property(
      object_class, PROP_MEMORY,
      g_param_spec_enum("memory", "Memory",
                        "Memory the consumer accepts; a producer sharing another kind is refused "
                        "with an error",
                        gst_cipc_src_memory_get_type(), DEFAULT_MEMORY, rw_ready));
  g_object_class_install_property(
      object_class, PROP_RECONNECT,
      g_param_spec_boolean("reconnect", "Reconnect",
                           "When the producer goes away (or is not there yet), wait for one to "
                           "appear at socket-path and continue, instead of ending with EOS/error",
                           DEFAULT_RECONNECT, rw_ready));
  g_object_class_install_property(
      object_class, PROP_RECONNECT_INTERVAL,
      g_param_spec_uint("reconnect-interval", "Reconnect interval",
                        "Milliseconds between attempts to reach the producer", 1, 60000,
                        DEFAULT_RECONNECT_INTERVAL, rw_ready));
  g_object_class_install_property(
      object_class, PROP_CONNECT_TIMEOUT,
      g_param_spec_uint("connect-timeout", "Connect timeout",
                        "Milliseconds to wait for a producer at start before failing (0 = "
                        "forever; reconnect=true also waits forever)",
                        0, G_MAXUINT, DEFAULT_CONNECT_TIMEOUT, rw_ready));
  g_object_class_install_property(
      object_class, PROP_MAX_IN_FLIGHT,
      g_param_spec_uint("max-in-flight", "Max in flight",
                        "Frames this consumer may hold downstream at once (the producer may "
                        "grant fewer); frames beyond that are skipped for this consumer",
                        1, cipc::kMaxInFlight, DEFAULT_MAX_IN_FLIGHT, rw_ready));
  g_object_class_install_property(
      object_class, PROP_PROCESSING_DEADLINE,
      g_param_spec_uint64("processing-deadline", "Processing deadline",
                          "Latency reported downstream, in nanoseconds", 0, G_MAXUINT64,
                          DEFAULT_PROCESSING_DEADLINE, rw_ready));
  g_object_class_install_property(
      object_class, PROP_STATS_INTERVAL,
      g_param_spec_uint("stats-interval", "Statistics interval",
                        "Post a 'cudasrc-ipc-stats' element message (fps, latency p50/p99/max in "
                        "microseconds from the producer's send to this element's output) every "
                        "this many milliseconds; 0 = never",
                        0, G_MAXUINT, DEFAULT_STATS_INTERVAL, rw_ready));
  g_object_class_install_property(
      object_class, PROP_CUDA_DEVICE_ID,
      g_param_spec_int("cuda-device-id", "CUDA device id",
                       "CUDA device to import CUDA memory on; it must be the producer's GPU. -1: "
                       "find the producer's GPU by its UUID",
                       -1, G_MAXINT, DEFAULT_CUDA_DEVICE_ID, rw_ready));
  g_object_class_install_property(
      object_class, PROP_IO_MODE,
      g_param_spec_enum("io-mode", "I/O mode",
                        "For CUDA memory output: hand downstream the producer's slot (import), or a "
                        "private device copy that releases the slot at once (copy). System-memory "
                        "output is always one download into downstream's buffer",
                        gst_cipc_io_mode_get_type(), DEFAULT_IO_MODE, rw_ready));
  g_object_class_install_property(
      object_class, PROP_STATS,
      g_param_spec_boxed("stats", "Statistics",
                         "frames-received, frames-skipped, slots-imported, connects, "
                         "caps-changes, latency-last-ns, downloads, device-copies",
                         GST_TYPE_STRUCTURE, ro));

  gst_element_class_set_static_metadata(
      element_class, "CUDA IPC source", "Source/Video/Hardware",
      "Receives video frames that a cudasink-ipc in another process shares, without copying",
      "gst-cudaipc developers");
  gst_element_class_add_static_pad_template(element_class, &src_template);

  basesrc_class->start = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_start);
  basesrc_class->stop = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_stop);
  basesrc_class->unlock = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_unlock);
  basesrc_class->unlock_stop = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_unlock_stop);
  basesrc_class->get_caps = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_get_caps);
  basesrc_class->negotiate = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_negotiate);
  basesrc_class->set_caps = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_set_caps);
  basesrc_class->query = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_query);
  basesrc_class->decide_allocation = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_decide_allocation);
  pushsrc_class->create = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_create);

  GST_DEBUG_CATEGORY_INIT(gst_cuda_src_ipc_debug, "cudasrc-ipc", 0, "cudasrc-ipc");
  gst_type_mark_as_plugin_api(gst_cipc_src_memory_get_type(), static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(gst_cipc_io_mode_get_type(), static_cast<GstPluginAPIFlags>(0));
}

static void gst_cuda_src_ipc_init(GstCudaSrcIpc* self) {
  self->settings = new Settings();
  self->state = new State();
  self->counters = new Counters();
  gst_base_src_set_live(GST_BASE_SRC(self), TRUE);
  gst_base_src_set_format(GST_BASE_SRC(self), GST_FORMAT_TIME);
  gst_base_src_set_do_timestamp(GST_BASE_SRC(self), FALSE);
}
