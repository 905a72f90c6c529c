// SPDX-License-Identifier: LGPL-2.1-or-later
#include "camera/bayercaps.h"

#include <gst/video/video.h>

#include "formats.h"

namespace cipc_gst {

namespace {

const cipc_bayer::BayerFormat* bayer10(const char* name) {
  const cipc_bayer::BayerFormat* f = name ? cipc_bayer::bayer_format_from_caps_name(name) : nullptr;
  return f && f->bits == 10 ? f : nullptr;
}

}  // namespace

bool bayer10_phase(const char* format, cipc_bayer::CfaOrder* phase) {
  const cipc_bayer::BayerFormat* f = bayer10(format);
  if (!f) return false;
  *phase = f->order;
  return true;
}

gsize bayer10_default_stride(gint width) {
  return width < 1 ? 0
                   : cipc_bayer::implicit_stride(*bayer10("rggb10le"), static_cast<guint>(width));
}

GstCaps* caps_with_size_and_rate(GstCaps* caps, const char* media_type, const char* formats,
                                 const char* feature) {
  GstCaps* out = gst_caps_new_empty();
  GValue format_list = G_VALUE_INIT;
  g_value_init(&format_list, GST_TYPE_LIST);
  gst_value_deserialize(&format_list, formats);
  for (guint i = 0; i < gst_caps_get_size(caps); ++i) {
    const GstStructure* in = gst_caps_get_structure(caps, i);
    GstStructure* s = gst_structure_new_empty(media_type);
    gst_structure_set_value(s, "format", &format_list);
    for (const char* field : {"width", "height", "framerate"}) {
      const GValue* v = gst_structure_get_value(in, field);
      if (v) gst_structure_set_value(s, field, v);
    }
    out = gst_caps_merge_structure_full(
        out, s, feature ? gst_caps_features_new(feature, nullptr) : nullptr);
  }
  g_value_unset(&format_list);
  return out;
}

bool frame_size_of(GstCaps* caps, gsize* size) {
  if (bayer10_frame_size(caps, size)) return true;
  GstVideoInfo info;
  if (!caps || !gst_video_info_from_caps(&info, caps)) return false;
  *size = GST_VIDEO_INFO_SIZE(&info);
  return true;
}

bool bayer10_frame_size(GstCaps* caps, gsize* size) {
  if (!caps || gst_caps_is_empty(caps)) return false;
  const GstStructure* s = gst_caps_get_structure(caps, 0);
  gint width = 0, height = 0;
  if (!gst_structure_has_name(s, "video/x-bayer") || !gst_structure_get_int(s, "width", &width) ||
      !gst_structure_get_int(s, "height", &height) || width < 1 || height < 1)
    return false;
  *size = bayer10_default_stride(width) * static_cast<gsize>(height);
  return true;
}

}  // namespace cipc_gst
