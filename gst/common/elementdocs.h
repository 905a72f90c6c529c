// SPDX-License-Identifier: LGPL-2.1-or-later
// Where an element's reference lives, for its metadata's documentation URI (gst-inspect-1.0
// shows it): docs/elements.md, at the path the Debian package installs it, anchored at the
// element's section (its heading is the factory name).
#pragma once

#include <gst/gst.h>

namespace cipc_gst {

constexpr const char* kElementDocsPath =
    "file:///usr/share/doc/gstreamer1.0-cudaipc/docs/elements.md";

inline void add_doc_uri(GstElementClass* klass, const char* factory) {
  gchar* uri = g_strdup_printf("%s#%s", kElementDocsPath, factory);
  gst_element_class_add_metadata(klass, GST_ELEMENT_METADATA_DOC_URI, uri);
  g_free(uri);
}

}  // namespace cipc_gst
