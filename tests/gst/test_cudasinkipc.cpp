// SPDX-License-Identifier: LGPL-2.1-or-later
// cudasink-ipc as GStreamer sees it, in one process: its defaults and socket file, the slot
// pool it offers and the copies it counts and warns about, the caps it prefers, generations,
// backpressure and wait-for-consumer, and the clear errors for bad settings, socket paths and
// caps the protocol cannot carry. Cross-process behaviour is in tests/e2e.
#include <map>
#include <set>

#include "elements_fixture.h"

namespace {

using namespace cipc_test;

// A consumer that says HELLO (host memory) and then reads nothing, attached once `sink` counts it:
// frames that need a copy are copied only while someone could receive them.
std::unique_ptr<cipc::Channel> attach_silent_consumer(GstElement* sink, const std::string& socket) {
  auto channel = cipc::Channel::connect(socket);
  EXPECT_TRUE(channel.is_ok()) << channel.error().message;
  if (!channel.is_ok()) return nullptr;
  cipc::Hello hello;
  hello.memory_kind = cipc::MemoryKind::kHost;
  EXPECT_EQ(channel->send(cipc::Message{hello}), cipc::IoResult::kOk);
  EXPECT_TRUE(eventually([&] {
    guint n = 0;
    g_object_get(sink, "num-consumers", &n, nullptr);
    return n == 1;
  }));
  return std::make_unique<cipc::Channel>(std::move(channel.value()));
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

// Pushes `n` frames in memory of no pool: each needs a copy to be shared.
void push_foreign(GstHarness* h, int n) {
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(gst_harness_push(h, gst_buffer_new_allocate(nullptr, 64 * 48 * 4, nullptr)),
              GST_FLOW_OK);
}

// The warning that frames are copied: there, once.
void expect_one_copy_warning(const std::vector<GstMessage*>& warnings) {
  EXPECT_EQ(warnings.size(), 1u) << "copies must be announced, once";
  if (!warnings.empty()) {
    GError* error = nullptr;
    gst_message_parse_warning(warnings[0], &error, nullptr);
    EXPECT_NE(std::string(error ? error->message : "").find("copied"), std::string::npos);
    g_clear_error(&error);
  }
  for (auto* m : warnings) gst_message_unref(m);
}

TEST_F(Elements, ForeignBuffersAreCopiedCountedAndWarnedOnce) {
  GstHarness* h = make_sink();
  gst_harness_play(h);
  gst_harness_set_src_caps_str(h, kCaps);
  auto consumer = attach_silent_consumer(h->element, socket_);
  ASSERT_TRUE(consumer);
  push_foreign(h, 5);
  EXPECT_EQ(stat(h->element, "copies"), 5u);
  expect_one_copy_warning(messages(GST_MESSAGE_WARNING));
  gst_harness_teardown(h);
  TearDownBus();
}

// No work for nobody (issue 46): while no consumer is attached a frame that would have to be
// copied in is not copied, and counts as dropped; the copy warning still comes, once, so the
// user learns of the copies before anyone consumes. A consumer attaching starts the copies.
TEST_F(Elements, WithNoConsumerForeignFramesAreNotCopiedButCountedAsDropped) {
  GstHarness* h = make_sink();
  gst_harness_play(h);
  gst_harness_set_src_caps_str(h, kCaps);
  push_foreign(h, 5);
  EXPECT_EQ(stat(h->element, "frames-rendered"), 5u);
  EXPECT_EQ(stat(h->element, "copies"), 0u) << "copied for nobody";
  EXPECT_EQ(stat(h->element, "frames-dropped"), 5u);
  EXPECT_EQ(stat(h->element, "frames-sent"), 0u);
  auto consumer = attach_silent_consumer(h->element, socket_);
  ASSERT_TRUE(consumer);
  push_foreign(h, 3);
  EXPECT_EQ(stat(h->element, "copies"), 3u);
  EXPECT_EQ(stat(h->element, "frames-sent"), 3u);
  EXPECT_EQ(stat(h->element, "frames-dropped"), 5u);
  expect_one_copy_warning(messages(GST_MESSAGE_WARNING));
  gst_harness_teardown(h);
  TearDownBus();
}

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

// Issue 24, item 9: with no caps written, upstream picks a format display sinks take (BGRx),
// not GStreamer's first (ABGR64_LE), so `videotestsrc ! cudasink-ipc` | `cudasrc-ipc !
// ximagesink` works as README writes it.
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
  // No consumer is attached: the frames that needed a copy were dropped instead of copied.
  const guint64 needed_copies = stat(sink, "copies") + stat(sink, "frames-dropped");
  gst_object_unref(sink);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(pipeline);
  ASSERT_GT(needed_copies, 0u) << "the tee's frames needed no copy: nothing to warn about";
  EXPECT_NE(warning.find("'t' (through 'queue"), std::string::npos) << warning;
}

// Another element's slot pool (rg10tobgra keeps one when downstream offers none) numbers its
// generations from 1 too: its buffers are foreign memory, copied, never sent as our slots (the
// consumer would take them for ours of the same index).
TEST_F(Elements, SlotsOfAnotherElementsPoolAreCopiedDespiteTheSameGeneration) {
  GstHarness* other = make_sink("socket-path=" + dir_ + "/other.sock");
  GstBus* other_bus = bus_;
  bus_ = nullptr;
  gst_harness_play(other);
  gst_harness_set_src_caps_str(other, kCaps);
  GstHarness* h = make_sink();
  gst_harness_play(h);
  gst_harness_set_src_caps_str(h, kCaps);
  auto consumer = attach_silent_consumer(h->element, socket_);
  ASSERT_TRUE(consumer);
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
  // What the consumer received, in order: SLOTs apart, (type, generation) of everything else;
  // every FRAME must name a slot of its generation sent before it.
  std::vector<std::pair<cipc::MessageType, uint64_t>> seen;
  std::map<uint64_t, size_t> slots_seen;  // by generation
  std::set<std::pair<uint64_t, uint32_t>> slots_given;
  auto receive = [&](size_t frames) {
    size_t frames_seen = 0;
    while (frames_seen < frames && channel->wait_readable(5000)) {
      cipc::Packet packet;
      if (channel->receive(packet) != cipc::IoResult::kOk) return;
      cipc::DecodeResult d = cipc::decode(packet.bytes.data(), packet.bytes.size());
      if (!d) return;
      const cipc::Message& m = d.message();
      if (auto* sl = std::get_if<cipc::Slot>(&m.body)) {
        ++slots_seen[sl->generation];
        slots_given.insert({sl->generation, sl->index});
        continue;
      }
      uint64_t generation = 0;
      if (auto* c = std::get_if<cipc::Caps>(&m.body)) generation = c->generation;
      if (auto* f = std::get_if<cipc::Frame>(&m.body)) {
        generation = f->generation;
        ++frames_seen;
        EXPECT_TRUE(slots_given.count({f->generation, f->slot}))
            << "a frame in slot " << f->slot << " of generation " << f->generation
            << " that was not sent first";
      }
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

  // The consumer saw generation 1 (one frame), then CAPS 2 and generation 2 only. Slots went
  // ahead of their frames (issue 46) as the pools made them, but not all 4096 of generation 1
  // to a consumer that read nothing meanwhile: slots not needed yet leave its socket room for
  // CAPS 2 and the frames.
  receive(4);
  using T = cipc::MessageType;
  const std::vector<std::pair<cipc::MessageType, uint64_t>> expected = {
      {T::kWelcome, 0}, {T::kCaps, 1},  {T::kFrame, 1}, {T::kCaps, 2},
      {T::kFrame, 2},   {T::kFrame, 2}, {T::kFrame, 2}};
  EXPECT_EQ(seen, expected);
  EXPECT_GE(slots_seen[1], 1u);
  EXPECT_LT(slots_seen[1], 1000u) << "slots not needed yet filled the consumer's socket";
  EXPECT_GE(slots_seen[2], 3u);
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

}  // namespace
