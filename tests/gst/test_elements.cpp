// SPDX-License-Identifier: LGPL-2.1-or-later
// cudasink-ipc and cudasrc-ipc as GStreamer sees them, in one process: registration and
// properties, the allocation query, counted copies, claims that live as long as downstream
// holds a buffer, and the clear errors for bad settings and socket paths. The plugin is loaded
// from the build tree (GST_PLUGIN_PATH); cross-process behaviour is in tests/e2e.
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

namespace {

constexpr const char* kCaps = "video/x-raw,format=RGBA,width=64,height=48,framerate=30/1";

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

TEST_F(Elements, SinkDefaults) {
  GstElement* e = gst_element_factory_make("cudasink-ipc", nullptr);
  gchar* path = nullptr;
  guint mode = 0, in_flight = 0, timeout = 0, pool = 0;
  gboolean wait = TRUE;
  g_object_get(e, "socket-path", &path, "socket-mode", &mode, "max-in-flight", &in_flight,
               "release-timeout", &timeout, "pool-size", &pool, "wait-for-consumer", &wait,
               nullptr);
  // Per user (issue 17, defect 4): never a shared /tmp path another user could squat.
  if (!getenv("XDG_RUNTIME_DIR")) {
    EXPECT_EQ(std::string(path), "/tmp/cudaipc-" + std::to_string(getuid()) + "/cudaipc.sock");
  }
  EXPECT_EQ(mode, 0600u);
  EXPECT_EQ(in_flight, 4u);
  EXPECT_EQ(timeout, 2000u);
  EXPECT_EQ(pool, 6u);
  EXPECT_FALSE(wait);
  gint memory = -1, device = 0;
  g_object_get(e, "memory", &memory, "cuda-device-id", &device, nullptr);
  EXPECT_EQ(device, -1);
#ifdef CIPC_HAVE_CUDA
  EXPECT_EQ(memory, 2) << "memory=cuda is the default where the plugin is built with CUDA";
#else
  EXPECT_EQ(memory, 1);
#endif
  g_free(path);
  gst_object_unref(e);
}

TEST_F(Elements, SocketFileCreatedOwnerOnlyAndRemovedOnStop) {
  GstHarness* h = make_sink();
  gst_harness_play(h);
  struct stat st {};
  ASSERT_EQ(::lstat(socket_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  gst_harness_teardown(h);
  EXPECT_NE(::access(socket_.c_str(), F_OK), 0) << "socket file left behind after stop";
  TearDownBus();
}

TEST_F(Elements, OffersItsSlotPoolAndSendsPoolBuffersWithoutCopy) {
  GstHarness* h = make_sink();
  gst_harness_play(h);
  gst_harness_set_src_caps_str(h, kCaps);
  GstCaps* caps = gst_caps_from_string(kCaps);
  GstQuery* q = gst_query_new_allocation(caps, TRUE);
  ASSERT_TRUE(gst_pad_peer_query(h->srcpad, q));
  ASSERT_GE(gst_query_get_n_allocation_pools(q), 1u);
  GstBufferPool* pool = nullptr;
  guint size = 0, min = 0, max = 0;
  gst_query_parse_nth_allocation_pool(q, 0, &pool, &size, &min, &max);
  ASSERT_NE(pool, nullptr);
  EXPECT_STREQ(G_OBJECT_TYPE_NAME(pool), "GstCipcSlotPool");
  EXPECT_EQ(size, 64u * 48 * 4);
  EXPECT_EQ(min, 6u);
  EXPECT_EQ(max, 0u) << "the pool must grow rather than block the producer";
  EXPECT_TRUE(gst_query_find_allocation_meta(q, GST_VIDEO_META_API_TYPE, nullptr));

  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, size, min, max);
  ASSERT_TRUE(gst_buffer_pool_set_config(pool, config));
  ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE));
  for (int i = 0; i < 20; ++i) {
    GstBuffer* b = nullptr;
    ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &b, nullptr), GST_FLOW_OK);
    GST_BUFFER_PTS(b) = i * GST_SECOND / 30;
    ASSERT_EQ(gst_harness_push(h, b), GST_FLOW_OK);
  }
  EXPECT_EQ(stat(h->element, "frames-rendered"), 20u);
  EXPECT_EQ(stat(h->element, "copies"), 0u);
  gst_buffer_pool_set_active(pool, FALSE);
  gst_object_unref(pool);
  gst_query_unref(q);
  gst_caps_unref(caps);
  gst_harness_teardown(h);
  TearDownBus();
}

TEST_F(Elements, ForeignBuffersAreCopiedCountedAndWarnedOnce) {
  GstHarness* h = make_sink();
  gst_harness_play(h);
  gst_harness_set_src_caps_str(h, kCaps);
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(gst_harness_push(h, gst_buffer_new_allocate(nullptr, 64 * 48 * 4, nullptr)),
              GST_FLOW_OK);
  EXPECT_EQ(stat(h->element, "copies"), 5u);
  auto warnings = messages(GST_MESSAGE_WARNING);
  ASSERT_EQ(warnings.size(), 1u) << "copies must be announced, once";
  EXPECT_NE(error_text(warnings[0]).find("copied"), std::string::npos);
  for (auto* m : warnings) gst_message_unref(m);
  gst_harness_teardown(h);
  TearDownBus();
}

// Another element's slot pool (rg10tobgra keeps one when downstream offers none) numbers its
// generations from 1 too: its buffers are foreign memory, copied, never sent as our slots (the
// consumer would take them for ours of the same index).
// Issue 24, item 9: with no caps written, upstream picks a format display sinks take (BGRx),
// not GStreamer's first (ABGR64_LE), so `videotestsrc ! cudasink-ipc` | `cudasrc-ipc !
// ximagesink` works as README writes it.
// The format a host-memory cudasink-ipc negotiates behind `upstream` (a pipeline fragment).
static std::string negotiated_format(const std::string& upstream, const std::string& socket) {
  GstElement* pipeline = gst_parse_launch(
      (upstream + " ! cudasink-ipc name=sink memory=host sync=false socket-path=" + socket).c_str(),
      nullptr);
  if (!pipeline) return "(no pipeline)";
  GstBus* bus = gst_element_get_bus(pipeline);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstMessage* m = gst_bus_timed_pop_filtered(
      bus, 10 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  std::string format = "(no EOS)";
  if (m && GST_MESSAGE_TYPE(m) == GST_MESSAGE_EOS) {
    GstElement* sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
    GstPad* pad = gst_element_get_static_pad(sink, "sink");
    GstCaps* caps = gst_pad_get_current_caps(pad);
    format = caps ? gst_structure_get_string(gst_caps_get_structure(caps, 0), "format") : "(none)";
    if (caps) gst_caps_unref(caps);
    gst_object_unref(pad);
    gst_object_unref(sink);
  }
  if (m) gst_message_unref(m);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(pipeline);
  return format;
}

TEST_F(Elements, UpstreamFreeToChooseGetsAFormatDisplaysTake) {
  EXPECT_EQ(negotiated_format("videotestsrc num-buffers=2", socket_), "BGRx");
}

// An upstream that leads with an 8-bit format has a preference (rg10tobgra: BGRA), which the
// sink keeps: a consumer may ask for exactly that format.
TEST_F(Elements, UpstreamWithAPreferenceOfItsOwnKeepsIt) {
  EXPECT_EQ(
      negotiated_format("videotestsrc num-buffers=2 ! video/x-raw,format={BGRA,BGRx}", socket_),
      "BGRA");
}

// Issue 24, defect 7: the copy warning names the element that made the frames, not the queue
// that only handed them on.
TEST_F(Elements, CopyWarningNamesTheTeeNotTheQueueBehindIt) {
  GstElement* pipeline = gst_parse_launch(
      ("videotestsrc num-buffers=5 ! video/x-raw,width=64,height=48 ! tee name=t ! queue ! "
       "cudasink-ipc name=sink memory=host sync=false socket-path=" +
       socket_ + " t. ! queue ! fakesink sync=false")
          .c_str(),
      nullptr);
  ASSERT_NE(pipeline, nullptr);
  GstBus* bus = gst_element_get_bus(pipeline);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  std::string warning;
  for (;;) {
    GstMessage* m = gst_bus_timed_pop_filtered(
        bus, 10 * GST_SECOND,
        static_cast<GstMessageType>(GST_MESSAGE_WARNING | GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
    ASSERT_NE(m, nullptr) << "no EOS";
    const GstMessageType type = GST_MESSAGE_TYPE(m);
    if (type == GST_MESSAGE_WARNING) warning = error_text(m);
    gst_message_unref(m);
    ASSERT_NE(type, GST_MESSAGE_ERROR);
    if (type == GST_MESSAGE_EOS) break;
  }
  GstElement* sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  const guint64 copies = stat(sink, "copies");
  gst_object_unref(sink);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(pipeline);
  ASSERT_GT(copies, 0u) << "the tee's frames were not copied: nothing to warn about";
  EXPECT_NE(warning.find("'t' (through 'queue"), std::string::npos) << warning;
}

TEST_F(Elements, SlotsOfAnotherElementsPoolAreCopiedDespiteTheSameGeneration) {
  GstHarness* other = make_sink("socket-path=" + dir_ + "/other.sock");
  GstBus* other_bus = bus_;
  bus_ = nullptr;
  gst_harness_play(other);
  gst_harness_set_src_caps_str(other, kCaps);
  GstHarness* h = make_sink();
  gst_harness_play(h);
  gst_harness_set_src_caps_str(h, kCaps);
  // The other sink's pool, as upstream of it would get it (already configured by the sink).
  GstBufferPool* pool = nullptr;
  {
    GstCaps* caps = gst_caps_from_string(kCaps);
    GstQuery* q = gst_query_new_allocation(caps, TRUE);
    if (gst_pad_peer_query(other->srcpad, q) && gst_query_get_n_allocation_pools(q) > 0)
      gst_query_parse_nth_allocation_pool(q, 0, &pool, nullptr, nullptr, nullptr);
    gst_query_unref(q);
    gst_caps_unref(caps);
  }
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE));
  for (int i = 0; i < 3; ++i) {
    GstBuffer* b = nullptr;
    ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &b, nullptr), GST_FLOW_OK);
    ASSERT_EQ(gst_harness_push(h, b), GST_FLOW_OK);
  }
  EXPECT_EQ(stat(h->element, "frames-rendered"), 3u);
  EXPECT_EQ(stat(h->element, "copies"), 3u);
  for (auto* m : messages(GST_MESSAGE_WARNING)) gst_message_unref(m);
  gst_buffer_pool_set_active(pool, FALSE);
  gst_object_unref(pool);
  gst_harness_teardown(h);
  gst_harness_teardown(other);
  gst_object_unref(other_bus);
  TearDownBus();
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

// A sink that cannot start posts one error, the one naming the cause: not also basesink's
// generic "some element failed to post a proper error message" (issue 43, item 10).
TEST_F(Elements, FailedSinkStartPostsOneErrorNamingTheCause) {
  GstElement* pipeline = gst_parse_launch(
      "videotestsrc ! cudasink-ipc memory=host socket-path=/nonexistent-cudaipc-dir/x.sock",
      nullptr);
  ASSERT_NE(pipeline, nullptr);
  EXPECT_EQ(gst_element_set_state(pipeline, GST_STATE_PAUSED), GST_STATE_CHANGE_FAILURE);
  GstBus* bus = gst_element_get_bus(pipeline);
  std::vector<std::string> errors;
  while (GstMessage* m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR)) {
    errors.push_back(error_text(m));
    gst_message_unref(m);
  }
  ASSERT_EQ(errors.size(), 1u) << (errors.size() > 1 ? errors[1] : "");
  EXPECT_NE(errors[0].find("/nonexistent-cudaipc-dir/x.sock"), std::string::npos) << errors[0];
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
}

TEST_F(Elements, RequireZeroCopyRefusesForeignBuffersNamingUpstream) {
  GstHarness* h = make_sink("copy-policy=require-zero-copy");
  gst_harness_play(h);
  gst_harness_set_src_caps_str(h, kCaps);
  EXPECT_EQ(gst_harness_push(h, gst_buffer_new_allocate(nullptr, 64 * 48 * 4, nullptr)),
            GST_FLOW_ERROR);
  auto errors = messages(GST_MESSAGE_ERROR);
  ASSERT_EQ(errors.size(), 1u);
  const std::string text = error_text(errors[0]);
  EXPECT_NE(text.find("require-zero-copy"), std::string::npos) << text;
  gchar* upstream = gst_pad_get_name(h->srcpad);
  EXPECT_NE(text.find(upstream), std::string::npos) << text;
  g_free(upstream);
  EXPECT_EQ(stat(h->element, "copies"), 0u);
  for (auto* m : errors) gst_message_unref(m);
  gst_harness_teardown(h);
  TearDownBus();
}

// Slots retired under stuck consumers are replaced under new indices, never reused within a
// generation. Before the protocol's kMaxSlots indices run out, the sink rolls over to a new
// generation of the same caps: consumers are told (CAPS), upstream writing into the old pool is
// asked to renegotiate (RECONFIGURE) and its frames meanwhile copied - no error, no warning.
TEST_F(Elements, RollsOverToANewGenerationBeforeSlotIndicesRunOut) {
  GstHarness* h = make_sink("release-timeout=0");
  gst_harness_play(h);
  gst_harness_set_src_caps_str(h, kCaps);
  GstCaps* caps = gst_caps_from_string(kCaps);
  auto propose = [&]() {
    GstQuery* q = gst_query_new_allocation(caps, TRUE);
    GstBufferPool* pool = nullptr;
    if (gst_pad_peer_query(h->srcpad, q) && gst_query_get_n_allocation_pools(q) > 0)
      gst_query_parse_nth_allocation_pool(q, 0, &pool, nullptr, nullptr, nullptr);
    gst_query_unref(q);
    return pool;
  };
  auto push_from = [&](GstBufferPool* pool, guint8 fill) {
    GstBuffer* b = nullptr;
    if (gst_buffer_pool_acquire_buffer(pool, &b, nullptr) != GST_FLOW_OK) return GST_FLOW_ERROR;
    gst_buffer_memset(b, 0, fill, gst_buffer_get_size(b));
    return gst_harness_push(h, b);
  };

  // A raw consumer that holds what it gets (release-timeout=0: never disconnected).
  auto channel = cipc::Channel::connect(socket_);
  ASSERT_TRUE(channel.is_ok()) << channel.error().message;
  cipc::Hello hello;
  hello.memory_kind = cipc::MemoryKind::kHost;
  ASSERT_EQ(channel->send(cipc::Message{hello}), cipc::IoResult::kOk);
  ASSERT_TRUE(eventually([&] {
    guint n = 0;
    g_object_get(h->element, "num-consumers", &n, nullptr);
    return n == 1;
  }));
  // (type, generation) of what the consumer received, in order.
  std::vector<std::pair<cipc::MessageType, uint64_t>> seen;
  auto receive = [&](size_t count) {
    while (seen.size() < count && channel->wait_readable(5000)) {
      cipc::Packet packet;
      if (channel->receive(packet) != cipc::IoResult::kOk) return;
      cipc::DecodeResult d = cipc::decode(packet.bytes.data(), packet.bytes.size());
      if (!d) return;
      const cipc::Message& m = d.message();
      uint64_t generation = 0;
      if (auto* c = std::get_if<cipc::Caps>(&m.body)) generation = c->generation;
      if (auto* sl = std::get_if<cipc::Slot>(&m.body)) generation = sl->generation;
      if (auto* f = std::get_if<cipc::Frame>(&m.body)) generation = f->generation;
      seen.emplace_back(m.type(), generation);
    }
  };

  GstBufferPool* old_pool = propose();
  ASSERT_NE(old_pool, nullptr);
  ASSERT_TRUE(gst_buffer_pool_set_active(old_pool, TRUE));
  ASSERT_EQ(push_from(old_pool, 1), GST_FLOW_OK);
  EXPECT_EQ(stat(h->element, "pool-generation"), 1u);
  // What retirement does: a TAG_MEMORY buffer is freed, its replacement gets a new index. Up to
  // and past kMaxSlots, without a frame in between (upstream allocating ahead of the sink).
  for (guint i = 0; i < cipc::kMaxSlots; ++i) {
    GstBuffer* b = nullptr;
    ASSERT_EQ(gst_buffer_pool_acquire_buffer(old_pool, &b, nullptr), GST_FLOW_OK) << i;
    GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_TAG_MEMORY);
    gst_buffer_unref(b);
  }
  while (gst_harness_upstream_events_in_queue(h) > 0)
    gst_event_unref(gst_harness_pull_upstream_event(h));

  // The next frame (in a slot past the index limit) starts generation 2 and is copied into it.
  ASSERT_EQ(push_from(old_pool, 2), GST_FLOW_OK);
  EXPECT_EQ(stat(h->element, "pool-generation"), 2u);
  EXPECT_EQ(stat(h->element, "pool-rollovers"), 1u);
  EXPECT_EQ(stat(h->element, "copies"), 1u);
  ASSERT_EQ(gst_harness_upstream_events_in_queue(h), 1u);
  GstEvent* event = gst_harness_pull_upstream_event(h);
  EXPECT_EQ(GST_EVENT_TYPE(event), GST_EVENT_RECONFIGURE);
  gst_event_unref(event);
  // Still from the old pool (upstream has not renegotiated yet): copied, asked only once.
  ASSERT_EQ(push_from(old_pool, 3), GST_FLOW_OK);
  EXPECT_EQ(stat(h->element, "copies"), 2u);
  EXPECT_EQ(gst_harness_upstream_events_in_queue(h), 0u);

  // Renegotiated: the current pool is a new one, written into without a copy.
  GstBufferPool* new_pool = propose();
  ASSERT_NE(new_pool, nullptr);
  EXPECT_NE(new_pool, old_pool);
  ASSERT_TRUE(gst_buffer_pool_set_active(new_pool, TRUE));
  gst_buffer_pool_set_active(old_pool, FALSE);
  ASSERT_EQ(push_from(new_pool, 4), GST_FLOW_OK);
  EXPECT_EQ(stat(h->element, "copies"), 2u);
  EXPECT_EQ(stat(h->element, "frames-rendered"), 4u);

  // The consumer saw generation 1 (one frame), then CAPS 2 and generation 2 only: each of the
  // three later frames in a slot of its own (the first two are held).
  receive(11);
  using T = cipc::MessageType;
  const std::vector<std::pair<cipc::MessageType, uint64_t>> expected = {
      {T::kWelcome, 0}, {T::kCaps, 1}, {T::kSlot, 1},  {T::kFrame, 1}, {T::kCaps, 2}, {T::kSlot, 2},
      {T::kFrame, 2},   {T::kSlot, 2}, {T::kFrame, 2}, {T::kSlot, 2},  {T::kFrame, 2}};
  EXPECT_EQ(seen, expected);
  auto errors = messages(static_cast<GstMessageType>(GST_MESSAGE_ERROR | GST_MESSAGE_WARNING));
  EXPECT_TRUE(errors.empty()) << error_text(errors[0]);
  for (auto* m : errors) gst_message_unref(m);

  gst_buffer_pool_set_active(new_pool, FALSE);
  gst_object_unref(new_pool);
  gst_object_unref(old_pool);
  gst_caps_unref(caps);
  gst_harness_teardown(h);
  TearDownBus();
}

TEST_F(Elements, LiveSocketIsRefusedStaleOneReplacedOtherFilesUntouched) {
  GstHarness* first = make_sink();
  gst_harness_play(first);
  GstBus* first_bus = bus_;
  bus_ = nullptr;

  GstElement* second = gst_element_factory_make("cudasink-ipc", nullptr);
  set_properties(second, "memory=host socket-path=" + socket_);
  bus_ = gst_bus_new();
  gst_element_set_bus(second, bus_);
  EXPECT_EQ(gst_element_set_state(second, GST_STATE_PAUSED), GST_STATE_CHANGE_FAILURE);
  auto errors = messages(GST_MESSAGE_ERROR);
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(error_text(errors[0]).find("Another producer"), std::string::npos)
      << error_text(errors[0]);
  for (auto* m : errors) gst_message_unref(m);
  gst_element_set_state(second, GST_STATE_NULL);
  gst_harness_teardown(first);
  gst_object_unref(first_bus);

  // A socket file nobody listens on (a producer that died): replaced.
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
  EXPECT_EQ(gst_element_set_state(second, GST_STATE_PAUSED), GST_STATE_CHANGE_ASYNC);
  gst_element_set_state(second, GST_STATE_NULL);
  EXPECT_NE(::access(socket_.c_str(), F_OK), 0);

  // A regular file at the path is somebody's data: refused, left alone.
  { std::ofstream(socket_) << "keep me"; }
  EXPECT_EQ(gst_element_set_state(second, GST_STATE_PAUSED), GST_STATE_CHANGE_FAILURE);
  errors = messages(GST_MESSAGE_ERROR);
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(error_text(errors[0]).find(socket_), std::string::npos);
  for (auto* m : errors) gst_message_unref(m);
  std::string content;
  std::getline(std::ifstream(socket_), content);
  EXPECT_EQ(content, "keep me");
  gst_element_set_state(second, GST_STATE_NULL);
  gst_object_unref(second);
  TearDownBus();
}

TEST_F(Elements, UnusableSocketPathIsAClearError) {
  socket_ = dir_ + "/no/such/dir/s.sock";
  GstElement* e = gst_element_factory_make("cudasink-ipc", nullptr);
  set_properties(e, "memory=host socket-path=" + socket_);
  bus_ = gst_bus_new();
  gst_element_set_bus(e, bus_);
  EXPECT_EQ(gst_element_set_state(e, GST_STATE_PAUSED), GST_STATE_CHANGE_FAILURE);
  auto errors = messages(GST_MESSAGE_ERROR);
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(error_text(errors[0]).find(socket_), std::string::npos) << error_text(errors[0]);
  for (auto* m : errors) gst_message_unref(m);
  gst_element_set_state(e, GST_STATE_NULL);
  gst_object_unref(e);
  TearDownBus();
  socket_ = dir_ + "/s.sock";
}

// Producer (harness) and consumer (pipeline) in one process: the claim lives on the buffer.
TEST_F(Elements, ConsumerBufferKeepsClaimUntilLastReferenceAndIsReadOnly) {
  GstHarness* h = make_sink();
  gst_harness_play(h);
  gst_harness_set_src_caps_str(h, kCaps);

  // fakesink hands each buffer to us; we keep references as an application would.
  struct Held {
    std::mutex mutex;
    std::vector<GstBuffer*> buffers;
  } held;
  GstElement* pipeline = gst_parse_launch(
      ("cudasrc-ipc socket-path=" + socket_ +
       " ! fakesink name=out sync=false signal-handoffs=true enable-last-sample=false")
          .c_str(),
      nullptr);
  ASSERT_NE(pipeline, nullptr);
  GstElement* fakesink = gst_bin_get_by_name(GST_BIN(pipeline), "out");
  g_signal_connect(fakesink, "handoff",
                   G_CALLBACK(+[](GstElement*, GstBuffer* b, GstPad*, gpointer data) {
                     auto* h = static_cast<Held*>(data);
                     std::lock_guard<std::mutex> lock(h->mutex);
                     h->buffers.push_back(gst_buffer_ref(b));
                   }),
                   &held);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  ASSERT_TRUE(eventually([&] {
    guint n = 0;
    g_object_get(h->element, "num-consumers", &n, nullptr);
    return n == 1;
  }));

  // Frames written through the proposed pool, with a recognisable byte each.
  GstCaps* caps = gst_caps_from_string(kCaps);
  GstQuery* q = gst_query_new_allocation(caps, TRUE);
  ASSERT_TRUE(gst_pad_peer_query(h->srcpad, q));
  GstBufferPool* pool = nullptr;
  gst_query_parse_nth_allocation_pool(q, 0, &pool, nullptr, nullptr, nullptr);
  gst_query_unref(q);
  ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE));
  for (int i = 0; i < 3; ++i) {
    GstBuffer* b = nullptr;
    ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &b, nullptr), GST_FLOW_OK);
    gst_buffer_memset(b, 0, static_cast<guint8>(0x10 + i), gst_buffer_get_size(b));
    GST_BUFFER_PTS(b) = i * GST_SECOND / 30;
    ASSERT_EQ(gst_harness_push(h, b), GST_FLOW_OK);
  }
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(held.mutex);
    return held.buffers.size() == 3;
  }));
  std::vector<GstBuffer*> buffers;
  {
    std::lock_guard<std::mutex> lock(held.mutex);
    buffers.swap(held.buffers);
  }
  for (int i = 0; i < 3; ++i) {
    GstBuffer* b = buffers[i];
    GstMapInfo map;
    ASSERT_TRUE(gst_buffer_map(b, &map, GST_MAP_READ));
    EXPECT_EQ(map.data[0], 0x10 + i);
    EXPECT_EQ(map.data[map.size - 1], 0x10 + i);
    gst_buffer_unmap(b, &map);
    GstMemory* mem = gst_buffer_peek_memory(b, 0);
    EXPECT_TRUE(GST_MEMORY_IS_READONLY(mem));
    EXPECT_FALSE(gst_memory_map(mem, &map, GST_MAP_WRITE)) << "shared slots must be read-only";
  }
  // Three frames held downstream = three claims at the producer.
  EXPECT_EQ(stat(h->element, "claims-outstanding"), 3u);
  // A copy of a buffer shares its memory, and with it the claim.
  GstBuffer* copy = gst_buffer_copy(buffers[0]);
  for (auto* b : buffers) gst_buffer_unref(b);
  EXPECT_TRUE(eventually([&] { return stat(h->element, "claims-outstanding") == 1; }));
  EXPECT_EQ(stat(h->element, "releases"), 2u);
  gst_buffer_unref(copy);
  EXPECT_TRUE(eventually([&] { return stat(h->element, "claims-outstanding") == 0; }));
  EXPECT_EQ(stat(h->element, "releases"), 3u);

  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(fakesink);
  gst_object_unref(pipeline);
  gst_buffer_pool_set_active(pool, FALSE);
  gst_object_unref(pool);
  gst_caps_unref(caps);
  gst_harness_teardown(h);
  TearDownBus();
}

// The field names a stats blurb lists: "a, b (why, more), c" -> a, b, c.
static std::vector<std::string> documented_fields(GstElement* e, const char* property) {
  GParamSpec* spec = g_object_class_find_property(G_OBJECT_GET_CLASS(e), property);
  const std::string blurb = spec ? g_param_spec_get_blurb(spec) : "";
  std::vector<std::string> fields;
  std::string item;
  int depth = 0;
  for (size_t i = 0; i <= blurb.size(); ++i) {
    const char ch = i < blurb.size() ? blurb[i] : ',';
    if (ch == '(') ++depth;
    if (ch == ')') --depth;
    if (ch == ',' && depth == 0) {
      const size_t begin = item.find_first_not_of(' ');
      if (begin != std::string::npos) {
        const std::string name = item.substr(begin, item.find_first_of(" (", begin) - begin);
        fields.push_back(name);
      }
      item.clear();
    } else {
      item += ch;
    }
  }
  return fields;
}

// Issue 24, defect 10: every field the stats blurb (and docs/elements.md) lists is in the stats
// property and in the stats-interval message alike.
TEST_F(Elements, SourceStatsPropertyAndMessageHaveEveryDocumentedField) {
  GstHarness* h = make_sink();
  gst_harness_play(h);
  gst_harness_set_src_caps_str(h, kCaps);
  GstElement* pipeline = gst_parse_launch(
      ("cudasrc-ipc name=src stats-interval=20 socket-path=" + socket_ + " ! fakesink sync=false")
          .c_str(),
      nullptr);
  ASSERT_NE(pipeline, nullptr);
  GstElement* src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  const std::vector<std::string> fields = documented_fields(src, "stats");
  ASSERT_GE(fields.size(), 10u);
  EXPECT_NE(std::find(fields.begin(), fields.end(), "frames-stale"), fields.end());
  GstBus* bus = gst_element_get_bus(pipeline);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  ASSERT_TRUE(eventually([&] {
    guint n = 0;
    g_object_get(h->element, "num-consumers", &n, nullptr);
    return n == 1;
  }));
  GstMessage* message = nullptr;
  for (int i = 0; i < 200 && !message; ++i) {
    GstBuffer* b = gst_harness_create_buffer(h, 64 * 48 * 4);
    GST_BUFFER_PTS(b) = i * GST_SECOND / 30;
    ASSERT_EQ(gst_harness_push(h, b), GST_FLOW_OK);
    message = gst_bus_timed_pop_filtered(bus, 10 * GST_MSECOND, GST_MESSAGE_ELEMENT);
  }
  ASSERT_NE(message, nullptr) << "no cudasrc-ipc-stats message";
  const GstStructure* posted = gst_message_get_structure(message);
  GstStructure* property = nullptr;
  g_object_get(src, "stats", &property, nullptr);
  ASSERT_NE(property, nullptr);
  for (const std::string& field : fields) {
    EXPECT_TRUE(gst_structure_has_field(property, field.c_str())) << "stats lacks " << field;
    EXPECT_TRUE(gst_structure_has_field(posted, field.c_str()))
        << "the stats-interval message lacks " << field;
  }
  // Host memory: no CUDA context on either side, so neither is an MPS client (the GPU suite
  // checks the true case under run-on-gpu's mps step).
  gboolean mps = TRUE;
  EXPECT_TRUE(gst_structure_get_boolean(property, "cuda-mps", &mps));
  EXPECT_FALSE(mps);
  GstStructure* sink_stats = nullptr;
  g_object_get(h->element, "stats", &sink_stats, nullptr);
  ASSERT_NE(sink_stats, nullptr);
  mps = TRUE;
  EXPECT_TRUE(gst_structure_get_boolean(sink_stats, "cuda-mps", &mps))
      << "sink stats lack cuda-mps";
  EXPECT_FALSE(mps);
  gst_structure_free(sink_stats);
  gst_structure_free(property);
  gst_message_unref(message);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(src);
  gst_object_unref(pipeline);
  gst_harness_teardown(h);
  TearDownBus();
}

TEST_F(Elements, SourceWithoutProducerFailsAfterConnectTimeout) {
  GstElement* pipeline = gst_parse_launch(
      ("cudasrc-ipc connect-timeout=200 socket-path=" + socket_ + " ! fakesink").c_str(), nullptr);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstBus* bus = gst_element_get_bus(pipeline);
  GstMessage* m = gst_bus_timed_pop_filtered(
      bus, 5 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_ERROR | GST_MESSAGE_EOS));
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(GST_MESSAGE_TYPE(m), GST_MESSAGE_ERROR);
  EXPECT_NE(error_text(m).find("No producer is serving"), std::string::npos) << error_text(m);
  gst_message_unref(m);
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
}

TEST_F(Elements, WaitingSourceStopsPromptly) {
  GstElement* pipeline = gst_parse_launch(
      ("cudasrc-ipc reconnect=true socket-path=" + socket_ + " ! fakesink").c_str(), nullptr);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(gst_element_set_state(pipeline, GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3))
      << "unlock must end the wait";
  gst_object_unref(pipeline);
}

TEST_F(Elements, SourceAnswersLatencyAsLive) {
  GstHarness* h = make_sink();
  gst_harness_play(h);
  GstElement* pipeline = gst_parse_launch(
      ("cudasrc-ipc processing-deadline=7000000 socket-path=" + socket_ + " ! fakesink sync=false")
          .c_str(),
      nullptr);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstElement* src = gst_bin_get_by_interface(GST_BIN(pipeline), GST_TYPE_URI_HANDLER);
  if (src) gst_object_unref(src);
  GstIterator* it = gst_bin_iterate_sources(GST_BIN(pipeline));
  GValue v = G_VALUE_INIT;
  ASSERT_EQ(gst_iterator_next(it, &v), GST_ITERATOR_OK);
  GstElement* source = GST_ELEMENT(g_value_get_object(&v));
  GstQuery* q = gst_query_new_latency();
  ASSERT_TRUE(gst_element_query(source, q));
  gboolean live = FALSE;
  GstClockTime min = 0, max = 0;
  gst_query_parse_latency(q, &live, &min, &max);
  EXPECT_TRUE(live);
  EXPECT_EQ(min, 7000000u);
  gst_query_unref(q);
  g_value_unset(&v);
  gst_iterator_free(it);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
  gst_harness_teardown(h);
  TearDownBus();
}

TEST_F(Elements, WaitForConsumerHoldsFramesAndUnlocksOnStop) {
  GstElement* pipeline = gst_parse_launch(
      ("videotestsrc is-live=true ! " + std::string(kCaps) +
       " ! cudasink-ipc name=sink memory=host wait-for-consumer=true socket-path=" + socket_)
          .c_str(),
      nullptr);
  GstElement* sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Blocked on the first frame: nothing rendered while nobody listens.
  EXPECT_LE(stat(sink, "frames-rendered"), 0u);

  GstElement* consumer = gst_parse_launch(
      ("cudasrc-ipc socket-path=" + socket_ + " ! fakesink sync=false").c_str(), nullptr);
  gst_element_set_state(consumer, GST_STATE_PLAYING);
  EXPECT_TRUE(eventually([&] { return stat(sink, "frames-sent") >= 3; }));
  gst_element_set_state(consumer, GST_STATE_NULL);
  gst_object_unref(consumer);

  const auto t0 = std::chrono::steady_clock::now();
  gst_element_set_state(pipeline, GST_STATE_NULL);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  gst_object_unref(sink);
  gst_object_unref(pipeline);
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

// backpressure=block waits in render for a consumer that holds every frame it may; stopping the
// pipeline must end that wait at once (release-timeout=0: only unlock can end it).
TEST_F(Elements, BlockedBackpressureWaitEndsOnStop) {
  GstElement* pipeline = gst_parse_launch(
      ("videotestsrc ! " + std::string(kCaps) +
       " ! cudasink-ipc name=sink memory=host backpressure=block release-timeout=0 "
       "max-in-flight=2 socket-path=" +
       socket_)
          .c_str(),
      nullptr);
  GstElement* sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  ASSERT_TRUE(eventually([&] { return ::access(socket_.c_str(), F_OK) == 0; }));
  // A consumer that takes frames and never releases them.
  auto channel = cipc::Channel::connect(socket_);
  ASSERT_TRUE(channel) << channel.error().message;
  cipc::Hello hello;
  hello.max_in_flight = 2;
  ASSERT_EQ(channel->send(cipc::Message{hello}), cipc::IoResult::kOk);
  EXPECT_TRUE(eventually([&] { return stat(sink, "claims-outstanding") == 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const guint64 rendered = stat(sink, "frames-rendered");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(stat(sink, "frames-rendered"), rendered) << "a blocking sink went on rendering";
  EXPECT_GE(stat(sink, "backpressure-waits"), 1u);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(gst_element_set_state(pipeline, GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3))
      << "stop must end the backpressure wait";
  gst_object_unref(sink);
  gst_object_unref(pipeline);
}

// Whether this machine has an NVIDIA GPU (its driver's control node): the tests of what happens
// without one do not apply there.
bool have_nvidia_gpu() {
  return ::access("/dev/nvidiactl", F_OK) == 0;
}

// Without a GPU (CI), or without the CUDA toolkit at build time, memory=cuda must fail at start
// with a sentence that says why, on both elements - never crash, never hang.
TEST_F(Elements, CudaMemoryWithoutAGpuIsAClearError) {
  if (have_nvidia_gpu()) GTEST_SKIP() << "a GPU is present: covered by tests/gpu";
  struct Case {
    std::string launch;
    std::string expected;
  };
#ifdef CIPC_HAVE_CUDA
  const Case cases[] = {
      {"videotestsrc ! cudasink-ipc memory=cuda socket-path=" + socket_, "No usable CUDA device"},
      {"videotestsrc ! cudasink-ipc memory=cuda cuda-device-id=3 socket-path=" + socket_,
       "No usable CUDA device"}};
#else
  const Case cases[] = {
      {"videotestsrc ! cudasink-ipc memory=cuda socket-path=" + socket_, "memory=cuda"},
      {"cudasrc-ipc memory=cuda socket-path=" + socket_ + " ! fakesink", "memory=cuda"}};
#endif
  for (const Case& c : cases) {
    GstElement* pipeline = gst_parse_launch(c.launch.c_str(), nullptr);
    gst_element_set_state(pipeline, GST_STATE_PLAYING);
    GstBus* bus = gst_element_get_bus(pipeline);
    GstMessage* m = gst_bus_timed_pop_filtered(bus, 5 * GST_SECOND, GST_MESSAGE_ERROR);
    ASSERT_NE(m, nullptr) << c.launch;
    EXPECT_NE(error_text(m).find(c.expected), std::string::npos) << error_text(m);
    gst_message_unref(m);
    gst_object_unref(bus);
    gst_element_set_state(pipeline, GST_STATE_NULL);
    gst_object_unref(pipeline);
    EXPECT_NE(::access(socket_.c_str(), F_OK), 0) << "no socket may be left by a failed start";
  }
}

// A consumer facing a producer that shares CUDA memory, on a machine without a GPU (or without
// CUDA in the build): a clear error naming the reason, and the producer is told why.
TEST_F(Elements, ConsumerWithoutGpuRefusesCudaProducerClearly) {
  if (have_nvidia_gpu()) GTEST_SKIP() << "a GPU is present: covered by tests/gpu";
  auto listener = cipc::Listener::bind(socket_, 0600);
  ASSERT_TRUE(listener) << listener.error().message;
  std::string told;
  std::thread fake([&] {
    cipc::Channel channel;
    for (int i = 0; i < 500 && listener->accept(channel) != cipc::IoResult::kOk; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    cipc::Packet packet;
    for (int i = 0; i < 500 && channel.receive(packet) != cipc::IoResult::kOk; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    cipc::Welcome w;
    w.instance_id = 7;
    w.memory_kind = cipc::MemoryKind::kCuda;
    w.gpu_uuid.fill(0x5a);
    channel.send(cipc::Message{w});
    for (int i = 0; i < 500; ++i) {
      if (channel.receive(packet) == cipc::IoResult::kOk) {
        cipc::DecodeResult d = cipc::decode(packet.bytes.data(), packet.bytes.size());
        if (d && d.message().type() == cipc::MessageType::kError)
          told = std::get<cipc::ErrorMessage>(d.message().body).text;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  GstElement* pipeline =
      gst_parse_launch(("cudasrc-ipc socket-path=" + socket_ + " ! fakesink").c_str(), nullptr);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstBus* bus = gst_element_get_bus(pipeline);
  GstMessage* m = gst_bus_timed_pop_filtered(bus, 10 * GST_SECOND, GST_MESSAGE_ERROR);
  ASSERT_NE(m, nullptr);
  const std::string text = error_text(m);
#ifdef CIPC_HAVE_CUDA
  EXPECT_NE(text.find("this process has no CUDA device"), std::string::npos) << text;
#else
  EXPECT_NE(text.find("built without CUDA"), std::string::npos) << text;
#endif
  gst_message_unref(m);
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
  fake.join();
  EXPECT_NE(told.find("CUDA"), std::string::npos)
      << "the producer was not told why: '" << told << "'";
}

// GStreamer names an instance after its GType: ours are registered so that the default names
// are the element names ("cudasink-ipc0"), not "cudasinkipc0".
// cudaipc:// URIs (gst/urihandler, tested on its own in test_urihandler.cpp) pick the right
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

// kCaps with a string field that makes the caps, as the sink announces them, `length` bytes long.
static GstCaps* caps_of_length(size_t length) {
  auto text_of = [](GstCaps* caps) {
    gchar* t = gst_caps_to_string(caps);
    const std::string out = t;
    g_free(t);
    return out;
  };
  GstCaps* caps = gst_caps_from_string(kCaps);
  gst_caps_set_simple(caps, "note", G_TYPE_STRING, "a", nullptr);
  const size_t base = text_of(caps).size() - 1;
  EXPECT_LT(base, length);
  gst_caps_set_simple(caps, "note", G_TYPE_STRING, std::string(length - base, 'a').c_str(),
                      nullptr);
  EXPECT_EQ(text_of(caps).size(), length);
  return caps;
}

// An appsrc pipeline into cudasink-ipc with `caps`; one frame pushed.
static GstElement* appsrc_into_sink(GstCaps* caps, const std::string& sink_properties) {
  GstElement* pipeline = gst_parse_launch(
      ("appsrc name=src format=time ! cudasink-ipc name=sink " + sink_properties).c_str(), nullptr);
  GstElement* src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  g_object_set(src, "caps", caps, nullptr);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstBuffer* frame = gst_buffer_new_allocate(nullptr, 64 * 48 * 4, nullptr);
  GST_BUFFER_PTS(frame) = 0;
  GstFlowReturn ret = GST_FLOW_ERROR;
  g_signal_emit_by_name(src, "push-buffer", frame, &ret);
  EXPECT_EQ(ret, GST_FLOW_OK);
  gst_buffer_unref(frame);
  gst_object_unref(src);
  return pipeline;
}

// Issue 43, item 8: caps longer than a CAPS message carries were accepted and sent; every consumer
// then dropped the producer as misbehaving, and with wait-for-consumer=true the producer waited
// for ever. They are refused at negotiation, naming the limit and their length.
TEST_F(Elements, CapsLongerThanTheProtocolCarriesAreRefusedNamingTheLimit) {
  const size_t length = cipc::kMaxCapsLength + 1;
  GstCaps* caps = caps_of_length(length);
  GstElement* pipeline =
      appsrc_into_sink(caps, "memory=host wait-for-consumer=true socket-path=" + socket_);
  GstBus* bus = gst_element_get_bus(pipeline);
  GstMessage* m = gst_bus_timed_pop_filtered(bus, 10 * GST_SECOND, GST_MESSAGE_ERROR);
  EXPECT_NE(m, nullptr) << "no error: the caps were accepted";
  if (m) {
    const std::string text = error_text(m);
    EXPECT_NE(text.find(std::to_string(cipc::kMaxCapsLength)), std::string::npos) << text;
    EXPECT_NE(text.find(std::to_string(length)), std::string::npos) << text;
    GstElement* sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
    EXPECT_EQ(GST_MESSAGE_SRC(m), GST_OBJECT(sink)) << "posted by " << GST_MESSAGE_SRC_NAME(m);
    gst_object_unref(sink);
    gst_message_unref(m);
  }
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
  gst_caps_unref(caps);
}

// Caps of exactly the limit still stream to a consumer.
TEST_F(Elements, CapsOfTheProtocolsLimitStillStream) {
  GstCaps* caps = caps_of_length(cipc::kMaxCapsLength);
  GstElement* pipeline =
      appsrc_into_sink(caps, "memory=host wait-for-consumer=true socket-path=" + socket_);
  GstElement* sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  GstElement* consumer = gst_parse_launch(
      ("cudasrc-ipc socket-path=" + socket_ + " ! fakesink sync=false").c_str(), nullptr);
  gst_element_set_state(consumer, GST_STATE_PLAYING);
  EXPECT_TRUE(eventually([&] { return stat(sink, "frames-sent") >= 1; }));
  for (GstElement* p : {pipeline, consumer}) {
    GstBus* bus = gst_element_get_bus(p);
    GstMessage* error = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
    EXPECT_EQ(error, nullptr) << error_text(error);
    if (error) gst_message_unref(error);
    gst_object_unref(bus);
  }
  gst_element_set_state(consumer, GST_STATE_NULL);
  gst_object_unref(consumer);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(sink);
  gst_object_unref(pipeline);
  gst_caps_unref(caps);
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

// processing-deadline is reported as the latency, which GStreamer requires to be a valid clock
// time: 18446744073709551615 (GST_CLOCK_TIME_NONE) used to be accepted and hit a
// gst_query_set_latency assertion. The range stops well before it.
TEST(ElementProperties, ProcessingDeadlineCannotBeAnInvalidClockTime) {
  gst_init(nullptr, nullptr);
  GstElement* src = gst_element_factory_make("cudasrc-ipc", nullptr);
  ASSERT_NE(src, nullptr);
  GParamSpec* spec = g_object_class_find_property(G_OBJECT_GET_CLASS(src), "processing-deadline");
  ASSERT_NE(spec, nullptr);
  const guint64 max = G_PARAM_SPEC_UINT64(spec)->maximum;
  EXPECT_TRUE(GST_CLOCK_TIME_IS_VALID(max));
  EXPECT_LE(max, 3600 * GST_SECOND);
  g_object_set(src, "processing-deadline", max, nullptr);
  GstQuery* q = gst_query_new_latency();
  EXPECT_TRUE(gst_element_query(src, q));
  GstClockTime min = 0;
  gst_query_parse_latency(q, nullptr, &min, nullptr);
  EXPECT_EQ(min, max);
  gst_query_unref(q);
  gst_object_unref(src);
}

}  // namespace
