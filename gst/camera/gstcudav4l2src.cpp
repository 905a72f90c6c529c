// SPDX-License-Identifier: LGPL-2.1-or-later
/**
 * SECTION:element-cudav4l2src
 * @title: cudav4l2src
 *
 * Captures Bayer video from a V4L2 device: 10-bit (rggb10le, grbg10le, gbrg10le, bggr10le;
 * V4L2 RG10, BA10, GB10, BG10), 12-bit (rggb12le, ...) and 8-bit (rggb, ...) samples, the
 * >8-bit ones in 16-bit little-endian words as V4L2 defines them. GStreamer 1.22's v4l2src
 * skips the 10- and 12-bit formats; the names are those of GStreamer 1.24.
 *
 * With io-mode=auto (the default) the driver writes each frame straight into a buffer of the
 * pool that downstream offers in the ALLOCATION query (V4L2 USERPTR) when that pool's buffers
 * suit (one memory, mappable, page-aligned, large enough): rg10tobgra offers pinned,
 * CUDA-mapped host memory, so the sensor's DMA writes where the GPU reads, without a copy.
 * Otherwise frames land in page-aligned buffers of the element's own pool. A driver that
 * refuses USERPTR is used with its own buffers (MMAP), wrapped without a copy, after a one-time
 * warning. A buffer goes back to the driver only when downstream has released it.
 *
 * Buffers carry a GstVideoMeta with the driver's row stride (bytesperline) when downstream
 * supports the meta; its format field is the sample container (GRAY16_LE, or GRAY8 for 8-bit),
 * since GStreamer 1.22 has no Bayer GstVideoFormat. If downstream does not support the meta and
 * the stride differs from GST_ROUND_UP_4 (width) samples, frames are repacked with a copy
 * (counted in stats).
 *
 * Timestamps come from the driver (CLOCK_MONOTONIC) mapped to running time; frame drops are
 * counted from gaps in the driver's sequence numbers (buffer offset = sequence number, and a
 * gap sets DISCONT).
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 cudav4l2src device=/dev/video0 ! \
 *     video/x-bayer,format=rggb10le,width=1920,height=1080 ! rg10tobgra ! \
 *     cudasink-ipc socket-path=/tmp/cam0.sock
 * gst-launch-1.0 cudav4l2src num-buffers=10 ! filesink location=frames.raw
 * ]|
 *
 * Since: 0.1
 */
#include "camera/gstcudav4l2src.h"
#include "common/elementdocs.h"
#include "common/paramflags.h"

#include <gst/video/video.h>

#include <atomic>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>

#include "camera/cameraenums.h"
#include "camera/v4l2caps.h"
#include "camera/v4l2stream.h"
#include "common/clockmapping.h"
#include "formats.h"
#include "v4l2capture.h"

// Not static: v4l2stream.cpp logs to it too.
GST_DEBUG_CATEGORY(gst_cuda_v4l2_src_debug);
#define GST_CAT_DEFAULT gst_cuda_v4l2_src_debug

namespace cb = cipc_bayer;
namespace v4l = cipc_v4l2;

enum {
  PROP_0,
  PROP_DEVICE,
  PROP_IO_MODE,
  PROP_DRIVER_BUFFERS,
  PROP_FRAME_TIMEOUT,
  PROP_STATS,
};

#define DEFAULT_DEVICE "/dev/video0"
#define DEFAULT_IO_MODE GST_CIPC_V4L2_IO_AUTO
#define DEFAULT_DRIVER_BUFFERS 4
#define MIN_DRIVER_BUFFERS 2
#define MAX_DRIVER_BUFFERS 32
#define DEFAULT_FRAME_TIMEOUT_MS 5000
#define MAX_FRAME_TIMEOUT_MS 3600000
// While every buffer is downstream, look for returned ones this often.
#define STARVED_POLL_MS 10

namespace {

struct Settings {
  std::string device = DEFAULT_DEVICE;
  GstCipcV4l2IoMode io_mode = DEFAULT_IO_MODE;
  guint driver_buffers = DEFAULT_DRIVER_BUFFERS;
  guint frame_timeout_ms = DEFAULT_FRAME_TIMEOUT_MS;
};

struct Stats {
  guint64 frames = 0;
  guint64 drops = 0;
  guint64 corrupted = 0;
  guint64 copies = 0;
  const char* io_mode = "none";
  bool downstream_pool = false;
};

struct State {
  // While the element is READY or above (opened in NULL->READY). `device` and `probed_caps` are
  // also read by other threads (unlock, caps and latency queries): replaced under the object
  // lock.
  std::shared_ptr<v4l::Device> device;
  GstCaps* probed_caps = nullptr;
  v4l::Format preferred{};  // the driver's format when opened: what fixate() aims for

  // Negotiated, streaming thread (set_caps, decide_allocation, create).
  v4l::Format format{};
  const cb::BayerFormat* bayer = nullptr;
  v4l::Fraction rate{};
  GstClockTime duration = GST_CLOCK_TIME_NONE;  // object lock (latency query)
  guint buffer_count = 0;                       // object lock (latency query)
  bool downstream_meta = false;                 // downstream reads GstVideoMeta
  bool repack = false;                       // stride differs and downstream cannot be told: copy
  GstBufferPool* own_pool = nullptr;         // ours: activated and deactivated by us
  GstBufferPool* downstream_pool = nullptr;  // downstream's (basesrc deactivates it)
  std::unique_ptr<cipc_gst::CaptureStream> stream;
  bool streaming = false;
  bool have_sequence = false;
  guint32 last_sequence = 0;

  bool warned_fallback = false;
  bool error_posted = false;
  std::atomic<bool> flushing{false};
};

}  // namespace

// Everything the element owns, in one place; members clean up after themselves.
struct CudaV4l2SrcPrivate {
  Settings settings;  // object lock
  Stats stats;        // object lock
  State state;
};

struct _GstCudaV4l2Src {
  GstPushSrc parent;
  CudaV4l2SrcPrivate* priv;
};

// The src template: every format of bayer/formats.h, 10-bit first, any size and rate.
static GstCaps* template_caps() {
  GValue formats = G_VALUE_INIT;
  gst_value_list_init(&formats, 0);
  for (unsigned bits : {10u, 12u, 8u}) {
    for (const cb::BayerFormat& f : cb::bayer_formats()) {
      if (f.bits != bits) continue;
      GValue name = G_VALUE_INIT;
      g_value_init(&name, G_TYPE_STRING);
      g_value_set_static_string(&name, f.caps_name);
      gst_value_list_append_and_take_value(&formats, &name);
    }
  }
  GstCaps* caps = gst_caps_new_simple("video/x-bayer", "width", GST_TYPE_INT_RANGE, 1, G_MAXINT,
                                      "height", GST_TYPE_INT_RANGE, 1, G_MAXINT, "framerate",
                                      GST_TYPE_FRACTION_RANGE, 0, 1, G_MAXINT, 1, nullptr);
  gst_structure_take_value(gst_caps_get_structure(caps, 0), "format", &formats);
  return caps;
}

G_DEFINE_TYPE(GstCudaV4l2Src, gst_cuda_v4l2_src, GST_TYPE_PUSH_SRC)
// The category is made with the registration, so that --gst-debug-help lists it once the
// plugin is loaded, before the element is first used.
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE(cudav4l2src, "cudav4l2src", GST_RANK_NONE,
                                      GST_TYPE_CUDA_V4L2_SRC,
                                      GST_DEBUG_CATEGORY_INIT(gst_cuda_v4l2_src_debug,
                                                              "cudaipc-v4l2src", 0,
                                                              "V4L2 Bayer capture (cudav4l2src)"))

static Settings snapshot_settings(GstCudaV4l2Src* self) {
  GST_OBJECT_LOCK(self);
  Settings s = self->priv->settings;
  GST_OBJECT_UNLOCK(self);
  return s;
}

// Posts `error` as an element error whose code matches its kind.
static void post_error(GstCudaV4l2Src* self, const v4l::Error& error) {
  self->priv->state.error_posted = true;
  const char* text = error.message.c_str();
  const char* debug = error.detail.empty() ? "-" : error.detail.c_str();
#define CIPC_POST(code) GST_ELEMENT_ERROR(self, RESOURCE, code, ("%s", text), ("%s", debug))
  switch (error.kind) {
    case v4l::ErrorKind::kNotFound:
    case v4l::ErrorKind::kNotV4l2:
    case v4l::ErrorKind::kNotCapture: CIPC_POST(NOT_FOUND); break;
    case v4l::ErrorKind::kPermission: CIPC_POST(OPEN_READ_WRITE); break;
    case v4l::ErrorKind::kBusy: CIPC_POST(BUSY); break;
    case v4l::ErrorKind::kUnsupported: CIPC_POST(SETTINGS); break;
    case v4l::ErrorKind::kNoMemory: CIPC_POST(NO_SPACE_LEFT); break;
    case v4l::ErrorKind::kDisconnected:
    case v4l::ErrorKind::kStreamError:
    case v4l::ErrorKind::kTimeout: CIPC_POST(READ); break;
    case v4l::ErrorKind::kNone:
    case v4l::ErrorKind::kFailed: CIPC_POST(FAILED); break;
  }
#undef CIPC_POST
}

static std::shared_ptr<v4l::Device> current_device(GstCudaV4l2Src* self) {
  GST_OBJECT_LOCK(self);
  std::shared_ptr<v4l::Device> device = self->priv->state.device;
  GST_OBJECT_UNLOCK(self);
  return device;
}

// Stops capturing and gives every buffer back (to the driver's free list or the pool).
static void stop_stream(GstCudaV4l2Src* self) {
  State& st = self->priv->state;
  if (st.stream) {
    st.stream->stop();
    st.stream.reset();
  }
  if (st.own_pool) {
    gst_buffer_pool_set_active(st.own_pool, FALSE);
    gst_object_unref(st.own_pool);
    st.own_pool = nullptr;
  }
  if (st.downstream_pool) {
    gst_object_unref(st.downstream_pool);
    st.downstream_pool = nullptr;
  }
  st.streaming = false;
  st.have_sequence = false;
}

static void close_device(GstCudaV4l2Src* self);

// ---- GObject --------------------------------------------------------------------------------

static void gst_cuda_v4l2_src_set_property(GObject* object, guint prop_id, const GValue* value,
                                           GParamSpec* pspec) {
  auto* self = GST_CUDA_V4L2_SRC(object);
  GST_OBJECT_LOCK(self);
  Settings& s = self->priv->settings;
  switch (prop_id) {
    case PROP_DEVICE: {
      if (self->priv->state.device) {
        GST_WARNING_OBJECT(self, "the device is open: set 'device' in the NULL state");
        break;
      }
      const gchar* path = g_value_get_string(value);
      s.device = path ? path : DEFAULT_DEVICE;
      break;
    }
    case PROP_IO_MODE: s.io_mode = static_cast<GstCipcV4l2IoMode>(g_value_get_enum(value)); break;
    case PROP_DRIVER_BUFFERS: s.driver_buffers = g_value_get_uint(value); break;
    case PROP_FRAME_TIMEOUT: s.frame_timeout_ms = g_value_get_uint(value); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK(self);
}

static void gst_cuda_v4l2_src_get_property(GObject* object, guint prop_id, GValue* value,
                                           GParamSpec* pspec) {
  auto* self = GST_CUDA_V4L2_SRC(object);
  GST_OBJECT_LOCK(self);
  const Settings& s = self->priv->settings;
  const Stats& stats = self->priv->stats;
  switch (prop_id) {
    case PROP_DEVICE: g_value_set_string(value, s.device.c_str()); break;
    case PROP_IO_MODE: g_value_set_enum(value, s.io_mode); break;
    case PROP_DRIVER_BUFFERS: g_value_set_uint(value, s.driver_buffers); break;
    case PROP_FRAME_TIMEOUT: g_value_set_uint(value, s.frame_timeout_ms); break;
    case PROP_STATS:
      g_value_take_boxed(
          value,
          gst_structure_new("cudav4l2src-stats", "frames", G_TYPE_UINT64, stats.frames, "drops",
                            G_TYPE_UINT64, stats.drops, "corrupted", G_TYPE_UINT64, stats.corrupted,
                            "copies", G_TYPE_UINT64, stats.copies, "io-mode", G_TYPE_STRING,
                            stats.io_mode, "downstream-pool", G_TYPE_BOOLEAN,
                            static_cast<gboolean>(stats.downstream_pool), nullptr));
      break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK(self);
}

static void gst_cuda_v4l2_src_finalize(GObject* object) {
  auto* self = GST_CUDA_V4L2_SRC(object);
  close_device(self);
  delete self->priv;
  G_OBJECT_CLASS(gst_cuda_v4l2_src_parent_class)->finalize(object);
}

// ---- GstBaseSrc -----------------------------------------------------------------------------

// NULL -> READY: opens the device and reads its modes into caps, so that a wrong device fails
// the state change with one clear error and caps are known in READY (as with v4l2src).
static bool open_device(GstCudaV4l2Src* self) {
  State& st = self->priv->state;
  const Settings s = snapshot_settings(self);
  st.error_posted = false;
  st.warned_fallback = false;

  v4l::Error error;
  std::unique_ptr<v4l::Device> device = v4l::Device::open(s.device, &error);
  if (!device) {
    post_error(self, error);
    return false;
  }
  std::vector<v4l::FormatDescription> formats;
  if (!device->enumerate_formats(&formats, &error)) {
    post_error(self, error);
    return false;
  }
  v4l::Format current{};
  v4l::Error ignored;
  device->get_format(&current, &ignored);
  GstCaps* caps = cipc_gst::caps_from_formats(formats, current.fourcc);
  if (gst_caps_is_empty(caps)) {
    std::string offered;
    for (const v4l::FormatDescription& fd : formats)
      offered += (offered.empty() ? "" : ", ") + v4l::fourcc_to_string(fd.fourcc);
    if (offered.empty()) offered = "nothing";
    gst_caps_unref(caps);
    st.error_posted = true;
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                      ("Device '%s' offers no Bayer format this element captures (it offers %s).",
                       s.device.c_str(), offered.c_str()),
                      ("supported: 8-, 10- and 12-bit Bayer, one sample per 8/16-bit word"));
    return false;
  }
  GST_INFO_OBJECT(self, "%s: '%s' (driver %s), current format %s %ux%u, modes %" GST_PTR_FORMAT,
                  s.device.c_str(), device->card().c_str(), device->driver().c_str(),
                  v4l::fourcc_to_string(current.fourcc).c_str(), current.width, current.height,
                  caps);

  GST_OBJECT_LOCK(self);
  st.device = std::move(device);
  if (st.probed_caps) gst_caps_unref(st.probed_caps);
  st.probed_caps = caps;
  st.duration = GST_CLOCK_TIME_NONE;
  st.buffer_count = 0;
  GST_OBJECT_UNLOCK(self);
  st.preferred = current;
  st.bayer = nullptr;
  return true;
}

// READY -> NULL.
static void close_device(GstCudaV4l2Src* self) {
  State& st = self->priv->state;
  stop_stream(self);
  GST_OBJECT_LOCK(self);
  // MMAP buffers still downstream keep the device open until they are freed.
  std::shared_ptr<v4l::Device> device = std::move(st.device);
  if (st.probed_caps) gst_caps_unref(st.probed_caps);
  st.probed_caps = nullptr;
  GST_OBJECT_UNLOCK(self);
  device.reset();
  st.bayer = nullptr;
  st.format = {};
}

static GstStateChangeReturn gst_cuda_v4l2_src_change_state(GstElement* element,
                                                           GstStateChange transition) {
  auto* self = GST_CUDA_V4L2_SRC(element);
  if (transition == GST_STATE_CHANGE_NULL_TO_READY && !open_device(self))
    return GST_STATE_CHANGE_FAILURE;
  const GstStateChangeReturn ret =
      GST_ELEMENT_CLASS(gst_cuda_v4l2_src_parent_class)->change_state(element, transition);
  if (transition == GST_STATE_CHANGE_READY_TO_NULL) close_device(self);
  return ret;
}

static gboolean gst_cuda_v4l2_src_start(GstBaseSrc* bsrc) {
  auto* self = GST_CUDA_V4L2_SRC(bsrc);
  if (!current_device(self)) return FALSE;
  GST_OBJECT_LOCK(self);
  self->priv->stats = Stats();
  GST_OBJECT_UNLOCK(self);
  self->priv->state.flushing = false;
  return TRUE;
}

static gboolean gst_cuda_v4l2_src_stop(GstBaseSrc* bsrc) {
  stop_stream(GST_CUDA_V4L2_SRC(bsrc));
  return TRUE;
}

static GstCaps* gst_cuda_v4l2_src_get_caps(GstBaseSrc* bsrc, GstCaps* filter) {
  auto* self = GST_CUDA_V4L2_SRC(bsrc);
  GST_OBJECT_LOCK(self);
  GstCaps* caps =
      self->priv->state.probed_caps ? gst_caps_ref(self->priv->state.probed_caps) : nullptr;
  GST_OBJECT_UNLOCK(self);
  if (!caps) caps = gst_pad_get_pad_template_caps(GST_BASE_SRC_PAD(bsrc));
  if (filter) {
    GstCaps* filtered = gst_caps_intersect_full(filter, caps, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref(caps);
    caps = filtered;
  }
  return caps;
}

// Picks the mode closest to the one the driver was in (its default), in the best format.
static GstCaps* gst_cuda_v4l2_src_fixate(GstBaseSrc* bsrc, GstCaps* caps) {
  auto* self = GST_CUDA_V4L2_SRC(bsrc);
  const v4l::Format& pref = self->priv->state.preferred;
  const gint want_w = pref.width ? cipc_gst::clamp_int(pref.width) : 1920;
  const gint want_h = pref.height ? cipc_gst::clamp_int(pref.height) : 1080;

  guint best = 0;
  gint best_rank = G_MAXINT;
  guint64 best_distance = G_MAXUINT64;
  for (guint i = 0; i < gst_caps_get_size(caps); ++i) {
    GstStructure* s = gst_structure_copy(gst_caps_get_structure(caps, i));
    gst_structure_fixate_field_nearest_int(s, "width", want_w);
    gst_structure_fixate_field_nearest_int(s, "height", want_h);
    gint w = 0, h = 0;
    gst_structure_get_int(s, "width", &w);
    gst_structure_get_int(s, "height", &h);
    const gint rank = cipc_gst::format_rank(gst_structure_get_string(s, "format"), pref.fourcc);
    const gint64 area = static_cast<gint64>(w) * h - static_cast<gint64>(want_w) * want_h;
    const guint64 distance = static_cast<guint64>(area < 0 ? -area : area);
    if (rank < best_rank || (rank == best_rank && distance < best_distance)) {
      best = i;
      best_rank = rank;
      best_distance = distance;
    }
    gst_structure_free(s);
  }
  GstCaps* chosen = gst_caps_copy_nth(caps, best);
  gst_caps_unref(caps);
  GstStructure* s = gst_caps_get_structure(chosen, 0);
  gst_structure_fixate_field_nearest_int(s, "width", want_w);
  gst_structure_fixate_field_nearest_int(s, "height", want_h);
  if (gst_structure_has_field(s, "framerate"))
    gst_structure_fixate_field_nearest_fraction(s, "framerate", 30, 1);
  return GST_BASE_SRC_CLASS(gst_cuda_v4l2_src_parent_class)->fixate(bsrc, chosen);
}

static gboolean gst_cuda_v4l2_src_set_caps(GstBaseSrc* bsrc, GstCaps* caps) {
  auto* self = GST_CUDA_V4L2_SRC(bsrc);
  State& st = self->priv->state;
  std::shared_ptr<v4l::Device> device = current_device(self);
  if (!device) return FALSE;

  const GstStructure* s = gst_caps_get_structure(caps, 0);
  const char* format = gst_structure_get_string(s, "format");
  const cb::BayerFormat* bayer = format ? cb::bayer_format_from_caps_name(format) : nullptr;
  gint width = 0, height = 0, rate_num = 0, rate_den = 1;
  if (!bayer || !gst_structure_get_int(s, "width", &width) ||
      !gst_structure_get_int(s, "height", &height) || width < 1 || height < 1) {
    GST_ERROR_OBJECT(self, "unsupported caps %" GST_PTR_FORMAT, caps);
    return FALSE;
  }
  gst_structure_get_fraction(s, "framerate", &rate_num, &rate_den);
  const v4l::Fraction rate{static_cast<uint32_t>(std::max(rate_num, 0)),
                           static_cast<uint32_t>(std::max(rate_den, 1))};

  stop_stream(self);  // the driver refuses a new format while it holds buffers
  v4l::Error error;
  v4l::Format actual;
  if (!device->set_format(bayer->fourcc, static_cast<uint32_t>(width),
                          static_cast<uint32_t>(height), &actual, &error)) {
    post_error(self, error);
    return FALSE;
  }
  v4l::Fraction actual_rate = rate;
  if (rate.num > 0 && device->can_set_framerate() &&
      !device->set_framerate(rate, &actual_rate, &error)) {
    GST_WARNING_OBJECT(self, "%s (%s)", error.message.c_str(), error.detail.c_str());
    actual_rate = rate;
  } else if (!(actual_rate == rate)) {
    GST_WARNING_OBJECT(self, "asked for %u/%u fps, the driver chose %u/%u", rate.num, rate.den,
                       actual_rate.num, actual_rate.den);
  }
  st.format = actual;
  st.bayer = bayer;
  st.rate = actual_rate;
  const uint64_t duration = v4l::frame_duration_ns(actual_rate);
  GST_OBJECT_LOCK(self);
  st.duration = duration ? duration : GST_CLOCK_TIME_NONE;
  GST_OBJECT_UNLOCK(self);
  GST_INFO_OBJECT(self, "%s %ux%u at %u/%u fps: %u bytes per line, %u bytes per image",
                  v4l::fourcc_to_string(actual.fourcc).c_str(), actual.width, actual.height,
                  actual_rate.num, actual_rate.den, actual.bytes_per_line, actual.size_image);
  return TRUE;
}

// Our own pool of page-aligned system memory for USERPTR capture.
static GstBufferPool* make_own_pool(GstCaps* caps, size_t size_image, guint count) {
  const size_t page = cipc_gst::page_size();
  const guint size = static_cast<guint>((size_image + page - 1) / page * page);
  GstBufferPool* pool = gst_buffer_pool_new();
  GstStructure* config = gst_buffer_pool_get_config(pool);
  // Enough for the driver's buffers plus a few downstream; bounded so a stalled consumer makes
  // the driver drop frames (counted) instead of the pool growing.
  gst_buffer_pool_config_set_params(config, caps, size, count + 2, count * 3);
  GstAllocationParams params;
  gst_allocation_params_init(&params);
  params.align = page - 1;  // an alignment mask
  gst_buffer_pool_config_set_allocator(config, nullptr, &params);
  if (!gst_buffer_pool_set_config(pool, config) || !gst_buffer_pool_set_active(pool, TRUE)) {
    gst_object_unref(pool);
    return nullptr;
  }
  return pool;
}

// USERPTR capture into our own pool (st.own_pool) for `count` granted driver buffers. Both
// callers end up here: decide_allocation when downstream's pool does not suit, and
// start_streaming when the driver refused downstream's memory. False with `error` (kNoMemory)
// when the pool cannot be made.
static bool capture_into_own_pool(GstCudaV4l2Src* self, const std::shared_ptr<v4l::Device>& device,
                                  GstCaps* caps, guint count, v4l::Error* error) {
  State& st = self->priv->state;
  st.own_pool = make_own_pool(caps, st.format.size_image, count);
  if (!st.own_pool) {
    error->kind = v4l::ErrorKind::kNoMemory;
    error->message = "Cannot allocate capture buffers for device '" + device->path() + "'.";
    return false;
  }
  st.stream = cipc_gst::make_userptr_stream(device, st.own_pool, count, st.format.size_image);
  return true;
}

// Configures and activates downstream's pool for USERPTR capture; false (pool left inactive)
// if it cannot deliver suitable buffers.
static bool use_downstream_pool(GstCudaV4l2Src* self, GstBufferPool* pool, GstCaps* caps,
                                size_t size_image, guint count, guint* size, guint* min,
                                guint* max) {
  *size = std::max<guint>(*size, static_cast<guint>(size_image));
  *min = std::max<guint>(*min, count + 2);
  if (*max != 0) *max = std::max<guint>(*max, *min + 1);
  const bool activate_here = !gst_buffer_pool_is_active(pool);
  if (activate_here) {
    GstStructure* config = gst_buffer_pool_get_config(pool);
    gst_buffer_pool_config_set_params(config, caps, *size, *min, *max);
    if (!gst_buffer_pool_set_config(pool, config)) {
      config = gst_buffer_pool_get_config(pool);
      const bool ok = gst_buffer_pool_config_validate_params(config, caps, *size, *min, *max) &&
                      gst_buffer_pool_set_config(pool, config);
      if (!ok) {
        GST_INFO_OBJECT(self, "downstream pool %" GST_PTR_FORMAT " refused our configuration",
                        pool);
        return false;
      }
    }
    if (!gst_buffer_pool_set_active(pool, TRUE)) return false;
  }
  GstBufferPoolAcquireParams params{};
  params.flags = GST_BUFFER_POOL_ACQUIRE_FLAG_DONTWAIT;
  GstBuffer* probe = nullptr;
  std::string why = "it has no free buffer";
  bool ok = gst_buffer_pool_acquire_buffer(pool, &probe, &params) == GST_FLOW_OK &&
            cipc_gst::buffer_suits_userptr(probe, size_image, &why);
  if (probe) gst_buffer_unref(probe);
  if (!ok) {
    GST_INFO_OBJECT(self, "not capturing into downstream pool %" GST_PTR_FORMAT ": %s", pool,
                    why.c_str());
    if (activate_here) gst_buffer_pool_set_active(pool, FALSE);
  }
  return ok;
}

static void clear_allocation_pools(GstQuery* query) {
  while (gst_query_get_n_allocation_pools(query) > 0)
    gst_query_remove_nth_allocation_pool(query, 0);
}

// Downstream's first pool, if it suits USERPTR capture of `count` buffers: then the only pool
// left in the query, and a reference for the caller. nullptr otherwise.
static GstBufferPool* take_downstream_pool(GstCudaV4l2Src* self, GstQuery* query, GstCaps* caps,
                                           guint count) {
  if (gst_query_get_n_allocation_pools(query) == 0) return nullptr;
  GstBufferPool* pool = nullptr;
  guint size = 0, min = 0, max = 0;
  gst_query_parse_nth_allocation_pool(query, 0, &pool, &size, &min, &max);
  if (!pool) return nullptr;
  const size_t size_image = self->priv->state.format.size_image;
  if (!use_downstream_pool(self, pool, caps, size_image, count, &size, &min, &max)) {
    gst_object_unref(pool);
    return nullptr;
  }
  gst_query_set_nth_allocation_pool(query, 0, pool, size, min, max);
  while (gst_query_get_n_allocation_pools(query) > 1)
    gst_query_remove_nth_allocation_pool(query, 1);
  return pool;  // the parse's reference
}

// USERPTR capture with `count` driver buffers granted: into downstream's pool when it suits
// (and no repacking copy is needed anyway), else into our own.
static gboolean capture_userptr(GstCudaV4l2Src* self, const std::shared_ptr<v4l::Device>& device,
                                GstQuery* query, guint count) {
  State& st = self->priv->state;
  GstCaps* caps = nullptr;
  gst_query_parse_allocation(query, &caps, nullptr);
  if (!st.repack) st.downstream_pool = take_downstream_pool(self, query, caps, count);
  if (st.downstream_pool) {
    st.stream =
        cipc_gst::make_userptr_stream(device, st.downstream_pool, count, st.format.size_image);
  } else {
    clear_allocation_pools(query);
    v4l::Error error;
    if (!capture_into_own_pool(self, device, caps, count, &error)) {
      post_error(self, error);
      return FALSE;
    }
  }
  GST_OBJECT_LOCK(self);
  st.buffer_count = count;
  self->priv->stats.io_mode = "userptr";
  self->priv->stats.downstream_pool = st.downstream_pool != nullptr;
  GST_OBJECT_UNLOCK(self);
  GST_INFO_OBJECT(self, "USERPTR capture into %s pool, %u driver buffers, %s",
                  st.downstream_pool ? "downstream's" : "our own", count,
                  st.repack            ? "repacking rows (copy)"
                  : st.downstream_meta ? "with GstVideoMeta"
                                       : "no meta needed");
  return TRUE;
}

// MMAP capture: the driver's own buffers, wrapped; no pool in the query.
static gboolean capture_mmap(GstCudaV4l2Src* self, const std::shared_ptr<v4l::Device>& device,
                             GstQuery* query, guint wanted) {
  State& st = self->priv->state;
  guint count = wanted;
  v4l::Error error;
  if (!device->request_buffers(v4l::Memory::kMmap, &count, &error)) {
    post_error(self, error);
    return FALSE;
  }
  clear_allocation_pools(query);
  st.stream = cipc_gst::make_mmap_stream(device, count);
  GST_OBJECT_LOCK(self);
  st.buffer_count = count;
  self->priv->stats.io_mode = "mmap";
  self->priv->stats.downstream_pool = false;
  GST_OBJECT_UNLOCK(self);
  GST_INFO_OBJECT(self, "MMAP capture, %u driver buffers", count);
  return TRUE;
}

// Sets up the driver's buffer queue: USERPTR into downstream's pool or ours, or MMAP. Only the
// pool we capture into is left in the query (basesrc then activates and deactivates it).
static gboolean gst_cuda_v4l2_src_decide_allocation(GstBaseSrc* bsrc, GstQuery* query) {
  auto* self = GST_CUDA_V4L2_SRC(bsrc);
  State& st = self->priv->state;
  const Settings s = snapshot_settings(self);
  std::shared_ptr<v4l::Device> device = current_device(self);
  if (!device || !st.bayer) return FALSE;
  stop_stream(self);

  st.downstream_meta = gst_query_find_allocation_meta(query, GST_VIDEO_META_API_TYPE, nullptr);
  st.repack = cb::stride_needs_video_meta(*st.bayer, st.format.width, st.format.bytes_per_line) &&
              !st.downstream_meta;
  if (s.io_mode == GST_CIPC_V4L2_IO_MMAP)
    return capture_mmap(self, device, query, s.driver_buffers);

  guint count = s.driver_buffers;
  v4l::Error error;
  if (device->request_buffers(v4l::Memory::kUserptr, &count, &error))
    return capture_userptr(self, device, query, count);
  if (error.kind != v4l::ErrorKind::kUnsupported || s.io_mode != GST_CIPC_V4L2_IO_AUTO) {
    post_error(self, error);
    return FALSE;
  }
  if (!st.warned_fallback) {
    st.warned_fallback = true;
    GST_ELEMENT_WARNING(self, RESOURCE, SETTINGS,
                        ("Device '%s' does not accept user-pointer buffers; capturing into its "
                         "own (MMAP) buffers instead, so frames cannot land in downstream's "
                         "memory.",
                         device->path().c_str()),
                        ("%s", error.detail.c_str()));
  }
  return capture_mmap(self, device, query, s.driver_buffers);
}

static gboolean gst_cuda_v4l2_src_negotiate(GstBaseSrc* bsrc) {
  auto* self = GST_CUDA_V4L2_SRC(bsrc);
  if (GST_BASE_SRC_CLASS(gst_cuda_v4l2_src_parent_class)->negotiate(bsrc)) return TRUE;
  if (!self->priv->state.error_posted) {
    // Say which device and what it offers, instead of basesrc's bare "not-negotiated".
    GstCaps* peer = gst_pad_peer_query_caps(GST_BASE_SRC_PAD(bsrc), nullptr);
    GstCaps* ours = gst_cuda_v4l2_src_get_caps(bsrc, nullptr);
    const Settings s = snapshot_settings(self);
    self->priv->state.error_posted = true;
    GST_ELEMENT_ERROR(
        self, STREAM, FORMAT,
        ("Device '%s' cannot deliver a format, size and rate that downstream "
         "accepts.",
         s.device.c_str()),
        ("device offers %" GST_PTR_FORMAT "; downstream accepts %" GST_PTR_FORMAT, ours, peer));
    if (peer) gst_caps_unref(peer);
    gst_caps_unref(ours);
  }
  return FALSE;
}

static gboolean gst_cuda_v4l2_src_query(GstBaseSrc* bsrc, GstQuery* query) {
  auto* self = GST_CUDA_V4L2_SRC(bsrc);
  if (GST_QUERY_TYPE(query) == GST_QUERY_LATENCY) {
    GST_OBJECT_LOCK(self);
    const bool open = self->priv->state.device != nullptr;
    const GstClockTime duration = self->priv->state.duration;
    const guint count = self->priv->state.buffer_count;
    GST_OBJECT_UNLOCK(self);
    if (!open) return FALSE;
    // A frame is complete one frame time after its exposure began; the driver can hold up to
    // `count` of them before we dequeue.
    const GstClockTime min = GST_CLOCK_TIME_IS_VALID(duration) ? duration : 0;
    const GstClockTime max =
        GST_CLOCK_TIME_IS_VALID(duration) && count ? duration * count : GST_CLOCK_TIME_NONE;
    gst_query_set_latency(query, TRUE, min, max);
    GST_DEBUG_OBJECT(self, "latency: min %" GST_TIME_FORMAT " max %" GST_TIME_FORMAT,
                     GST_TIME_ARGS(min), GST_TIME_ARGS(max));
    return TRUE;
  }
  return GST_BASE_SRC_CLASS(gst_cuda_v4l2_src_parent_class)->query(bsrc, query);
}

static gboolean gst_cuda_v4l2_src_unlock(GstBaseSrc* bsrc) {
  auto* self = GST_CUDA_V4L2_SRC(bsrc);
  self->priv->state.flushing = true;
  if (std::shared_ptr<v4l::Device> device = current_device(self)) device->interrupt();
  return TRUE;
}

static gboolean gst_cuda_v4l2_src_unlock_stop(GstBaseSrc* bsrc) {
  auto* self = GST_CUDA_V4L2_SRC(bsrc);
  self->priv->state.flushing = false;
  if (std::shared_ptr<v4l::Device> device = current_device(self)) device->clear_interrupt();
  return TRUE;
}

// ---- Frames ---------------------------------------------------------------------------------

static GstClockTime monotonic_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return GST_TIMESPEC_TO_TIME(ts);
}

// Running time of the frame: the driver's CLOCK_MONOTONIC stamp moved onto the pipeline clock
// (for the default system clock the two are the same clock), else the clock time now.
static GstClockTime running_time_of(GstCudaV4l2Src* self, const v4l::Frame& frame) {
  GstClock* clock = gst_element_get_clock(GST_ELEMENT(self));
  if (!clock) return GST_CLOCK_TIME_NONE;
  const GstClockTime base = gst_element_get_base_time(GST_ELEMENT(self));
  const GstClockTime now = gst_clock_get_time(clock);
  gst_object_unref(clock);
  return cipc_gst::capture_running_time(now, monotonic_now(), base, frame.monotonic_timestamp,
                                        frame.timestamp_ns);
}

// A copy of `buffer` with rows GST_ROUND_UP_4 (width) samples apart, for a downstream that
// assumes that stride and cannot read GstVideoMeta.
static GstBuffer* repacked(const State& st, GstBuffer* buffer) {
  const size_t out_stride = cb::implicit_stride(*st.bayer, st.format.width);
  const size_t row = cb::tight_stride(*st.bayer, st.format.width);
  GstBuffer* out = gst_buffer_new_allocate(nullptr, out_stride * st.format.height, nullptr);
  GstMapInfo in_map, out_map;
  if (!out || !gst_buffer_map(buffer, &in_map, GST_MAP_READ)) {
    if (out) gst_buffer_unref(out);
    return nullptr;
  }
  gst_buffer_map(out, &out_map, GST_MAP_WRITE);
  for (uint32_t y = 0; y < st.format.height; ++y) {
    const size_t src = static_cast<size_t>(y) * st.format.bytes_per_line;
    uint8_t* dst = out_map.data + static_cast<size_t>(y) * out_stride;
    if (src + row <= in_map.size) {
      std::memcpy(dst, in_map.data + src, row);
      std::memset(dst + row, 0, out_stride - row);
    } else {
      std::memset(dst, 0, out_stride);
    }
  }
  gst_buffer_unmap(out, &out_map);
  gst_buffer_unmap(buffer, &in_map);
  gst_buffer_copy_into(out, buffer, GST_BUFFER_COPY_METADATA, 0, static_cast<gsize>(-1));
  return out;
}

// Starts capturing on the first create(). If the driver refuses downstream's memory (e.g. it
// cannot be pinned for DMA), captures into our own buffers instead, with a warning.
static bool start_streaming(GstCudaV4l2Src* self, const std::shared_ptr<v4l::Device>& device,
                            v4l::Error* error) {
  State& st = self->priv->state;
  if (st.stream->start(error)) return true;
  // Only a refused buffer says anything about downstream's memory.
  if (!st.downstream_pool || error->kind != v4l::ErrorKind::kFailed) return false;
  GST_ELEMENT_WARNING(self, RESOURCE, SETTINGS,
                      ("Device '%s' cannot write into downstream's buffers; capturing into its "
                       "own page-aligned buffers instead.",
                       device->path().c_str()),
                      ("%s (%s)", error->message.c_str(), error->detail.c_str()));
  const guint wanted = st.buffer_count;
  GstCaps* caps = gst_pad_get_current_caps(GST_BASE_SRC_PAD(self));
  stop_stream(self);
  guint count = wanted;
  bool ok = device->request_buffers(v4l::Memory::kUserptr, &count, error) &&
            capture_into_own_pool(self, device, caps, count, error);
  if (caps) gst_caps_unref(caps);
  if (!ok) return false;
  GST_OBJECT_LOCK(self);
  self->priv->stats.downstream_pool = false;
  GST_OBJECT_UNLOCK(self);
  return st.stream->start(error);
}

// How long to wait for a frame: frame-timeout, but never less than three frame times (a slow
// rate is not a dead sensor); -1 (frame-timeout=0) waits forever.
static int frame_timeout(const State& st, guint frame_timeout_ms) {
  if (frame_timeout_ms == 0) return -1;
  const guint64 frames_ms = st.rate.num ? 3ull * 1000 * st.rate.den / st.rate.num : 0;
  return static_cast<int>(
      std::min<guint64>(std::max<guint64>(frame_timeout_ms, frames_ms), MAX_FRAME_TIMEOUT_MS));
}

// The driver's next frame, in `*buffer`: gives the driver every buffer downstream has returned,
// waits up to `timeout_ms` and dequeues. Anything but GST_FLOW_OK (an error is posted first, a
// flush is not) ends create().
static GstFlowReturn wait_for_buffer(GstCudaV4l2Src* self, v4l::Device& device, int timeout_ms,
                                     size_t frame_bytes, v4l::Frame* frame, GstBuffer** buffer) {
  State& st = self->priv->state;
  v4l::Error error;
  for (;;) {
    if (st.flushing) return GST_FLOW_FLUSHING;
    bool pool_flushing = false;
    if (!st.stream->refill(&pool_flushing, &error)) {
      post_error(self, error);
      return GST_FLOW_ERROR;
    }
    if (pool_flushing) return GST_FLOW_FLUSHING;
    // With every buffer downstream there is nothing to time out on: wait for one to return.
    const bool starved = st.stream->queued() == 0;
    switch (device.wait_for_frame(starved ? STARVED_POLL_MS : timeout_ms, &error)) {
      case v4l::WaitResult::kInterrupted: return GST_FLOW_FLUSHING;
      case v4l::WaitResult::kError: post_error(self, error); return GST_FLOW_ERROR;
      case v4l::WaitResult::kTimeout:
        if (starved) continue;
        error.kind = v4l::ErrorKind::kTimeout;
        error.message = "Device '" + device.path() + "' delivered no frame for " +
                        std::to_string(timeout_ms) + " ms.";
        error.detail = "frame-timeout expired; the sensor may be stopped or unplugged";
        post_error(self, error);
        return GST_FLOW_ERROR;
      case v4l::WaitResult::kReady: break;
    }
    if (st.stream->dequeue(frame_bytes, frame, buffer, &error)) return GST_FLOW_OK;
    // Nothing was ready after all (no error): wait again.
    if (error) {
      post_error(self, error);
      return GST_FLOW_ERROR;
    }
  }
}

// What stamp_buffer() found out about a frame, for the stats and the log.
struct FrameMarks {
  guint64 dropped = 0;  // frames the driver's sequence numbers skipped before this one
  bool corrupted = false;
};

// Timestamps, offsets and flags of the frame onto `buffer`. Drops are gaps in the driver's
// sequence numbers (modulo 2^32; a jump back is a restart, not 4 billion drops).
static FrameMarks stamp_buffer(GstCudaV4l2Src* self, const v4l::Frame& frame, size_t frame_bytes,
                               GstBuffer* buffer) {
  State& st = self->priv->state;
  FrameMarks marks;
  bool discont = !st.have_sequence;
  if (st.have_sequence) {
    const guint32 gap = frame.sequence - st.last_sequence - 1u;
    if (gap != 0) {
      discont = true;
      if (gap < 0x80000000u) marks.dropped = gap;
    }
  }
  st.have_sequence = true;
  st.last_sequence = frame.sequence;

  const bool short_frame = frame.bytes_used != 0 && frame.bytes_used < frame_bytes;
  marks.corrupted = frame.error_flag() || short_frame;
  GST_BUFFER_PTS(buffer) = running_time_of(self, frame);
  GST_BUFFER_DTS(buffer) = GST_CLOCK_TIME_NONE;
  const uint64_t duration = v4l::frame_duration_ns(st.rate);
  GST_BUFFER_DURATION(buffer) = duration ? duration : GST_CLOCK_TIME_NONE;
  GST_BUFFER_OFFSET(buffer) = frame.sequence;
  GST_BUFFER_OFFSET_END(buffer) = static_cast<guint64>(frame.sequence) + 1;
  if (discont) GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_DISCONT);
  if (marks.corrupted) GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_CORRUPTED);
  return marks;
}

// Tells downstream the driver's row stride: a GstVideoMeta with bytesperline (a pool's buffer
// may carry one already: its stride is corrected), the sample container as its format.
static void set_stride_meta(const State& st, GstBuffer* buffer) {
  gsize offsets[GST_VIDEO_MAX_PLANES] = {0};
  gint strides[GST_VIDEO_MAX_PLANES] = {static_cast<gint>(st.format.bytes_per_line)};
  GstVideoMeta* meta = gst_buffer_get_video_meta(buffer);
  if (meta) {
    meta->stride[0] = strides[0];
    meta->offset[0] = 0;
    return;
  }
  gst_buffer_add_video_meta_full(
      buffer, GST_VIDEO_FRAME_FLAG_NONE,
      st.bayer->bytes_per_sample == 1 ? GST_VIDEO_FORMAT_GRAY8 : GST_VIDEO_FORMAT_GRAY16_LE,
      st.format.width, st.format.height, 1, offsets, strides);
}

// The frame as downstream can read it: repacked rows (a counted copy, `*copied`) for a downstream
// that cannot be told the stride, else the buffer itself with the stride in a GstVideoMeta if
// downstream reads one. nullptr (error posted, `buffer` given back) if the copy had no memory.
static GstBuffer* lay_out(GstCudaV4l2Src* self, const v4l::Device& device, GstBuffer* buffer,
                          bool* copied) {
  const State& st = self->priv->state;
  *copied = false;
  if (st.downstream_meta && !st.repack) set_stride_meta(st, buffer);
  if (!st.repack) return buffer;
  GstBuffer* packed = repacked(st, buffer);
  gst_buffer_unref(buffer);  // back to the pool / the driver
  if (!packed) {
    v4l::Error e;
    e.kind = v4l::ErrorKind::kNoMemory;
    e.message = "Cannot allocate a buffer to repack a frame from device '" + device.path() + "'.";
    post_error(self, e);
    return nullptr;
  }
  *copied = true;
  return packed;
}

static GstFlowReturn gst_cuda_v4l2_src_create(GstPushSrc* psrc, GstBuffer** out) {
  auto* self = GST_CUDA_V4L2_SRC(psrc);
  State& st = self->priv->state;
  std::shared_ptr<v4l::Device> device = current_device(self);
  if (!device || !st.stream) return GST_FLOW_NOT_NEGOTIATED;
  const Settings s = snapshot_settings(self);
  if (!st.streaming) {
    v4l::Error error;
    if (!start_streaming(self, device, &error)) {
      post_error(self, error);
      return GST_FLOW_ERROR;
    }
    st.streaming = true;
  }

  const size_t frame_bytes = static_cast<size_t>(st.format.bytes_per_line) * st.format.height;
  v4l::Frame frame;
  GstBuffer* buffer = nullptr;
  const GstFlowReturn ret = wait_for_buffer(self, *device, frame_timeout(st, s.frame_timeout_ms),
                                            frame_bytes, &frame, &buffer);
  if (ret != GST_FLOW_OK) return ret;
  const FrameMarks marks = stamp_buffer(self, frame, frame_bytes, buffer);
  bool copied = false;
  buffer = lay_out(self, *device, buffer, &copied);
  if (!buffer) return GST_FLOW_ERROR;

  GST_OBJECT_LOCK(self);
  Stats& stats = self->priv->stats;
  ++stats.frames;
  stats.drops += marks.dropped;
  if (marks.corrupted) ++stats.corrupted;
  if (copied) ++stats.copies;
  GST_OBJECT_UNLOCK(self);
  GST_LOG_OBJECT(self, "frame %u (buffer %u, %u bytes)%s%s pts %" GST_TIME_FORMAT, frame.sequence,
                 frame.index, frame.bytes_used, marks.dropped ? " after a gap" : "",
                 marks.corrupted ? " CORRUPTED" : "", GST_TIME_ARGS(GST_BUFFER_PTS(buffer)));
  *out = buffer;
  return GST_FLOW_OK;
}

// ---- Class ----------------------------------------------------------------------------------

static void gst_cuda_v4l2_src_class_init(GstCudaV4l2SrcClass* klass) {
  auto* object_class = G_OBJECT_CLASS(klass);
  auto* element_class = GST_ELEMENT_CLASS(klass);
  auto* base_class = GST_BASE_SRC_CLASS(klass);
  auto* push_class = GST_PUSH_SRC_CLASS(klass);
  object_class->set_property = gst_cuda_v4l2_src_set_property;
  object_class->get_property = gst_cuda_v4l2_src_get_property;
  object_class->finalize = gst_cuda_v4l2_src_finalize;

  const GParamFlags rw_ready = cipc_gst::kParamReadyRW;
  g_object_class_install_property(
      object_class, PROP_DEVICE,
      g_param_spec_string("device", "Device",
                          "V4L2 video capture device node to open (set it in the NULL state)",
                          DEFAULT_DEVICE, rw_ready));
  g_object_class_install_property(
      object_class, PROP_IO_MODE,
      g_param_spec_enum("io-mode", "I/O mode",
                        "How frames get from the driver into buffers: auto (USERPTR, falling "
                        "back to MMAP with a warning if the driver refuses it), userptr or mmap",
                        gst_cipc_v4l2_io_mode_get_type(), DEFAULT_IO_MODE, rw_ready));
  g_object_class_install_property(
      object_class, PROP_DRIVER_BUFFERS,
      g_param_spec_uint("driver-buffers", "Driver buffers",
                        "Number of buffers the driver fills in turn (2..32); the driver may "
                        "grant a different number",
                        MIN_DRIVER_BUFFERS, MAX_DRIVER_BUFFERS, DEFAULT_DRIVER_BUFFERS, rw_ready));
  g_object_class_install_property(
      object_class, PROP_FRAME_TIMEOUT,
      g_param_spec_uint("frame-timeout", "Frame timeout",
                        "Milliseconds (0..3600000) without a frame after which capture fails "
                        "with an error; never less than three frame times; 0 waits forever",
                        0, MAX_FRAME_TIMEOUT_MS, DEFAULT_FRAME_TIMEOUT_MS,
                        static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                                                 GST_PARAM_MUTABLE_PLAYING)));
  g_object_class_install_property(
      object_class, PROP_STATS,
      g_param_spec_boxed("stats", "Statistics",
                         "Capture statistics since start: frames (pushed), drops (gaps in the "
                         "driver's sequence numbers), corrupted (frames the driver flagged or "
                         "cut short), copies (frames repacked for a downstream without "
                         "GstVideoMeta), io-mode (userptr, mmap or none), downstream-pool "
                         "(whether the driver writes into downstream's buffers)",
                         GST_TYPE_STRUCTURE,
                         static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));

  gst_element_class_set_static_metadata(
      element_class, "V4L2 Bayer camera source", "Source/Video",
      "Captures 8-, 10- and 12-bit Bayer video from a V4L2 device, into downstream's buffers "
      "(USERPTR) where it can",
      "gst-cudaipc developers");
  cipc_gst::add_doc_uri(element_class, "cudav4l2src");
  GstCaps* caps = template_caps();
  gst_element_class_add_pad_template(
      element_class, gst_pad_template_new("src", GST_PAD_SRC, GST_PAD_ALWAYS, caps));
  gst_caps_unref(caps);

  element_class->change_state = GST_DEBUG_FUNCPTR(gst_cuda_v4l2_src_change_state);
  base_class->start = GST_DEBUG_FUNCPTR(gst_cuda_v4l2_src_start);
  base_class->stop = GST_DEBUG_FUNCPTR(gst_cuda_v4l2_src_stop);
  base_class->get_caps = GST_DEBUG_FUNCPTR(gst_cuda_v4l2_src_get_caps);
  base_class->fixate = GST_DEBUG_FUNCPTR(gst_cuda_v4l2_src_fixate);
  base_class->set_caps = GST_DEBUG_FUNCPTR(gst_cuda_v4l2_src_set_caps);
  base_class->negotiate = GST_DEBUG_FUNCPTR(gst_cuda_v4l2_src_negotiate);
  base_class->decide_allocation = GST_DEBUG_FUNCPTR(gst_cuda_v4l2_src_decide_allocation);
  base_class->query = GST_DEBUG_FUNCPTR(gst_cuda_v4l2_src_query);
  base_class->unlock = GST_DEBUG_FUNCPTR(gst_cuda_v4l2_src_unlock);
  base_class->unlock_stop = GST_DEBUG_FUNCPTR(gst_cuda_v4l2_src_unlock_stop);
  push_class->create = GST_DEBUG_FUNCPTR(gst_cuda_v4l2_src_create);
}

static void gst_cuda_v4l2_src_init(GstCudaV4l2Src* self) {
  self->priv = new CudaV4l2SrcPrivate();
  gst_base_src_set_live(GST_BASE_SRC(self), TRUE);
  gst_base_src_set_format(GST_BASE_SRC(self), GST_FORMAT_TIME);
  gst_base_src_set_do_timestamp(GST_BASE_SRC(self), FALSE);
}
