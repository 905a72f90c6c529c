// SPDX-License-Identifier: LGPL-2.1-or-later
/**
 * SECTION:element-rg10replaysrc
 * @title: rg10replaysrc
 *
 * A RAW10 camera that costs (almost) nothing to run: at start it renders `frames` frames of a
 * scrolling colour-bar scene (bayer/replay_scene.h), mosaics them into 10-bit Bayer samples
 * like bgratorg10 (black level 0, unit white balance) and then replays them in a loop at the
 * negotiated frame rate, each buffer a new reference to one of those frames. Nothing is
 * rendered, mosaicked or copied per frame, so a benchmark of `rg10replaysrc ! rg10tobgra !
 * cudasink-ipc` measures the transport and the debayer, not the simulator (bgratorg10 behind
 * videotestsrc spends most of a core on a 4K frame).
 *
 * The frames are allocated with the allocator downstream proposes: behind rg10tobgra that is
 * pinned, CUDA-mapped memory, which the debayer reads in place, as it would a capture buffer.
 * They are marked read-only (an element that wants to write copies first). Live by default:
 * buffers are timestamped from 0 at the frame rate and pushed on the pipeline clock's time, as
 * a camera delivers them; with is-live=false they go out as fast as downstream takes them.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 rg10replaysrc !
 * video/x-bayer,format=rggb10le,width=3840,height=2160,framerate=60/1 \ ! rg10tobgra ! cudasink-ipc
 * socket-path=/tmp/camera.sock
 * ]|
 *
 * Since: 0.1
 */
#include "camera/gstrg10replaysrc.h"
#include "common/elementdocs.h"
#include "common/paramflags.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "camera/bayercaps.h"
#include "camera/cameraenums.h"
#include "replay_scene.h"

GST_DEBUG_CATEGORY_STATIC(gst_rg10_replay_src_debug);
#define GST_CAT_DEFAULT gst_rg10_replay_src_debug

enum {
  PROP_0,
  PROP_FRAMES,
  PROP_IS_LIVE,
  PROP_BIT_ALIGNMENT,
};

#define DEFAULT_FRAMES 8
#define MAX_FRAMES 240
#define DEFAULT_IS_LIVE TRUE
#define DEFAULT_BIT_ALIGNMENT GST_CIPC_BIT_ALIGNMENT_LSB

namespace {

struct Settings {
  guint frames = DEFAULT_FRAMES;
  gboolean is_live = DEFAULT_IS_LIVE;
  GstCipcBitAlignment bit_alignment = DEFAULT_BIT_ALIGNMENT;
};

// Negotiated format and the frames made for it; set_caps, create and stop, all serialised by
// GstBaseSrc (the streaming thread, or the state change with the streaming thread stopped).
struct State {
  cipc_bayer::CfaOrder phase = cipc_bayer::CfaOrder::kRGGB;
  gint width = 0, height = 0;
  gint fps_n = 0, fps_d = 1;
  gsize stride = 0, frame_size = 0;
  std::vector<GstMemory*> frames;  // one reference each, read-only
  guint64 next = 0;                // buffers pushed since start

  void drop_frames() {
    for (GstMemory* m : frames) gst_memory_unref(m);
    frames.clear();
  }
};

}  // namespace

struct Rg10ReplaySrcPrivate {
  Settings settings;  // under the object lock
  State state;
  std::atomic<guint64> frame_ns{0};  // one frame period of the caps, for latency queries
  ~Rg10ReplaySrcPrivate() { state.drop_frames(); }
};

struct _GstRg10ReplaySrc {
  GstPushSrc parent;
  Rg10ReplaySrcPrivate* priv;
};

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE(
    "src", GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS("video/x-bayer, format = (string) " CIPC_BAYER10_FORMATS
                    ", width = (int) [ 1, 32768 ], height = (int) [ 1, 32768 ], "
                    "framerate = (fraction) [ 1/1, 1000/1 ]"));

G_DEFINE_TYPE(GstRg10ReplaySrc, gst_rg10_replay_src, GST_TYPE_PUSH_SRC)
// The category is made with the registration, so that --gst-debug-help lists it once the
// plugin is loaded, before the element is first used.
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE(rg10replaysrc, "rg10replaysrc", GST_RANK_NONE,
                                      GST_TYPE_RG10_REPLAY_SRC,
                                      GST_DEBUG_CATEGORY_INIT(gst_rg10_replay_src_debug,
                                                              "cudaipc-rg10replaysrc", 0,
                                                              "rg10replaysrc element"))

static Settings snapshot_settings(GstRg10ReplaySrc* self) {
  GST_OBJECT_LOCK(self);
  Settings s = self->priv->settings;
  GST_OBJECT_UNLOCK(self);
  return s;
}

static void gst_rg10_replay_src_set_property(GObject* object, guint prop_id, const GValue* value,
                                             GParamSpec* pspec) {
  auto* self = GST_RG10_REPLAY_SRC(object);
  GST_OBJECT_LOCK(self);
  Settings& s = self->priv->settings;
  switch (prop_id) {
    case PROP_FRAMES: s.frames = g_value_get_uint(value); break;
    case PROP_IS_LIVE: s.is_live = g_value_get_boolean(value); break;
    case PROP_BIT_ALIGNMENT:
      s.bit_alignment = static_cast<GstCipcBitAlignment>(g_value_get_enum(value));
      break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec); break;
  }
  const gboolean live = s.is_live;
  GST_OBJECT_UNLOCK(self);
  if (prop_id == PROP_IS_LIVE) gst_base_src_set_live(GST_BASE_SRC(self), live);
}

static void gst_rg10_replay_src_get_property(GObject* object, guint prop_id, GValue* value,
                                             GParamSpec* pspec) {
  auto* self = GST_RG10_REPLAY_SRC(object);
  GST_OBJECT_LOCK(self);
  const Settings& s = self->priv->settings;
  switch (prop_id) {
    case PROP_FRAMES: g_value_set_uint(value, s.frames); break;
    case PROP_IS_LIVE: g_value_set_boolean(value, s.is_live); break;
    case PROP_BIT_ALIGNMENT: g_value_set_enum(value, s.bit_alignment); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK(self);
}

static void gst_rg10_replay_src_finalize(GObject* object) {
  delete GST_RG10_REPLAY_SRC(object)->priv;
  G_OBJECT_CLASS(gst_rg10_replay_src_parent_class)->finalize(object);
}

// Unconstrained downstream: 1920x1080 at 60 frames/s, rggb10le.
static GstCaps* gst_rg10_replay_src_fixate(GstBaseSrc* src, GstCaps* caps) {
  caps = gst_caps_make_writable(caps);
  caps = gst_caps_truncate(caps);
  GstStructure* s = gst_caps_get_structure(caps, 0);
  gst_structure_fixate_field_nearest_int(s, "width", 1920);
  gst_structure_fixate_field_nearest_int(s, "height", 1080);
  gst_structure_fixate_field_nearest_fraction(s, "framerate", 60, 1);
  gst_structure_fixate_field_string(s, "format", "rggb10le");
  return GST_BASE_SRC_CLASS(gst_rg10_replay_src_parent_class)->fixate(src, caps);
}

static gboolean gst_rg10_replay_src_set_caps(GstBaseSrc* src, GstCaps* caps) {
  auto* self = GST_RG10_REPLAY_SRC(src);
  State& st = self->priv->state;
  const GstStructure* s = gst_caps_get_structure(caps, 0);
  cipc_bayer::CfaOrder phase;
  gint width = 0, height = 0, fps_n = 0, fps_d = 1;
  if (!cipc_gst::bayer10_phase(gst_structure_get_string(s, "format"), &phase) ||
      !gst_structure_get_int(s, "width", &width) || !gst_structure_get_int(s, "height", &height) ||
      !gst_structure_get_fraction(s, "framerate", &fps_n, &fps_d) || fps_n <= 0 || fps_d <= 0) {
    GST_ERROR_OBJECT(self, "unsupported caps %" GST_PTR_FORMAT, caps);
    return FALSE;
  }
  st.drop_frames();  // made again, for the new format, by the next create()
  st.phase = phase;
  st.width = width;
  st.height = height;
  st.fps_n = fps_n;
  st.fps_d = fps_d;
  st.stride = cipc_gst::bayer10_default_stride(width);
  st.frame_size = st.stride * static_cast<gsize>(height);
  self->priv->frame_ns = gst_util_uint64_scale(GST_SECOND, fps_d, fps_n);
  GST_INFO_OBJECT(self, "%dx%d at %d/%d, %" G_GSIZE_FORMAT " bytes per frame", width, height, fps_n,
                  fps_d, st.frame_size);
  return TRUE;
}

static gboolean gst_rg10_replay_src_start(GstBaseSrc* src) {
  auto* self = GST_RG10_REPLAY_SRC(src);
  self->priv->state.next = 0;
  return TRUE;
}

static gboolean gst_rg10_replay_src_stop(GstBaseSrc* src) {
  GST_RG10_REPLAY_SRC(src)->priv->state.drop_frames();
  return TRUE;
}

// Live, like a camera that delivers a frame one frame period after its exposure started: the
// latency is one frame (as videotestsrc reports), so that synchronised sinks are not late.
static gboolean gst_rg10_replay_src_query(GstBaseSrc* src, GstQuery* query) {
  // Any thread may ask; the period is published by set_caps.
  const GstClockTime frame = GST_RG10_REPLAY_SRC(src)->priv->frame_ns.load();
  if (GST_QUERY_TYPE(query) == GST_QUERY_LATENCY && frame > 0) {
    gst_query_set_latency(query, gst_base_src_is_live(src), frame, frame);
    return TRUE;
  }
  return GST_BASE_SRC_CLASS(gst_rg10_replay_src_parent_class)->query(src, query);
}

// Only downstream's allocator is used (the frames are made once, outside any pool): a pool it
// proposes would be activated for nothing.
static gboolean gst_rg10_replay_src_decide_allocation(GstBaseSrc* src, GstQuery* query) {
  while (gst_query_get_n_allocation_pools(query) > 0)
    gst_query_remove_nth_allocation_pool(query, 0);
  return GST_BASE_SRC_CLASS(gst_rg10_replay_src_parent_class)->decide_allocation(src, query);
}

// Live: basesrc waits on the clock until a buffer's start, as for any live source.
static void gst_rg10_replay_src_get_times(GstBaseSrc* src, GstBuffer* buffer, GstClockTime* start,
                                          GstClockTime* end) {
  if (gst_base_src_is_live(src) && GST_BUFFER_PTS_IS_VALID(buffer)) {
    *start = GST_BUFFER_PTS(buffer);
    *end = GST_BUFFER_DURATION_IS_VALID(buffer) ? *start + GST_BUFFER_DURATION(buffer)
                                                : GST_CLOCK_TIME_NONE;
  } else {
    *start = *end = GST_CLOCK_TIME_NONE;
  }
}

// The loop of frames, with the allocator downstream proposed (pinned memory behind
// rg10tobgra). False after an element error.
static bool make_frames(GstRg10ReplaySrc* self, const Settings& s) {
  State& st = self->priv->state;
  GstAllocator* allocator = nullptr;
  GstAllocationParams params;
  gst_base_src_get_allocator(GST_BASE_SRC(self), &allocator, &params);
  // A loop that cannot fit is refused before anything is allocated: an allocator that
  // overcommits would otherwise hand out the memory and the OOM killer end the process later.
  const double mib = st.frame_size / (1024.0 * 1024.0);
  const double machine_mib =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
  if (mib * s.frames > machine_mib / 2) {
    if (allocator) gst_object_unref(allocator);
    GST_ELEMENT_ERROR(self, RESOURCE, NO_SPACE_LEFT,
                      ("Replaying %u frames of %.1f MiB needs %.0f MiB, more than half of this "
                       "machine's memory (%.0f MiB). Lower frames or the resolution.",
                       s.frames, mib, mib * s.frames, machine_mib),
                      (nullptr));
    return false;
  }
  cipc_bayer::MosaicParams mosaic;
  mosaic.phase = st.phase;
  mosaic.alignment = gst_cipc_bit_alignment_to_bayer(s.bit_alignment);
  for (guint i = 0; i < s.frames; ++i) {
    GstMemory* mem = gst_allocator_alloc(allocator, st.frame_size, &params);
    GstMapInfo map;
    if (mem == nullptr || !gst_memory_map(mem, &map, GST_MAP_WRITE)) {
      GST_ELEMENT_ERROR(self, RESOURCE, NO_SPACE_LEFT,
                        ("Could not allocate replay frame %u of %u (%.1f MiB each). Lower "
                         "frames or the resolution.",
                         i + 1, s.frames, mib),
                        ("allocator %s", allocator ? GST_OBJECT_NAME(allocator) : "default"));
      if (mem) gst_memory_unref(mem);
      if (allocator) gst_object_unref(allocator);
      st.drop_frames();
      return false;
    }
    std::memset(map.data, 0, st.frame_size);  // row padding stays zero
    cipc_bayer::replay_frame_raw10(i, s.frames, st.width, st.height, mosaic, map.data, st.stride);
    gst_memory_unmap(mem, &map);
    // Shared by every buffer that replays it: nobody may write into it.
    GST_MINI_OBJECT_FLAG_SET(mem, GST_MEMORY_FLAG_READONLY);
    st.frames.push_back(mem);
  }
  if (allocator) gst_object_unref(allocator);
  GST_INFO_OBJECT(self, "%u frames made (%s memory)", s.frames,
                  st.frames.empty() ? "no" : st.frames[0]->allocator->mem_type);
  return true;
}

static GstFlowReturn gst_rg10_replay_src_create(GstPushSrc* src, GstBuffer** out) {
  auto* self = GST_RG10_REPLAY_SRC(src);
  State& st = self->priv->state;
  if (st.frame_size == 0) return GST_FLOW_NOT_NEGOTIATED;
  if (st.frames.empty() && !make_frames(self, snapshot_settings(self))) return GST_FLOW_ERROR;

  const guint64 n = st.next++;
  GstBuffer* buffer = gst_buffer_new();
  gst_buffer_append_memory(buffer, gst_memory_ref(st.frames[n % st.frames.size()]));
  const GstClockTime pts = gst_util_uint64_scale(n, GST_SECOND * st.fps_d, st.fps_n);
  GST_BUFFER_PTS(buffer) = pts;
  GST_BUFFER_DTS(buffer) = GST_CLOCK_TIME_NONE;
  GST_BUFFER_DURATION(buffer) = gst_util_uint64_scale(n + 1, GST_SECOND * st.fps_d, st.fps_n) - pts;
  GST_BUFFER_OFFSET(buffer) = n;
  GST_BUFFER_OFFSET_END(buffer) = n + 1;
  if (n == 0) GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_DISCONT);
  *out = buffer;
  return GST_FLOW_OK;
}

static void gst_rg10_replay_src_class_init(GstRg10ReplaySrcClass* klass) {
  auto* object_class = G_OBJECT_CLASS(klass);
  auto* element_class = GST_ELEMENT_CLASS(klass);
  auto* basesrc_class = GST_BASE_SRC_CLASS(klass);
  auto* pushsrc_class = GST_PUSH_SRC_CLASS(klass);
  object_class->set_property = gst_rg10_replay_src_set_property;
  object_class->get_property = gst_rg10_replay_src_get_property;
  object_class->finalize = gst_rg10_replay_src_finalize;

  const GParamFlags rw_ready = cipc_gst::kParamReadyRW;
  g_object_class_install_property(
      object_class, PROP_FRAMES,
      g_param_spec_uint("frames", "Frames",
                        "Distinct frames made at start and replayed in a loop (the scene "
                        "scrolls once per loop); each takes one frame of memory",
                        1, MAX_FRAMES, DEFAULT_FRAMES, rw_ready));
  g_object_class_install_property(
      object_class, PROP_IS_LIVE,
      g_param_spec_boolean("is-live", "Is live",
                           "Deliver frames at the frame rate on the pipeline clock, as a camera "
                           "does; false: as fast as downstream takes them",
                           DEFAULT_IS_LIVE, rw_ready));
  g_object_class_install_property(
      object_class, PROP_BIT_ALIGNMENT,
      g_param_spec_enum("bit-alignment", "Bit alignment",
                        "Where the 10 bits lie in each 16-bit little-endian word: bits 9..0 "
                        "(lsb, V4L2 RG10) or bits 15..6 (msb, Jetson capture)",
                        gst_cipc_bit_alignment_get_type(), DEFAULT_BIT_ALIGNMENT, rw_ready));

  gst_element_class_set_static_metadata(
      element_class, "RAW10 replay camera", "Source/Video",
      "Replays a loop of pre-mosaicked 10-bit Bayer frames at the camera's rate, with no "
      "per-frame work: a camera for benchmarks",
      "gst-cudaipc developers");
  cipc_gst::add_doc_uri(element_class, "rg10replaysrc");
  gst_element_class_add_static_pad_template(element_class, &src_template);

  basesrc_class->fixate = GST_DEBUG_FUNCPTR(gst_rg10_replay_src_fixate);
  basesrc_class->set_caps = GST_DEBUG_FUNCPTR(gst_rg10_replay_src_set_caps);
  basesrc_class->start = GST_DEBUG_FUNCPTR(gst_rg10_replay_src_start);
  basesrc_class->stop = GST_DEBUG_FUNCPTR(gst_rg10_replay_src_stop);
  basesrc_class->get_times = GST_DEBUG_FUNCPTR(gst_rg10_replay_src_get_times);
  basesrc_class->decide_allocation = GST_DEBUG_FUNCPTR(gst_rg10_replay_src_decide_allocation);
  basesrc_class->query = GST_DEBUG_FUNCPTR(gst_rg10_replay_src_query);
  pushsrc_class->create = GST_DEBUG_FUNCPTR(gst_rg10_replay_src_create);
}

static void gst_rg10_replay_src_init(GstRg10ReplaySrc* self) {
  self->priv = new Rg10ReplaySrcPrivate();
  gst_base_src_set_format(GST_BASE_SRC(self), GST_FORMAT_TIME);
  gst_base_src_set_live(GST_BASE_SRC(self), DEFAULT_IS_LIVE);
}
