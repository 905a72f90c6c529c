// SPDX-License-Identifier: LGPL-2.1-or-later
#include "cuda_slots.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "deferred_destruction.h"
#include "release_worker.h"
#include "waker.h"

namespace cipc_slots {
namespace {

// How long a reader's thread polls its release event before handing the frame to the release
// worker (see drop_after_reads).
constexpr uint64_t kInlineReleaseWindowNs = 20000;

// Returns once `event`'s last record has completed: polled without pause for `spin_ns`, then
// sleeping from `first_pause`, doubling up to 1 ms. Our release events ask for no interrupt and
// an opened interprocess event cannot be synchronize()d without spinning a core for as long as
// the GPU work takes.
cipc_cuda::Status poll_until_complete(const cipc_cuda::Event& event, uint64_t spin_ns,
                                      std::chrono::microseconds first_pause) {
  const uint64_t spin_until = cipc::monotonic_ns() + spin_ns;
  auto pause = first_pause;
  for (;;) {
    bool done = false;
    const cipc_cuda::Status s = event.query(&done);
    if (!s || done) return s;
    if (cipc::monotonic_ns() < spin_until) continue;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

cipc::Error cuda_error(const std::string& what, const cipc_cuda::Status& s) {
  return cipc::Error{cipc::ErrorCode::kSystem, what + ": " + s.message()};
}

}  // namespace

CudaSlotMemory::~CudaSlotMemory() = default;

cipc::Result<std::unique_ptr<CudaSlotMemory>> CudaSlotMemory::allocate(int device, size_t size,
                                                                       SyncMode sync) {
  cipc_cuda::destroy_parked();  // an application thread (deferred_destruction.h)
  std::unique_ptr<CudaSlotMemory> m(new CudaSlotMemory());
  m->sync_ = sync;
  cipc_cuda::Status s = cipc_cuda::DeviceAllocation::create(device, size, &m->allocation_);
  if (!s) return cuda_error("allocating a " + std::to_string(size) + "-byte CUDA slot", s);
  m->set_mapping(m->allocation_.device(), m->allocation_.ptr(), m->allocation_.size());
  int fd = -1;
  s = m->allocation_.export_fd(&fd);
  if (!s) return cuda_error("exporting a CUDA slot", s);
  m->export_fd_.reset(fd);
  s = m->create_readiness_event();
  if (!s) return cuda_error("creating a slot's readiness event", s);
  return m;
}

cipc::Result<std::unique_ptr<CudaSlotMemory>> CudaSlotMemory::adopt(int device, cipc::UniqueFd fd,
                                                                    cipc_cuda::DevicePtr ptr,
                                                                    size_t size, SyncMode sync) {
  if (!fd || ptr == 0 || size == 0)
    return cipc::Error{cipc::ErrorCode::kInvalidArgument,
                       "adopting CUDA memory needs its descriptor, address and size"};
  std::unique_ptr<CudaSlotMemory> m(new CudaSlotMemory());
  m->sync_ = sync;
  m->set_mapping(device, ptr, size);
  m->export_fd_ = std::move(fd);
  const cipc_cuda::Status s = m->create_readiness_event();
  if (!s) return cuda_error("creating the readiness event of adopted CUDA memory", s);
  return m;
}

void CudaSlotMemory::set_mapping(int device, cipc_cuda::DevicePtr ptr, size_t size) {
  device_ = device;
  ptr_ = ptr;
  size_ = size;
}

cipc_cuda::Status CudaSlotMemory::create_readiness_event() {
  if (sync_ == SyncMode::kCpu) return cipc_cuda::Status::ok();
  cipc_cuda::Status s = cipc_cuda::Event::create_interprocess(device_, &readiness_);
  if (s) s = readiness_.ipc_handle(&readiness_handle_);
  return s;
}

cipc::Result<std::unique_ptr<CudaSlotMemory>> CudaSlotMemory::import(
    int device, cipc::UniqueFd fd, size_t size, const cipc::EventHandle* readiness, SyncMode sync,
    bool keep_descriptor) {
  cipc_cuda::destroy_parked();  // an application thread (deferred_destruction.h)
  std::unique_ptr<CudaSlotMemory> m(new CudaSlotMemory());
  m->sync_ = sync;
  cipc_cuda::Status s =
      cipc_cuda::DeviceAllocation::import(device, fd.get(), size, &m->allocation_);
  if (!s) return cipc::Error{cipc::ErrorCode::kProtocol, "importing a CUDA slot: " + s.message()};
  m->set_mapping(m->allocation_.device(), m->allocation_.ptr(), m->allocation_.size());
  if (sync != SyncMode::kCpu) {
    if (readiness) {
      s = cipc_cuda::Event::open(device, *readiness, &m->readiness_);
      // The usual causes in containers: CUDA keeps interprocess events in /dev/shm, and names
      // them by the creator's pid, which a consumer in another PID namespace may share.
      if (!s)
        return cuda_error(
            "opening the producer's readiness event (with sync-mode=gpu-events the producer and "
            "the consumer must share /dev/shm and must not have the same process id in "
            "different PID namespaces; or set sync-mode=cpu on the sink)",
            s);
    }
    // Only this process waits on it, on the CPU, by polling (wait_released): a blocking-sync
    // event recorded after the stream's wait for the producer's event would wake the CUDA
    // driver's cuda-EvtHandlr thread in the producer and in every consumer, once per consumer
    // per frame (docs/bench-h200-runs.md, "What woke cuda-EvtHandlr").
    s = cipc_cuda::Event::create_polled(device, &m->release_);
    if (!s) return cuda_error("creating a release event", s);
  }
  if (keep_descriptor) m->kept_fd_ = std::move(fd);
  return m;
}

bool CudaSlotMemory::event_handle(cipc::EventHandle* out) const {
  if (!readiness_.valid() || release_.valid()) return false;  // only the producer exports it
  *out = readiness_handle_;
  return true;
}

cipc_cuda::Status CudaSlotMemory::begin_write(cipc_cuda::StreamHandle) {
  // Nothing to wait for: a slot returns to the pool only after every reader's RELEASE, which
  // readers send once their reads have completed.
  return cipc_cuda::Status::ok();
}

cipc_cuda::Status CudaSlotMemory::end_write(cipc_cuda::StreamHandle stream) {
  if (sync_ == SyncMode::kCpu) return cipc_cuda::synchronize_stream(stream);
  return readiness_.record(stream);
}

cipc_cuda::Status CudaSlotMemory::wait_ready(cipc_cuda::StreamHandle stream) {
  // CPU mode: the producer synchronised before sending the frame.
  if (sync_ == SyncMode::kCpu || !readiness_.valid()) return cipc_cuda::Status::ok();
  // A frame the producer's GPU has finished needs no GPU-side wait, and skipping it spares the
  // driver's cuda-EvtHandlr thread a wake-up in every process of the session (a stream wait on
  // an interprocess event wakes it; docs/bench-h200-runs.md, "What woke cuda-EvtHandlr").
  bool written = false;
  if (readiness_.query(&written) && written) return cipc_cuda::Status::ok();
  return readiness_.wait(stream);
}

cipc_cuda::Status CudaSlotMemory::record_release(cipc_cuda::StreamHandle stream) {
  if (sync_ == SyncMode::kCpu || !release_.valid()) return cipc_cuda::synchronize_stream(stream);
  return release_.record(stream);
}

cipc_cuda::Status CudaSlotMemory::wait_released() {
  if (!release_.valid()) return cipc_cuda::Status::ok();
  // Backing off from 50 us: the event asks for no interrupt (see import()).
  return poll_until_complete(release_, 0, std::chrono::microseconds(50));
}

cipc_cuda::Status CudaSlotMemory::wait_ready_on_host() {
  if (sync_ == SyncMode::kCpu || !readiness_.valid()) return cipc_cuda::Status::ok();
  // Frames usually arrive complete, or a few microseconds short (a producer records readiness
  // right after its last launch): spin briefly before sleeping.
  return poll_until_complete(readiness_, kInlineReleaseWindowNs, std::chrono::microseconds(20));
}

cipc_cuda::Status CudaSlotMemory::query_reads_done(bool* done) {
  // sync-mode=cpu: record_release() synchronised the stream, the reads are done.
  if (!release_.valid()) {
    *done = true;
    return cipc_cuda::Status::ok();
  }
  return release_.query(done);
}

void CudaSlotMemory::drop_after_reads(std::shared_ptr<void> keepalive) {
  // Reads that are done, or finish within a few microseconds (a consumer that only waited for
  // readiness, or whose GPU work finished while downstream held the frame; a release recorded
  // just now needs the GPU a few microseconds to pass): RELEASE from this thread. Handing off
  // to the release worker costs two wake-ups (its own, then the event's) of 20-50 us of CPU
  // each, more than polling the event for kInlineReleaseWindowNs.
  if (!release_.valid()) {
    keepalive.reset();
    return;
  }
  const uint64_t give_up = cipc::monotonic_ns() + kInlineReleaseWindowNs;
  for (;;) {
    bool done = false;
    if (!release_.query(&done)) break;  // the worker's wait reports the error
    if (done) {
      keepalive.reset();
      return;
    }
    if (cipc::monotonic_ns() >= give_up) break;
  }
  // `this` lives while `keepalive` does: it owns the frame, which owns the imported slot.
  drop_after([this] { return wait_released(); }, std::move(keepalive));
}

cipc::Result<std::unique_ptr<cipc::SlotMemory>> CudaMemoryBackend::allocate(size_t size) {
  auto m = CudaSlotMemory::allocate(device_, size, sync_);
  if (!m) return m.error();
  return std::unique_ptr<cipc::SlotMemory>(std::move(m.value()));
}

cipc::Result<std::unique_ptr<cipc::SlotMemory>> CudaMemoryBackend::import(
    cipc::UniqueFd fd, size_t size, const cipc::EventHandle* event) {
  auto m = CudaSlotMemory::import(device_, std::move(fd), size, event, sync_, keep_descriptors_);
  if (!m) return m.error();
  return std::unique_ptr<cipc::SlotMemory>(std::move(m.value()));
}

CudaSlotMemory* cuda_slot_of(cipc::SlotMemory* memory) {
  return memory && memory->kind() == cipc::MemoryKind::kCuda ? static_cast<CudaSlotMemory*>(memory)
                                                             : nullptr;
}

}  // namespace cipc_slots
