// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ipcsink/sinknegotiation.h"

namespace cipc_gst {

GstCaps* sink_memory_caps(GstCaps* template_caps, bool cuda_slots) {
  if (cuda_slots) return gst_caps_ref(template_caps);
  // Structures are appended without their features, so that what is left is system memory.
  GstCaps* system = gst_caps_new_empty();
  for (guint i = 0; i < gst_caps_get_size(template_caps); ++i) {
    if (gst_cipc_caps_have_cuda_memory(template_caps, i)) continue;
    gst_caps_append_structure(system, gst_structure_copy(gst_caps_get_structure(template_caps, i)));
  }
  return system;
}

bool leads_with_a_deep_format(GstCaps* caps) {
  if (gst_caps_is_empty(caps) || gst_caps_is_any(caps)) return false;
  const GValue* format = gst_structure_get_value(gst_caps_get_structure(caps, 0), "format");
  if (format && GST_VALUE_HOLDS_LIST(format) && gst_value_list_get_size(format) > 0)
    format = gst_value_list_get_value(format, 0);
  if (!format || !G_VALUE_HOLDS_STRING(format)) return false;
  const GstVideoFormatInfo* info =
      gst_video_format_get_info(gst_video_format_from_string(g_value_get_string(format)));
  return info && GST_VIDEO_FORMAT_INFO_DEPTH(info, 0) > 8;
}

// We take every format, and an upstream that is free to choose takes the first one offered:
// GStreamer lists the deepest first (ABGR64_LE), which no display sink accepts and cudasrc-ipc
// cannot convert. Formats every display sink takes (ximagesink, glimagesink) come first.
GstCaps* prefer_display_formats(GstCaps* caps) {
  GstCaps* preferred = gst_caps_new_empty();
  for (guint i = 0; i < gst_caps_get_size(caps); ++i) {
    GstStructure* s = gst_structure_copy(gst_caps_get_structure(caps, i));
    GValue formats = G_VALUE_INIT;
    gst_value_list_init(&formats, 4);
    for (const char* format : {"BGRx", "BGRA", "RGBx", "RGBA"}) {
      GValue v = G_VALUE_INIT;
      g_value_init(&v, G_TYPE_STRING);
      g_value_set_static_string(&v, format);
      gst_value_list_append_and_take_value(&formats, &v);
    }
    gst_structure_take_value(s, "format", &formats);
    gst_caps_append_structure_full(preferred, s,
                                   gst_caps_features_copy(gst_caps_get_features(caps, i)));
    gst_caps_append_structure_full(preferred, gst_structure_copy(gst_caps_get_structure(caps, i)),
                                   gst_caps_features_copy(gst_caps_get_features(caps, i)));
  }
  return preferred;
}

GstCaps* sink_input_caps(GstCaps* template_caps, GstCaps* filter, bool cuda_slots) {
  GstCaps* caps = sink_memory_caps(template_caps, cuda_slots);
  if (filter) {
    // An upstream with a preference of its own (rg10tobgra: BGRA) keeps it; one that lists all
    // it can make, deepest first (videotestsrc), gets ours instead.
    GstCaps* upstream_order = gst_caps_intersect_full(filter, caps, GST_CAPS_INTERSECT_FIRST);
    if (!leads_with_a_deep_format(upstream_order)) {
      gst_caps_unref(caps);
      return upstream_order;
    }
    gst_caps_unref(upstream_order);
  }
  GstCaps* preferred = prefer_display_formats(caps);
  gst_caps_unref(caps);
  if (filter == nullptr) return preferred;
  GstCaps* ours_first = gst_caps_intersect_full(preferred, filter, GST_CAPS_INTERSECT_FIRST);
  gst_caps_unref(preferred);
  return ours_first;
}

SinkPool sink_pool_for(GstCaps* caps, bool cuda_slots) {
#ifdef CIPC_HAVE_GST_CUDA
  // nvcodec elements write GstCudaMemory: into an exportable pool of GStreamer's where it has
  // one; what they allocate elsewhere is copied on the GPU.
  if (caps_have_gst_cuda_memory(caps)) return SinkPool::kExportableGstCuda;
#endif
  if (cuda_slots && !gst_cipc_caps_have_cuda_memory(caps)) return SinkPool::kPinnedUpload;
  // Offered even when upstream asks for no pool: writing into it is what avoids a copy.
  return SinkPool::kSlots;
}

}  // namespace cipc_gst
