// SPDX-License-Identifier: LGPL-2.1-or-later
// cudasrc-ipc as GStreamer sees it, in one process: claims that live as long as downstream
// holds a buffer, its stats, connect-timeout and a prompt stop, latency, processing-deadline, and
// the clear error when a CUDA producer meets a consumer without a GPU. Cross-process behaviour is
// in tests/e2e.
#include "elements_fixture.h"

namespace {

using namespace cipc_test;

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
