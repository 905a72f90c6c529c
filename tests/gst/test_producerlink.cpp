// SPDX-License-Identifier: LGPL-2.1-or-later
// What ties cudasink-ipc to its producer (gst/ipcsink/producerlink), without the plugin or a
// running pipeline: the slots a bounded pool leaves consumers, the writer's flush reaching the
// producer, a published buffer's hold, and which producer events the user hears of.
#include <gst/gst.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "ipcsink/producerlink.h"

namespace {

using cipc_gst::ProducerLink;

class SinkProducerLink : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }
};

// The writer keeps two slots of a bounded pool to go on with: a pool of 6 leaves consumers 4, and
// however small the pool, consumers are left one; an unbounded pool (0) leaves them no limit.
TEST_F(SinkProducerLink, ConsumersMayHoldAllButTheWritersTwoSlotsOfABoundedPool) {
  EXPECT_EQ(ProducerLink::kWriterSlots, 2u);
  EXPECT_EQ(ProducerLink::consumer_slot_budget(0), 0u);
  EXPECT_EQ(ProducerLink::consumer_slot_budget(1), 1u);
  EXPECT_EQ(ProducerLink::consumer_slot_budget(2), 1u);
  EXPECT_EQ(ProducerLink::consumer_slot_budget(3), 1u);
  EXPECT_EQ(ProducerLink::consumer_slot_budget(4), 2u);
  EXPECT_EQ(ProducerLink::consumer_slot_budget(6), 4u);
  EXPECT_EQ(ProducerLink::consumer_slot_budget(64), 62u);
}

// Upstream's pool outlives the element: its calls find no producer and do nothing, but its
// flushing is remembered until the element serves again.
TEST_F(SinkProducerLink, WithoutAProducerCallsDoNothingAndFlushingIsForgottenWhenServingStarts) {
  ProducerLink link;
  link.read_releases_now();
  link.set_pool_limit(6);
  link.retire_slot(1, 0);
  EXPECT_FALSE(link.is_writer_flushing());
  link.set_writer_flushing(true);
  EXPECT_TRUE(link.is_writer_flushing());
  link.set(nullptr);
  EXPECT_FALSE(link.is_writer_flushing());
}

// A source stopping its streaming thread flushes the pool it writes into: a render waiting in the
// producer must come back at once, and wait again once the flush is over.
TEST_F(SinkProducerLink, AWritersFlushInterruptsTheProducersWaitUntilItEnds) {
  char dir_template[] = "/tmp/cipc-link-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  ASSERT_NE(dir, nullptr);
  cipc::ProducerConfig config;
  config.socket_path = std::string(dir) + "/link.sock";
  auto started = cipc::Producer::start(config);
  ASSERT_TRUE(started.is_ok()) << started.error().message;
  std::unique_ptr<cipc::Producer> producer = std::move(started.value());
  ProducerLink link;
  link.set(producer.get());
  using Clock = std::chrono::steady_clock;

  link.set_writer_flushing(true);
  Clock::time_point t0 = Clock::now();
  EXPECT_FALSE(producer->wait_for_consumer(5000));
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2)) << "the flush did not interrupt the wait";

  link.set_writer_flushing(false);
  t0 = Clock::now();
  EXPECT_FALSE(producer->wait_for_consumer(100));
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(90)) << "still flushing";

  link.set(nullptr);
  producer.reset();
  rmdir(dir);
}

// The hold takes over a reference and gives it back when the last claim ends; retiring tags the
// buffer so that its pool frees it instead of handing the slot to the writer again.
TEST_F(SinkProducerLink, BufferHoldKeepsTheBufferAndRetiringTagsItForThePoolToDrop) {
  GstBuffer* buffer = gst_buffer_new_allocate(nullptr, 64, nullptr);
  auto hold = std::make_shared<cipc_gst::BufferHold>(gst_buffer_ref(buffer));
  EXPECT_EQ(GST_MINI_OBJECT_REFCOUNT_VALUE(buffer), 2);
  EXPECT_FALSE(GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_TAG_MEMORY));
  hold->retire();
  EXPECT_TRUE(GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_TAG_MEMORY));
  hold.reset();
  EXPECT_EQ(GST_MINI_OBJECT_REFCOUNT_VALUE(buffer), 1);
  gst_buffer_unref(buffer);
}

// The warning `bus` holds next, as "domain/code: text"; "(none)" when it holds none.
std::string next_warning(GstBus* bus) {
  GstMessage* m = gst_bus_pop_filtered(bus, GST_MESSAGE_WARNING);
  if (m == nullptr) return "(none)";
  GError* error = nullptr;
  gst_message_parse_warning(m, &error, nullptr);
  std::string out = std::string(g_quark_to_string(error->domain)) + "/" +
                    std::to_string(error->code) + ": " + error->message;
  g_error_free(error);
  gst_message_unref(m);
  return out;
}

TEST_F(SinkProducerLink, ConsumerProblemsReachTheUserAsWarningsAndCleanComingsAndGoingsDoNot) {
  GstElement* element = gst_pipeline_new("sink-under-test");
  GstBus* bus = gst_element_get_bus(element);
  cipc_gst::SinkObserver observer(element);
  const std::string resource = g_quark_to_string(GST_RESOURCE_ERROR);

  observer.on_consumer_attached(1, getpid());
  observer.on_consumer_detached(1, "it said BYE", false);
  EXPECT_EQ(next_warning(bus), "(none)");

  observer.on_consumer_detached(2, "it kept a frame past release-timeout", true);
  EXPECT_EQ(next_warning(bus), resource + "/" + std::to_string(GST_RESOURCE_ERROR_READ) +
                                   ": A consumer was disconnected: it kept a frame past "
                                   "release-timeout.");
  observer.on_consumer_refused(3, "it runs as another user");
  EXPECT_EQ(next_warning(bus), resource + "/" + std::to_string(GST_RESOURCE_ERROR_READ) +
                                   ": Refused a consumer: it runs as another user.");
  observer.on_warning("The process ran out of file descriptors");
  EXPECT_EQ(next_warning(bus), resource + "/" + std::to_string(GST_RESOURCE_ERROR_OPEN_READ_WRITE) +
                                   ": The process ran out of file descriptors.");
  EXPECT_EQ(next_warning(bus), "(none)");
  gst_object_unref(bus);
  gst_object_unref(element);
}

}  // namespace
