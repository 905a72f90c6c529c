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
 * Also made from a URI, cudaipc:///path/to/socket with properties as query parameters
 * (cudaipc:///tmp/cam0.sock?memory=host); see gst/common/urihandler.h.
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
#include "ipcsink/gstcudasinkipc.h"
#include "common/elementdocs.h"
#include "common/paramflags.h"

#include <gst/video/video.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "channel.h"
#include "common/elementtype.h"
#include "common/gstcudainterop.h"
#include "ipcsink/producerlink.h"
#include "ipcsink/sinkenums.h"
#include "ipcsink/sinknegotiation.h"
#ifdef CIPC_HAVE_GST_CUDA
#include "common/gstcompat.h"
#include "ipcsink/sinkcudamemoryinput.h"
#endif
#include "common/clockmapping.h"
#include "common/frameplanes.h"
#include "common/urihandler.h"
#include "ipcsink/slotcopy.h"
#include "memory/slotmemory.h"
#include "memory/slotpool.h"
#include "producer.h"
#include "slot_backend.h"

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
  PROP_BACKPRESSURE,
  PROP_POOL_SIZE,
  PROP_CUDA_DEVICE_ID,
  PROP_SYNC_MODE,
  PROP_NUM_CONSUMERS,
  PROP_STATS,
};

// Per user ($XDG_RUNTIME_DIR or /tmp/cudaipc-<uid>): see cipc::default_socket_path().
#define DEFAULT_SOCKET_PATH cipc::default_socket_path()
#define DEFAULT_SOCKET_MODE 0600
#define DEFAULT_ALLOW_OTHER_USERS FALSE
#ifdef CIPC_HAVE_CUDA
#define DEFAULT_MEMORY cipc::MemoryKind::kCuda
#else
#define DEFAULT_MEMORY cipc::MemoryKind::kHost
#endif
#define DEFAULT_CUDA_DEVICE_ID -1
#define DEFAULT_SYNC_MODE cipc::SyncMode::kGpuEvents
#define DEFAULT_MAX_IN_FLIGHT 4
#define DEFAULT_RELEASE_TIMEOUT 2000
#define DEFAULT_WAIT_FOR_CONSUMER FALSE
#define DEFAULT_COPY_POLICY GST_CIPC_COPY_IF_NEEDED
#define DEFAULT_BACKPRESSURE GST_CIPC_BACKPRESSURE_AUTO
#define DEFAULT_POOL_SIZE 6

namespace {

struct Settings {
  std::string socket_path = DEFAULT_SOCKET_PATH;
  guint socket_mode = DEFAULT_SOCKET_MODE;
  gboolean allow_other_users = DEFAULT_ALLOW_OTHER_USERS;
  cipc::MemoryKind memory = DEFAULT_MEMORY;
  guint max_in_flight = DEFAULT_MAX_IN_FLIGHT;
  guint release_timeout = DEFAULT_RELEASE_TIMEOUT;
  gboolean wait_for_consumer = DEFAULT_WAIT_FOR_CONSUMER;
  GstCipcCopyPolicy copy_policy = DEFAULT_COPY_POLICY;
  GstCipcBackpressure backpressure = DEFAULT_BACKPRESSURE;
  guint pool_size = DEFAULT_POOL_SIZE;
  gint cuda_device_id = DEFAULT_CUDA_DEVICE_ID;
  cipc::SyncMode sync_mode = DEFAULT_SYNC_MODE;
};

// Everything the element owns, in one place; members clean up after themselves.
struct SinkPrivate {
  explicit SinkPrivate(GstElement* element) : observer(element) {}
#ifdef CIPC_HAVE_GST_CUDA
  // Shared with nvcodec elements (context queries, set_context); kept across state changes.
  cipc_gst::ElementCudaContext cuda_context;
#endif

  Settings settings;  // under the object lock
  cipc_gst::SinkObserver observer;

  // Streaming state: made in start(), gone after stop() (teardown()).
  std::shared_ptr<cipc::MemoryBackend> backend;
  std::unique_ptr<cipc_gst::SlotCopier> copier;  // frames not written into the pool
  std::mutex producer_lock;  // `producer` is also read by property getters and unlock()
  std::unique_ptr<cipc::Producer> producer;
  std::shared_ptr<cipc_gst::ProducerLink> producer_link =
      std::make_shared<cipc_gst::ProducerLink>();
  std::unique_ptr<cipc_gst::SlotPoolGenerations> pools;
#ifdef CIPC_HAVE_GST_CUDA
  // GstCudaMemory from the exportable pool proposed upstream, sent without a copy (>= 1.24).
  std::unique_ptr<cipc_gst::SinkCudaMemoryInput> exported;
#endif
  cipc_gst::ClockOffset clock_offset;
  bool warned_copy = false;
  bool cuda_memory = false;  // memory=cuda
  int upstream_live = -1;    // -1: not asked yet (latency query on the first frame of a stream)

  std::atomic<guint64> frames_rendered{0};
  std::atomic<guint64> frames_unsent{0};  // not copied in: no consumer (in frames-dropped)
  std::atomic<guint64> copies{0};
  std::atomic<guint64> device_copies{0};       // of them: GstCudaMemory copied on the GPU
  std::atomic<guint64> pageable_uploads{0};    // of them: uploads from pageable memory (staged)
  std::atomic<guint64> pageable_upload_ns{0};  // the streaming thread's time in those uploads
  std::atomic<guint64> gst_cuda_shared{0};     // GstCudaMemory frames sent without a copy
  std::atomic<guint64> pool_generation{0};     // mirrors pools->generation() for the stats
  std::atomic<bool> cuda_mps{false};           // memory=cuda and our context is an MPS client
  std::atomic<guint64> pool_rollovers{0};

  // A new stream's statistics start from zero, and its first copy is announced again.
  void reset_counters() {
    frames_rendered = 0;
    frames_unsent = 0;
    copies = 0;
    device_copies = 0;
    pageable_uploads = 0;
    pageable_upload_ns = 0;
    gst_cuda_shared = 0;
    pool_generation = 0;
    pool_rollovers = 0;
    warned_copy = false;
    upstream_live = -1;
  }

  // The one cleanup path, for stop() and for a start() that failed half-way.
  void teardown() {
    std::unique_ptr<cipc::Producer> gone;
    producer_link->set(nullptr);
    {
      std::lock_guard<std::mutex> lock(producer_lock);
      gone = std::move(producer);
    }
    gone.reset();  // says BYE, returns every held buffer, removes the socket file
#ifdef CIPC_HAVE_GST_CUDA
    exported.reset();  // after the holds: memory kept from upstream's pool goes back
#endif
    pools.reset();
    copier.reset();
    backend.reset();
    clock_offset.reset();
    cipc_publish::destroy_parked_slots();  // what the producer's I/O thread parked
  }
};

}  // namespace

struct _GstCudaSinkIpc {
  GstBaseSink parent;
  SinkPrivate* priv;
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE(
    "sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS(CIPC_SINK_TEMPLATE_CAPS));

// The URI handler (cudaipc:///path/to/socket?property=value): gst/common/urihandler.h.
CIPC_DEFINE_ELEMENT_TYPE_WITH_CODE(GstCudaSinkIpc, gst_cuda_sink_ipc, GST_TYPE_BASE_SINK,
                                   "GstCudaSink-ipc",
                                   G_IMPLEMENT_INTERFACE(GST_TYPE_URI_HANDLER,
                                                         cipc_gst::init_sink_uri_handler))
// The category is made with the registration, so that --gst-debug-help lists it once the
// plugin is loaded, before the element is first used.
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE(
    cudasink_ipc, "cudasink-ipc", GST_RANK_NONE, GST_TYPE_CUDA_SINK_IPC,
    GST_DEBUG_CATEGORY_INIT(gst_cuda_sink_ipc_debug, "cudaipc-sink", 0, "cudasink-ipc element"))

static Settings snapshot_settings(GstCudaSinkIpc* self) {
  GST_OBJECT_LOCK(self);
  Settings s = self->priv->settings;
  GST_OBJECT_UNLOCK(self);
  return s;
}

static GstStructure* make_stats(GstCudaSinkIpc* self) {
  SinkPrivate& p = *self->priv;
  cipc::ProducerStats ps;
  {
    std::lock_guard<std::mutex> lock(p.producer_lock);
    if (p.producer) ps = p.producer->stats();
  }
  return gst_structure_new(
      "cudasink-ipc-stats", "frames-rendered", G_TYPE_UINT64, p.frames_rendered.load(),
      "frames-sent", G_TYPE_UINT64, ps.frames_sent, "frames-dropped", G_TYPE_UINT64,
      ps.frames_dropped + p.frames_unsent.load(), "copies", G_TYPE_UINT64, p.copies.load(),
      "device-copies", G_TYPE_UINT64, p.device_copies.load(), "pageable-uploads", G_TYPE_UINT64,
      p.pageable_uploads.load(), "pageable-upload-ns", G_TYPE_UINT64, p.pageable_upload_ns.load(),
      "gst-cuda-frames-shared", G_TYPE_UINT64, p.gst_cuda_shared.load(), "consumers", G_TYPE_UINT64,
      ps.consumers, "consumers-total", G_TYPE_UINT64, ps.consumers_total, "consumers-timed-out",
      G_TYPE_UINT64, ps.consumers_timed_out, "consumers-rejected", G_TYPE_UINT64,
      ps.consumers_rejected, "releases", G_TYPE_UINT64, ps.releases, "claims-outstanding",
      G_TYPE_UINT64, ps.claims_outstanding, "slots-exported", G_TYPE_UINT64, ps.slots_exported,
      "backpressure-waits", G_TYPE_UINT64, ps.backpressure_waits, "slots-retired", G_TYPE_UINT64,
      ps.slots_retired, "retire-notices", G_TYPE_UINT64, ps.retire_notices, "pool-generation",
      G_TYPE_UINT64, p.pool_generation.load(), "pool-rollovers", G_TYPE_UINT64,
      p.pool_rollovers.load(), "cuda-mps", G_TYPE_BOOLEAN, static_cast<gboolean>(p.cuda_mps.load()),
      nullptr);
}

static void gst_cuda_sink_ipc_set_property(GObject* object, guint prop_id, const GValue* value,
                                           GParamSpec* pspec) {
  auto* self = GST_CUDA_SINK_IPC(object);
  GST_OBJECT_LOCK(self);
  Settings& s = self->priv->settings;
  switch (prop_id) {
    case PROP_SOCKET_PATH: {
      const gchar* path = g_value_get_string(value);
      s.socket_path = path ? path : DEFAULT_SOCKET_PATH;
      break;
    }
    case PROP_SOCKET_MODE: s.socket_mode = g_value_get_uint(value); break;
    case PROP_ALLOW_OTHER_USERS: s.allow_other_users = g_value_get_boolean(value); break;
    case PROP_MEMORY: s.memory = static_cast<cipc::MemoryKind>(g_value_get_enum(value)); break;
    case PROP_MAX_IN_FLIGHT: s.max_in_flight = g_value_get_uint(value); break;
    case PROP_RELEASE_TIMEOUT: s.release_timeout = g_value_get_uint(value); break;
    case PROP_WAIT_FOR_CONSUMER: s.wait_for_consumer = g_value_get_boolean(value); break;
    case PROP_COPY_POLICY:
      s.copy_policy = static_cast<GstCipcCopyPolicy>(g_value_get_enum(value));
      break;
    case PROP_BACKPRESSURE:
      s.backpressure = static_cast<GstCipcBackpressure>(g_value_get_enum(value));
      break;
    case PROP_POOL_SIZE: s.pool_size = g_value_get_uint(value); break;
    case PROP_CUDA_DEVICE_ID: s.cuda_device_id = g_value_get_int(value); break;
    case PROP_SYNC_MODE: s.sync_mode = static_cast<cipc::SyncMode>(g_value_get_enum(value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK(self);
}

static void gst_cuda_sink_ipc_get_property(GObject* object, guint prop_id, GValue* value,
                                           GParamSpec* pspec) {
  auto* self = GST_CUDA_SINK_IPC(object);
  SinkPrivate& p = *self->priv;
  if (prop_id == PROP_STATS) {
    g_value_take_boxed(value, make_stats(self));
    return;
  }
  if (prop_id == PROP_NUM_CONSUMERS) {
    std::lock_guard<std::mutex> lock(p.producer_lock);
    g_value_set_uint(value, p.producer ? p.producer->consumer_count() : 0);
    return;
  }
  GST_OBJECT_LOCK(self);
  const Settings& s = p.settings;
  switch (prop_id) {
    case PROP_SOCKET_PATH: g_value_set_string(value, s.socket_path.c_str()); break;
    case PROP_SOCKET_MODE: g_value_set_uint(value, s.socket_mode); break;
    case PROP_ALLOW_OTHER_USERS: g_value_set_boolean(value, s.allow_other_users); break;
    case PROP_MEMORY: g_value_set_enum(value, static_cast<gint>(s.memory)); break;
    case PROP_MAX_IN_FLIGHT: g_value_set_uint(value, s.max_in_flight); break;
    case PROP_RELEASE_TIMEOUT: g_value_set_uint(value, s.release_timeout); break;
    case PROP_WAIT_FOR_CONSUMER: g_value_set_boolean(value, s.wait_for_consumer); break;
    case PROP_COPY_POLICY: g_value_set_enum(value, s.copy_policy); break;
    case PROP_BACKPRESSURE: g_value_set_enum(value, s.backpressure); break;
    case PROP_POOL_SIZE: g_value_set_uint(value, s.pool_size); break;
    case PROP_CUDA_DEVICE_ID: g_value_set_int(value, s.cuda_device_id); break;
    case PROP_SYNC_MODE: g_value_set_enum(value, static_cast<gint>(s.sync_mode)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK(self);
}

// The slots' memory (publish/slot_backend, shared with libcudaipc's writer): the device's for
// memory=cuda, else host memfds. Fills the producer's memory, sync and GPU fields and `device`.
static gboolean open_backend(GstCudaSinkIpc* self, const Settings& s, cipc::ProducerConfig& config,
                             int* device) {
  SinkPrivate& p = *self->priv;
  p.cuda_memory = s.memory == cipc::MemoryKind::kCuda;
  cipc_publish::SlotBackend opened;
  std::string why;
  switch (cipc_publish::open_slot_backend(s.memory, s.cuda_device_id, s.sync_mode, config, &opened,
                                          &why)) {
    case cipc_publish::BackendFailure::kNone: break;
    case cipc_publish::BackendFailure::kNoCudaBuild:
      GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                        ("memory=cuda is not available: this cudaipc plugin was built without the "
                         "CUDA toolkit; use memory=host."),
                        (nullptr));
      return FALSE;
    case cipc_publish::BackendFailure::kNoDevice:
      GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND,
                        ("No usable CUDA device for memory=cuda: %s.", why.c_str()),
                        ("set memory=host to share host memory instead"));
      return FALSE;
  }
  p.backend = opened.backend;
  p.cuda_mps = opened.mps_client;
  *device = opened.device;
  if (!p.cuda_memory) return TRUE;
  if (opened.sync_fell_back)
    GST_ELEMENT_WARNING(self, RESOURCE, SETTINGS,
                        ("CUDA device %d cannot share events between processes; falling back to "
                         "sync-mode=cpu.",
                         opened.device),
                        (nullptr));
  GST_INFO_OBJECT(
      self, "CUDA device %d (%s), sync-mode %s%s", opened.device, opened.device_name.c_str(),
      cipc::to_string(opened.sync_mode),
      opened.mps_client ? ", as an MPS client (one server context for all its clients)" : "");
  return TRUE;
}

// Copies of frames upstream did not write into a slot, on `device` (-1: host slots).
static gboolean make_copier(GstCudaSinkIpc* self, int device) {
  SinkPrivate& p = *self->priv;
  std::string error;
  p.copier = cipc_gst::SlotCopier::create(device, &error);
  if (p.copier) return TRUE;
  GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("Could not prepare copies into shareable memory."),
                    ("%s", error.c_str()));
  return FALSE;
}

// Serves the socket: the producer, and the link through which our pools reach it.
static gboolean start_producer(GstCudaSinkIpc* self, const Settings& s,
                               cipc::ProducerConfig& config) {
  SinkPrivate& p = *self->priv;
  config.socket_path = s.socket_path;
  config.socket_mode = s.socket_mode;
  config.allow_other_users = s.allow_other_users;
  config.max_in_flight = s.max_in_flight;
  config.release_timeout_ms = s.release_timeout;
  auto producer = cipc::Producer::start(config, &p.observer);
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
    return FALSE;
  }
  {
    std::lock_guard<std::mutex> lock(p.producer_lock);
    p.producer = std::move(producer.value());
  }
  p.producer_link->set(p.producer.get());
  return TRUE;
}

// What our pools tell the element: a failed allocation, and (through the producer link, which
// upstream's pool may outlive us by) a writer about to wait, flushing, the pool's limit, or a
// new slot to give consumers ahead of its first frame.
static CipcSlotPoolHooks pool_hooks(GstCudaSinkIpc* self) {
  std::shared_ptr<cipc_gst::ProducerLink> link = self->priv->producer_link;
  CipcSlotPoolHooks hooks;
  // Upstream only sees a failed allocation (not-negotiated, or a flow error mid-stream): this is
  // where the user learns what ran out.
  hooks.on_failure = [self](const std::string& what) {
    GST_ELEMENT_ERROR(self, RESOURCE, NO_SPACE_LEFT,
                      ("Out of memory for shared frames: %s. Lower pool-size or the "
                       "resolution, or raise the process's memory limit (ulimit -v, the "
                       "container's memory limit).",
                       what.c_str()),
                      (nullptr));
  };
  hooks.before_wait = [link] { link->read_releases_now(); };
  hooks.on_flushing = [link](bool flushing) { link->set_writer_flushing(flushing); };
  hooks.on_configured = [link](guint max_slots) { link->set_pool_limit(max_slots); };
  hooks.on_allocated = [link](uint64_t generation, guint index,
                              const std::shared_ptr<cipc::SlotMemory>& memory) {
    link->offer_slot(generation, index, memory);
  };
  return hooks;
}

// The pools upstream writes into, a generation per format, each announced to consumers.
static void make_pools(GstCudaSinkIpc* self, guint pool_size) {
  SinkPrivate& p = *self->priv;
  cipc::Producer* announce_to = p.producer.get();
  p.pools = std::make_unique<cipc_gst::SlotPoolGenerations>(
      p.backend, pool_size,
      [announce_to](uint64_t generation, const std::string& caps, uint64_t frame_size) {
        announce_to->set_caps(generation, caps, frame_size);
      },
      pool_hooks(self));
}

#ifdef CIPC_HAVE_GST_CUDA
// memory=cuda: GstCudaMemory from the exportable pool proposed upstream, sent without a copy
// where GStreamer can export it; otherwise it is copied into slots.
static void make_exported_input(GstCudaSinkIpc* self, int device, cipc::SyncMode sync) {
  SinkPrivate& p = *self->priv;
  std::string why;
  p.exported = cipc_gst::SinkCudaMemoryInput::create(
      device, sync,
      [link = p.producer_link](uint64_t generation, uint32_t index) {
        link->retire_slot(generation, index);
      },
      [link = p.producer_link](guint max_buffers) { link->set_pool_limit(max_buffers); }, &why);
  if (!p.exported)
    GST_INFO_OBJECT(self, "GStreamer CUDA memory will be copied into slots: %s", why.c_str());
}
#endif

// READY -> PAUSED, from change_state() rather than GstBaseSink::start(): a failed start() makes
// basesink post a second, generic error ("some element failed to post a proper error message")
// after the one here that names the cause.
static gboolean start_serving(GstCudaSinkIpc* self) {
  SinkPrivate& p = *self->priv;
  const Settings s = snapshot_settings(self);
  cipc::ProducerConfig config;
  int device = -1;
  if (!open_backend(self, s, config, &device) || !make_copier(self, device) ||
      !start_producer(self, s, config)) {
    p.teardown();  // the step that failed posted the error
    return FALSE;
  }
  make_pools(self, s.pool_size);
#ifdef CIPC_HAVE_GST_CUDA
  if (p.cuda_memory) make_exported_input(self, device, config.sync_mode);
#endif
  p.reset_counters();
  GST_INFO_OBJECT(self, "serving %s memory on %s (instance %016" G_GINT64_MODIFIER "x)",
                  cipc::to_string(config.memory_kind), s.socket_path.c_str(),
                  p.producer->instance_id());
  return TRUE;
}

static gboolean gst_cuda_sink_ipc_stop(GstBaseSink* sink) {
  GST_CUDA_SINK_IPC(sink)->priv->teardown();
  return TRUE;
}

// The caps policy (memory, format order) is sinknegotiation's.
static GstCaps* gst_cuda_sink_ipc_get_caps(GstBaseSink* sink, GstCaps* filter) {
  auto* self = GST_CUDA_SINK_IPC(sink);
  GstCaps* template_caps = gst_pad_get_pad_template_caps(GST_BASE_SINK_PAD(sink));
  GstCaps* caps = cipc_gst::sink_input_caps(
      template_caps, filter, snapshot_settings(self).memory == cipc::MemoryKind::kCuda);
  gst_caps_unref(template_caps);
  return caps;
}

// Makes the pool for `caps` the current generation, telling consumers about the new format.
static gboolean ensure_pool(GstCudaSinkIpc* self, GstCaps* caps) {
  SinkPrivate& p = *self->priv;
  // Caps longer than a CAPS message carries are refused here: sent, every consumer would drop
  // the producer as misbehaving (and wait-for-consumer would wait forever).
  const size_t caps_length = cipc_gst::SlotPoolGenerations::announced_caps(caps).size();
  if (caps_length > cipc::kMaxCapsLength) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION,
                      ("The format's caps are %zu bytes long; consumers accept at most %zu (the "
                       "protocol's CAPS limit).",
                       caps_length, cipc::kMaxCapsLength),
                      ("Remove long fields from the caps upstream of %s.", GST_ELEMENT_NAME(self)));
    return FALSE;
  }
  std::string error;
  if (!p.pools->ensure(caps, &error)) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION,
                      ("Could not set up shareable memory for the format."), ("%s", error.c_str()));
    return FALSE;
  }
  p.pool_generation = p.pools->generation();
  return TRUE;
}

static gboolean gst_cuda_sink_ipc_set_caps(GstBaseSink* sink, GstCaps* caps) {
  auto* self = GST_CUDA_SINK_IPC(sink);
  if (!self->priv->pools) return FALSE;
  return ensure_pool(self, caps);
}

#ifdef CIPC_HAVE_GST_CUDA
static int context_device(GstCudaSinkIpc* self);

// A GstCudaBufferPool of exportable memory on the pipeline's CUDA context, when that context is
// the one our slots live in and GStreamer can export its memory (>= 1.24).
static void propose_exportable_cuda_pool(GstCudaSinkIpc* self, GstQuery* query, GstCaps* caps) {
  SinkPrivate& p = *self->priv;
  if (!p.exported) return;
  GstCudaContext* context = p.cuda_context.held();
  std::string why;
  GstBufferPool* pool = nullptr;
  guint size = 0;
  if (context == nullptr) {
    why = "no CUDA context is shared with the pipeline";
  } else if (!cipc_gst::is_primary_context(context, context_device(self))) {
    why = "the pipeline's CUDA context is not the device's primary context";
  } else {
    pool = cipc_gst::make_exportable_cuda_pool(context, caps, p.pools->pool_size(), &size, &why);
  }
  gst_clear_object(&context);
  if (pool == nullptr) {
    GST_INFO_OBJECT(self, "proposing no exportable CUDA pool (frames will be copied): %s",
                    why.c_str());
    return;
  }
  gst_query_add_allocation_pool(query, pool, size, p.pools->pool_size(), 0);
  gst_object_unref(pool);
  GST_DEBUG_OBJECT(self, "proposed an exportable GStreamer CUDA pool upstream");
}
#endif

// A CPU writer's pool for CUDA slots: pinned host memory, when the copier can make it.
static void propose_pinned_pool(GstCudaSinkIpc* self, GstQuery* query, GstCaps* caps) {
  SinkPrivate& p = *self->priv;
  const guint size = static_cast<guint>(GST_VIDEO_INFO_SIZE(&p.pools->info()));
  if (GstBufferPool* pinned = p.copier ? p.copier->upload_pool(caps, size) : nullptr) {
    gst_query_add_allocation_pool(query, pinned, size, 2, 0);
    gst_object_unref(pinned);
  }
}

// Which pool to offer is sinknegotiation's choice; the pools are the element's.
static gboolean gst_cuda_sink_ipc_propose_allocation(GstBaseSink* sink, GstQuery* query) {
  auto* self = GST_CUDA_SINK_IPC(sink);
  SinkPrivate& p = *self->priv;
  GstCaps* caps = nullptr;
  gboolean need_pool = FALSE;
  gst_query_parse_allocation(query, &caps, &need_pool);
  if (caps == nullptr || !p.pools || !ensure_pool(self, caps)) return FALSE;
  gst_query_add_allocation_meta(query, GST_VIDEO_META_API_TYPE, nullptr);
  switch (cipc_gst::sink_pool_for(caps, p.cuda_memory)) {
    case cipc_gst::SinkPool::kExportableGstCuda:
#ifdef CIPC_HAVE_GST_CUDA
      propose_exportable_cuda_pool(self, query, caps);
#endif
      break;
    case cipc_gst::SinkPool::kPinnedUpload: propose_pinned_pool(self, query, caps); break;
    case cipc_gst::SinkPool::kSlots:
      gst_query_add_allocation_pool(query, p.pools->pool(), GST_VIDEO_INFO_SIZE(&p.pools->info()),
                                    p.pools->pool_size(), 0);
      break;
  }
  return TRUE;
}

// A buffer that is not in the current pool: copied into a slot (and counted) - unless no consumer
// is attached to receive it. Then nothing is copied (no work for nobody), `*skipped` says so and
// nullptr comes back; the frame counts as dropped. nullptr alone: an element error was posted.
static GstBuffer* copy_into_slot(GstCudaSinkIpc* self, GstBuffer* buffer, bool* skipped) {
  SinkPrivate& p = *self->priv;
  if (p.producer->consumer_count() == 0) {
    *skipped = true;
    return nullptr;
  }
  std::string error;
  GstBuffer* slot = p.copier->copy(*p.pools, buffer, &error);
  if (slot == nullptr) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Could not copy a frame into shareable memory."),
                      ("%s", error.c_str()));
    return nullptr;
  }
  ++p.copies;
  p.pageable_uploads = p.copier->pageable_uploads();
  p.pageable_upload_ns = p.copier->pageable_upload_ns();
#ifdef CIPC_HAVE_GST_CUDA
  if (p.cuda_memory && cipc_gst::buffer_is_gst_cuda_memory(buffer)) ++p.device_copies;
#endif
  return slot;
}

// Elements that hand on the buffers they get without making any: the one that made a frame sits
// above them, and is the one a copy warning must name.
static bool forwards_buffers(GstElement* element) {
  GstElementFactory* factory = gst_element_get_factory(element);
  const gchar* name = factory ? gst_plugin_feature_get_name(GST_PLUGIN_FEATURE(factory)) : "";
  for (const char* forwarder : {"queue", "queue2", "capsfilter", "identity", "valve"})
    if (g_strcmp0(name, forwarder) == 0) return true;
  return false;
}

// The element upstream that made the frames: "'tee0'" or "'tee0' (through 'queue0')".
static gchar* upstream_name(GstBaseSink* sink) {
  GstPad* pad = GST_PAD(gst_object_ref(GST_BASE_SINK_PAD(sink)));
  std::string made_by, through;
  for (int depth = 0; depth < 16 && made_by.empty(); ++depth) {
    GstPad* peer = gst_pad_get_peer(pad);
    gst_object_unref(pad);
    pad = nullptr;
    GstElement* parent = peer ? gst_pad_get_parent_element(peer) : nullptr;
    if (parent == nullptr) {
      made_by = peer ? GST_PAD_NAME(peer) : "(unlinked)";
    } else if (forwards_buffers(parent) && (pad = gst_element_get_static_pad(parent, "sink"))) {
      through += std::string(through.empty() ? "" : "', '") + GST_ELEMENT_NAME(parent);
    } else {
      made_by = GST_ELEMENT_NAME(parent);
    }
    if (parent) gst_object_unref(parent);
    if (peer) gst_object_unref(peer);
    if (pad == nullptr && made_by.empty()) made_by = "(unlinked)";
  }
  if (pad) gst_object_unref(pad);
  std::string text = "'" + made_by + "'";
  if (!through.empty()) text += " (through '" + through + "')";
  return g_strdup(text.c_str());
}

// Whether upstream flushes the pool it writes into. A pool that was deactivated (upstream let it
// go: it chose another) was flushed too, but that asks no one to stop: forget it.
static bool writer_is_flushing(GstCudaSinkIpc* self) {
  SinkPrivate& p = *self->priv;
  if (!p.producer_link->is_writer_flushing()) return false;
  GstBufferPool* pool = p.pools ? p.pools->pool() : nullptr;
  if (pool && gst_buffer_pool_is_active(pool)) return true;
  p.producer_link->set_writer_flushing(false);
  return false;
}

static GstFlowReturn wait_for_consumer(GstCudaSinkIpc* self) {
  cipc::Producer& producer = *self->priv->producer;
  while (producer.consumer_count() == 0) {
    if (producer.wait_for_consumer(-1)) break;
    if (writer_is_flushing(self)) return GST_FLOW_FLUSHING;
    // Interrupted by unlock(): let basesink handle the state change, then wait again.
    const GstFlowReturn ret = gst_base_sink_wait_preroll(GST_BASE_SINK(self));
    if (ret != GST_FLOW_OK) return ret;
  }
  return GST_FLOW_OK;
}

// Whether the source upstream is live (a camera), from a latency query made once per stream.
// Unanswered: treated as live, which keeps the old behaviour (never block the camera).
static bool upstream_is_live(GstCudaSinkIpc* self) {
  SinkPrivate& p = *self->priv;
  if (p.upstream_live < 0) {
    gboolean live = FALSE, upstream_live = FALSE;
    GstClockTime min_latency = 0, max_latency = 0;
    const gboolean answered = gst_base_sink_query_latency(
        GST_BASE_SINK(self), &live, &upstream_live, &min_latency, &max_latency);
    p.upstream_live = !answered || upstream_live ? 1 : 0;
    GST_INFO_OBJECT(self, "upstream is %s%s", p.upstream_live ? "live" : "not live",
                    answered ? "" : " (the latency query was not answered)");
  }
  return p.upstream_live == 1;
}

// backpressure=block, or auto with a source that is not live: every consumer gets every frame,
// and upstream waits for the slowest (release-timeout still evicts one that stops).
static GstFlowReturn wait_for_room(GstCudaSinkIpc* self) {
  cipc::Producer& producer = *self->priv->producer;
  for (;;) {
    if (producer.wait_for_room(-1) == cipc::Producer::Room::kReady) return GST_FLOW_OK;
    // Upstream is stopping its streaming thread (this one): give the frame up.
    if (writer_is_flushing(self)) return GST_FLOW_FLUSHING;
    // Interrupted by unlock(): let basesink handle the flush or state change, then wait again.
    const GstFlowReturn ret = gst_base_sink_wait_preroll(GST_BASE_SINK(self));
    if (ret != GST_FLOW_OK) return ret;
  }
}

static uint32_t wire_flags(GstBuffer* buffer) {
  uint32_t flags = 0;
  if (GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DISCONT)) flags |= cipc::Frame::kDiscont;
  if (GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT)) flags |= cipc::Frame::kDeltaUnit;
  if (GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_GAP)) flags |= cipc::Frame::kGap;
  return flags;
}

// The buffer to send: `buffer` itself when it sits in a current slot, else a copy in one (or
// nullptr: after an element error, or with `*skipped` set when no consumer would get the copy).
static GstBuffer* frame_in_slot(GstCudaSinkIpc* self, GstBuffer* buffer,
                                GstCipcCopyPolicy copy_policy, bool* skipped) {
  SinkPrivate& p = *self->priv;
  GstBaseSink* sink = GST_BASE_SINK(self);
  if (p.pools->current_slot(buffer)) return gst_buffer_ref(buffer);
  if (p.pools->stale_slot(buffer)) {
    // Our own doing (roll-over), so copied whatever the copy policy, and without the warning;
    // upstream is asked once to renegotiate, which gets it the current pool.
    if (p.pools->take_reconfigure()) {
      GST_DEBUG_OBJECT(self, "upstream writes into a replaced pool: asking it to renegotiate");
      gst_pad_push_event(GST_BASE_SINK_PAD(sink), gst_event_new_reconfigure());
    }
    return copy_into_slot(self, buffer, skipped);
  }
  if (copy_policy == GST_CIPC_REQUIRE_ZERO_COPY) {
    gchar* name = upstream_name(sink);
#ifdef CIPC_HAVE_GST_CUDA
    if (cipc_gst::buffer_is_gst_cuda_memory(buffer)) {
      GST_ELEMENT_ERROR(
          self, STREAM, FAILED,
          ("Upstream element %s delivers GStreamer CUDA memory (memory:CUDAMemory) that other "
           "processes cannot import (%s); copy-policy=require-zero-copy forbids the one "
           "device-to-device copy per frame that sharing it takes.",
           name,
           cipc_gst::gst_cuda_can_export_memory()
               ? "not allocated exportable: not from the pool cudasink-ipc proposed, e.g. a "
                 "decoder's own output surfaces"
               : "GStreamer before 1.24 cannot export CUDA memory"),
          ("Set copy-policy=copy-if-needed (the copy stays on the GPU); with GStreamer >= 1.24 "
           "let upstream write into the pool cudasink-ipc proposes (nvh264dec and the other "
           "NVDEC decoders do with num-output-surfaces=1), or put an element that writes into "
           "cudasink-ipc's pool (memory:CUDAIPCMemory) upstream."));
      g_free(name);
      return nullptr;
    }
#endif
    GST_ELEMENT_ERROR(self, STREAM, FAILED,
                      ("Upstream element %s did not write into cudasink-ipc's shareable buffer "
                       "pool, and copy-policy=require-zero-copy forbids copying.",
                       name),
                      ("Use an upstream element that honours the allocation query, or set "
                       "copy-policy=copy-if-needed."));
    g_free(name);
    return nullptr;
  }
  if (!p.warned_copy) {
    p.warned_copy = true;
    gchar* name = upstream_name(sink);
#ifdef CIPC_HAVE_GST_CUDA
    if (cipc_gst::buffer_is_gst_cuda_memory(buffer)) {
      GST_ELEMENT_INFO(self, STREAM, FORMAT,
                       ("Upstream element %s delivers GStreamer CUDA memory: every frame is "
                        "copied once on the GPU into a shareable slot (device-copies in the "
                        "'stats' property).",
                        name),
                       (nullptr));
      g_free(name);
      return copy_into_slot(self, buffer, skipped);
    }
#endif
    GST_ELEMENT_WARNING(self, STREAM, FORMAT,
                        ("Upstream element %s does not write into the shareable pool; every "
                         "frame is copied once (see the 'stats' property).",
                         name),
                        (nullptr));
    g_free(name);
  }
  return copy_into_slot(self, buffer, skipped);
}

// A frame ready to publish: its slot, what keeps it out of its pool, and its plane layout.
struct PlacedFrame {
  cipc::SlotRef ref;
  std::shared_ptr<cipc::FrameHold> hold;
  GstBuffer* described = nullptr;  // the buffer whose planes are sent (kept by `hold`)
  GstVideoInfo layout;
  bool skipped = false;  // no consumer: not copied, not sent (counted as dropped)
};

// `buffer` in a slot of the current generation: itself, exportable GstCudaMemory sent as it is,
// or a copy (none while no consumer is attached: then out->skipped). False after an element
// error.
static bool place_frame(GstCudaSinkIpc* self, GstBuffer* buffer, GstCipcCopyPolicy copy_policy,
                        PlacedFrame* out) {
  SinkPrivate& p = *self->priv;
#ifdef CIPC_HAVE_GST_CUDA
  if (p.exported) {
    std::string error;
    switch (p.exported->send(buffer, *p.pools, &out->ref, &out->hold, &error)) {
      case cipc_gst::SinkCudaMemoryInput::Outcome::kSent:
        out->described = buffer;
        out->layout = cipc_gst::exported_frame_layout(buffer, p.pools->info());
        ++p.gst_cuda_shared;
        return true;
      case cipc_gst::SinkCudaMemoryInput::Outcome::kFailed:
        GST_ELEMENT_ERROR(self, STREAM, FAILED,
                          ("Could not share a frame of GStreamer CUDA memory with consumers."),
                          ("%s", error.c_str()));
        return false;
      case cipc_gst::SinkCudaMemoryInput::Outcome::kNotExportable: break;
    }
  }
#endif
  GstBuffer* slot_buffer = frame_in_slot(self, buffer, copy_policy, &out->skipped);
  if (slot_buffer == nullptr) return out->skipped;
  const GstCipcSlotBinding* binding = p.pools->current_slot(slot_buffer);
  if (binding == nullptr) {  // not expected: copies land in the current pool, below the limit
    gst_buffer_unref(slot_buffer);
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Could not place a frame in a shareable slot."),
                      (nullptr));
    return false;
  }
  out->ref.generation = binding->generation;
  out->ref.index = binding->index;
  out->ref.memory = binding->producer_slot.get();
  out->hold = std::make_shared<cipc_gst::BufferHold>(slot_buffer);
  out->described = slot_buffer;
  out->layout = p.pools->info();
  return true;
}

static GstFlowReturn gst_cuda_sink_ipc_render(GstBaseSink* sink, GstBuffer* buffer) {
  auto* self = GST_CUDA_SINK_IPC(sink);
  SinkPrivate& p = *self->priv;
  // Slots of an older pool whose last claim ended on the producer's I/O thread.
  cipc_publish::destroy_parked_slots();
  if (!p.producer || !p.pools || !p.pools->pool()) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("Received a frame before its format."), (nullptr));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  // The two settings that may change while playing, without copying the others per frame.
  GST_OBJECT_LOCK(self);
  const bool wait = p.settings.wait_for_consumer;
  const GstCipcCopyPolicy copy_policy = p.settings.copy_policy;
  const GstCipcBackpressure backpressure = p.settings.backpressure;
  GST_OBJECT_UNLOCK(self);
  if (wait) {
    const GstFlowReturn ret = wait_for_consumer(self);
    if (ret != GST_FLOW_OK) return ret;
  }
  const bool live = upstream_is_live(self);
  if (backpressure == GST_CIPC_BACKPRESSURE_BLOCK ||
      (backpressure == GST_CIPC_BACKPRESSURE_AUTO && !live)) {
    const GstFlowReturn ret = wait_for_room(self);
    if (ret != GST_FLOW_OK) return ret;
  }

  bool rolled = false;
  std::string error;
  if (!p.pools->roll_over_if_needed(&rolled, &error)) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Could not start a new shareable buffer pool."),
                      ("%s", error.c_str()));
    return GST_FLOW_ERROR;
  }
  if (rolled) {
    p.pool_generation = p.pools->generation();
    p.pool_rollovers = p.pools->rollovers();
  }

  PlacedFrame placed;
  if (!place_frame(self, buffer, copy_policy, &placed)) return GST_FLOW_ERROR;
  if (placed.skipped) {
    ++p.frames_unsent;
    ++p.frames_rendered;
    GST_LOG_OBJECT(self, "no consumer: frame not copied, pts %" GST_TIME_FORMAT,
                   GST_TIME_ARGS(GST_BUFFER_PTS(buffer)));
    return GST_FLOW_OK;
  }

  cipc::Frame frame;
  // A producer that holds frames for its consumers (wait-for-consumer) gives up liveness on the
  // wire: consumers keep those frames, shifted in time, instead of dropping them as stale.
  frame.flags = wire_flags(buffer) | (live && !wait ? cipc::Frame::kLive : 0);
  GstClock* clock = gst_element_get_clock(GST_ELEMENT(self));
  const GstClockTime base_time = gst_element_get_base_time(GST_ELEMENT(self));
  const gint64 offset = p.clock_offset.get(clock);
  if (clock) gst_object_unref(clock);
  const GstSegment* segment = &sink->segment;
  frame.pts = cipc_gst::running_time_to_monotonic(
      gst_segment_to_running_time(segment, GST_FORMAT_TIME, GST_BUFFER_PTS(buffer)), base_time,
      offset);
  frame.dts = cipc_gst::running_time_to_monotonic(
      gst_segment_to_running_time(segment, GST_FORMAT_TIME, GST_BUFFER_DTS(buffer)), base_time,
      offset);
  frame.duration =
      GST_BUFFER_DURATION_IS_VALID(buffer) ? GST_BUFFER_DURATION(buffer) : cipc::kNoTimestamp;
  frame.offset =
      GST_BUFFER_OFFSET_IS_VALID(buffer) ? GST_BUFFER_OFFSET(buffer) : cipc::kNoTimestamp;
  cipc_gst::describe_planes(placed.described, placed.layout, frame);

  const size_t delivered = p.producer->publish(placed.ref, frame, placed.hold);
  ++p.frames_rendered;
  GST_LOG_OBJECT(self, "slot %u -> %zu consumer(s), pts %" GST_TIME_FORMAT, placed.ref.index,
                 delivered, GST_TIME_ARGS(GST_BUFFER_PTS(buffer)));
  return GST_FLOW_OK;
}

static gboolean gst_cuda_sink_ipc_event(GstBaseSink* sink, GstEvent* event) {
  auto* self = GST_CUDA_SINK_IPC(sink);
  if (GST_EVENT_TYPE(event) == GST_EVENT_STREAM_START) self->priv->upstream_live = -1;
  if (GST_EVENT_TYPE(event) == GST_EVENT_EOS && self->priv->producer)
    self->priv->producer->send_eos();
  return GST_BASE_SINK_CLASS(gst_cuda_sink_ipc_parent_class)->event(sink, event);
}

static void set_flushing(GstCudaSinkIpc* self, bool flushing) {
  SinkPrivate& p = *self->priv;
  std::lock_guard<std::mutex> lock(p.producer_lock);
  if (p.producer) p.producer->set_flushing(flushing);
}

static gboolean gst_cuda_sink_ipc_unlock(GstBaseSink* sink) {
  set_flushing(GST_CUDA_SINK_IPC(sink), true);
  return TRUE;
}

static gboolean gst_cuda_sink_ipc_unlock_stop(GstBaseSink* sink) {
  set_flushing(GST_CUDA_SINK_IPC(sink), false);
  return TRUE;
}

#ifdef CIPC_HAVE_GST_CUDA
// The GPU of this element's CUDA work, for the GstCudaContext it shares.
static int context_device(GstCudaSinkIpc* self) {
  const int id = snapshot_settings(self).cuda_device_id;
  return id < 0 ? 0 : id;
}

// nvcodec elements ask their neighbours for a "gst.cuda.context": they get the wrapper of our
// primary context, created on first demand, so that the process has one context per device.
static gboolean gst_cuda_sink_ipc_query(GstBaseSink* sink, GstQuery* query) {
  auto* self = GST_CUDA_SINK_IPC(sink);
  if (self->priv->cuda_context.answer_query(GST_ELEMENT(self), query, context_device(self)))
    return TRUE;
  return GST_BASE_SINK_CLASS(gst_cuda_sink_ipc_parent_class)->query(sink, query);
}

static void gst_cuda_sink_ipc_set_context(GstElement* element, GstContext* context) {
  auto* self = GST_CUDA_SINK_IPC(element);
  self->priv->cuda_context.set(element, context, context_device(self));
  GST_ELEMENT_CLASS(gst_cuda_sink_ipc_parent_class)->set_context(element, context);
}

// NULL -> READY runs before upstream elements open (sinks change state first): announcing the
// context now lets a decoder further upstream find it even when it is not our neighbour.
static void share_cuda_context(GstCudaSinkIpc* self) {
  GstElement* element = GST_ELEMENT(self);
  if (snapshot_settings(self).memory == cipc::MemoryKind::kCuda) {
    SinkPrivate& p = *self->priv;
    GstCudaContext* context = p.cuda_context.held();
    bool primary = true;
    std::string why;
    // Outside the lock: it may post messages whose handlers query or set our context.
    if (cipc_gst::ensure_cuda_context(element, context_device(self), &context, &primary, &why)) {
      p.cuda_context.adopt(&context);
    } else {
      GST_INFO_OBJECT(self, "not sharing a CUDA context with GStreamer's CUDA elements: %s",
                      why.c_str());
    }
    gst_clear_object(&context);
  }
}
#endif

static GstStateChangeReturn gst_cuda_sink_ipc_change_state(GstElement* element,
                                                           GstStateChange transition) {
  auto* self = GST_CUDA_SINK_IPC(element);
#ifdef CIPC_HAVE_GST_CUDA
  if (transition == GST_STATE_CHANGE_NULL_TO_READY) share_cuda_context(self);
#endif
  if (transition == GST_STATE_CHANGE_READY_TO_PAUSED && !start_serving(self))
    return GST_STATE_CHANGE_FAILURE;  // start_serving() posted the error
  const GstStateChangeReturn ret =
      GST_ELEMENT_CLASS(gst_cuda_sink_ipc_parent_class)->change_state(element, transition);
  // Stopped by basesink's stop() on the way down; a start that basesink failed never gets there.
  if (transition == GST_STATE_CHANGE_READY_TO_PAUSED && ret == GST_STATE_CHANGE_FAILURE)
    self->priv->teardown();
  return ret;
}

static void gst_cuda_sink_ipc_finalize(GObject* object) {
  delete GST_CUDA_SINK_IPC(object)->priv;
  G_OBJECT_CLASS(gst_cuda_sink_ipc_parent_class)->finalize(object);
}

// copy-policy's description, saying what this build does with GStreamer's CUDA memory upstream.
static const char* copy_policy_blurb() {
#ifdef CIPC_HAVE_GST_CUDA
  if (cipc_gst::gst_cuda_can_export_memory())
    return "What to do with buffers that upstream did not write into the shareable pool. "
           "GStreamer CUDA memory (memory:CUDAMemory) written into the exportable pool this "
           "element proposes upstream is sent as it is, with no copy (this build: GStreamer 1.24 "
           "or later); other GStreamer CUDA memory (a decoder's own output surfaces) takes one "
           "device copy";
  return "What to do with buffers that upstream did not write into the shareable pool. "
         "GStreamer CUDA memory (memory:CUDAMemory) always takes one device copy (this build: "
         "GStreamer before 1.24 cannot export it)";
#else
  return "What to do with buffers that upstream did not write into the shareable pool";
#endif
}

static void gst_cuda_sink_ipc_class_init(GstCudaSinkIpcClass* klass) {
  auto* object_class = G_OBJECT_CLASS(klass);
  auto* element_class = GST_ELEMENT_CLASS(klass);
  auto* sink_class = GST_BASE_SINK_CLASS(klass);
  object_class->set_property = gst_cuda_sink_ipc_set_property;
  object_class->get_property = gst_cuda_sink_ipc_get_property;
  object_class->finalize = gst_cuda_sink_ipc_finalize;

  const GParamFlags rw_ready = cipc_gst::kParamReadyRW;
  const GParamFlags rw_playing = cipc_gst::kParamPlayingRW;
  const GParamFlags ro = cipc_gst::kParamRO;

  g_object_class_install_property(
      object_class, PROP_SOCKET_PATH,
      g_param_spec_string("socket-path", "Socket path",
                          "Filesystem path of the Unix socket consumers connect to. A stale "
                          "socket left by a dead producer is replaced; a live one is an error",
                          DEFAULT_SOCKET_PATH.c_str(), rw_ready));
  g_object_class_install_property(
      object_class, PROP_SOCKET_MODE,
      g_param_spec_uint("socket-mode", "Socket mode",
                        "Permission bits of the socket file, in octal: the default 0600 (shown "
                        "in decimal as 384) lets only the owner connect; 0660 adds the group",
                        0, 0777, DEFAULT_SOCKET_MODE, rw_ready));
  g_object_class_install_property(
      object_class, PROP_ALLOW_OTHER_USERS,
      g_param_spec_boolean("allow-other-users", "Allow other users",
                           "Accept consumers running under another user id (checked with "
                           "SO_PEERCRED); by default only the producer's own user may attach",
                           DEFAULT_ALLOW_OTHER_USERS, rw_ready));
  g_object_class_install_property(
      object_class, PROP_MEMORY,
      g_param_spec_enum("memory", "Memory", "Where the shared slots live",
                        gst_cipc_sink_memory_get_type(), static_cast<gint>(DEFAULT_MEMORY),
                        rw_ready));
  g_object_class_install_property(
      object_class, PROP_MAX_IN_FLIGHT,
      g_param_spec_uint("max-in-flight", "Max in flight",
                        "Frames one consumer may hold at once. Beyond that, what backpressure "
                        "says happens: upstream waits until it releases one (block), or the "
                        "frame skips that consumer, counted in frames-dropped (drop)",
                        1, cipc::kMaxInFlight, DEFAULT_MAX_IN_FLIGHT, rw_ready));
  g_object_class_install_property(
      object_class, PROP_RELEASE_TIMEOUT,
      g_param_spec_uint(
          "release-timeout", "Release timeout",
          "Milliseconds a consumer may keep a frame after the producer needs it "
          "back (a newer frame exists, or the writer waits) before it is "
          "disconnected and its slots are retired; for up to 30 s after it attached, a "
          "consumer that has not yet read its first frames (still starting up) "
          "gets the whole timeout from when it reads them. 0 = wait forever",
          0, G_MAXUINT, DEFAULT_RELEASE_TIMEOUT, rw_ready));
  g_object_class_install_property(
      object_class, PROP_WAIT_FOR_CONSUMER,
      g_param_spec_boolean("wait-for-consumer", "Wait for consumer",
                           "Hold frames back (blocking upstream) until at least one consumer is "
                           "attached, instead of discarding them",
                           DEFAULT_WAIT_FOR_CONSUMER, rw_playing));
  g_object_class_install_property(
      object_class, PROP_COPY_POLICY,
      g_param_spec_enum("copy-policy", "Copy policy", copy_policy_blurb(),
                        gst_cipc_copy_policy_get_type(), DEFAULT_COPY_POLICY, rw_playing));
  g_object_class_install_property(
      object_class, PROP_BACKPRESSURE,
      g_param_spec_enum("backpressure", "Backpressure",
                        "What happens when a consumer holds max-in-flight frames: block "
                        "upstream until it can take the frame, or drop the frame for that "
                        "consumer. auto blocks for sources that are not live (files: nothing is "
                        "lost) and drops for live ones (cameras: nobody is slowed down)",
                        gst_cipc_backpressure_get_type(), DEFAULT_BACKPRESSURE, rw_playing));
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
                        gst_cipc_sync_mode_get_type(), static_cast<gint>(DEFAULT_SYNC_MODE),
                        rw_ready));
  g_object_class_install_property(object_class, PROP_NUM_CONSUMERS,
                                  g_param_spec_uint("num-consumers", "Number of consumers",
                                                    "Consumers attached now", 0, G_MAXUINT, 0, ro));
  g_object_class_install_property(
      object_class, PROP_STATS,
      g_param_spec_boxed(
          "stats", "Statistics",
          "frames-rendered, frames-sent (summed over consumers), frames-dropped (a consumer "
          "was skipped, or no consumer was attached and a frame that needed a copy was not "
          "copied), copies, device-copies (of them: GStreamer CUDA memory copied on the "
          "GPU), pageable-uploads (of them: uploads from pageable memory, which "
          "the driver stages synchronously), pageable-upload-ns (the streaming thread's "
          "time inside those uploads, in nanoseconds), gst-cuda-frames-shared (GStreamer CUDA "
          "memory written into the exportable pool proposed upstream and sent without a copy, "
          "GStreamer >= 1.24), consumers, consumers-total, consumers-timed-out, "
          "consumers-rejected, releases, claims-outstanding, slots-exported, "
          "backpressure-waits (frames that waited for a consumer to release), "
          "slots-retired (out of the pool after a consumer timed out), "
          "retire-notices (RETIRE messages telling other consumers), "
          "pool-generation, pool-rollovers, cuda-mps (boolean: memory=cuda and this "
          "process's CUDA context runs as a client of an MPS server)",
          GST_TYPE_STRUCTURE, ro));

  gst_element_class_set_static_metadata(
      element_class, "CUDA IPC sink", "Sink/Video/Hardware",
      "Shares video frames with other processes without copying them (cudasrc-ipc receives)",
      "gst-cudaipc developers");
  cipc_gst::add_doc_uri(element_class, "cudasink-ipc");
  gst_element_class_add_static_pad_template(element_class, &sink_template);

#ifdef CIPC_HAVE_GST_CUDA
  sink_class->query = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_query);
  element_class->set_context = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_set_context);
#endif
  element_class->change_state = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_change_state);
  sink_class->stop = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_stop);
  sink_class->set_caps = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_set_caps);
  sink_class->get_caps = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_get_caps);
  sink_class->propose_allocation = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_propose_allocation);
  sink_class->render = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_render);
  sink_class->event = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_event);
  sink_class->unlock = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_unlock);
  sink_class->unlock_stop = GST_DEBUG_FUNCPTR(gst_cuda_sink_ipc_unlock_stop);

  gst_type_mark_as_plugin_api(gst_cipc_sink_memory_get_type(), static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(gst_cipc_sync_mode_get_type(), static_cast<GstPluginAPIFlags>(0));
}

static void gst_cuda_sink_ipc_init(GstCudaSinkIpc* self) {
  self->priv = new SinkPrivate(GST_ELEMENT(self));
  gst_base_sink_set_sync(GST_BASE_SINK(self), TRUE);
}
