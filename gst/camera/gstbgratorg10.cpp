// SPDX-License-Identifier: LGPL-2.1-or-later
/**
 * SECTION:element-bgratorg10
 * @title: bgratorg10
 *
 * A camera simulator on the CPU: mosaics 8-bit colour video into 10-bit Bayer samples
 * (video/x-bayer, rggb10le, bggr10le, grbg10le or gbrg10le, one 16-bit little-endian word per
 * sample), so that a test source can stand in for a RAW10 camera in front of a debayer. The
 * CFA phase is the output format, chosen by downstream (rggb10le when it does not care).
 *
 * Each 8-bit channel is taken as linear light, divided by its colour's white-balance gain
 * (the camera's response: a debayer applying the same gains restores the scene), clamped to
 * full scale and scaled into [black-level, 1023]. The 10 bits are written in bits 9..0 (V4L2
 * RG10) or bits 15..6 (as the Jetson capture hardware writes them). Output rows are
 * GST_ROUND_UP_4 (width) * 2 bytes apart. The math is documented in bayer/mosaic.h.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 videotestsrc ! video/x-raw,format=BGRx,width=1920,height=1080 ! \
 *     bgratorg10 black-level=64 wb-red=1.8 wb-blue=1.5 ! video/x-bayer,format=bggr10le ! fakesink
 * ]|
 *
 * Since: 0.1
 */
#include "camera/gstbgratorg10.h"
#include "common/elementdocs.h"
#include "common/paramflags.h"

#include <gst/video/video.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "camera/bayercaps.h"
#include "camera/cameraenums.h"
#include "mosaic.h"

GST_DEBUG_CATEGORY_STATIC(gst_bgra_to_rg10_debug);
#define GST_CAT_DEFAULT gst_bgra_to_rg10_debug

enum {
  PROP_0,
  PROP_BIT_ALIGNMENT,
  PROP_BLACK_LEVEL,
  PROP_WB_RED,
  PROP_WB_GREEN,
  PROP_WB_BLUE,
};

#define DEFAULT_BIT_ALIGNMENT GST_CIPC_BIT_ALIGNMENT_LSB
#define DEFAULT_BLACK_LEVEL 0
#define MAX_BLACK_LEVEL 1022
#define DEFAULT_WB 1.0
#define MIN_WB 0.01
#define MAX_WB 100.0

#define SINK_FORMATS "{ BGRA, BGRx, RGBA, RGBx, RGB, BGR }"
#define SRC_FORMATS CIPC_BAYER10_FORMATS

namespace {

struct Settings {
  GstCipcBitAlignment bit_alignment = DEFAULT_BIT_ALIGNMENT;
  guint black_level = DEFAULT_BLACK_LEVEL;
  gdouble wb_red = DEFAULT_WB;
  gdouble wb_green = DEFAULT_WB;
  gdouble wb_blue = DEFAULT_WB;
};

// Negotiated formats; set in set_caps, read by the streaming thread.
struct State {
  GstVideoInfo in_info;
  cipc_bayer::MosaicInput input = cipc_bayer::MosaicInput::kBgra;
  cipc_bayer::CfaOrder phase = cipc_bayer::CfaOrder::kRGGB;
  gsize out_stride = 0;
  bool configured = false;
};

bool input_of(GstVideoFormat f, cipc_bayer::MosaicInput* out) {
  switch (f) {
    case GST_VIDEO_FORMAT_BGRA:
    case GST_VIDEO_FORMAT_BGRx: *out = cipc_bayer::MosaicInput::kBgra; return true;
    case GST_VIDEO_FORMAT_RGBA:
    case GST_VIDEO_FORMAT_RGBx: *out = cipc_bayer::MosaicInput::kRgba; return true;
    case GST_VIDEO_FORMAT_RGB: *out = cipc_bayer::MosaicInput::kRgb; return true;
    case GST_VIDEO_FORMAT_BGR: *out = cipc_bayer::MosaicInput::kBgr; return true;
    default: return false;
  }
}

}  // namespace

// Everything the element owns, in one place; members clean up after themselves.
struct BgraToRg10Private {
  Settings settings;  // under the object lock
  State state;        // set_caps and the streaming thread
};

struct _GstBgraToRg10 {
  GstBaseTransform parent;
  BgraToRg10Private* priv;
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE(
    "sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE(SINK_FORMATS)));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE(
    "src", GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS("video/x-bayer, format = (string) " SRC_FORMATS
                    ", width = (int) [ 1, max ], height = (int) [ 1, max ], "
                    "framerate = (fraction) [ 0, max ]"));

G_DEFINE_TYPE(GstBgraToRg10, gst_bgra_to_rg10, GST_TYPE_BASE_TRANSFORM)
// The category is made with the registration, so that --gst-debug-help lists it once the
// plugin is loaded, before the element is first used.
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE(
    bgratorg10, "bgratorg10", GST_RANK_NONE, GST_TYPE_BGRA_TO_RG10,
    GST_DEBUG_CATEGORY_INIT(gst_bgra_to_rg10_debug, "cudaipc-bgratorg10", 0, "bgratorg10 element"))

static Settings snapshot_settings(GstBgraToRg10* self) {
  GST_OBJECT_LOCK(self);
  Settings s = self->priv->settings;
  GST_OBJECT_UNLOCK(self);
  return s;
}

static void gst_bgra_to_rg10_set_property(GObject* object, guint prop_id, const GValue* value,
                                          GParamSpec* pspec) {
  auto* self = GST_BGRA_TO_RG10(object);
  GST_OBJECT_LOCK(self);
  Settings& s = self->priv->settings;
  switch (prop_id) {
    case PROP_BIT_ALIGNMENT:
      s.bit_alignment = static_cast<GstCipcBitAlignment>(g_value_get_enum(value));
      break;
    case PROP_BLACK_LEVEL: s.black_level = g_value_get_uint(value); break;
    case PROP_WB_RED: s.wb_red = g_value_get_double(value); break;
    case PROP_WB_GREEN: s.wb_green = g_value_get_double(value); break;
    case PROP_WB_BLUE: s.wb_blue = g_value_get_double(value); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK(self);
}

static void gst_bgra_to_rg10_get_property(GObject* object, guint prop_id, GValue* value,
                                          GParamSpec* pspec) {
  auto* self = GST_BGRA_TO_RG10(object);
  GST_OBJECT_LOCK(self);
  const Settings& s = self->priv->settings;
  switch (prop_id) {
    case PROP_BIT_ALIGNMENT: g_value_set_enum(value, s.bit_alignment); break;
    case PROP_BLACK_LEVEL: g_value_set_uint(value, s.black_level); break;
    case PROP_WB_RED: g_value_set_double(value, s.wb_red); break;
    case PROP_WB_GREEN: g_value_set_double(value, s.wb_green); break;
    case PROP_WB_BLUE: g_value_set_double(value, s.wb_blue); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK(self);
}

static void gst_bgra_to_rg10_finalize(GObject* object) {
  delete GST_BGRA_TO_RG10(object)->priv;
  G_OBJECT_CLASS(gst_bgra_to_rg10_parent_class)->finalize(object);
}

// Sink -> src: the same size and rate as video/x-bayer in any of the four phases; src -> sink:
// the same size and rate in any of the input formats.
static GstCaps* gst_bgra_to_rg10_transform_caps(GstBaseTransform* trans, GstPadDirection direction,
                                                GstCaps* caps, GstCaps* filter) {
  GstCaps* other =
      direction == GST_PAD_SINK
          ? cipc_gst::caps_with_size_and_rate(caps, "video/x-bayer", SRC_FORMATS, nullptr)
          : cipc_gst::caps_with_size_and_rate(caps, "video/x-raw", SINK_FORMATS, nullptr);
  if (filter) {
    GstCaps* filtered = gst_caps_intersect_full(filter, other, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref(other);
    other = filtered;
  }
  GST_DEBUG_OBJECT(trans, "%s %" GST_PTR_FORMAT " -> %" GST_PTR_FORMAT,
                   direction == GST_PAD_SINK ? "sink" : "src", caps, other);
  return other;
}

static gboolean gst_bgra_to_rg10_set_caps(GstBaseTransform* trans, GstCaps* incaps,
                                          GstCaps* outcaps) {
  auto* self = GST_BGRA_TO_RG10(trans);
  State& st = self->priv->state;
  st.configured = false;
  if (!gst_video_info_from_caps(&st.in_info, incaps) ||
      !input_of(GST_VIDEO_INFO_FORMAT(&st.in_info), &st.input)) {
    GST_ERROR_OBJECT(self, "unsupported input caps %" GST_PTR_FORMAT, incaps);
    return FALSE;
  }
  const GstStructure* s = gst_caps_get_structure(outcaps, 0);
  const char* format = gst_structure_get_string(s, "format");
  gint width = 0, height = 0;
  const bool known = cipc_gst::bayer10_phase(format, &st.phase);
  if (!known || !gst_structure_get_int(s, "width", &width) ||
      !gst_structure_get_int(s, "height", &height) || width != GST_VIDEO_INFO_WIDTH(&st.in_info) ||
      height != GST_VIDEO_INFO_HEIGHT(&st.in_info)) {
    GST_ERROR_OBJECT(self, "unsupported output caps %" GST_PTR_FORMAT, outcaps);
    return FALSE;
  }
  st.out_stride = cipc_gst::bayer10_default_stride(width);
  st.configured = true;
  GST_INFO_OBJECT(self, "%s %dx%d -> %s, %" G_GSIZE_FORMAT " bytes per row",
                  GST_VIDEO_INFO_NAME(&st.in_info), width, height, format, st.out_stride);
  return TRUE;
}

// Sizes come from the caps alone (RAW10 or raw video), in both directions.
static gboolean gst_bgra_to_rg10_transform_size(GstBaseTransform* trans, GstPadDirection direction,
                                                GstCaps* caps, gsize size, GstCaps* othercaps,
                                                gsize* othersize) {
  (void)direction;
  (void)caps;
  (void)size;
  if (cipc_gst::frame_size_of(othercaps, othersize)) return TRUE;
  GST_DEBUG_OBJECT(trans, "cannot size a buffer for %" GST_PTR_FORMAT, othercaps);
  return FALSE;
}

static gboolean gst_bgra_to_rg10_get_unit_size(GstBaseTransform* trans, GstCaps* caps,
                                               gsize* size) {
  (void)trans;
  return cipc_gst::frame_size_of(caps, size);
}

// A 4K frame is ~8 M samples: on one core the mosaic alone takes most of a 60 fps frame
// period, so large frames are split into bands of rows, one thread each. Bands start on even
// rows, where the CFA pattern starts again.
static void mosaic_in_bands(const uint8_t* in, size_t in_pitch, int in_format, uint8_t* out,
                            size_t out_pitch, int width, int height,
                            const cipc_bayer::MosaicParams& p) {
  constexpr long kSamplesPerBand = 1 << 20;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int bands = static_cast<int>(std::min<long>(
      {static_cast<long>(cores), 8L, static_cast<long>(width) * height / kSamplesPerBand}));
  if (bands <= 1) {
    cipc_bayer::mosaic_cpu(in, in_pitch, in_format, out, out_pitch, width, height, p);
    return;
  }
  const int rows_per_band = ((height + bands - 1) / bands + 1) & ~1;
  std::vector<std::thread> threads;
  for (int top = rows_per_band; top < height; top += rows_per_band) {
    const int rows = std::min(rows_per_band, height - top);
    threads.emplace_back([=, &p] {
      cipc_bayer::mosaic_cpu(in + static_cast<size_t>(top) * in_pitch, in_pitch, in_format,
                             out + static_cast<size_t>(top) * out_pitch, out_pitch, width, rows, p);
    });
  }
  cipc_bayer::mosaic_cpu(in, in_pitch, in_format, out, out_pitch, width,
                         std::min(rows_per_band, height), p);
  for (auto& t : threads) t.join();
}

static GstFlowReturn gst_bgra_to_rg10_transform(GstBaseTransform* trans, GstBuffer* inbuf,
                                                GstBuffer* outbuf) {
  auto* self = GST_BGRA_TO_RG10(trans);
  State& st = self->priv->state;
  if (!st.configured) return GST_FLOW_NOT_NEGOTIATED;
  const Settings s = snapshot_settings(self);

  const gint width = GST_VIDEO_INFO_WIDTH(&st.in_info);
  const gint height = GST_VIDEO_INFO_HEIGHT(&st.in_info);
  const gsize needed = st.out_stride * static_cast<gsize>(height);

  GstVideoFrame in_frame;
  if (!gst_video_frame_map(&in_frame, &st.in_info, inbuf, GST_MAP_READ)) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Could not read an input frame."),
                      ("the buffer does not match the negotiated %s %dx%d",
                       GST_VIDEO_INFO_NAME(&st.in_info), width, height));
    return GST_FLOW_ERROR;
  }
  GstMapInfo out_map;
  if (!gst_buffer_map(outbuf, &out_map, GST_MAP_WRITE)) {
    gst_video_frame_unmap(&in_frame);
    GST_ELEMENT_ERROR(self, RESOURCE, WRITE, ("Could not write an output buffer."), (nullptr));
    return GST_FLOW_ERROR;
  }
  if (out_map.size < needed) {
    gst_buffer_unmap(outbuf, &out_map);
    gst_video_frame_unmap(&in_frame);
    GST_ELEMENT_ERROR(
        self, STREAM, FAILED, ("An output buffer is too small for the frame."),
        ("%" G_GSIZE_FORMAT " bytes, %" G_GSIZE_FORMAT " needed", out_map.size, needed));
    return GST_FLOW_ERROR;
  }

  cipc_bayer::MosaicParams p;
  p.phase = st.phase;
  p.alignment = gst_cipc_bit_alignment_to_bayer(s.bit_alignment);
  p.black_level = static_cast<uint16_t>(s.black_level);
  p.wb_red = static_cast<float>(s.wb_red);
  p.wb_green = static_cast<float>(s.wb_green);
  p.wb_blue = static_cast<float>(s.wb_blue);
  const auto* in = static_cast<const uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&in_frame, 0));
  const auto in_pitch = static_cast<size_t>(GST_VIDEO_FRAME_PLANE_STRIDE(&in_frame, 0));
  // Row padding (when width is not a multiple of 4) is zeroed so no stale memory leaks out.
  if (st.out_stride != static_cast<gsize>(width) * 2) std::memset(out_map.data, 0, needed);
  mosaic_in_bands(in, in_pitch, static_cast<int>(st.input), out_map.data, st.out_stride, width,
                  height, p);

  gst_buffer_unmap(outbuf, &out_map);
  gst_video_frame_unmap(&in_frame);
  return GST_FLOW_OK;
}

static void gst_bgra_to_rg10_class_init(GstBgraToRg10Class* klass) {
  auto* object_class = G_OBJECT_CLASS(klass);
  auto* element_class = GST_ELEMENT_CLASS(klass);
  auto* trans_class = GST_BASE_TRANSFORM_CLASS(klass);
  object_class->set_property = gst_bgra_to_rg10_set_property;
  object_class->get_property = gst_bgra_to_rg10_get_property;
  object_class->finalize = gst_bgra_to_rg10_finalize;

  const GParamFlags rw_playing = cipc_gst::kParamPlayingRW;

  g_object_class_install_property(
      object_class, PROP_BIT_ALIGNMENT,
      g_param_spec_enum("bit-alignment", "Bit alignment",
                        "Where the 10 bits lie in each 16-bit little-endian word: bits 9..0 "
                        "(lsb, V4L2 RG10) or bits 15..6 with the low 6 bits zero (msb, as the "
                        "Jetson capture hardware writes them)",
                        gst_cipc_bit_alignment_get_type(), DEFAULT_BIT_ALIGNMENT, rw_playing));
  g_object_class_install_property(
      object_class, PROP_BLACK_LEVEL,
      g_param_spec_uint("black-level", "Black level",
                        "Sensor black level in 10-bit codes (0..1022): black maps to this code "
                        "and full scale to 1023",
                        0, MAX_BLACK_LEVEL, DEFAULT_BLACK_LEVEL, rw_playing));
  g_object_class_install_property(
      object_class, PROP_WB_RED,
      g_param_spec_double("wb-red", "White balance red",
                          "Simulated sensor response of the red samples: each is divided by "
                          "this gain (0.01..100), so a debayer applying the same gain restores "
                          "the scene",
                          MIN_WB, MAX_WB, DEFAULT_WB, rw_playing));
  g_object_class_install_property(
      object_class, PROP_WB_GREEN,
      g_param_spec_double("wb-green", "White balance green",
                          "Simulated sensor response of the green samples: each is divided by "
                          "this gain (0.01..100)",
                          MIN_WB, MAX_WB, DEFAULT_WB, rw_playing));
  g_object_class_install_property(
      object_class, PROP_WB_BLUE,
      g_param_spec_double("wb-blue", "White balance blue",
                          "Simulated sensor response of the blue samples: each is divided by "
                          "this gain (0.01..100), so a debayer applying the same gain restores "
                          "the scene",
                          MIN_WB, MAX_WB, DEFAULT_WB, rw_playing));

  gst_element_class_set_static_metadata(
      element_class, "8-bit RGB or BGR video to RAW10 Bayer (camera simulator)",
      "Filter/Converter/Video",
      "Mosaics 8-bit colour video into 10-bit Bayer samples on the CPU, to stand in for a RAW10 "
      "camera",
      "gst-cudaipc developers");
  cipc_gst::add_doc_uri(element_class, "bgratorg10");
  gst_element_class_add_static_pad_template(element_class, &sink_template);
  gst_element_class_add_static_pad_template(element_class, &src_template);

  trans_class->passthrough_on_same_caps = FALSE;
  trans_class->transform_caps = GST_DEBUG_FUNCPTR(gst_bgra_to_rg10_transform_caps);
  trans_class->set_caps = GST_DEBUG_FUNCPTR(gst_bgra_to_rg10_set_caps);
  trans_class->transform_size = GST_DEBUG_FUNCPTR(gst_bgra_to_rg10_transform_size);
  trans_class->get_unit_size = GST_DEBUG_FUNCPTR(gst_bgra_to_rg10_get_unit_size);
  trans_class->transform = GST_DEBUG_FUNCPTR(gst_bgra_to_rg10_transform);
}

static void gst_bgra_to_rg10_init(GstBgraToRg10* self) {
  self->priv = new BgraToRg10Private();
  gst_video_info_init(&self->priv->state.in_info);
}
