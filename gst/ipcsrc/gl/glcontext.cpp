// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ipcsrc/gl/glcontext.h"

namespace cipc_gst {

ElementGlContext::~ElementGlContext() {
  gst_clear_object(&context_);
  gst_clear_object(&other_);
  gst_clear_object(&display_);
}

void ElementGlContext::set(GstElement* element, GstContext* context) {
  std::lock_guard<std::recursive_mutex> hold(lock_);
  gst_gl_handle_set_context(element, context, &display_, &other_);
}

bool ElementGlContext::answer_query(GstElement* element, GstQuery* query) {
  if (GST_QUERY_TYPE(query) != GST_QUERY_CONTEXT) return false;
  std::lock_guard<std::recursive_mutex> hold(lock_);
  return gst_gl_handle_context_query(element, query, display_, context_, other_);
}

void ElementGlContext::drop_context() {
  std::lock_guard<std::recursive_mutex> hold(lock_);
  gst_clear_object(&context_);
}

GstGLContext* ElementGlContext::ensure(GstElement* element, std::string* error) {
  std::lock_guard<std::recursive_mutex> hold(lock_);
  if (context_) return GST_GL_CONTEXT(gst_object_ref(context_));
  if (!gst_gl_ensure_element_data(element, &display_, &other_)) {
    *error =
        "no GL display could be opened (with no window system, set GST_GL_WINDOW and "
        "GST_GL_PLATFORM, e.g. egl-device and egl)";
    return nullptr;
  }
  // Downstream's context (glimagesink's), so that its reads need no sharing between contexts.
  if (!gst_gl_query_local_gl_context(element, GST_PAD_SRC, &context_)) {
    GError* gerror = nullptr;
    GST_OBJECT_LOCK(display_);
    do {
      gst_clear_object(&context_);
      context_ = gst_gl_display_get_gl_context_for_thread(display_, nullptr);
      if (!context_ && !gst_gl_display_create_context(display_, other_, &context_, &gerror)) break;
    } while (!gst_gl_display_add_context(display_, context_));
    GST_OBJECT_UNLOCK(display_);
    if (!context_) {
      *error = std::string("no GL context could be made: ") +
               (gerror ? gerror->message : "unknown reason");
      g_clear_error(&gerror);
      return nullptr;
    }
  }
  return GST_GL_CONTEXT(gst_object_ref(context_));
}

}  // namespace cipc_gst
