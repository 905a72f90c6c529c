// SPDX-License-Identifier: LGPL-2.1-or-later
// The fixture the element tests share (test_cudasinkipc.cpp, test_cudasrcipc.cpp,
// test_registration.cpp): GStreamer initialised once, a private socket directory per test, a
// harnessed cudasink-ipc with its own bus, and helpers to read errors and stats. The plugin is
// loaded from the build tree (GST_PLUGIN_PATH), never linked.
#pragma once

#include <gst/check/gstharness.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "channel.h"
#include "protocol.h"

namespace cipc_test {

inline constexpr const char* kCaps = "video/x-raw,format=RGBA,width=64,height=48,framerate=30/1";

class Elements : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }

  void SetUp() override {
    char tmpl[] = "/tmp/cudaipc-elements-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    socket_ = dir_ + "/s.sock";
  }
  void TearDown() override {
    ::unlink(socket_.c_str());
    ::rmdir(dir_.c_str());
  }

  GstHarness* make_sink(const std::string& extra = "") {
    // Configure before the harness starts it: the socket is opened at start.
    GstElement* e = gst_element_factory_make("cudasink-ipc", nullptr);
    set_properties(e, "sync=false async=false memory=host socket-path=" + socket_ + " " + extra);
    static GstStaticPadTemplate src =
        GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
    GstHarness* h = gst_harness_new_empty();
    gst_harness_add_element_full(h, e, &src, "sink", nullptr, nullptr);
    gst_object_unref(e);
    bus_ = gst_bus_new();
    gst_element_set_bus(h->element, bus_);
    return h;
  }

  // "name=value name=value" as gst-launch would apply them.
  static void set_properties(GstElement* e, const std::string& props) {
    gchar** parts = g_strsplit(props.c_str(), " ", -1);
    for (gchar** p = parts; *p; ++p) {
      gchar** kv = g_strsplit(*p, "=", 2);
      if (kv[0] && kv[1]) gst_util_set_object_arg(G_OBJECT(e), kv[0], kv[1]);
      g_strfreev(kv);
    }
    g_strfreev(parts);
  }

  // Messages of `type` the element posted so far.
  std::vector<GstMessage*> messages(GstMessageType type) {
    std::vector<GstMessage*> out;
    while (GstMessage* m = gst_bus_pop_filtered(bus_, type)) out.push_back(m);
    return out;
  }

  static std::string error_text(GstMessage* m) {
    GError* err = nullptr;
    gchar* debug = nullptr;
    if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR)
      gst_message_parse_error(m, &err, &debug);
    else
      gst_message_parse_warning(m, &err, &debug);
    std::string text = err ? err->message : "";
    g_clear_error(&err);
    g_free(debug);
    return text;
  }

  static guint64 stat(GstElement* e, const char* field) {
    GstStructure* s = nullptr;
    g_object_get(e, "stats", &s, nullptr);
    guint64 v = G_MAXUINT64;
    EXPECT_TRUE(s && gst_structure_get_uint64(s, field, &v)) << field;
    if (s) gst_structure_free(s);
    return v;
  }

  void TearDownBus() {
    if (bus_) gst_object_unref(bus_);
    bus_ = nullptr;
  }

  std::string dir_;
  std::string socket_;
  GstBus* bus_ = nullptr;
};

// Waits (up to 5 s) until `pred` holds.
template <typename Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 500; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// Whether this machine has an NVIDIA GPU (its driver's control node): the tests of what happens
// without one do not apply there.
inline bool have_nvidia_gpu() {
  return ::access("/dev/nvidiactl", F_OK) == 0;
}

}  // namespace cipc_test
