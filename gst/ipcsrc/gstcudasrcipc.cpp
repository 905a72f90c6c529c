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
 * Players and applications that take a URI open it as cudaipc:///path/to/socket, with
 * properties as query parameters (cudaipc:///tmp/cam0.sock?reconnect=true); see
 * gst/common/urihandler.h.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 cudasrc-ipc socket-path=/tmp/cam0.sock reconnect=true ! videoconvert ! \
 *     autovideosink
 * ]|
 *
 * Since: 0.1
 */
#include "ipcsrc/gstcudasrcipc.h"
#include "common/elementdocs.h"
#include "common/paramflags.h"

#include <gst/video/video.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "channel.h"
#include "common/clockmapping.h"
#include "common/elementtype.h"
#include "common/frameplanes.h"
#include "common/gstcompat.h"
#include "common/gstcudainterop.h"
#include "consumer_backend.h"
#include "ipcsrc/srcenums.h"
#include "reconnectingconsumer.h"
#ifdef CIPC_HAVE_GST_GL
#include "ipcsrc/gl/glcontext.h"
#include "ipcsrc/gl/glcudainteropoutput.h"
#endif
#include "common/urihandler.h"
#include "ipcsrc/srcnegotiation.h"
#include "ipcsrc/srcoutput.h"
#include "memory/slotmemory.h"

GST_DEBUG_CATEGORY_STATIC(gst_cuda_src_ipc_debug);
#define GST_CAT_DEFAULT gst_cuda_src_ipc_debug

enum {
  PROP_0,
  PROP_SOCKET_PATH,
  PROP_ALLOW_OTHER_USERS,
  PROP_MEMORY,
  PROP_RECONNECT,
  PROP_RECONNECT_INTERVAL,
  PROP_CONNECT_TIMEOUT,
  PROP_MAX_IN_FLIGHT,
  PROP_PROCESSING_DEADLINE,
  PROP_STATS_INTERVAL,
  PROP_CUDA_DEVICE_ID,
  PROP_IO_MODE,
  PROP_GL_IMPORT,
  PROP_STATS,
};

// Per user ($XDG_RUNTIME_DIR or /tmp/cudaipc-<uid>): see cipc::default_socket_path().
#define DEFAULT_SOCKET_PATH cipc::default_socket_path()
// Reference timestamp caps of the meta carrying the producer's send time.
#define CIPC_SEND_TIME_CAPS "timestamp/x-cudaipc-send-monotonic"
#define DEFAULT_ALLOW_OTHER_USERS FALSE
#define DEFAULT_MEMORY cipc::MemoryKind::kAny
#define DEFAULT_RECONNECT FALSE
#define DEFAULT_RECONNECT_INTERVAL 100
#define DEFAULT_CONNECT_TIMEOUT 5000
#define DEFAULT_MAX_IN_FLIGHT 4
#define DEFAULT_PROCESSING_DEADLINE (20 * GST_MSECOND)
// A latency must be a valid clock time (GST_CLOCK_TIME_NONE is not): an hour is beyond any use.
constexpr guint64 kMaxProcessingDeadline = 3600 * GST_SECOND;
#define DEFAULT_STATS_INTERVAL 0
#define DEFAULT_CUDA_DEVICE_ID -1
#define DEFAULT_IO_MODE GST_CIPC_IO_IMPORT
// GL textures where downstream takes them, through system memory where CUDA cannot write them.
#define DEFAULT_GL_IMPORT GST_CIPC_GL_IMPORT_AUTO

namespace {

struct Settings {
  std::string socket_path = DEFAULT_SOCKET_PATH;
  gboolean allow_other_users = DEFAULT_ALLOW_OTHER_USERS;
  cipc::MemoryKind memory = DEFAULT_MEMORY;
  gboolean reconnect = DEFAULT_RECONNECT;
  guint reconnect_interval = DEFAULT_RECONNECT_INTERVAL;
  guint connect_timeout = DEFAULT_CONNECT_TIMEOUT;
  guint max_in_flight = DEFAULT_MAX_IN_FLIGHT;
  GstClockTime processing_deadline = DEFAULT_PROCESSING_DEADLINE;
  guint stats_interval = DEFAULT_STATS_INTERVAL;
  gint cuda_device_id = DEFAULT_CUDA_DEVICE_ID;
  GstCipcIoMode io_mode = DEFAULT_IO_MODE;
  GstCipcGlImport gl_import = DEFAULT_GL_IMPORT;
};

struct Counters {
  std::atomic<guint64> frames{0};
  std::atomic<guint64> frames_skipped{0};  // sequence gaps: frames the producer did not send us
  std::atomic<guint64> slots_imported{0};
  std::atomic<guint64> slots_retired{0};       // imports dropped because the producer retired them
  std::atomic<guint64> frames_stale{0};        // live frames captured before this pipeline started
  std::atomic<guint64> timestamp_shift_ns{0};  // added to a non-live producer's timestamps
  std::atomic<guint64> connects{0};
  std::atomic<guint64> caps_changes{0};
  std::atomic<guint64> latency_last_ns{0};
  std::atomic<guint64> downloads{0};      // device-to-host copies into downstream buffers
  std::atomic<guint64> device_copies{0};  // io-mode=copy
  std::atomic<guint64> gl_copies{0};      // gl-import=memory-object: GL's copies into textures
  std::atomic<bool> cuda_mps{false};      // the CUDA context importing frames is an MPS client

  void reset() {
    frames = frames_skipped = slots_imported = slots_retired = connects = caps_changes = 0;
    frames_stale = timestamp_shift_ns = 0;
    latency_last_ns = 0;
    downloads = device_copies = gl_copies = 0;
    cuda_mps = false;
  }
};

// Latency samples for one stats-interval message.
struct Window {
  std::vector<uint64_t> latency_ns;
  uint64_t start_ns = 0;
  uint64_t frames = 0;
};

// Everything the element owns, in one place; members clean up after themselves.
struct SrcPrivate {
  Settings settings;  // properties, under the object lock
  Counters counters;

  // Streaming state (streaming thread, start/stop); reset by teardown().
  Settings active;  // as of start(): every property is fixed from READY on
  cipc::Waker waker;
  std::unique_ptr<cipc::ReconnectingConsumer> client;
  cipc_gst::ClockOffset clock_offset;
  cipc_gst::TimestampMapper timestamps;
  std::unique_ptr<cipc_gst::SrcOutput> output;  // made by set_caps (gst/ipcsrc/srcoutput.h)
  bool output_for_cuda = false;                 // `output` was made for a producer of CUDA memory
  bool producer_cuda = false;                   // the current producer shares CUDA memory
  GstVideoInfo out_info;  // what we output (format may be BGRx for the producer's BGRA)
  cipc_gst::SrcCudaSide cuda;
  bool discont = true;
  bool first_frame = true;  // no frame yet from the producer attached last (logged at INFO)
  bool warned_one_in_flight = false;  // warn_if_one_frame_cannot_flow(), once per producer
  GstCaps* caps = nullptr;  // the producer's current caps (object lock: get_caps reads it)
  GstVideoInfo info;
  Window window;

#ifdef CIPC_HAVE_GST_CUDA
  // Shared with nvcodec elements (context queries, set_context); kept across state changes.
  cipc_gst::ElementCudaContext cuda_context;
#endif
#ifdef CIPC_HAVE_GST_GL
  // Shared with GL elements (glimagesink): the display, the application's and downstream's context.
  cipc_gst::ElementGlContext gl_context;
#endif
  ~SrcPrivate() {
    gst_clear_caps(&caps);
  }

  // The one cleanup path, for stop() and for a start() that failed.
  void teardown(GstObject* element) {
    client.reset();  // says BYE; frames still downstream stay valid until released
    clock_offset.reset();
    GST_OBJECT_LOCK(element);
    gst_clear_caps(&caps);
    GST_OBJECT_UNLOCK(element);
    output.reset();  // before `cuda`, which it uses
    cuda = cipc_gst::SrcCudaSide();
    producer_cuda = false;
    discont = true;
    window = Window();
  }
};

}  // namespace

struct _GstCudaSrcIpc {
  GstPushSrc parent;
  SrcPrivate* priv;
};

// With GStreamer's CUDA library, nvcodec's memory:CUDAMemory too (one copy on the GPU).
#ifdef CIPC_HAVE_GST_CUDA
#define CIPC_SRC_GST_CUDA_CAPS \
  GST_VIDEO_CAPS_MAKE_WITH_FEATURES(GST_CAPS_FEATURE_MEMORY_CUDA_MEMORY, GST_VIDEO_FORMATS_ALL) ";"
#else
#define CIPC_SRC_GST_CUDA_CAPS
#endif
// With GStreamer's GL library, GL textures written on the GPU (CUDA producers, 4-byte formats).
#ifdef CIPC_HAVE_GST_GL
#define CIPC_SRC_GL_CAPS                                               \
  GST_VIDEO_CAPS_MAKE_WITH_FEATURES(GST_CAPS_FEATURE_MEMORY_GL_MEMORY, \
                                    "{ RGBA, BGRA, RGBx, BGRx }")      \
  ", texture-target=(string)2D;"
#else
#define CIPC_SRC_GL_CAPS
#endif
static GstStaticPadTemplate src_template =
    GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS,
                            GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE_WITH_FEATURES(
                                GST_CAPS_FEATURE_MEMORY_CUDA_IPC,
                                GST_VIDEO_FORMATS_ALL) ";" CIPC_SRC_GST_CUDA_CAPS CIPC_SRC_GL_CAPS
                                                GST_VIDEO_CAPS_MAKE(GST_VIDEO_FORMATS_ALL)));

// The URI handler (cudaipc:///path/to/socket?property=value): gst/common/urihandler.h.
CIPC_DEFINE_ELEMENT_TYPE_WITH_CODE(GstCudaSrcIpc, gst_cuda_src_ipc, GST_TYPE_PUSH_SRC,
                                   "GstCudaSrc-ipc",
                                   G_IMPLEMENT_INTERFACE(GST_TYPE_URI_HANDLER,
                                                         cipc_gst::init_src_uri_handler))
// The category is made with the registration, so that --gst-debug-help lists it once the
// plugin is loaded, before the element is first used.
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE(cudasrc_ipc, "cudasrc-ipc", GST_RANK_NONE,
                                      GST_TYPE_CUDA_SRC_IPC,
                                      GST_DEBUG_CATEGORY_INIT(gst_cuda_src_ipc_debug, "cudaipc-src",
                                                              0, "cudasrc-ipc element"))

static Settings snapshot_settings(GstCudaSrcIpc* self) {
  GST_OBJECT_LOCK(self);
  Settings s = self->priv->settings;
  GST_OBJECT_UNLOCK(self);
  return s;
}

// Every counter, in both the stats property and the stats-interval message: one list, so that
// neither can lack a field the other has (issue 24, defect 10).
static void set_counters(const Counters& c, GstStructure* s) {
  gst_structure_set(
      s, "frames-received", G_TYPE_UINT64, c.frames.load(), "frames-skipped", G_TYPE_UINT64,
      c.frames_skipped.load(), "frames-stale", G_TYPE_UINT64, c.frames_stale.load(),
      "timestamp-shift-ns", G_TYPE_UINT64, c.timestamp_shift_ns.load(), "slots-imported",
      G_TYPE_UINT64, c.slots_imported.load(), "slots-retired", G_TYPE_UINT64,
      c.slots_retired.load(), "connects", G_TYPE_UINT64, c.connects.load(), "caps-changes",
      G_TYPE_UINT64, c.caps_changes.load(), "latency-last-ns", G_TYPE_UINT64,
      c.latency_last_ns.load(), "downloads", G_TYPE_UINT64, c.downloads.load(), "device-copies",
      G_TYPE_UINT64, c.device_copies.load(), "gl-copies", G_TYPE_UINT64, c.gl_copies.load(),
      "cuda-mps", G_TYPE_BOOLEAN, static_cast<gboolean>(c.cuda_mps.load()), nullptr);
}

static GstStructure* make_stats(GstCudaSrcIpc* self) {
  GstStructure* s = gst_structure_new_empty("cudasrc-ipc-stats");
  set_counters(self->priv->counters, s);
  return s;
}

static void gst_cuda_src_ipc_set_property(GObject* object, guint prop_id, const GValue* value,
                                          GParamSpec* pspec) {
  auto* self = GST_CUDA_SRC_IPC(object);
  GST_OBJECT_LOCK(self);
  Settings& s = self->priv->settings;
  switch (prop_id) {
    case PROP_SOCKET_PATH: {
      const gchar* path = g_value_get_string(value);
      s.socket_path = path ? path : DEFAULT_SOCKET_PATH;
      break;
    }
    case PROP_ALLOW_OTHER_USERS: s.allow_other_users = g_value_get_boolean(value); break;
    case PROP_MEMORY: s.memory = static_cast<cipc::MemoryKind>(g_value_get_enum(value)); break;
    case PROP_RECONNECT: s.reconnect = g_value_get_boolean(value); break;
    case PROP_RECONNECT_INTERVAL: s.reconnect_interval = g_value_get_uint(value); break;
    case PROP_CONNECT_TIMEOUT: s.connect_timeout = g_value_get_uint(value); break;
    case PROP_MAX_IN_FLIGHT: s.max_in_flight = g_value_get_uint(value); break;
    case PROP_PROCESSING_DEADLINE: s.processing_deadline = g_value_get_uint64(value); break;
    case PROP_STATS_INTERVAL: s.stats_interval = g_value_get_uint(value); break;
    case PROP_CUDA_DEVICE_ID: s.cuda_device_id = g_value_get_int(value); break;
    case PROP_IO_MODE: s.io_mode = static_cast<GstCipcIoMode>(g_value_get_enum(value)); break;
    case PROP_GL_IMPORT: s.gl_import = static_cast<GstCipcGlImport>(g_value_get_enum(value)); break;
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
  const Settings& s = self->priv->settings;
  switch (prop_id) {
    case PROP_SOCKET_PATH: g_value_set_string(value, s.socket_path.c_str()); break;
    case PROP_ALLOW_OTHER_USERS: g_value_set_boolean(value, s.allow_other_users); break;
    case PROP_MEMORY: g_value_set_enum(value, static_cast<gint>(s.memory)); break;
    case PROP_RECONNECT: g_value_set_boolean(value, s.reconnect); break;
    case PROP_RECONNECT_INTERVAL: g_value_set_uint(value, s.reconnect_interval); break;
    case PROP_CONNECT_TIMEOUT: g_value_set_uint(value, s.connect_timeout); break;
    case PROP_MAX_IN_FLIGHT: g_value_set_uint(value, s.max_in_flight); break;
    case PROP_PROCESSING_DEADLINE: g_value_set_uint64(value, s.processing_deadline); break;
    case PROP_STATS_INTERVAL: g_value_set_uint(value, s.stats_interval); break;
    case PROP_CUDA_DEVICE_ID: g_value_set_int(value, s.cuda_device_id); break;
    case PROP_IO_MODE: g_value_set_enum(value, s.io_mode); break;
    case PROP_GL_IMPORT: g_value_set_enum(value, s.gl_import); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK(self);
}

// Once the producer has said what it shares (WELCOME): the backend to import with, and for a
// CUDA producer the stream and copies on its GPU.
static cipc::Result<std::shared_ptr<cipc::MemoryBackend>> choose_backend(GstCudaSrcIpc* self,
                                                                         const cipc::Welcome& w) {
  SrcPrivate& p = *self->priv;
  cipc_slots::ConsumerDevice gpu;
  // gl-import=memory-object: GL imports the slots from their descriptors (one kept per slot).
  auto backend = cipc_slots::backend_for_producer(
      w, p.active.cuda_device_id, &gpu, p.active.gl_import == GST_CIPC_GL_IMPORT_MEMORY_OBJECT);
  if (!backend) return backend;
  const int device = gpu.ordinal;
  p.producer_cuda = w.memory_kind == cipc::MemoryKind::kCuda;
  p.counters.cuda_mps = gpu.mps_client;
  if (p.producer_cuda)
    GST_INFO_OBJECT(
        self, "importing on CUDA device %d%s", device,
        gpu.mps_client ? " as an MPS client (one server context for all its clients)" : "");
#ifdef CIPC_HAVE_CUDA
  if (p.producer_cuda && (p.cuda.device != device || !p.cuda.stream.handle())) {
    p.cuda = cipc_gst::SrcCudaSide();  // the output reads it per frame: no need to remake it
    const cipc_cuda::Status status = cipc_cuda::Stream::create(device, &p.cuda.stream);
    if (!status) return cipc::Error{cipc::ErrorCode::kSystem, status.message()};
    p.cuda.copies = cipc_slots::PrivateCopies::create(device);
    p.cuda.deferred = std::make_unique<cipc_slots::DeferredReleases>();
    p.cuda.device = device;
  }
#endif
  return backend;
}

static gboolean gst_cuda_src_ipc_start(GstBaseSrc* src) {
  auto* self = GST_CUDA_SRC_IPC(src);
  SrcPrivate& p = *self->priv;
  const Settings s = snapshot_settings(self);
#ifndef CIPC_HAVE_CUDA
  if (s.memory == cipc::MemoryKind::kCuda) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                      ("memory=cuda is not available: this cudaipc plugin was built without the "
                       "CUDA toolkit; use memory=auto or memory=host."),
                      (nullptr));
    return FALSE;
  }
#endif
  if (!p.waker.valid()) {
    GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("Could not create an eventfd."), (nullptr));
    return FALSE;
  }
  p.teardown(GST_OBJECT(self));
  p.active = s;
  p.waker.clear();
  p.counters.reset();
  cipc::ClientConfig config;
  config.consumer.socket_path = s.socket_path;
  config.consumer.memory_kind = s.memory;
  config.consumer.allow_other_users = s.allow_other_users;
  config.consumer.max_in_flight = s.max_in_flight;
  config.reconnect = s.reconnect;
  config.reconnect_interval_ms = s.reconnect_interval;
  config.connect_timeout_ms = s.connect_timeout;
  // A wait for a producer says at INFO what it waits for, and at DEBUG each attempt.
  config.on_retry = [self, s](const cipc::ConnectAttempt& a) {
    const char* why = a.error ? a.error->message.c_str() : "";
    if (a.number == 1) {
      const bool forever = s.reconnect || s.connect_timeout == 0;
      GST_INFO_OBJECT(
          self, "%s a producer at %s, %s, trying every %u ms: %s",
          a.after_loss ? "lost the producer; waiting for" : "waiting for", s.socket_path.c_str(),
          forever ? "for as long as it takes" : "until connect-timeout", s.reconnect_interval, why);
    }
    GST_DEBUG_OBJECT(self, "attempt %" G_GUINT64_FORMAT " to reach %s: %s", a.number,
                     s.socket_path.c_str(), why);
  };
  p.client = std::make_unique<cipc::ReconnectingConsumer>(
      config, [self](const cipc::Welcome& w) { return choose_backend(self, w); }, &p.waker);
  return TRUE;
}

static gboolean gst_cuda_src_ipc_stop(GstBaseSrc* src) {
  auto* self = GST_CUDA_SRC_IPC(src);
  self->priv->teardown(GST_OBJECT(self));
#ifdef CIPC_HAVE_GST_GL
  self->priv->gl_context.drop_context();  // the next start may have another GL sink downstream
#endif
  return TRUE;
}

static gboolean gst_cuda_src_ipc_unlock(GstBaseSrc* src) {
  GST_CUDA_SRC_IPC(src)->priv->waker.wake();
  return TRUE;
}

static gboolean gst_cuda_src_ipc_unlock_stop(GstBaseSrc* src) {
  GST_CUDA_SRC_IPC(src)->priv->waker.clear();
  return TRUE;
}

// The producer's caps as we can output them, or nullptr before the producer sent any.
static GstCaps* current_output_caps(GstCudaSrcIpc* self) {
  SrcPrivate& p = *self->priv;
  GstCaps* caps = nullptr;
  GST_OBJECT_LOCK(self);
  if (p.caps)
    caps = cipc_gst::src_output_caps(p.producer_cuda, p.caps,
                                     p.settings.gl_import != GST_CIPC_GL_IMPORT_NONE);
  GST_OBJECT_UNLOCK(self);
  return caps;
}

static GstCaps* gst_cuda_src_ipc_get_caps(GstBaseSrc* src, GstCaps* filter) {
  GstCaps* caps = current_output_caps(GST_CUDA_SRC_IPC(src));
  if (!caps) caps = gst_pad_get_pad_template_caps(GST_BASE_SRC_PAD(src));
  if (filter) {
    GstCaps* tmp = gst_caps_intersect_full(filter, caps, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref(caps);
    caps = tmp;
  }
  return caps;
}

#ifdef CIPC_HAVE_GST_CUDA
static int context_device(GstCudaSrcIpc* self);
static GstCudaContext* our_gst_cuda_context(GstCudaSrcIpc* self);
#endif

#ifdef CIPC_HAVE_GST_GL
// GL memory downstream: a GL pool on the context frames are written in.
static gboolean decide_gl_allocation(GstCudaSrcIpc* self, GstQuery* query, GstCaps* caps) {
  std::string why;
  GstGLContext* context = self->priv->gl_context.ensure(GST_ELEMENT(self), &why);
  const bool ok = context && cipc_gst::decide_gl_pool(query, caps, context);
  if (context) gst_object_unref(context);
  if (!ok)
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                      ("Cannot output GL memory: %s.",
                       why.empty() ? "no GL buffer pool could be configured" : why.c_str()),
                      ("caps %" GST_PTR_FORMAT, caps));
  return ok;
}
#endif

// The pool downstream's memory needs (srcnegotiation.h); our own memory needs none.
static gboolean gst_cuda_src_ipc_decide_allocation(GstBaseSrc* src, GstQuery* query) {
  GstCaps* caps = nullptr;
  gst_query_parse_allocation(query, &caps, nullptr);
  GstVideoInfo info;
  if (!caps || !gst_video_info_from_caps(&info, caps))
    return GST_BASE_SRC_CLASS(gst_cuda_src_ipc_parent_class)->decide_allocation(src, query);
  switch (cipc_gst::src_caps_memory(caps)) {
    case cipc_gst::SrcCapsMemory::kCudaIpc: break;
    case cipc_gst::SrcCapsMemory::kGstCuda: {
#ifdef CIPC_HAVE_GST_CUDA
      GstCudaContext* context = our_gst_cuda_context(GST_CUDA_SRC_IPC(src));
      cipc_gst::decide_gst_cuda_pool(query, caps, info, context);
      if (context) gst_object_unref(context);
#endif
      break;
    }
    case cipc_gst::SrcCapsMemory::kGl:
#ifdef CIPC_HAVE_GST_GL
      if (!decide_gl_allocation(GST_CUDA_SRC_IPC(src), query, caps)) return FALSE;
#endif
      break;
    case cipc_gst::SrcCapsMemory::kSystem:
      cipc_gst::decide_system_memory_pool(query, caps, info);
      break;
  }
  return GST_BASE_SRC_CLASS(gst_cuda_src_ipc_parent_class)->decide_allocation(src, query);
}

// Caps come from the producer, in create(); until then there is nothing to negotiate.
static gboolean gst_cuda_src_ipc_negotiate(GstBaseSrc* src) {
  GstCaps* offer = current_output_caps(GST_CUDA_SRC_IPC(src));
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

// A sink that keeps the last frame it got (appsink, fakesink, the display sinks) lets it go only
// when the next one arrives. Where frames go downstream in the producer's slots, a consumer
// granted one frame in flight can therefore never receive a second: the producer evicts it at
// release-timeout. Said once per producer, with what to change.
static void warn_if_one_frame_cannot_flow(GstCudaSrcIpc* self) {
  SrcPrivate& p = *self->priv;
  const cipc_gst::SrcOutputKind kind = p.output->kind();
  const bool slots_downstream =
      kind == cipc_gst::SrcOutputKind::kShared || kind == cipc_gst::SrcOutputKind::kGstCudaWrapped;
  const cipc::Consumer* consumer = p.client ? p.client->consumer() : nullptr;
  if (!slots_downstream || !consumer || consumer->welcome().max_in_flight >= 2 ||
      p.warned_one_in_flight)
    return;
  p.warned_one_in_flight = true;
  GST_ELEMENT_WARNING(
      self, RESOURCE, SETTINGS,
      ("Only one frame may be in flight to this consumer (max-in-flight=%u here, %u granted by "
       "the producer), but its frames go downstream in the producer's slots: a sink that keeps "
       "its last frame (appsink, fakesink, display sinks) holds that one until the next, which "
       "cannot come, and the producer will disconnect this consumer at its release-timeout. Set "
       "max-in-flight to 2 or more on both elements.",
       p.active.max_in_flight, consumer->welcome().max_in_flight),
      (nullptr));
}

static gboolean gst_cuda_src_ipc_set_caps(GstBaseSrc* src, GstCaps* caps) {
  auto* self = GST_CUDA_SRC_IPC(src);
  SrcPrivate& p = *self->priv;
  if (!gst_video_info_from_caps(&p.out_info, caps)) return FALSE;
  cipc_gst::SrcOutputRequest request;
  request.producer_cuda = p.producer_cuda;
  request.caps_cuda_ipc = gst_cipc_caps_have_cuda_memory(caps);
#ifdef CIPC_HAVE_GST_CUDA
  request.caps_gst_cuda = cipc_gst::caps_have_gst_cuda_memory(caps);
#endif
#ifdef CIPC_HAVE_GST_GL
  request.caps_gl = cipc_gst::caps_have_gl_memory(caps);
#endif
  request.io_mode_copy = p.active.io_mode == GST_CIPC_IO_COPY;
  GstCudaContext* gst_cuda_context = nullptr;
#ifdef CIPC_HAVE_GST_CUDA
  // Wrapping needs the slots' own context: with another one, frames are copied between the two.
  if (request.caps_gst_cuda && p.producer_cuda && cipc_gst::gst_cuda_can_wrap_device_memory()) {
    gst_cuda_context = our_gst_cuda_context(self);
    request.gst_cuda_can_wrap =
        gst_cuda_context && cipc_gst::is_primary_context(gst_cuda_context, p.cuda.device);
  }
#endif
  cipc_gst::SrcOutputKind kind = cipc_gst::choose_src_output(request);
  const cipc_gst::SrcOutputCounters counters{&p.counters.downloads, &p.counters.device_copies,
                                             &p.counters.gl_copies};
  // Every set_caps makes a new output: each output describes its buffers with the caps it was
  // made for, so one kept from earlier caps would label frames with the old format.
  p.output.reset();
#ifdef CIPC_HAVE_GST_GL
  if (kind == cipc_gst::SrcOutputKind::kGl) {
    std::string why;
    GstGLContext* gl = p.gl_context.ensure(GST_ELEMENT(self), &why);
    if (!gl) {
      GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Cannot output GL memory: %s.", why.c_str()),
                        (nullptr));
      return FALSE;
    }
    p.output = cipc_gst::make_gl_cuda_interop_output(p.out_info, gl, &p.cuda, counters,
                                                     p.active.gl_import, &why);
    gst_object_unref(gl);
    if (!p.output) {
      GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Cannot output GL memory: %s.", why.c_str()),
                        (nullptr));
      return FALSE;
    }
  }
#endif
  if (!p.output)
    p.output = cipc_gst::make_src_output(kind, p.out_info, &p.cuda, counters, gst_cuda_context);
  if (!p.output && kind == cipc_gst::SrcOutputKind::kGstCudaWrapped) {
    GST_WARNING_OBJECT(self, "could not wrap slots as GStreamer CUDA memory: copying frames");
    kind = cipc_gst::SrcOutputKind::kGstCuda;
    p.output = cipc_gst::make_src_output(kind, p.out_info, &p.cuda, counters);
  }
  if (gst_cuda_context) gst_object_unref(gst_cuda_context);
  if (!p.output) {
    GST_ELEMENT_ERROR(
        self, CORE, NEGOTIATION,
        ("Cannot output %s: this cudaipc plugin was built without CUDA.", cipc_gst::describe(kind)),
        (nullptr));
    return FALSE;
  }
  p.output_for_cuda = p.producer_cuda;
  GST_INFO_OBJECT(self, "output %s: %" GST_PTR_FORMAT, cipc_gst::describe(kind), caps);
  warn_if_one_frame_cannot_flow(self);
  return TRUE;
}

#ifdef CIPC_HAVE_GST_CUDA
static int context_device(GstCudaSrcIpc* self) {
  const int id = snapshot_settings(self).cuda_device_id;
  return id < 0 ? 0 : id;
}

// The context this element shares (a new reference): one the application or a neighbour gave,
// else the wrapper of our primary context, created on first demand.
static GstCudaContext* our_gst_cuda_context(GstCudaSrcIpc* self) {
  return self->priv->cuda_context.get(GST_ELEMENT(self), context_device(self));
}

#endif

#if defined(CIPC_HAVE_GST_CUDA) || defined(CIPC_HAVE_GST_GL)
static void gst_cuda_src_ipc_set_context(GstElement* element, GstContext* context) {
  auto* self = GST_CUDA_SRC_IPC(element);
#ifdef CIPC_HAVE_GST_CUDA
  self->priv->cuda_context.set(element, context, context_device(self));
#endif
#ifdef CIPC_HAVE_GST_GL
  self->priv->gl_context.set(element, context);
#endif
  GST_ELEMENT_CLASS(gst_cuda_src_ipc_parent_class)->set_context(element, context);
}
#endif

static gboolean gst_cuda_src_ipc_query(GstBaseSrc* src, GstQuery* query) {
  auto* self = GST_CUDA_SRC_IPC(src);
#ifdef CIPC_HAVE_GST_CUDA
  // nvcodec elements downstream (cudaconvert, cudadownload...) ask for a "gst.cuda.context":
  // they get our primary context's wrapper, so the process keeps one context per device.
  if (self->priv->cuda_context.answer_query(GST_ELEMENT(self), query, context_device(self)))
    return TRUE;
#endif
#ifdef CIPC_HAVE_GST_GL
  // GL elements downstream ask for the GL display and context.
  if (self->priv->gl_context.answer_query(GST_ELEMENT(self), query)) return TRUE;
#endif
  if (GST_QUERY_TYPE(query) == GST_QUERY_LATENCY) {
    const Settings s = snapshot_settings(self);
    gst_query_set_latency(query, TRUE, s.processing_deadline, GST_CLOCK_TIME_NONE);
    return TRUE;
  }
  return GST_BASE_SRC_CLASS(gst_cuda_src_ipc_parent_class)->query(src, query);
}

static GstFlowReturn apply_caps(GstCudaSrcIpc* self, const cipc::Caps& message) {
  SrcPrivate& p = *self->priv;
  GstCaps* caps = cipc_gst::parse_producer_caps(message.caps);
  GstVideoInfo info;
  if (!caps || !gst_video_info_from_caps(&info, caps)) {
    if (caps) gst_caps_unref(caps);
    GST_ELEMENT_ERROR(
        self, STREAM, FORMAT, ("The producer announced a format that is not raw video."),
        ("caps (%s): %s", caps ? "not raw video" : "unreadable", message.caps.c_str()));
    return GST_FLOW_ERROR;
  }
  // The same caps from a producer of the other memory kind (a reconnect) still renegotiate:
  // what we can output differs.
  if (p.caps && gst_caps_is_equal(caps, p.caps) && p.output &&
      p.output_for_cuda == p.producer_cuda) {
    gst_caps_unref(caps);
    return GST_FLOW_OK;
  }
  GST_OBJECT_LOCK(self);
  gst_caps_replace(&p.caps, caps);
  GST_OBJECT_UNLOCK(self);
  p.info = info;
  ++p.counters.caps_changes;
  gst_caps_unref(caps);
  if (!gst_base_src_negotiate(GST_BASE_SRC(self))) {
    GST_ELEMENT_ERROR(
        self, CORE, NEGOTIATION,
        ("Downstream does not accept the producer's format %s.", message.caps.c_str()), (nullptr));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  // Caps equal to the current ones skip set_caps (GstBaseSrc), but a producer of the other
  // memory kind needs the other output for them (a download instead of the slot itself).
  if (p.output_for_cuda != p.producer_cuda) {
    GstCaps* current = gst_pad_get_current_caps(GST_BASE_SRC_PAD(self));
    if (!current) {
      GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("Negotiation left no caps on the source pad."),
                        (nullptr));
      return GST_FLOW_NOT_NEGOTIATED;
    }
    const gboolean ok = gst_cuda_src_ipc_set_caps(GST_BASE_SRC(self), current);
    gst_caps_unref(current);
    if (!ok) return GST_FLOW_NOT_NEGOTIATED;  // set_caps said why
  }
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
  const Counters& c = self->priv->counters;
  // "frames" is the name this message had for frames-received before both shared one list.
  GstStructure* s = gst_structure_new(
      "cudasrc-ipc-stats", "fps", G_TYPE_DOUBLE, seconds > 0 ? w.frames / seconds : 0.0,
      "latency-p50-us", G_TYPE_DOUBLE, pick(0.50), "latency-p99-us", G_TYPE_DOUBLE, pick(0.99),
      "latency-max-us", G_TYPE_DOUBLE, v.empty() ? 0.0 : v.back() / 1000.0, "frames", G_TYPE_UINT64,
      c.frames.load(), nullptr);
  set_counters(c, s);
  gst_element_post_message(GST_ELEMENT(self), gst_message_new_element(GST_OBJECT(self), s));
  w = Window();
  w.start_ns = now;
}

// The frame's timestamps as running times of this pipeline; false for a stale frame of a live
// producer (captured before this pipeline started), which is dropped (clockmapping.h).
static bool map_timestamps(GstCudaSrcIpc* self, const cipc::Frame& info, GstClockTime* pts,
                           GstClockTime* dts) {
  SrcPrivate& p = *self->priv;
  GstClock* clock = gst_element_get_clock(GST_ELEMENT(self));
  const GstClockTime base_time = gst_element_get_base_time(GST_ELEMENT(self));
  const gint64 offset = p.clock_offset.get(clock);
  if (clock) gst_object_unref(clock);
  const bool fresh = p.timestamps.map(info.pts, info.dts, (info.flags & cipc::Frame::kLive) != 0,
                                      base_time, offset, pts, dts);
  p.counters.timestamp_shift_ns = p.timestamps.shift();
  return fresh;
}

static GstFlowReturn make_buffer(GstCudaSrcIpc* self, cipc::ReceivedFrame& frame, GstClockTime pts,
                                 GstClockTime dts, GstBuffer** out) {
  SrcPrivate& p = *self->priv;
  const cipc::Frame& info = frame.info;
  GstVideoInfo layout;
  std::string why;
  if (!cipc_gst::validate_planes(info, p.info, &layout, &why)) {
    GST_ELEMENT_ERROR(self, STREAM, DECODE,
                      ("The producer sent a frame that does not fit its format."),
                      ("%s", why.c_str()));
    return GST_FLOW_ERROR;
  }
  if (!p.output) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION,
                      ("A frame arrived before its format was negotiated downstream."), (nullptr));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  GstBuffer* buffer = nullptr;
  const GstFlowReturn ret = p.output->make(GST_BASE_SRC(self), frame, layout, &buffer);
  if (ret != GST_FLOW_OK) return ret;

  GST_BUFFER_PTS(buffer) = pts;
  GST_BUFFER_DTS(buffer) = dts;
  GST_BUFFER_DURATION(buffer) =
      info.duration == cipc::kNoTimestamp ? GST_CLOCK_TIME_NONE : info.duration;
  GST_BUFFER_OFFSET(buffer) =
      info.offset == cipc::kNoTimestamp ? GST_BUFFER_OFFSET_NONE : info.offset;
  // When the producer sent the frame (CLOCK_MONOTONIC), for applications measuring latency.
  static GstCaps* send_time_caps = gst_caps_new_empty_simple(CIPC_SEND_TIME_CAPS);
  gst_buffer_add_reference_timestamp_meta(buffer, send_time_caps, info.send_time,
                                          GST_CLOCK_TIME_NONE);

  if (p.discont || (info.flags & cipc::Frame::kDiscont))
    GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_DISCONT);
  if (info.flags & cipc::Frame::kDeltaUnit) GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT);
  if (info.flags & cipc::Frame::kGap) GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_GAP);
  p.discont = false;
  *out = buffer;
  return GST_FLOW_OK;
}

// Maps why the stream cannot go on to an element error (or EOS), with a sentence for the user.
static GstFlowReturn stream_failed(GstCudaSrcIpc* self, const cipc::ClientEvent& ev) {
  const Settings& s = self->priv->active;
  const char* path = s.socket_path.c_str();
  const char* why = ev.error.message.c_str();
  switch (ev.failure) {
    case cipc::ClientEvent::Failure::kNoProducer: {
      const std::string hint = cipc::explain_default_socket_path(s.socket_path);
      GST_ELEMENT_ERROR(
          self, RESOURCE, OPEN_READ,
          ("No producer is serving '%s'.%s%s", path, hint.empty() ? "" : " ", hint.c_str()),
          ("%s; waited %u ms (connect-timeout)%s", why, s.connect_timeout,
           ev.after_loss ? " after the producer went away" : ""));
      break;
    }
    case cipc::ClientEvent::Failure::kRefused:
      GST_ELEMENT_ERROR(self, RESOURCE, OPEN_READ,
                        ("Could not attach to the producer at '%s': %s.", path, why), (nullptr));
      break;
    case cipc::ClientEvent::Failure::kIncompatible:
      GST_ELEMENT_ERROR(self, RESOURCE, READ,
                        ("Cannot receive from the producer at '%s': %s.", path, why), (nullptr));
      break;
    case cipc::ClientEvent::Failure::kMisbehaved:
      GST_ELEMENT_ERROR(self, RESOURCE, READ, ("The producer at '%s' misbehaved: %s.", path, why),
                        (nullptr));
      break;
  }
  return GST_FLOW_ERROR;
}

// A frame left the element: counters and the stats-interval window.
static void count_frame(GstCudaSrcIpc* self, const cipc::Frame& info) {
  SrcPrivate& p = *self->priv;
  const uint64_t now = cipc::monotonic_ns();
  const uint64_t latency = now > info.send_time ? now - info.send_time : 0;
  ++p.counters.frames;
  p.counters.latency_last_ns = latency;
  if (p.active.stats_interval == 0) return;
  Window& w = p.window;
  if (w.start_ns == 0) w.start_ns = now;
  w.latency_ns.push_back(latency);
  ++w.frames;
  if (now - w.start_ns >= uint64_t(p.active.stats_interval) * 1000000) post_stats(self, w, now);
}

// Leaving create() without a frame (EOS, flushing, an error): io-mode=copy's pending releases
// go to the release worker rather than wait for a next call that may not come soon.
static GstFlowReturn without_frame(SrcPrivate& p, GstFlowReturn ret) {
#ifdef CIPC_HAVE_CUDA
  if (p.cuda.deferred) p.cuda.deferred->flush();
#endif
  if (p.output) p.output->flush_releases();
  return ret;
}

// Gives back the claims whose copy or GL read is done, and says how long the next wait for the
// producer may last before looking again (-1: until a message comes).
static int collect_done_releases(SrcPrivate& p) {
  int timeout_ms = -1;
#ifdef CIPC_HAVE_CUDA
  // io-mode=copy: claims whose copy is done go back now (a downstream that worked on the copy
  // has waited for it by the time it asks for the next frame); with some still pending, wait
  // for the next frame, on whose arrival they are looked at again, but no longer than 1.5 frame
  // intervals, and only 1 ms when the producer sends nothing more until one goes
  // (slots/deferred_releases.h).
  if (p.cuda.deferred && p.cuda.deferred->pending() > 0) {
    if (const cipc::Consumer* consumer = p.client->consumer()) {
      p.cuda.deferred->collect();
      const bool next_frame_can_come =
          consumer->stats().claims_outstanding < consumer->welcome().max_in_flight;
      timeout_ms = p.cuda.deferred->wait_ms(next_frame_can_come);
    } else {
      p.cuda.deferred->flush();  // reconnecting may take long: the release worker takes them
    }
  }
#endif
  // GL memory objects: claims whose GL read is done go back
  // (gst/ipcsrc/gl/glmemoryobjectoutput.h).
  if (p.output) {
    const int output_ms = p.output->collect_releases();
    if (output_ms >= 0 && (timeout_ms < 0 || output_ms < timeout_ms)) timeout_ms = output_ms;
  }
  return timeout_ms;
}

// A new connection: what follows is a new stream as far as downstream can tell.
static void on_attached(GstCudaSrcIpc* self, const cipc::ClientEvent& ev) {
  SrcPrivate& p = *self->priv;
  const cipc::Welcome& w = p.client->consumer()->welcome();
  if (ev.new_instance && p.client->connects() > 1)
    GST_INFO_OBJECT(self, "new producer instance %016" G_GINT64_MODIFIER "x: import cache flushed",
                    w.instance_id);
  p.discont = true;
  p.first_frame = true;
  p.warned_one_in_flight = false;
  p.timestamps.reset();
  GST_INFO_OBJECT(self, "attached to %s (%s memory, %u frames in flight)",
                  p.active.socket_path.c_str(), cipc::to_string(w.memory_kind), w.max_in_flight);
#ifdef CIPC_HAVE_CUDA
  if (p.cuda.deferred) p.cuda.deferred->set_max_in_flight(w.max_in_flight);
#endif
}

// A frame: *out is set and true returned, or false for a stale frame (released at once: not a
// gap the producer made) and for a failure (*ret says which).
static bool on_frame(GstCudaSrcIpc* self, cipc::ClientEvent& ev, GstBuffer** out,
                     GstFlowReturn* ret) {
  SrcPrivate& p = *self->priv;
  *ret = GST_FLOW_OK;
  // Frames the producer sent others but not us (we were at max-in-flight) show as a gap.
  if (ev.skipped) {
    p.counters.frames_skipped += ev.skipped;
    p.discont = true;
  }
  GstClockTime pts = GST_CLOCK_TIME_NONE, dts = GST_CLOCK_TIME_NONE;
  if (!map_timestamps(self, ev.frame.info, &pts, &dts)) {
    ++p.counters.frames_stale;
    return false;
  }
  *ret = make_buffer(self, ev.frame, pts, dts, out);
  if (*ret != GST_FLOW_OK) return false;
  count_frame(self, ev.frame.info);
  if (p.first_frame) {
    p.first_frame = false;
    GST_INFO_OBJECT(self, "first frame from the producer at %s: %dx%d %s",
                    p.active.socket_path.c_str(), GST_VIDEO_INFO_WIDTH(&p.out_info),
                    GST_VIDEO_INFO_HEIGHT(&p.out_info), GST_VIDEO_INFO_NAME(&p.out_info));
  }
  return true;
}

static GstFlowReturn gst_cuda_src_ipc_create(GstPushSrc* push, GstBuffer** out) {
  auto* self = GST_CUDA_SRC_IPC(push);
  SrcPrivate& p = *self->priv;
  const Settings& s = p.active;
  if (!p.client) return GST_FLOW_FLUSHING;
  for (;;) {
    cipc::ClientEvent ev = p.client->next(collect_done_releases(p));
    p.counters.slots_imported = p.client->slots_imported();
    p.counters.slots_retired = p.client->slots_retired();
    p.counters.connects = p.client->connects();
    switch (ev.kind) {
      case cipc::ClientEvent::Kind::kAttached: on_attached(self, ev); continue;
      case cipc::ClientEvent::Kind::kCaps: {
        const GstFlowReturn ret = apply_caps(self, ev.caps);
        if (ret != GST_FLOW_OK) return without_frame(p, ret);
        continue;
      }
      case cipc::ClientEvent::Kind::kFrame: {
        GstFlowReturn ret = GST_FLOW_OK;
        if (on_frame(self, ev, out, &ret)) return GST_FLOW_OK;
        if (ret != GST_FLOW_OK) return without_frame(p, ret);
        continue;  // a stale frame
      }
      case cipc::ClientEvent::Kind::kEos:
        GST_INFO_OBJECT(self, "producer sent EOS");
        return without_frame(p, GST_FLOW_EOS);
      case cipc::ClientEvent::Kind::kInterrupted: return without_frame(p, GST_FLOW_FLUSHING);
      case cipc::ClientEvent::Kind::kTimeout: continue;  // a deferred release's look again
      case cipc::ClientEvent::Kind::kLost:
        GST_ELEMENT_WARNING(self, RESOURCE, READ,
                            ("Lost the producer at '%s' (%s); waiting for it to come back.",
                             s.socket_path.c_str(), ev.error.message.c_str()),
                            (nullptr));
        p.discont = true;
        continue;
      case cipc::ClientEvent::Kind::kEnded:
        GST_ELEMENT_WARNING(self, RESOURCE, READ,
                            ("The producer at '%s' went away (%s); ending the stream. Set "
                             "reconnect=true to wait for it instead.",
                             s.socket_path.c_str(), ev.error.message.c_str()),
                            (nullptr));
        return without_frame(p, GST_FLOW_EOS);
      case cipc::ClientEvent::Kind::kFailed: return without_frame(p, stream_failed(self, ev));
    }
  }
}

static void gst_cuda_src_ipc_finalize(GObject* object) {
  delete GST_CUDA_SRC_IPC(object)->priv;
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

  const GParamFlags rw_ready = cipc_gst::kParamReadyRW;
  const GParamFlags ro = cipc_gst::kParamRO;

  g_object_class_install_property(
      object_class, PROP_SOCKET_PATH,
      g_param_spec_string("socket-path", "Socket path",
                          "Filesystem path of the Unix socket a cudasink-ipc serves",
                          DEFAULT_SOCKET_PATH.c_str(), rw_ready));
  g_object_class_install_property(
      object_class, PROP_ALLOW_OTHER_USERS,
      g_param_spec_boolean("allow-other-users", "Allow other users",
                           "Attach to a producer running under another user id (checked with "
                           "SO_PEERCRED before anything is sent); by default only a producer of "
                           "this process's own user is trusted",
                           DEFAULT_ALLOW_OTHER_USERS, rw_ready));
  g_object_class_install_property(
      object_class, PROP_MEMORY,
      g_param_spec_enum("memory", "Memory",
                        "Memory the consumer accepts; a producer sharing another kind is refused "
                        "with an error",
                        gst_cipc_src_memory_get_type(), static_cast<gint>(DEFAULT_MEMORY),
                        rw_ready));
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
                          "Latency reported downstream, in nanoseconds (at most one hour)", 0,
                          kMaxProcessingDeadline, DEFAULT_PROCESSING_DEADLINE, rw_ready));
  g_object_class_install_property(
      object_class, PROP_STATS_INTERVAL,
      g_param_spec_uint("stats-interval", "Statistics interval",
                        "Post a 'cudasrc-ipc-stats' element message (fps, latency p50/p99/max in "
                        "microseconds from the producer's send to this element's output, and every "
                        "field of 'stats') every this many milliseconds; 0 = never",
                        0, G_MAXUINT, DEFAULT_STATS_INTERVAL, rw_ready));
  g_object_class_install_property(
      object_class, PROP_CUDA_DEVICE_ID,
      g_param_spec_int("cuda-device-id", "CUDA device id",
                       "CUDA device to import CUDA memory on; it must be the producer's GPU. -1: "
                       "find the producer's GPU by its UUID",
                       -1, G_MAXINT, DEFAULT_CUDA_DEVICE_ID, rw_ready));
  g_object_class_install_property(
      object_class, PROP_IO_MODE,
      g_param_spec_enum("io-mode", "I/O mode", cipc_gst::io_mode_description(),
                        gst_cipc_io_mode_get_type(), DEFAULT_IO_MODE, rw_ready));
#ifdef CIPC_HAVE_GST_GL
  g_object_class_install_property(
      object_class, PROP_GL_IMPORT,
      g_param_spec_enum("gl-import", "GL import",
                        "How a CUDA producer's frames reach GL elements downstream (glimagesink): "
                        "as GL textures written on the GPU by CUDA (cuda-interop; auto falls back "
                        "to system memory where GL is on another GPU) or by GL from the slot "
                        "imported into it (memory-object), or as system memory (none)",
                        gst_cipc_gl_import_get_type(), DEFAULT_GL_IMPORT, rw_ready));
#endif
  g_object_class_install_property(
      object_class, PROP_STATS,
      g_param_spec_boxed(
          "stats", "Statistics",
          "frames-received, frames-skipped, frames-stale (frames of a live producer "
          "captured before this pipeline started: dropped), timestamp-shift-ns "
          "(added to a non-live producer's timestamps to keep them positive), "
          "slots-imported, slots-retired (imports dropped "
          "because the producer retired their slot), connects, "
          "caps-changes, latency-last-ns, downloads, device-copies (io-mode=copy, or "
          "copies into GStreamer CUDA memory where it cannot wrap the slot, or into GL textures "
          "with gl-import=cuda-interop or auto), gl-copies (GL's copies into textures from "
          "imported slots, gl-import=memory-object), cuda-mps (boolean: this process's CUDA "
          "context runs as a client of an MPS server)",
          GST_TYPE_STRUCTURE, ro));

  gst_element_class_set_static_metadata(
      element_class, "CUDA IPC source", "Source/Video/Hardware",
      "Receives video frames that a cudasink-ipc in another process shares, without copying",
      "gst-cudaipc developers");
  cipc_gst::add_doc_uri(element_class, "cudasrc-ipc");
  gst_element_class_add_static_pad_template(element_class, &src_template);

  basesrc_class->start = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_start);
  basesrc_class->stop = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_stop);
  basesrc_class->unlock = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_unlock);
  basesrc_class->unlock_stop = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_unlock_stop);
#if defined(CIPC_HAVE_GST_CUDA) || defined(CIPC_HAVE_GST_GL)
  element_class->set_context = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_set_context);
#endif
  basesrc_class->get_caps = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_get_caps);
  basesrc_class->negotiate = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_negotiate);
  basesrc_class->set_caps = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_set_caps);
  basesrc_class->query = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_query);
  basesrc_class->decide_allocation = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_decide_allocation);
  pushsrc_class->create = GST_DEBUG_FUNCPTR(gst_cuda_src_ipc_create);

  gst_type_mark_as_plugin_api(gst_cipc_src_memory_get_type(), static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(gst_cipc_io_mode_get_type(), static_cast<GstPluginAPIFlags>(0));
#ifdef CIPC_HAVE_GST_GL
  gst_type_mark_as_plugin_api(gst_cipc_gl_import_get_type(), static_cast<GstPluginAPIFlags>(0));
#endif
}

static void gst_cuda_src_ipc_init(GstCudaSrcIpc* self) {
  self->priv = new SrcPrivate();
  gst_base_src_set_live(GST_BASE_SRC(self), TRUE);
  gst_base_src_set_format(GST_BASE_SRC(self), GST_FORMAT_TIME);
  gst_base_src_set_do_timestamp(GST_BASE_SRC(self), FALSE);
}
