// SPDX-License-Identifier: LGPL-2.1-or-later
// What the GPU harness's pipelines share (tests/gpu/cuda_peer.cpp and gst_cudaipc_peer.cpp):
// parsing a pipeline, the first error it left on its bus as one line, and the end of an
// appsrc-fed stream.
#pragma once

#include <gst/app/gstappsrc.h>
#include <gst/gst.h>

#include <algorithm>
#include <string>

namespace cipc_test {

// A pipeline from `description`, or nullptr with `*err` set. An element the runtime lacks
// (gldownload under a runtime without GStreamer's opengl plugin, cudaipcsink before 1.24) is an
// error, not a partly built pipeline that then waits for frames: gst_parse_launch returns one
// without the flag.
inline GstElement* parse_or_null(const std::string& description, GError** err) {
  return gst_parse_launch_full(description.c_str(), nullptr, GST_PARSE_FLAG_FATAL_ERRORS, err);
}

// The first error message left on `bus` as one line, "<text> | <debug>"; empty if none.
inline std::string pop_bus_error(GstBus* bus) {
  GstMessage* m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
  if (!m) return "";
  GError* err = nullptr;
  gchar* debug = nullptr;
  gst_message_parse_error(m, &err, &debug);
  std::string text = err ? err->message : "(no message)";
  if (debug) text += std::string(" | ") + debug;
  g_clear_error(&err);
  g_free(debug);
  gst_message_unref(m);
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

// EOS into `appsrc`, then up to 5 s for it (or an error) to come out of `pipeline`: every
// frame pushed has reached the sink.
inline void end_appsrc_stream(GstElement* pipeline, GstElement* appsrc) {
  gst_app_src_end_of_stream(GST_APP_SRC(appsrc));
  GstBus* bus = gst_element_get_bus(pipeline);
  if (GstMessage* m = gst_bus_timed_pop_filtered(
          bus, 5 * GST_SECOND, GstMessageType(GST_MESSAGE_EOS | GST_MESSAGE_ERROR)))
    gst_message_unref(m);
  gst_object_unref(bus);
}

}  // namespace cipc_test
