// SPDX-License-Identifier: LGPL-2.1-or-later
// How each room registers its enum GTypes (sinkenums, srcenums, cameraenums): as plugin API, so
// gst-inspect-1.0 documents them, under names with a "Cipc" prefix that never collide with
// GStreamer's own nvcodec cudaipc types in one process. One enum per concept: properties that
// hold the protocol's values (cipc::MemoryKind, cipc::SyncMode) use those values.
#pragma once

#include <gst/gst.h>

namespace cipc_gst {

template <typename E>
constexpr gint enum_value_of(E e) {
  return static_cast<gint>(e);
}

inline GType register_enum(const char* name, const GEnumValue* values) {
  GType type = g_enum_register_static(name, values);
  gst_type_mark_as_plugin_api(type, static_cast<GstPluginAPIFlags>(0));
  return type;
}

}  // namespace cipc_gst
