// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ipcsink/producerlink.h"

// Logs go to cudasink-ipc's own category.
GST_DEBUG_CATEGORY_STATIC(cipc_producer_link_debug);
#define GST_CAT_DEFAULT cipc_producer_link_debug

namespace cipc_gst {

namespace {

// The element registers the category with the plugin; tests that drive these without the plugin
// make it here.
void init_category() {
  static std::once_flag once;
  std::call_once(once, [] {
    GST_DEBUG_CATEGORY_GET(cipc_producer_link_debug, "cudaipc-sink");
    if (!cipc_producer_link_debug)
      GST_DEBUG_CATEGORY_INIT(cipc_producer_link_debug, "cudaipc-sink", 0, "cudasink-ipc element");
  });
}

}  // namespace

SinkObserver::SinkObserver(GstElement* element) : element_(element) {
  init_category();
}

void SinkObserver::on_consumer_attached(uint64_t id, pid_t pid) {
  GST_INFO_OBJECT(element_, "consumer %" G_GUINT64_FORMAT " (pid %d) attached", id, (int)pid);
}

void SinkObserver::on_consumer_detached(uint64_t id, const std::string& reason, bool problem) {
  if (problem) {
    GST_ELEMENT_WARNING(element_, RESOURCE, READ,
                        ("A consumer was disconnected: %s.", reason.c_str()), (nullptr));
  } else {
    GST_INFO_OBJECT(element_, "consumer %" G_GUINT64_FORMAT " detached: %s", id, reason.c_str());
  }
}

void SinkObserver::on_consumer_refused(uint64_t id, const std::string& reason) {
  (void)id;
  GST_ELEMENT_WARNING(element_, RESOURCE, READ, ("Refused a consumer: %s.", reason.c_str()),
                      (nullptr));
}

void SinkObserver::on_warning(const std::string& text) {
  GST_ELEMENT_WARNING(element_, RESOURCE, OPEN_READ_WRITE, ("%s.", text.c_str()), (nullptr));
}

void ProducerLink::set(cipc::Producer* producer) {
  std::lock_guard<std::mutex> guard(lock_);
  producer_ = producer;
  writer_flushing_ = false;
}

void ProducerLink::read_releases_now() {
  std::lock_guard<std::mutex> guard(lock_);
  if (producer_) producer_->read_releases_now();
}

void ProducerLink::set_writer_flushing(bool flushing) {
  std::lock_guard<std::mutex> guard(lock_);
  writer_flushing_ = flushing;
  if (producer_) producer_->set_flushing(flushing, cipc::Producer::FlushHolder::kWriter);
}

bool ProducerLink::is_writer_flushing() {
  std::lock_guard<std::mutex> guard(lock_);
  return writer_flushing_;
}

void ProducerLink::set_pool_limit(guint max_slots) {
  std::lock_guard<std::mutex> guard(lock_);
  if (producer_) producer_->set_slot_budget(consumer_slot_budget(max_slots));
}

void ProducerLink::offer_slot(uint64_t generation, uint32_t index,
                              std::weak_ptr<const cipc::SlotMemory> memory) {
  std::lock_guard<std::mutex> guard(lock_);
  if (producer_) producer_->offer_slot(generation, index, std::move(memory));
}

void ProducerLink::retire_slot(uint64_t generation, uint32_t index) {
  std::lock_guard<std::mutex> guard(lock_);
  if (producer_) producer_->retire_slot(generation, index);
}

}  // namespace cipc_gst
