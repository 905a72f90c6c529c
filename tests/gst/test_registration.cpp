// SPDX-License-Identifier: LGPL-2.1-or-later
// What gst-inspect-1.0 and applications see of the plugin's IPC elements before any frame:
// GType and instance names, complete property specs, blurbs, documentation URIs, pad templates,
// the per-user default socket path, and cudaipc:// URIs.
#include "elements_fixture.h"

namespace {

using namespace cipc_test;

TEST_F(Elements, RegisteredWithOwnTypeNamesAndCompleteProperties) {
  for (const char* name : {"cudasink-ipc", "cudasrc-ipc"}) {
    GstElementFactory* f = gst_element_factory_find(name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_NE(std::string(gst_element_factory_get_metadata(f, GST_ELEMENT_METADATA_KLASS))
                  .find("Hardware"),
              std::string::npos);
    GstElement* e = gst_element_factory_create(f, nullptr);
    // nvcodec owns GstCudaIpcSink/GstCudaIpcSrc; ours must not collide.
    EXPECT_STRNE(G_OBJECT_TYPE_NAME(e), "GstCudaIpcSink");
    EXPECT_STRNE(G_OBJECT_TYPE_NAME(e), "GstCudaIpcSrc");
    guint n = 0;
    GParamSpec** props = g_object_class_list_properties(G_OBJECT_GET_CLASS(e), &n);
    for (guint i = 0; i < n; ++i) {
      if (props[i]->owner_type != G_OBJECT_TYPE(e)) continue;
      const char* blurb = g_param_spec_get_blurb(props[i]);
      EXPECT_TRUE(blurb && std::strlen(blurb) > 15) << name << ":" << props[i]->name;
    }
    g_free(props);
    gst_object_unref(e);
    gst_object_unref(f);
  }
}

// Issue 24, defect 7: what gst-inspect-1.0 shows does not mislead.
TEST_F(Elements, BlurbsAndNamesSayWhatTheElementsDo) {
  auto blurb = [](const char* element, const char* property) {
    GstElement* e = gst_element_factory_make(element, nullptr);
    GParamSpec* spec = g_object_class_find_property(G_OBJECT_GET_CLASS(e), property);
    const std::string text = spec ? g_param_spec_get_blurb(spec) : "";
    gst_object_unref(e);
    return text;
  };
  // gst-inspect shows the default in decimal (384): the blurb says it in octal.
  EXPECT_NE(blurb("cudasink-ipc", "socket-mode").find("default 0600"), std::string::npos);
  // With backpressure=block nothing is dropped: the blurb must not say it always is.
  const std::string in_flight = blurb("cudasink-ipc", "max-in-flight");
  EXPECT_NE(in_flight.find("backpressure"), std::string::npos) << in_flight;
  EXPECT_NE(in_flight.find("waits"), std::string::npos) << in_flight;
  GstElementFactory* f = gst_element_factory_find("bgratorg10");
  ASSERT_NE(f, nullptr);
  const std::string longname = gst_element_factory_get_metadata(f, GST_ELEMENT_METADATA_LONGNAME);
  EXPECT_EQ(longname.find("BGRA to"), std::string::npos) << "it takes six formats: " << longname;
  gst_object_unref(f);
}

// The default socket path is per user: $XDG_RUNTIME_DIR when it is a private directory of ours,
// else /tmp/cudaipc-<uid>; the same for both elements so that they find each other.
TEST_F(Elements, DefaultSocketPathIsPerUser) {
  const char* saved = getenv("XDG_RUNTIME_DIR");
  const std::string saved_value = saved ? saved : "";
  auto default_of = [](const char* factory) {
    GstElement* e = gst_element_factory_make(factory, nullptr);
    gchar* path = nullptr;
    g_object_get(e, "socket-path", &path, nullptr);
    std::string out = path ? path : "";
    g_free(path);
    gst_object_unref(e);
    return out;
  };
  const std::string fallback = "/tmp/cudaipc-" + std::to_string(getuid()) + "/cudaipc.sock";
  unsetenv("XDG_RUNTIME_DIR");
  EXPECT_EQ(default_of("cudasink-ipc"), fallback);
  EXPECT_EQ(default_of("cudasrc-ipc"), fallback);

  const std::string runtime = dir_ + "/runtime";
  ASSERT_EQ(mkdir(runtime.c_str(), 0700), 0);
  setenv("XDG_RUNTIME_DIR", runtime.c_str(), 1);
  EXPECT_EQ(default_of("cudasink-ipc"), runtime + "/cudaipc.sock");
  EXPECT_EQ(default_of("cudasrc-ipc"), runtime + "/cudaipc.sock");
  // A runtime directory others can enter is not private: the fallback is used.
  ASSERT_EQ(chmod(runtime.c_str(), 0777), 0);
  EXPECT_EQ(default_of("cudasink-ipc"), fallback);
  rmdir(runtime.c_str());
  if (saved)
    setenv("XDG_RUNTIME_DIR", saved_value.c_str(), 1);
  else
    unsetenv("XDG_RUNTIME_DIR");
}

// Every element names its reference in its metadata (gst-inspect-1.0's "Doc-uri"): the section
// of docs/elements.md named after it, where the Debian package installs that page (issue 43,
// item 10). The section exists in the source tree's page.
TEST_F(Elements, EveryElementNamesItsReferenceSection) {
  const char* root = g_getenv("CUDAIPC_SOURCE_ROOT");
  std::string page;
  if (root) {
    gchar* text = nullptr;
    if (g_file_get_contents((std::string(root) + "/docs/elements.md").c_str(), &text, nullptr,
                            nullptr))
      page = text;
    g_free(text);
  }
  for (const char* name : {"cudasink-ipc", "cudasrc-ipc", "bgratorg10", "rg10replaysrc",
                           "rg10tobgra", "cudav4l2src"}) {
    GstElementFactory* factory = gst_element_factory_find(name);
    if (!factory) continue;  // rg10tobgra is built only with the CUDA toolkit
    const gchar* uri = gst_element_factory_get_metadata(factory, GST_ELEMENT_METADATA_DOC_URI);
    EXPECT_EQ(std::string(uri ? uri : ""),
              std::string("file:///usr/share/doc/gstreamer1.0-cudaipc/docs/elements.md#") + name);
    if (root) {
      EXPECT_NE(page.find(std::string("\n## ") + name + "\n"), std::string::npos)
          << "docs/elements.md has no section '## " << name << "'";
    }
    gst_object_unref(factory);
  }
}

// Issue 13: with GStreamer's CUDA library both elements speak nvcodec's memory:CUDAMemory (the
// sink takes it in, copied once on the GPU; the source gives it to cudaconvert & co.); without
// it they must not claim to.
TEST_F(Elements, PadTemplatesOfferGstCudaMemoryExactlyWhenBuiltWithInterop) {
#ifdef CIPC_HAVE_GST_CUDA
  const bool expected = true;
#else
  const bool expected = false;
#endif
  for (const char* factory : {"cudasink-ipc", "cudasrc-ipc"}) {
    GstElement* e = gst_element_factory_make(factory, nullptr);
    ASSERT_NE(e, nullptr) << factory;
    GstPad* pad =
        gst_element_get_static_pad(e, g_str_equal(factory, "cudasink-ipc") ? "sink" : "src");
    GstCaps* templ = gst_pad_get_pad_template_caps(pad);
    GstCaps* queried = gst_pad_query_caps(pad, nullptr);
    for (GstCaps* caps : {templ, queried}) {
      bool found = false;
      for (guint i = 0; i < gst_caps_get_size(caps); ++i)
        found = found ||
                gst_caps_features_contains(gst_caps_get_features(caps, i), "memory:CUDAMemory");
      EXPECT_EQ(found, expected) << factory << ": " << gst_caps_to_string(caps);
    }
    gst_caps_unref(templ);
    gst_caps_unref(queried);
    gst_object_unref(pad);
    gst_object_unref(e);
  }
}

// GStreamer names an instance after its GType: ours are registered so that the default names
// are the element names ("cudasink-ipc0"), not "cudasinkipc0".
// cudaipc:// URIs (gst/common/urihandler, tested on its own in test_urihandler.cpp) pick the right
// element for each direction, with the query's properties set; playbin and gst-play-1.0 are in
// tests/e2e/check_uri_players.py.
TEST_F(Elements, UriMakesTheSourceAndTheSinkWithTheirProperties) {
  const std::string uri = "cudaipc://" + socket_;
  GError* error = nullptr;
  GstElement* src = gst_element_make_from_uri(
      GST_URI_SRC, (uri + "?memory=host&connect-timeout=250&reconnect=true").c_str(), nullptr,
      &error);
  ASSERT_NE(src, nullptr) << (error ? error->message : "");
  EXPECT_STREQ(GST_OBJECT_NAME(gst_element_get_factory(src)), "cudasrc-ipc");
  gchar* path = nullptr;
  gchar* memory = nullptr;
  guint timeout = 0;
  gboolean reconnect = FALSE;
  g_object_get(src, "socket-path", &path, "connect-timeout", &timeout, "reconnect", &reconnect,
               nullptr);
  GValue value = G_VALUE_INIT;
  g_value_init(&value, G_PARAM_SPEC_VALUE_TYPE(
                           g_object_class_find_property(G_OBJECT_GET_CLASS(src), "memory")));
  g_object_get_property(G_OBJECT(src), "memory", &value);
  memory = gst_value_serialize(&value);
  g_value_unset(&value);
  EXPECT_EQ(path, socket_);
  EXPECT_STREQ(memory, "host");
  EXPECT_EQ(timeout, 250u);
  EXPECT_TRUE(reconnect);
  g_free(path);
  g_free(memory);
  gchar* got = gst_uri_handler_get_uri(GST_URI_HANDLER(src));
  EXPECT_EQ(got, uri);  // the path only: the other properties are not put back in a query
  g_free(got);
  gst_object_unref(gst_object_ref_sink(src));

  GstElement* sink = gst_element_make_from_uri(
      GST_URI_SINK, (uri + "?memory=host&socket-mode=0660&pool-size=3").c_str(), nullptr, &error);
  ASSERT_NE(sink, nullptr) << (error ? error->message : "");
  EXPECT_STREQ(GST_OBJECT_NAME(gst_element_get_factory(sink)), "cudasink-ipc");
  guint mode = 0, pool_size = 0;
  g_object_get(sink, "socket-path", &path, "socket-mode", &mode, "pool-size", &pool_size, nullptr);
  EXPECT_EQ(path, socket_);
  EXPECT_EQ(mode, 0660u);  // 0660 read as octal, as gst-launch-1.0 reads it
  EXPECT_EQ(pool_size, 3u);
  g_free(path);
  gst_object_unref(gst_object_ref_sink(sink));
}

TEST_F(Elements, UriWithAnUnknownOrReadOnlyParameterMakesNoElement) {
  const std::string uri = "cudaipc://" + socket_;
  GError* error = nullptr;
  EXPECT_EQ(gst_element_make_from_uri(GST_URI_SRC, (uri + "?timeout=5").c_str(), nullptr, &error),
            nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_TRUE(g_error_matches(error, GST_URI_ERROR, GST_URI_ERROR_BAD_URI));
  EXPECT_NE(std::string(error->message).find("unknown parameter 'timeout'"), std::string::npos)
      << error->message;
  EXPECT_NE(std::string(error->message).find("connect-timeout"), std::string::npos)
      << error->message;
  g_clear_error(&error);
  EXPECT_EQ(
      gst_element_make_from_uri(GST_URI_SINK, (uri + "?num-consumers=2").c_str(), nullptr, &error),
      nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error->message).find("'num-consumers' is read-only"), std::string::npos)
      << error->message;
  g_clear_error(&error);
}

TEST_F(Elements, UriCannotChangeWhileTheSinkRuns) {
  GstHarness* h = make_sink();
  gst_harness_play(h);
  GError* error = nullptr;
  EXPECT_FALSE(gst_uri_handler_set_uri(GST_URI_HANDLER(h->element),
                                       ("cudaipc://" + dir_ + "/other.sock").c_str(), &error));
  EXPECT_TRUE(g_error_matches(error, GST_URI_ERROR, GST_URI_ERROR_BAD_STATE));
  g_clear_error(&error);
  gchar* path = nullptr;
  g_object_get(h->element, "socket-path", &path, nullptr);
  EXPECT_EQ(path, socket_);
  g_free(path);
  gst_harness_teardown(h);
  TearDownBus();
}

TEST(ElementNames, DefaultInstanceNamesAreTheElementNames) {
  gst_init(nullptr, nullptr);
  for (const char* factory : {"cudasink-ipc", "cudasrc-ipc"}) {
    GstElement* e = gst_element_factory_make(factory, nullptr);
    ASSERT_NE(e, nullptr) << factory;
    gchar* name = gst_element_get_name(e);
    const std::string n = name;
    g_free(name);
    EXPECT_EQ(n.rfind(factory, 0), 0u) << n;
    EXPECT_FALSE(n.size() == std::strlen(factory)) << n;
    EXPECT_EQ(n.find_first_not_of("0123456789", std::strlen(factory)), std::string::npos) << n;
    gst_object_unref(e);
  }
  EXPECT_EQ(g_type_from_name("GstCudaIpcSink"), 0u) << "nvcodec's type names are not ours to take";
}

}  // namespace
