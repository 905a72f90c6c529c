// SPDX-License-Identifier: LGPL-2.1-or-later
// cudasrc-ipc's part in GStreamer's GL context sharing (gst-libs/gst/gl): the GL display and the
// application's context arrive through context messages and set_context, downstream's GL
// context through a local context query; frames are written in downstream's context when it has
// one (glimagesink's), else in one of our own that shares the application's. Context queries
// from downstream are answered with what we hold. The element owns one; set() and
// answer_query() may come from any thread, ensure() from the streaming thread.
#pragma once

#include <gst/gl/gl.h>
#include <gst/gst.h>

#include <mutex>
#include <string>

namespace cipc_gst {

class ElementGlContext {
 public:
  ElementGlContext() = default;
  ~ElementGlContext();
  ElementGlContext(const ElementGlContext&) = delete;
  ElementGlContext& operator=(const ElementGlContext&) = delete;

  // GstElement::set_context: a GL display or an application's GL context.
  void set(GstElement* element, GstContext* context);
  // A context query downstream (or the application) sent: true when answered.
  bool answer_query(GstElement* element, GstQuery* query);
  // The GL context to write frames in (a new reference): found or made on first demand.
  // nullptr with *error set when GL is not available (no display, no context could be made).
  GstGLContext* ensure(GstElement* element, std::string* error);
  // Forgets the GL context (not the display or the application's context): stop().
  void drop_context();

 private:
  std::recursive_mutex lock_;  // ensure() sends queries whose answers may call set()
  GstGLDisplay* display_ = nullptr;
  GstGLContext* other_ = nullptr;    // the application's, shared with ours
  GstGLContext* context_ = nullptr;  // where frames are written
};

}  // namespace cipc_gst
