// SPDX-License-Identifier: LGPL-2.1-or-later
// What ties cudasink-ipc to its cipc::Producer: BufferHold keeps a published buffer (and so its
// slot) out of its pool while consumers hold the frame; SinkObserver turns the producer's events
// into the element's log lines and warnings; ProducerLink is the producer as the pools see it,
// which upstream may keep after the element is gone.
//
// The element makes a SinkObserver with itself and one ProducerLink, shares the link with its
// pools' hooks and points it at the producer while it serves (start to stop). Threads:
// SinkObserver is called on the producer's I/O thread; ProducerLink from any thread (the
// streaming thread, upstream's pool calls), under its own lock; a BufferHold ends on whatever
// thread drops the frame's last claim.
#pragma once

#include <gst/gst.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "producer.h"
#include "slot_indices.h"

namespace cipc_gst {

// Keeps a published buffer (and so its slot) out of the pool while consumers hold it. Takes
// over the caller's reference to `buffer`.
class BufferHold final : public cipc::FrameHold {
 public:
  explicit BufferHold(GstBuffer* buffer) : buffer_(buffer) {}
  ~BufferHold() override { gst_buffer_unref(buffer_); }
  BufferHold(const BufferHold&) = delete;
  BufferHold& operator=(const BufferHold&) = delete;
  // The pool frees a TAG_MEMORY buffer instead of recycling it: a retired slot is never
  // written again while a stuck consumer may still read it.
  void retire() override { GST_BUFFER_FLAG_SET(buffer_, GST_BUFFER_FLAG_TAG_MEMORY); }

 private:
  GstBuffer* buffer_;
};

// Consumers coming and going are logged on `element`; a consumer disconnected for a problem, one
// refused and the producer's own warnings are element warnings (the user hears of them).
class SinkObserver final : public cipc::ProducerObserver {
 public:
  explicit SinkObserver(GstElement* element);
  void on_consumer_attached(uint64_t id, pid_t pid) override;
  void on_consumer_detached(uint64_t id, const std::string& reason, bool problem) override;
  void on_consumer_refused(uint64_t id, const std::string& reason) override;
  void on_warning(const std::string& text) override;

 private:
  GstElement* element_;
};

// The producer as seen from our pools, which upstream may keep after the element is gone: a pool
// about to wait for a slot asks the producer, while there is one, to read RELEASEs at once.
// Every call is a no-op while no producer is set, apart from the writer's flushing, remembered.
class ProducerLink {
 public:
  // Consumers may hold all but these of a bounded pool: the writer needs the rest to go on
  // (publish/slot_indices.h, shared with libcudaipc's writer).
  static constexpr guint kWriterSlots = cipc_publish::kWriterSlots;
  // The slots consumers may hold between them when upstream's pool holds at most `max_slots`
  // (0: it grows as needed, and so does the budget); never less than one.
  static guint consumer_slot_budget(guint max_slots) {
    return cipc_publish::consumer_slot_budget(max_slots);
  }

  // While the element serves: `producer`; nullptr once it stops. Forgets the writer's flushing.
  void set(cipc::Producer* producer);
  void read_releases_now();
  // Upstream flushes the pool it writes into (its source stops its streaming thread: a flush, a
  // state change, or the EOS of gst-launch-1.0 -e, which waits for that thread): a render waiting
  // for room must give up its frame, or the source waits for it forever.
  void set_writer_flushing(bool flushing);
  bool is_writer_flushing();
  // The pool upstream writes into holds at most `max_slots` (0: it grows as needed).
  void set_pool_limit(guint max_slots);
  // A slot our pool made: consumers get it before its first frame (cipc::Producer::offer_slot).
  void offer_slot(uint64_t generation, uint32_t index,
                  std::weak_ptr<const cipc::SlotMemory> memory);
  // Memory an upstream pool owned and sent as a slot is being freed (issue 29).
  void retire_slot(uint64_t generation, uint32_t index);

 private:
  std::mutex lock_;
  cipc::Producer* producer_ = nullptr;  // set while the element serves
  bool writer_flushing_ = false;
};

}  // namespace cipc_gst
