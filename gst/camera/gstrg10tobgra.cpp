// SPDX-License-Identifier: LGPL-2.1-or-later
/**
 * SECTION:element-rg10tobgra
 * @title: rg10tobgra
 *
 * Debayers 10-bit Bayer video (video/x-bayer rggb10le, bggr10le, grbg10le or gbrg10le: one
 * 16-bit little-endian word per sample) into BGRA on the GPU, in one kernel pass: black level,
 * white balance (fixed gains, or gray world from the previous frame's statistics gathered by
 * the same kernel), demosaic (bilinear or Malvar-He-Cutler), gain and an output transfer curve
 * (sRGB, linear or a power law). The math is documented in cuda/debayer.h; a CPU reference of
 * it is the oracle of the GPU tests.
 *
 * No copies on the way: upstream gets a pool of pinned, CUDA-mapped host memory to write its
 * frames into, which the kernel reads in place; the output is written straight into the pool
 * downstream offers - cudasink-ipc's exportable CUDA slots - and its readiness is recorded on
 * the GPU, nothing waits on the CPU. Input from elsewhere is copied to the GPU first, and with
 * system-memory caps downstream (ximagesink...) each frame is downloaded once into downstream's
 * buffer; both are counted in the stats property.
 *
 * Reading the pinned pool in place over the bus is not always the fastest way for the frame to
 * reach the GPU: on a discrete GPU a copy engine's upload is about twice as fast as the
 * kernel's reads of host memory (53 against 22 GB/s on an H200), while on Jetson the pinned
 * memory is the GPU's own. With input-mode=auto (the default) the element times both on the
 * negotiated frame size when the first pinned frame arrives and keeps the faster; an upload runs
 * on a stream of its own, overlapping the previous frame's kernel, and is counted in the stats
 * (input-uploads), as is the choice (input-path, in-place-us, upload-us).
 *
 * Input rows are GST_ROUND_UP_4 (width) * 2 bytes apart unless a GstVideoMeta gives the stride.
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 videotestsrc is-live=true ! video/x-raw,format=BGRx,width=1920,height=1080 ! \
 *     bgratorg10 ! rg10tobgra ! cudasink-ipc socket-path=/tmp/camera.sock
 * gst-launch-1.0 cudasrc-ipc socket-path=/tmp/camera.sock ! ximagesink
 * ]|
 * |[
 * gst-launch-1.0 videotestsrc ! bgratorg10 ! rg10tobgra method=bilinear ! videoconvert !
 * autovideosink
 * ]|
 *
 * Since: 0.1
 */
#include "camera/gstrg10tobgra.h"
#include "common/elementdocs.h"
#include "common/paramflags.h"

#include <gst/video/video.h>

#include <atomic>
#include <memory>
#include <string>

#include "camera/bayercaps.h"
#include "camera/cameraenums.h"
#include "camera/debayerinput.h"
#include "common/cudaplanecopy.h"
#include "common/gstcudainterop.h"
#include "cuda_slots.h"
#include "cudaipc/gstcudaipcmemory.h"
#include "debayer_gpu.h"
#include "device.h"
#include "input_upload.h"
#include "memory/pinnedmemory.h"
#include "memory/slotmemory.h"
#include "memory/slotpool.h"

GST_DEBUG_CATEGORY_STATIC(gst_rg10_to_bgra_debug);
#define GST_CAT_DEFAULT gst_rg10_to_bgra_debug

enum {
  PROP_0,
  PROP_BIT_ALIGNMENT,
  PROP_BLACK_LEVEL,
  PROP_WB_MODE,
  PROP_WB_RED,
  PROP_WB_GREEN,
  PROP_WB_BLUE,
  PROP_METHOD,
  PROP_GAIN,
  PROP_TRANSFER,
  PROP_GAMMA,
  PROP_PRECISION,
  PROP_CUDA_DEVICE_ID,
  PROP_INPUT_POOL_SIZE,
  PROP_INPUT_MODE,
  PROP_STATS,
};

#define DEFAULT_BIT_ALIGNMENT GST_CIPC_BIT_ALIGNMENT_LSB
#define DEFAULT_BLACK_LEVEL 0
#define MAX_BLACK_LEVEL 1022
#define DEFAULT_WB_MODE GST_CIPC_WB_FIXED
#define DEFAULT_WB 1.0
#define MIN_WB 0.01
#define MAX_WB 16.0
#define DEFAULT_METHOD GST_CIPC_DEMOSAIC_MHC
#define DEFAULT_GAIN 1.0
#define MIN_GAIN 0.0
#define MAX_GAIN 64.0
#define DEFAULT_TRANSFER GST_CIPC_TRANSFER_SRGB
#define DEFAULT_GAMMA 2.2
#define MIN_GAMMA 0.1
#define MAX_GAMMA 10.0
#define DEFAULT_PRECISION GST_CIPC_PRECISION_FAST
#define DEFAULT_CUDA_DEVICE_ID -1
#define DEFAULT_INPUT_POOL_SIZE 4
#define DEFAULT_INPUT_MODE GST_CIPC_INPUT_AUTO

#define OUT_FORMATS "{ BGRA, BGRx, RGBA }"

namespace {

struct Settings {
  GstCipcBitAlignment bit_alignment = DEFAULT_BIT_ALIGNMENT;
  guint black_level = DEFAULT_BLACK_LEVEL;
  GstCipcWhiteBalance wb_mode = DEFAULT_WB_MODE;
  gdouble wb_red = DEFAULT_WB;
  gdouble wb_green = DEFAULT_WB;
  gdouble wb_blue = DEFAULT_WB;
  GstCipcDemosaic method = DEFAULT_METHOD;
  gdouble gain = DEFAULT_GAIN;
  GstCipcTransfer transfer = DEFAULT_TRANSFER;
  gdouble gamma = DEFAULT_GAMMA;
  GstCipcPrecision precision = DEFAULT_PRECISION;
  gint cuda_device_id = DEFAULT_CUDA_DEVICE_ID;
  guint input_pool_size = DEFAULT_INPUT_POOL_SIZE;
  GstCipcInputMode input_mode = DEFAULT_INPUT_MODE;
};

// Everything the streaming thread uses; created in start(), dropped in stop().
struct State {
  int device = -1;
  cipc_cuda::Stream stream;
  cipc_cuda::GpuDebayer debayer;
  // Negotiated.
  bool configured = false;
  cipc_bayer::CfaOrder phase = cipc_bayer::CfaOrder::kRGGB;
  GstVideoInfo out_info;
  bool cuda_output = false;             // memory:CUDAIPCMemory downstream
  GstBufferPool* input_pool = nullptr;  // offered upstream: pinned, CUDA-mapped
  GstCaps* input_pool_caps = nullptr;
  // How each frame reaches the kernel: in place, uploaded or copied (its counters are the
  // stats' input part).
  cipc_gst::DebayerInput input;
  // Output before a download into system memory, allocated on first use.
  cipc_cuda::DeviceBuffer output_staging;
};

// The stats besides the input's (State::input).
struct Counters {
  std::atomic<guint64> frames{0};
  std::atomic<guint64> downloads{0};

  void reset() {
    frames = 0;
    downloads = 0;
  }
};

cipc_cuda::DebayerParams debayer_params(const Settings& s, cipc_bayer::CfaOrder phase,
                                        GstVideoFormat out_format) {
  cipc_cuda::DebayerParams p;
  p.phase = phase;
  p.alignment = gst_cipc_bit_alignment_to_bayer(s.bit_alignment);
  p.method = s.method == GST_CIPC_DEMOSAIC_BILINEAR ? cipc_cuda::Demosaic::kBilinear
                                                    : cipc_cuda::Demosaic::kMhc;
  p.black_level = static_cast<uint16_t>(s.black_level);
  p.wb_red = static_cast<float>(s.wb_red);
  p.wb_green = static_cast<float>(s.wb_green);
  p.wb_blue = static_cast<float>(s.wb_blue);
  p.gain = static_cast<float>(s.gain);
  p.transfer = s.transfer == GST_CIPC_TRANSFER_LINEAR  ? cipc_cuda::Transfer::kLinear
               : s.transfer == GST_CIPC_TRANSFER_POWER ? cipc_cuda::Transfer::kPower
                                                       : cipc_cuda::Transfer::kSrgb;
  p.gamma = static_cast<float>(s.gamma);
  p.order = out_format == GST_VIDEO_FORMAT_RGBA ? cipc_cuda::PixelOrder::kRgba
                                                : cipc_cuda::PixelOrder::kBgra;
  p.precision = s.precision == GST_CIPC_PRECISION_EXACT ? cipc_cuda::Precision::kExact
                                                        : cipc_cuda::Precision::kFast;
  return p;
}

}  // namespace

// Everything the element owns, in one place; members clean up after themselves.
struct Rg10ToBgraPrivate {
  Settings settings;  // under the object lock
  State state;        // start/stop, set_caps, allocation queries and the streaming thread
  Counters counters;
#ifdef CIPC_HAVE_GST_CUDA
  // Shared with nvcodec elements (context queries, set_context): the debayer already runs in
  // the primary context, which this wraps.
  cipc_gst::ElementCudaContext cuda_context;
#endif
};

struct _GstRg10ToBgra {
  GstBaseTransform parent;
  Rg10ToBgraPrivate* priv;
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE(
    "sink", GST_PAD_SINK, GST_PAD_ALWAYS,
    GST_STATIC_CAPS("video/x-bayer, format = (string) " CIPC_BAYER10_FORMATS
                    ", width = (int) [ 1, 32767 ], height = (int) [ 1, 32767 ], "
                    "framerate = (fraction) [ 0, max ]"));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE(
    "src", GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE_WITH_FEATURES(
        GST_CAPS_FEATURE_MEMORY_CUDA_IPC, OUT_FORMATS) ";" GST_VIDEO_CAPS_MAKE(OUT_FORMATS)));

G_DEFINE_TYPE(GstRg10ToBgra, gst_rg10_to_bgra, GST_TYPE_BASE_TRANSFORM)
// The category is made with the registration, so that --gst-debug-help lists it once the
// plugin is loaded, before the element is first used.
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE(
    rg10tobgra, "rg10tobgra", GST_RANK_NONE, GST_TYPE_RG10_TO_BGRA,
    GST_DEBUG_CATEGORY_INIT(gst_rg10_to_bgra_debug, "cudaipc-rg10tobgra", 0, "rg10tobgra element"))

static Settings snapshot_settings(GstRg10ToBgra* self) {
  GST_OBJECT_LOCK(self);
  Settings s = self->priv->settings;
  GST_OBJECT_UNLOCK(self);
  return s;
}

static GstStructure* make_stats(GstRg10ToBgra* self) {
  const cipc_cuda::WbGains g = self->priv->state.debayer.valid()
                                   ? self->priv->state.debayer.last_gains()
                                   : cipc_cuda::WbGains{};
  const Counters& c = self->priv->counters;
  const cipc_gst::DebayerInputCounters& in = self->priv->state.input.counters();
  const int path = in.path.load();
  const char* path_name =
      path < 0 ? "none" : cipc_cuda::input_path_name(static_cast<cipc_cuda::InputPath>(path));
  return gst_structure_new("rg10tobgra-stats", "frames", G_TYPE_UINT64, c.frames.load(),
                           "input-copies", G_TYPE_UINT64, in.copies.load(), "input-uploads",
                           G_TYPE_UINT64, in.uploads.load(), "input-path", G_TYPE_STRING, path_name,
                           "in-place-us", G_TYPE_DOUBLE, in.in_place_us.load(), "upload-us",
                           G_TYPE_DOUBLE, in.upload_us.load(), "downloads", G_TYPE_UINT64,
                           c.downloads.load(), "wb-red", G_TYPE_DOUBLE, static_cast<gdouble>(g.red),
                           "wb-green", G_TYPE_DOUBLE, static_cast<gdouble>(g.green), "wb-blue",
                           G_TYPE_DOUBLE, static_cast<gdouble>(g.blue), nullptr);
}

static void gst_rg10_to_bgra_set_property(GObject* object, guint prop_id, const GValue* value,
                                          GParamSpec* pspec) {
  auto* self = GST_RG10_TO_BGRA(object);
  GST_OBJECT_LOCK(self);
  Settings& s = self->priv->settings;
  switch (prop_id) {
    case PROP_BIT_ALIGNMENT:
      s.bit_alignment = static_cast<GstCipcBitAlignment>(g_value_get_enum(value));
      break;
    case PROP_BLACK_LEVEL: s.black_level = g_value_get_uint(value); break;
    case PROP_WB_MODE: s.wb_mode = static_cast<GstCipcWhiteBalance>(g_value_get_enum(value)); break;
    case PROP_WB_RED: s.wb_red = g_value_get_double(value); break;
    case PROP_WB_GREEN: s.wb_green = g_value_get_double(value); break;
    case PROP_WB_BLUE: s.wb_blue = g_value_get_double(value); break;
    case PROP_METHOD: s.method = static_cast<GstCipcDemosaic>(g_value_get_enum(value)); break;
    case PROP_GAIN: s.gain = g_value_get_double(value); break;
    case PROP_TRANSFER: s.transfer = static_cast<GstCipcTransfer>(g_value_get_enum(value)); break;
    case PROP_GAMMA: s.gamma = g_value_get_double(value); break;
    case PROP_PRECISION:
      s.precision = static_cast<GstCipcPrecision>(g_value_get_enum(value));
      break;
    case PROP_CUDA_DEVICE_ID: s.cuda_device_id = g_value_get_int(value); break;
    case PROP_INPUT_POOL_SIZE: s.input_pool_size = g_value_get_uint(value); break;
    case PROP_INPUT_MODE:
      s.input_mode = static_cast<GstCipcInputMode>(g_value_get_enum(value));
      break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK(self);
}

static void gst_rg10_to_bgra_get_property(GObject* object, guint prop_id, GValue* value,
                                          GParamSpec* pspec) {
  auto* self = GST_RG10_TO_BGRA(object);
  if (prop_id == PROP_STATS) {
    g_value_take_boxed(value, make_stats(self));
    return;
  }
  GST_OBJECT_LOCK(self);
  const Settings& s = self->priv->settings;
  switch (prop_id) {
    case PROP_BIT_ALIGNMENT: g_value_set_enum(value, s.bit_alignment); break;
    case PROP_BLACK_LEVEL: g_value_set_uint(value, s.black_level); break;
    case PROP_WB_MODE: g_value_set_enum(value, s.wb_mode); break;
    case PROP_WB_RED: g_value_set_double(value, s.wb_red); break;
    case PROP_WB_GREEN: g_value_set_double(value, s.wb_green); break;
    case PROP_WB_BLUE: g_value_set_double(value, s.wb_blue); break;
    case PROP_METHOD: g_value_set_enum(value, s.method); break;
    case PROP_GAIN: g_value_set_double(value, s.gain); break;
    case PROP_TRANSFER: g_value_set_enum(value, s.transfer); break;
    case PROP_GAMMA: g_value_set_double(value, s.gamma); break;
    case PROP_PRECISION: g_value_set_enum(value, s.precision); break;
    case PROP_CUDA_DEVICE_ID: g_value_set_int(value, s.cuda_device_id); break;
    case PROP_INPUT_POOL_SIZE: g_value_set_uint(value, s.input_pool_size); break;
    case PROP_INPUT_MODE: g_value_set_enum(value, s.input_mode); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK(self);
}

static void drop_input_pool(State& st) {
  if (st.input_pool) {
    gst_buffer_pool_set_active(st.input_pool, FALSE);
    gst_object_unref(st.input_pool);
    st.input_pool = nullptr;
  }
  if (st.input_pool_caps) {
    gst_caps_unref(st.input_pool_caps);
    st.input_pool_caps = nullptr;
  }
}

#ifdef CIPC_HAVE_GST_CUDA
static int context_device(GstRg10ToBgra* self) {
  GST_OBJECT_LOCK(self);
  const int id = self->priv->settings.cuda_device_id;
  GST_OBJECT_UNLOCK(self);
  return id < 0 ? 0 : id;
}

// nvcodec neighbours ask for a "gst.cuda.context": the wrapper of the primary context the
// debayer runs in, so that a process keeps one context per device.
static gboolean gst_rg10_to_bgra_query(GstBaseTransform* trans, GstPadDirection direction,
                                       GstQuery* query) {
  auto* self = GST_RG10_TO_BGRA(trans);
  if (self->priv->cuda_context.answer_query(GST_ELEMENT(self), query, context_device(self)))
    return TRUE;
  return GST_BASE_TRANSFORM_CLASS(gst_rg10_to_bgra_parent_class)->query(trans, direction, query);
}

static void gst_rg10_to_bgra_set_context(GstElement* element, GstContext* context) {
  auto* self = GST_RG10_TO_BGRA(element);
  self->priv->cuda_context.set(element, context, context_device(self));
  GST_ELEMENT_CLASS(gst_rg10_to_bgra_parent_class)->set_context(element, context);
}
#endif

static void gst_rg10_to_bgra_finalize(GObject* object) {
  auto* self = GST_RG10_TO_BGRA(object);
  drop_input_pool(self->priv->state);
  delete self->priv;
  G_OBJECT_CLASS(gst_rg10_to_bgra_parent_class)->finalize(object);
}

static gboolean cuda_failure(GstRg10ToBgra* self, const char* what, const cipc_cuda::Status& s) {
  GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("%s", what), ("%s", s.message().c_str()));
  return FALSE;
}

// The one cleanup path, for stop() and for a start() that failed half-way.
static void teardown(State& st) {
  if (st.stream.handle()) (void)st.stream.synchronize();  // nothing may still use what goes
  st.input.stop();
  drop_input_pool(st);
  st.output_staging = cipc_cuda::DeviceBuffer();
  st.debayer = cipc_cuda::GpuDebayer();
  st.stream = cipc_cuda::Stream();
  st.configured = false;
  st.device = -1;
}

static gboolean gst_rg10_to_bgra_start(GstBaseTransform* trans) {
  auto* self = GST_RG10_TO_BGRA(trans);
  const Settings s = snapshot_settings(self);
  State& st = self->priv->state;
  cipc_cuda::DeviceInfo info;
  // Exportable memory is cudasink-ipc's concern; the debayer itself runs on any CUDA device.
  cipc_cuda::Status status = cipc_slots::open_device(s.cuda_device_id, &info, false);
  if (!status) {
    GST_ELEMENT_ERROR(
        self, RESOURCE, NOT_FOUND,
        ("rg10tobgra needs a CUDA GPU, and none is usable: %s.", status.message().c_str()),
        ("cuda-device-id=%d", s.cuda_device_id));
    return FALSE;
  }
  st.device = info.ordinal;
  status = cipc_cuda::Stream::create(st.device, &st.stream);
  if (status) status = cipc_cuda::GpuDebayer::create(st.device, &st.debayer);
  if (!status) {
    teardown(st);
    return cuda_failure(self, "Could not set up the GPU debayer.", status);
  }
  st.input.start(st.device, st.stream.handle());
  self->priv->counters.reset();
  GST_INFO_OBJECT(self, "debayering on CUDA device %d (%s)", st.device, info.name.c_str());
  return TRUE;
}

static gboolean gst_rg10_to_bgra_stop(GstBaseTransform* trans) {
  teardown(GST_RG10_TO_BGRA(trans)->priv->state);
  return TRUE;
}

// Sink -> src: BGRA-like video of the same size and rate, CUDA memory first; src -> sink: the
// four RAW10 phases of the same size and rate.
static GstCaps* gst_rg10_to_bgra_transform_caps(GstBaseTransform* trans, GstPadDirection direction,
                                                GstCaps* caps, GstCaps* filter) {
  const bool to_src = direction == GST_PAD_SINK;
  GstCaps* other;
  if (to_src) {
    other = cipc_gst::caps_with_size_and_rate(caps, "video/x-raw", OUT_FORMATS,
                                              GST_CAPS_FEATURE_MEMORY_CUDA_IPC);
    other = gst_caps_merge(
        other, cipc_gst::caps_with_size_and_rate(caps, "video/x-raw", OUT_FORMATS, nullptr));
  } else {
    other = cipc_gst::caps_with_size_and_rate(caps, "video/x-bayer", CIPC_BAYER10_FORMATS, nullptr);
  }
  if (filter) {
    GstCaps* filtered = gst_caps_intersect_full(filter, other, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref(other);
    other = filtered;
  }
  GST_DEBUG_OBJECT(trans, "%s %" GST_PTR_FORMAT " -> %" GST_PTR_FORMAT, to_src ? "sink" : "src",
                   caps, other);
  return other;
}

static gboolean gst_rg10_to_bgra_set_caps(GstBaseTransform* trans, GstCaps* incaps,
                                          GstCaps* outcaps) {
  auto* self = GST_RG10_TO_BGRA(trans);
  State& st = self->priv->state;
  st.configured = false;
  const GstStructure* in = gst_caps_get_structure(incaps, 0);
  gint width = 0, height = 0;
  if (!cipc_gst::bayer10_phase(gst_structure_get_string(in, "format"), &st.phase) ||
      !gst_structure_get_int(in, "width", &width) ||
      !gst_structure_get_int(in, "height", &height)) {
    GST_ELEMENT_ERROR(
        self, CORE, NEGOTIATION, ("Unsupported input: %" GST_PTR_FORMAT, incaps),
        ("rg10tobgra takes 10-bit Bayer: video/x-bayer, format " CIPC_BAYER10_FORMATS));
    return FALSE;
  }
  if (!gst_video_info_from_caps(&st.out_info, outcaps) ||
      GST_VIDEO_INFO_WIDTH(&st.out_info) != width ||
      GST_VIDEO_INFO_HEIGHT(&st.out_info) != height) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("Unsupported output: %" GST_PTR_FORMAT, outcaps),
                      (nullptr));
    return FALSE;
  }
  st.cuda_output = gst_cipc_caps_have_cuda_memory(outcaps);
  st.configured = true;
  GST_INFO_OBJECT(self, "%dx%d %s -> %s in %s memory", width, height,
                  gst_structure_get_string(in, "format"), GST_VIDEO_INFO_NAME(&st.out_info),
                  st.cuda_output ? "CUDA" : "system");
  return TRUE;
}

// Sizes come from the caps alone (RAW10 or raw video), in both directions.
static gboolean gst_rg10_to_bgra_transform_size(GstBaseTransform* trans, GstPadDirection direction,
                                                GstCaps* caps, gsize size, GstCaps* othercaps,
                                                gsize* othersize) {
  (void)direction;
  (void)caps;
  (void)size;
  if (cipc_gst::frame_size_of(othercaps, othersize)) return TRUE;
  GST_DEBUG_OBJECT(trans, "cannot size a buffer for %" GST_PTR_FORMAT, othercaps);
  return FALSE;
}

static gboolean gst_rg10_to_bgra_get_unit_size(GstBaseTransform* trans, GstCaps* caps,
                                               gsize* size) {
  (void)trans;
  return cipc_gst::frame_size_of(caps, size);
}

// Upstream gets a pool of pinned, CUDA-mapped host memory: the kernel reads it in place.
static gboolean gst_rg10_to_bgra_propose_allocation(GstBaseTransform* trans, GstQuery* decide_query,
                                                    GstQuery* query) {
  (void)decide_query;
  auto* self = GST_RG10_TO_BGRA(trans);
  State& st = self->priv->state;
  GstCaps* caps = nullptr;
  gst_query_parse_allocation(query, &caps, nullptr);
  gsize size = 0;
  if (caps == nullptr || !cipc_gst::bayer10_frame_size(caps, &size) || st.device < 0) return FALSE;
  gst_query_add_allocation_meta(query, GST_VIDEO_META_API_TYPE, nullptr);
  const Settings s = snapshot_settings(self);
  if (!st.input_pool || !st.input_pool_caps || !gst_caps_is_equal(caps, st.input_pool_caps)) {
    drop_input_pool(st);
    st.input_pool =
        gst_cipc_pinned_pool_new(st.device, caps, static_cast<guint>(size), s.input_pool_size);
    if (!st.input_pool) return FALSE;
    st.input_pool_caps = gst_caps_ref(caps);
  }
  gst_query_add_allocation_pool(query, st.input_pool, static_cast<guint>(size), s.input_pool_size,
                                0);
  GstAllocator* allocator = gst_cipc_pinned_allocator_new(st.device);
  gst_query_add_allocation_param(query, allocator, nullptr);
  gst_object_unref(allocator);
  return TRUE;
}

// CUDA output: downstream's pool (cudasink-ipc's slots); without one, a pool of our own
// exportable slots. System memory: the default (downstream's pool or a plain one).
static gboolean gst_rg10_to_bgra_decide_allocation(GstBaseTransform* trans, GstQuery* query) {
  auto* self = GST_RG10_TO_BGRA(trans);
  State& st = self->priv->state;
  GstCaps* caps = nullptr;
  gst_query_parse_allocation(query, &caps, nullptr);
  if (caps && gst_cipc_caps_have_cuda_memory(caps) &&
      gst_query_get_n_allocation_pools(query) == 0) {
    GstVideoInfo info;
    if (!gst_video_info_from_caps(&info, caps)) return FALSE;
    auto backend =
        std::make_shared<cipc_slots::CudaMemoryBackend>(st.device, cipc::SyncMode::kGpuEvents);
    GstBufferPool* pool = gst_cipc_slot_pool_new(backend, 1);
    GST_INFO_OBJECT(self, "downstream offers no CUDA pool: using CUDA slots of our own");
    gst_query_add_allocation_pool(query, pool, GST_VIDEO_INFO_SIZE(&info), 2, 0);
    gst_object_unref(pool);
  }
  gboolean ok =
      GST_BASE_TRANSFORM_CLASS(gst_rg10_to_bgra_parent_class)->decide_allocation(trans, query);
  if (ok && gst_query_get_n_allocation_pools(query) > 0) {
    GstBufferPool* pool = nullptr;
    gst_query_parse_nth_allocation_pool(query, 0, &pool, nullptr, nullptr, nullptr);
    if (pool) {
      GstStructure* config = gst_buffer_pool_get_config(pool);
      if (gst_query_find_allocation_meta(query, GST_VIDEO_META_API_TYPE, nullptr))
        gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
      if (!gst_buffer_pool_set_config(pool, config)) {
        // An active or fixed pool keeps its config; the meta option is only an optimisation.
        GST_DEBUG_OBJECT(self, "pool kept its configuration");
      }
      gst_object_unref(pool);
    }
  }
  return ok;
}

static GstFlowReturn debayer_failed(GstRg10ToBgra* self, const cipc_cuda::Status& status) {
  cuda_failure(self, "Could not debayer a frame on the GPU.", status);
  return GST_FLOW_ERROR;
}

// Queues the kernel from `in` into `out` (rows `out_pitch` apart) on the element's stream.
static cipc_cuda::Status run_kernel(State& st, const cipc_gst::InputPlacement& in,
                                    cipc_cuda::DevicePtr out, size_t out_pitch) {
  cipc_cuda::Status k =
      st.debayer.run(in.ptr, in.pitch, out, out_pitch, GST_VIDEO_INFO_WIDTH(&st.out_info),
                     GST_VIDEO_INFO_HEIGHT(&st.out_info), st.stream.handle());
  if (k) k = st.input.kernel_queued(in);
  return k;
}

// Straight into downstream's CUDA memory (cudasink-ipc's slots, or ours), ordered by the slot's
// readiness on the GPU: nothing waits on the CPU.
static GstFlowReturn debayer_into_cuda_memory(GstRg10ToBgra* self,
                                              const cipc_gst::InputPlacement& in,
                                              GstBuffer* outbuf) {
  State& st = self->priv->state;
  GstMemory* mem = gst_buffer_n_memory(outbuf) == 1 ? gst_buffer_peek_memory(outbuf, 0) : nullptr;
  const GstCudaIpcMemoryInfo* info = gst_cuda_ipc_memory_get_info(mem);
  if (!info) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION,
                      ("Downstream negotiated CUDA memory but gave a buffer that is not."),
                      ("buffer %" GST_PTR_FORMAT, outbuf));
    return GST_FLOW_ERROR;
  }
  if (info->device != st.device) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                      ("rg10tobgra runs on CUDA device %d but downstream's memory is on device "
                       "%d: set the same cuda-device-id on both.",
                       st.device, info->device),
                      (nullptr));
    return GST_FLOW_ERROR;
  }
  const GstVideoMeta* meta = gst_buffer_get_video_meta(outbuf);
  const cipc_cuda::DevicePtr out =
      info->device_ptr + mem->offset +
      (meta ? meta->offset[0] : GST_VIDEO_INFO_PLANE_OFFSET(&st.out_info, 0));
  const size_t out_pitch =
      static_cast<size_t>(meta ? meta->stride[0] : GST_VIDEO_INFO_PLANE_STRIDE(&st.out_info, 0));
  const cipc_cuda::StreamHandle stream = st.stream.handle();
  cipc_cuda::Status status = cipc_cuda::Status::ok();
  if (!info->begin_write(mem, stream)) status = cipc_cuda::Status::failure("begin_write failed");
  if (status) status = run_kernel(st, in, out, out_pitch);
  if (status && !info->end_write(mem, stream))
    status = cipc_cuda::Status::failure("end_write failed");
  return status ? GST_FLOW_OK : debayer_failed(self, status);
}

// System memory: debayer into a device buffer, then one download into downstream's buffer,
// waited for (downstream reads it with the CPU). The input is then read too: `in->hold_on` is
// cleared.
static GstFlowReturn debayer_into_system_memory(GstRg10ToBgra* self, cipc_gst::InputPlacement* in,
                                                GstBuffer* outbuf) {
  State& st = self->priv->state;
  const gint height = GST_VIDEO_INFO_HEIGHT(&st.out_info);
  const size_t pitch = 4 * static_cast<size_t>(GST_VIDEO_INFO_WIDTH(&st.out_info));
  cipc_cuda::Status status = cipc_gst::ensure_staging(st.output_staging, st.device, pitch * height);
  if (status) status = run_kernel(st, *in, st.output_staging.ptr(), pitch);
  if (!status) return debayer_failed(self, status);
  GstVideoFrame frame;
  if (!gst_video_frame_map(&frame, &st.out_info, outbuf, GST_MAP_WRITE)) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Could not map an output buffer."), (nullptr));
    return GST_FLOW_ERROR;
  }
  if (gst_buffer_n_memory(outbuf) == 1)
    cipc_gst::register_host_memory_once(gst_buffer_peek_memory(outbuf, 0), frame.map[0].data,
                                        frame.map[0].size);
  status = cipc_cuda::copy_2d_async(GST_VIDEO_FRAME_PLANE_DATA(&frame, 0),
                                    GST_VIDEO_FRAME_PLANE_STRIDE(&frame, 0),
                                    cipc_gst::device_address(st.output_staging.ptr()), pitch, pitch,
                                    static_cast<size_t>(height), st.stream.handle());
  if (status) status = st.stream.synchronize();
  gst_video_frame_unmap(&frame);
  if (!status) return debayer_failed(self, status);
  ++self->priv->counters.downloads;
  in->hold_on = nullptr;  // synchronised: the kernel (and any upload) is done with the input
  return GST_FLOW_OK;
}

static GstFlowReturn gst_rg10_to_bgra_transform(GstBaseTransform* trans, GstBuffer* inbuf,
                                                GstBuffer* outbuf) {
  auto* self = GST_RG10_TO_BGRA(trans);
  State& st = self->priv->state;
  if (!st.configured) return GST_FLOW_NOT_NEGOTIATED;
  const Settings s = snapshot_settings(self);
  const cipc_cuda::DebayerParams params =
      debayer_params(s, st.phase, GST_VIDEO_INFO_FORMAT(&st.out_info));
  cipc_cuda::Status status =
      st.debayer.configure(params,
                           s.wb_mode == GST_CIPC_WB_GRAY_WORLD ? cipc_cuda::WhiteBalance::kGrayWorld
                                                               : cipc_cuda::WhiteBalance::kFixed,
                           st.stream.handle());
  if (!status) {
    cuda_failure(self, "Could not configure the GPU debayer.", status);
    return GST_FLOW_ERROR;
  }

  cipc_gst::InputPlacement in;
  GstFlowReturn ret =
      st.input.locate(GST_ELEMENT(self), inbuf, GST_VIDEO_INFO_WIDTH(&st.out_info),
                      GST_VIDEO_INFO_HEIGHT(&st.out_info), s.input_mode, params, &in);
  if (ret != GST_FLOW_OK) return ret;
  ret = st.cuda_output ? debayer_into_cuda_memory(self, in, outbuf)
                       : debayer_into_system_memory(self, &in, outbuf);
  if (ret != GST_FLOW_OK) return ret;
  status = st.input.hold_until_read(inbuf, in);
  if (!status) return debayer_failed(self, status);
  ++self->priv->counters.frames;
  return GST_FLOW_OK;
}

static void gst_rg10_to_bgra_class_init(GstRg10ToBgraClass* klass) {
  auto* object_class = G_OBJECT_CLASS(klass);
  auto* element_class = GST_ELEMENT_CLASS(klass);
  auto* trans_class = GST_BASE_TRANSFORM_CLASS(klass);
  object_class->set_property = gst_rg10_to_bgra_set_property;
  object_class->get_property = gst_rg10_to_bgra_get_property;
  object_class->finalize = gst_rg10_to_bgra_finalize;

  const GParamFlags rw_playing = cipc_gst::kParamPlayingRW;
  const GParamFlags rw_ready = cipc_gst::kParamReadyRW;
  const GParamFlags ro = cipc_gst::kParamRO;

  g_object_class_install_property(
      object_class, PROP_BIT_ALIGNMENT,
      g_param_spec_enum("bit-alignment", "Bit alignment",
                        "Where the 10 bits lie in each 16-bit little-endian word: bits 9..0 "
                        "(lsb, V4L2 RG10, most USB and MIPI drivers) or bits 15..6 (msb, as the "
                        "Jetson Xavier/Orin VI capture hardware writes them)",
                        gst_cipc_bit_alignment_get_type(), DEFAULT_BIT_ALIGNMENT, rw_playing));
  g_object_class_install_property(
      object_class, PROP_BLACK_LEVEL,
      g_param_spec_uint("black-level", "Black level",
                        "Sensor black level (pedestal) in 10-bit codes, subtracted before "
                        "anything else; the IMX274 uses 50",
                        0, MAX_BLACK_LEVEL, DEFAULT_BLACK_LEVEL, rw_playing));
  g_object_class_install_property(
      object_class, PROP_WB_MODE,
      g_param_spec_enum("wb-mode", "White balance mode",
                        "fixed: the wb-red/green/blue gains; gray-world: gains computed from "
                        "the previous frame's statistics (the first frame uses the fixed gains)",
                        gst_cipc_white_balance_get_type(), DEFAULT_WB_MODE, rw_playing));
  g_object_class_install_property(
      object_class, PROP_WB_RED,
      g_param_spec_double("wb-red", "White balance red",
                          "Gain applied to the red samples before demosaicing (wb-mode=fixed)",
                          MIN_WB, MAX_WB, DEFAULT_WB, rw_playing));
  g_object_class_install_property(
      object_class, PROP_WB_GREEN,
      g_param_spec_double("wb-green", "White balance green",
                          "Gain applied to the green samples before demosaicing (wb-mode=fixed)",
                          MIN_WB, MAX_WB, DEFAULT_WB, rw_playing));
  g_object_class_install_property(
      object_class, PROP_WB_BLUE,
      g_param_spec_double("wb-blue", "White balance blue",
                          "Gain applied to the blue samples before demosaicing (wb-mode=fixed)",
                          MIN_WB, MAX_WB, DEFAULT_WB, rw_playing));
  g_object_class_install_property(
      object_class, PROP_METHOD,
      g_param_spec_enum("method", "Demosaic method",
                        "bilinear (3x3) or Malvar-He-Cutler (5x5, sharper, fewer colour fringes)",
                        gst_cipc_demosaic_get_type(), DEFAULT_METHOD, rw_playing));
  g_object_class_install_property(
      object_class, PROP_GAIN,
      g_param_spec_double("gain", "Gain",
                          "Digital gain on linear R, G and B after demosaicing, before the "
                          "transfer curve (values above full scale clip to white)",
                          MIN_GAIN, MAX_GAIN, DEFAULT_GAIN, rw_playing));
  g_object_class_install_property(
      object_class, PROP_TRANSFER,
      g_param_spec_enum("transfer", "Transfer curve",
                        "Output transfer curve, applied through a 4096-entry table: srgb for "
                        "display, linear for measurement, power for x^(1/gamma)",
                        gst_cipc_transfer_get_type(), DEFAULT_TRANSFER, rw_playing));
  g_object_class_install_property(
      object_class, PROP_GAMMA,
      g_param_spec_double("gamma", "Gamma", "Exponent of transfer=power: output = x^(1/gamma)",
                          MIN_GAMMA, MAX_GAMMA, DEFAULT_GAMMA, rw_playing));
  g_object_class_install_property(
      object_class, PROP_PRECISION,
      g_param_spec_enum("precision", "Precision",
                        "fast: every output byte within 1 code of the CPU reference, about twice "
                        "as fast (the exact kernel still runs where that bound cannot hold: "
                        "transfer=power with gamma above about 1.6, or gain x white-balance gain "
                        "above 64); exact: bit-exact against the CPU reference",
                        gst_cipc_precision_get_type(), DEFAULT_PRECISION, rw_playing));
  g_object_class_install_property(
      object_class, PROP_CUDA_DEVICE_ID,
      g_param_spec_int("cuda-device-id", "CUDA device",
                       "CUDA device to debayer on (-1: device 0); must match cudasink-ipc's", -1,
                       G_MAXINT, DEFAULT_CUDA_DEVICE_ID, rw_ready));
  g_object_class_install_property(
      object_class, PROP_INPUT_POOL_SIZE,
      g_param_spec_uint("input-pool-size", "Input pool size",
                        "Pinned input buffers allocated up front in the pool offered upstream "
                        "(it grows beyond this when upstream holds more)",
                        1, 64, DEFAULT_INPUT_POOL_SIZE, rw_ready));
  g_object_class_install_property(
      object_class, PROP_INPUT_MODE,
      g_param_spec_enum("input-mode", "Input mode",
                        "How the kernel reads frames upstream wrote into the pinned pool offered "
                        "to it: in-place over the bus (no copy), upload by a copy engine first "
                        "(overlapping the previous frame's kernel), or auto: whichever is faster "
                        "here, timed on the first frame (stats: input-path, in-place-us, "
                        "upload-us)",
                        gst_cipc_input_mode_get_type(), DEFAULT_INPUT_MODE, rw_playing));
  g_object_class_install_property(
      object_class, PROP_STATS,
      g_param_spec_boxed("stats", "Statistics",
                         "frames, input-copies (frames that were not in the pinned pool), "
                         "input-uploads (pinned frames uploaded, see input-mode), input-path "
                         "(in-place, upload or none: how the last pinned frame was read), "
                         "in-place-us and upload-us (what input-mode=auto timed per frame, 0 "
                         "if not), downloads (frames copied into system memory downstream), "
                         "and the wb-red/green/blue gains in use",
                         GST_TYPE_STRUCTURE, ro));

  gst_element_class_set_static_metadata(
      element_class, "RAW10 Bayer to BGRA on the GPU", "Filter/Converter/Video/Hardware",
      "Debayers 10-bit Bayer video with CUDA (black level, white balance, bilinear or "
      "Malvar-He-Cutler demosaic, gain, gamma) straight into shareable GPU memory",
      "gst-cudaipc developers");
  cipc_gst::add_doc_uri(element_class, "rg10tobgra");
  gst_element_class_add_static_pad_template(element_class, &sink_template);
  gst_element_class_add_static_pad_template(element_class, &src_template);

  trans_class->passthrough_on_same_caps = FALSE;
#ifdef CIPC_HAVE_GST_CUDA
  trans_class->query = GST_DEBUG_FUNCPTR(gst_rg10_to_bgra_query);
  element_class->set_context = GST_DEBUG_FUNCPTR(gst_rg10_to_bgra_set_context);
#endif
  trans_class->start = GST_DEBUG_FUNCPTR(gst_rg10_to_bgra_start);
  trans_class->stop = GST_DEBUG_FUNCPTR(gst_rg10_to_bgra_stop);
  trans_class->transform_caps = GST_DEBUG_FUNCPTR(gst_rg10_to_bgra_transform_caps);
  trans_class->set_caps = GST_DEBUG_FUNCPTR(gst_rg10_to_bgra_set_caps);
  trans_class->transform_size = GST_DEBUG_FUNCPTR(gst_rg10_to_bgra_transform_size);
  trans_class->get_unit_size = GST_DEBUG_FUNCPTR(gst_rg10_to_bgra_get_unit_size);
  trans_class->propose_allocation = GST_DEBUG_FUNCPTR(gst_rg10_to_bgra_propose_allocation);
  trans_class->decide_allocation = GST_DEBUG_FUNCPTR(gst_rg10_to_bgra_decide_allocation);
  trans_class->transform = GST_DEBUG_FUNCPTR(gst_rg10_to_bgra_transform);
}

static void gst_rg10_to_bgra_init(GstRg10ToBgra* self) {
  self->priv = new Rg10ToBgraPrivate();
  gst_video_info_init(&self->priv->state.out_info);
}
