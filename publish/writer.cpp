// SPDX-License-Identifier: LGPL-2.1-or-later
#include "writer.h"

#include <chrono>
#include <cstring>
#include <shared_mutex>

#include "waker.h"
#ifdef CIPC_HAVE_CUDA
#include "cuda_api.h"
#include "cuda_slots.h"
#endif

namespace cipc_publish {

struct WriterCore {
  WriterConfig config;
  SlotBackend backend;
  std::shared_ptr<SlotRing> ring;
  // Held exclusively while a new generation is made current and announced, shared while a
  // frame is published: no frame of a generation reaches consumers before its CAPS.
  std::shared_mutex format_lock;
  mutable std::mutex producer_lock;  // guards the pointer only; calls are made on a copy
  std::shared_ptr<cipc::Producer> producer;
  std::atomic<bool> ended{false};
  std::atomic<bool> closed{false};
  std::atomic<bool> interrupted{false};
  std::atomic<uint64_t> published{0};
  std::atomic<uint64_t> abandoned{0};
  std::atomic<uint64_t> timeouts{0};
  std::atomic<uint64_t> copies{0};

  std::shared_ptr<cipc::Producer> get_producer() const {
    std::lock_guard<std::mutex> guard(producer_lock);
    return producer;
  }
  // Starts a generation of `layout` and announces it (under format_lock, exclusively).
  Outcome start_generation_locked(const FrameLayout& layout) {
    std::string why;
    if (!ring->start_generation(layout, &why)) return {Code::kSystem, why};
    if (auto p = get_producer()) announce(*p);
    return Outcome::ok();
  }
  // The current generation's format, and its slots, which consumers import now rather than one
  // by one in the first frames.
  void announce(cipc::Producer& producer) {
    const std::shared_ptr<SlotGeneration> g = ring->current();
    producer.set_caps(g->number, caps_string(g->layout), g->layout.size);
    for (const auto& slot : ring->slots_of(*g))
      producer.offer_slot(g->number, slot.first, slot.second);
  }
  // An interrupt is answered once, by the acquire or wait it ended (or the next one).
  bool take_interrupt() {
    if (!interrupted.exchange(false)) return false;
    ring->clear_interrupt();
    if (auto p = get_producer()) p->set_flushing(false);
    return true;
  }
};

namespace {

Outcome interrupted_outcome() {
  return {Code::kInterrupted, "interrupted"};
}

int remaining_ms(int timeout_ms, std::chrono::steady_clock::time_point start) {
  if (timeout_ms < 0) return -1;
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - start)
                         .count();
  return spent >= timeout_ms ? 0 : static_cast<int>(timeout_ms - spent);
}

Code start_failure(cipc::ErrorCode code) {
  switch (code) {
    case cipc::ErrorCode::kAddressInUse: return Code::kBusy;
    case cipc::ErrorCode::kInvalidArgument: return Code::kInvalid;
    default: return Code::kSystem;
  }
}

}  // namespace

Loan::~Loan() {
  if (!done_ && core_) {
    core_->ring->give_back(slot_);
    ++core_->abandoned;
  }
}

Outcome Writer::open(const WriterConfig& config, cipc::ProducerObserver* observer,
                     std::unique_ptr<Writer>* out) {
  auto core = std::make_shared<WriterCore>();
  core->config = config;
  if (config.format.size == 0) return {Code::kInvalid, "no frame format"};
  if (config.pool_size < 1 || config.pool_size > 64)
    return {Code::kInvalid, "the pool size must be between 1 and 64 slots"};
  cipc::ProducerConfig producer_config = config.producer;
  producer_config.pool_advice = "Raise the writer's pool_size (it admits pool_size - 2 consumers)";
  std::string why;
  switch (open_slot_backend(config.memory, config.cuda_device, config.sync_mode, producer_config,
                            &core->backend, &why)) {
    case BackendFailure::kNone: break;
    case BackendFailure::kNoCudaBuild: return {Code::kUnsupported, "CUDA memory: " + why};
    case BackendFailure::kNoDevice:
      return {Code::kNoDevice, "no usable CUDA device for CUDA memory: " + why};
  }
  core->ring = std::make_shared<SlotRing>(core->backend.backend, config.pool_size);
  // Slots first: an allocation that fails is told before anyone can attach.
  if (!core->ring->start_generation(config.format, &why)) return {Code::kSystem, why};
  auto producer = cipc::Producer::start(producer_config, observer);
  if (!producer)
    return {start_failure(producer.error().code), "could not serve frames on '" +
                                                      producer_config.socket_path +
                                                      "': " + producer.error().message};
  core->producer = std::move(producer.value());
  // Consumers each keep (at least) their newest frame: two slots stay the writer's.
  core->producer->set_slot_budget(consumer_slot_budget(config.pool_size));
  core->announce(*core->producer);
  out->reset(new Writer(std::move(core)));
  return Outcome::ok();
}

Writer::~Writer() {
  core_->closed = true;
  core_->ring->close();
  std::shared_ptr<cipc::Producer> producer;
  {
    std::lock_guard<std::mutex> guard(core_->producer_lock);
    producer.swap(core_->producer);
  }
  if (producer) producer->set_flushing(true);
  // The producer says BYE and drops its claims when the last call using it returns.
  producer.reset();
  destroy_parked_slots();
}

Outcome Writer::acquire(int timeout_ms, std::unique_ptr<Loan>* out) {
  WriterCore& c = *core_;
  const auto start = std::chrono::steady_clock::now();
  destroy_parked_slots();  // the application's thread: see slot_backend.h
  if (c.closed) return {Code::kClosed, "the writer is closed"};
  if (c.ended) return {Code::kEnded, "the stream was ended"};
  if (c.take_interrupt()) return interrupted_outcome();
  std::shared_ptr<cipc::Producer> producer = c.get_producer();
  if (!producer) return {Code::kClosed, "the writer is closed"};
  if (c.config.backpressure == Backpressure::kBlock) {
    switch (producer->wait_for_room(timeout_ms)) {
      case cipc::Producer::Room::kReady: break;
      case cipc::Producer::Room::kTimeout:
        ++c.timeouts;
        return {Code::kTimeout, "a consumer had no room for another frame within " +
                                    std::to_string(timeout_ms) + " ms (backpressure=block)"};
      case cipc::Producer::Room::kFlushing:
        if (c.closed) return {Code::kClosed, "the writer is closed"};
        if (c.ended) return {Code::kEnded, "the stream was ended"};
        c.take_interrupt();
        return interrupted_outcome();
    }
  }
  if (c.ring->needs_rollover()) {
    std::unique_lock<std::shared_mutex> format(c.format_lock);
    if (c.ring->needs_rollover()) {
      const Outcome o = c.start_generation_locked(c.ring->current()->layout);
      if (!o) return o;
    }
  }
  LentSlot slot;
  std::string why;
  switch (c.ring->acquire(
      remaining_ms(timeout_ms, start), [producer] { producer->read_releases_now(); }, &slot,
      &why)) {
    case SlotRing::Wait::kLent: break;
    case SlotRing::Wait::kTimeout:
      ++c.timeouts;
      return {Code::kTimeout, "consumers held every slot for " + std::to_string(timeout_ms) +
                                  " ms (pool of " + std::to_string(c.config.pool_size) + ")"};
    case SlotRing::Wait::kInterrupted:
      if (c.ended) return {Code::kEnded, "the stream was ended"};
      c.take_interrupt();
      return interrupted_outcome();
    case SlotRing::Wait::kClosed: return {Code::kClosed, "the writer is closed"};
    case SlotRing::Wait::kFailed: return {Code::kSystem, why};
  }
  out->reset(new Loan(core_, std::move(slot)));
  return Outcome::ok();
}

void Loan::abandon() {
  if (done_) return;
  done_ = true;
  core_->ring->give_back(slot_);
  ++core_->abandoned;
}

Outcome Loan::publish(const PublishOptions& options) {
  if (done_) return {Code::kInvalid, "this slot was already published or abandoned"};
  done_ = true;
  WriterCore& c = *core_;
  SlotRing& ring = *c.ring;
  const LentSlot& slot = slot_;
  auto give_back = [&](Outcome o) {
    ring.give_back(slot);
    ++c.abandoned;
    return o;
  };
  if (c.closed) return give_back({Code::kClosed, "the writer is closed"});
  if (c.ended) return give_back({Code::kEnded, "the stream was ended"});
  std::shared_ptr<cipc::Producer> producer = c.get_producer();
  if (!producer) return give_back({Code::kClosed, "the writer is closed"});
#ifdef CIPC_HAVE_CUDA
  if (cipc_slots::CudaSlotMemory* region = cipc_slots::cuda_slot_of(slot.memory)) {
    cipc_cuda::DeviceGuard device;
    void* stream = options.cuda_stream;
    if (stream == nullptr) {
      // The legacy default stream is the current device's: make it the slot's.
      if (const cipc_cuda::Status s = device.enter(region->device()); !s)
        return give_back({Code::kCuda, s.message()});
      stream = cipc_cuda::legacy_default_stream();
    }
    if (const cipc_cuda::Status s = region->end_write(stream); !s)
      return give_back({Code::kCuda, "recording the frame's readiness: " + s.message()});
  }
#endif
  const FrameLayout& layout = slot.generation->layout;
  cipc::Frame frame;
  frame.generation = slot.generation->number;
  frame.slot = slot.index;
  frame.flags =
      (options.flags & (cipc::Frame::kDiscont | cipc::Frame::kDeltaUnit | cipc::Frame::kGap)) |
      (c.config.live ? cipc::Frame::kLive : 0);
  frame.pts = options.pts_ns == cipc::kNoTimestamp ? cipc::monotonic_ns() : options.pts_ns;
  frame.duration = options.duration_ns;
  frame.size = layout.size;
  frame.n_planes = layout.n_planes;
  frame.plane_offset = layout.plane_offset;
  frame.plane_stride = layout.plane_stride;
  {
    std::shared_lock<std::shared_mutex> format(c.format_lock);
    if (slot.generation != ring.current())
      return give_back(
          {Code::kInvalid, "the slot was acquired before the format changed; it is not sent"});
    frame.offset = c.published.fetch_add(1);
    std::shared_ptr<cipc::FrameHold> hold = ring.hold(slot);
    producer->publish({slot.generation->number, slot.index, slot.memory}, frame, hold);
  }
  return Outcome::ok();
}

// Whether rows of `src_stride` bytes in plane 0 (each other plane's scaled by its stride_shift)
// hold every plane's pixels: a shorter stride would read past the caller's frame.
static Outcome check_source_stride(const FrameLayout& l, size_t src_stride) {
  if (src_stride == 0) return Outcome::ok();
  for (uint32_t p = 0; p < l.n_planes; ++p) {
    const size_t stride = src_stride >> l.stride_shift[p];
    if (stride < l.plane_row_bytes[p])
      return {Code::kInvalid,
              "rows of " + std::to_string(src_stride) + " bytes leave plane " + std::to_string(p) +
                  " rows of " + std::to_string(stride) + " bytes, shorter than its " +
                  std::to_string(l.plane_row_bytes[p]) + " bytes of pixels (" + l.format + " " +
                  std::to_string(l.width) + "x" + std::to_string(l.height) + ")"};
  }
  return Outcome::ok();
}

Outcome Writer::publish_copy(const void* src, size_t src_stride, int timeout_ms,
                             const PublishOptions& options) {
  if (src == nullptr) return {Code::kInvalid, "the source frame is NULL"};
  // Checked before a slot is waited for, and again against the slot's own format (set_format
  // may have run in between).
  if (Outcome o = check_source_stride(format(), src_stride); !o) return o;
  std::unique_ptr<Loan> loan;
  Outcome o = acquire(timeout_ms, &loan);
  if (!o) return o;
  const FrameLayout& l = loan->layout();
  if (Outcome bad = check_source_stride(l, src_stride); !bad) return bad;
  const auto* from = static_cast<const uint8_t*>(src);
  auto* to = static_cast<uint8_t*>(loan->data());
  uint64_t src_offset = 0;
  for (uint32_t p = 0; p < l.n_planes; ++p) {
    const size_t stride = src_stride ? src_stride >> l.stride_shift[p] : l.plane_stride[p];
    const uint64_t offset = src_stride ? src_offset : l.plane_offset[p];
    const uint8_t* plane_src = from + offset;
    uint8_t* plane_dst = to + l.plane_offset[p];
    if (loan->memory_kind() == cipc::MemoryKind::kCuda) {
#ifdef CIPC_HAVE_CUDA
      cipc_cuda::DeviceGuard device;
      if (const cipc_cuda::Status s = device.enter(core_->backend.device); !s)
        return {Code::kCuda, s.message()};
      void* stream = options.cuda_stream ? options.cuda_stream : cipc_cuda::legacy_default_stream();
      if (const cipc_cuda::Status s =
              cipc_cuda::copy_2d_async(plane_dst, l.plane_stride[p], plane_src, stride,
                                       l.plane_row_bytes[p], l.plane_rows[p], stream);
          !s)
        return {Code::kCuda, "copying the frame into a slot: " + s.message()};
#endif
    } else {
      for (uint32_t row = 0; row < l.plane_rows[p]; ++row)
        std::memcpy(plane_dst + static_cast<uint64_t>(row) * l.plane_stride[p],
                    plane_src + static_cast<uint64_t>(row) * stride, l.plane_row_bytes[p]);
    }
    // The next plane of a caller's frame starts after this one's rows (as the format lays them
    // out: even rows for planar chroma).
    src_offset +=
        stride * ((l.n_planes > 1 && p == 0) ? (l.plane_rows[0] + 1) / 2 * 2 : l.plane_rows[p]);
  }
  ++core_->copies;
  return loan->publish(options);
}

Outcome Writer::set_format(const FrameLayout& layout) {
  WriterCore& c = *core_;
  if (c.closed) return {Code::kClosed, "the writer is closed"};
  std::unique_lock<std::shared_mutex> format(c.format_lock);
  return c.start_generation_locked(layout);
}

Outcome Writer::end_stream() {
  WriterCore& c = *core_;
  if (c.closed) return {Code::kClosed, "the writer is closed"};
  if (c.ended.exchange(true)) return Outcome::ok();
  c.ring->interrupt();  // acquires in progress say kEnded
  if (auto p = c.get_producer()) {
    p->send_eos();
    p->set_flushing(true);
  }
  return Outcome::ok();
}

Outcome Writer::wait_for_consumer(int timeout_ms) {
  WriterCore& c = *core_;
  if (c.take_interrupt()) return interrupted_outcome();
  std::shared_ptr<cipc::Producer> producer = c.get_producer();
  if (!producer || c.closed) return {Code::kClosed, "the writer is closed"};
  if (c.ended) return {Code::kEnded, "the stream was ended"};
  if (producer->wait_for_consumer(timeout_ms)) return Outcome::ok();
  if (c.take_interrupt()) return interrupted_outcome();
  return {Code::kTimeout, "no consumer attached within " + std::to_string(timeout_ms) + " ms"};
}

void Writer::interrupt() {
  WriterCore& c = *core_;
  c.interrupted = true;
  c.ring->interrupt();
  if (auto p = c.get_producer()) p->set_flushing(true);
}

WriterStats Writer::stats() const {
  const WriterCore& c = *core_;
  WriterStats s;
  if (auto p = c.get_producer()) {
    const cipc::ProducerStats ps = p->stats();
    s.frames_sent = ps.frames_sent;
    s.frames_dropped = ps.frames_dropped;
    s.consumers = ps.consumers;
    s.consumers_total = ps.consumers_total;
    s.consumers_evicted = ps.consumers_timed_out;
  }
  s.frames_published = c.published;
  s.frames_abandoned = c.abandoned;
  s.acquire_timeouts = c.timeouts;
  s.copies = c.copies;
  s.slots_allocated = c.ring->slots_allocated();
  s.slots_retired = c.ring->slots_retired();
  s.generations = c.ring->generations();
  s.cuda_mps = c.backend.mps_client;
  return s;
}

FrameLayout Writer::format() const {
  return core_->ring->current()->layout;
}

int Writer::cuda_device() const {
  return core_->backend.device;
}

const std::string& Writer::socket_path() const {
  return core_->config.producer.socket_path;
}

}  // namespace cipc_publish
