// SPDX-License-Identifier: LGPL-2.1-or-later
// CUDA slot memory behind ipc's MemoryBackend: VMM allocations exported as file descriptors, and
// a per-slot readiness event recorded by writers and waited on by readers on the GPU.
//
// Releases are not GPU fences across processes: a reader records a release event in its own
// process, and the claim (RELEASE) is handed back only once that event has completed, by a
// background thread (release_worker.h). Measured on an H200 (driver 580): a producer waiting on a
// consumer's interprocess event after that consumer exited hit cudaErrorIllegalAddress, which
// kills the producer's CUDA context - a departing consumer must never be able to do that.
#pragma once

#include <cstddef>
#include <memory>

#include "cuda_api.h"
#include "memorybackend.h"

namespace cipc_slots {

// How writers and readers of a slot are ordered (the protocol's enum, sent in WELCOME):
// kGpuEvents - interprocess readiness events waited on by the GPU; kCpu - writers synchronise
// their stream before the frame is sent. kNone (host memory) is treated as kGpuEvents.
using cipc::SyncMode;

// A piece of device memory with the slot ordering rules: what the public table
// (gst/cudaipc/gstcudaipcmemory.h) and CPU staging operate on.
class CudaRegion {
 public:
  virtual ~CudaRegion() = default;
  virtual int device() const = 0;
  virtual cipc_cuda::DevicePtr ptr() const = 0;
  virtual size_t bytes() const = 0;
  // Writer: begin_write (orders this write after earlier uses of the region), write, then
  // end_write (records readiness).
  virtual cipc_cuda::Status begin_write(cipc_cuda::StreamHandle stream) = 0;
  virtual cipc_cuda::Status end_write(cipc_cuda::StreamHandle stream) = 0;
  // Reader: wait for the writer's readiness; after the last read, record the release.
  virtual cipc_cuda::Status wait_ready(cipc_cuda::StreamHandle stream) = 0;
  virtual cipc_cuda::Status record_release(cipc_cuda::StreamHandle stream) = 0;
  // Drops `keepalive` (which owns a frame's claim) once the reads recorded by record_release()
  // are done, without the calling thread waiting. Default: at once.
  virtual void drop_after_reads(std::shared_ptr<void> keepalive) { keepalive.reset(); }
  // Whether the reads recorded by record_release() are done, without waiting. Default: yes.
  virtual cipc_cuda::Status query_reads_done(bool* done) {
    *done = true;
    return cipc_cuda::Status::ok();
  }
};

class CudaSlotMemory final : public cipc::SlotMemory, public CudaRegion {
 public:
  ~CudaSlotMemory() override;

  // Producer: an exportable allocation with its readiness event; exported once.
  static cipc::Result<std::unique_ptr<CudaSlotMemory>> allocate(int device, size_t size,
                                                                SyncMode sync);
  // Consumer: imports a producer's slot and opens its readiness event (when sent); creates this
  // process's (local) release event for it. With `keep_descriptor`, the slot's descriptor stays
  // open for the slot's life (another API importing the same memory: GL's memory objects).
  static cipc::Result<std::unique_ptr<CudaSlotMemory>> import(int device, cipc::UniqueFd fd,
                                                              size_t size,
                                                              const cipc::EventHandle* readiness,
                                                              SyncMode sync,
                                                              bool keep_descriptor = false);
  // Producer: device memory another allocator made exportable and exported (GStreamer's VMM
  // pools, issue 29). `fd` is this slot's own descriptor for it (a dup); the mapping at `ptr`, of
  // `size` bytes, stays the other allocator's, which must keep it for as long as this object
  // lives. Only the readiness event is made here.
  static cipc::Result<std::unique_ptr<CudaSlotMemory>> adopt(int device, cipc::UniqueFd fd,
                                                             cipc_cuda::DevicePtr ptr, size_t size,
                                                             SyncMode sync);

  void* data() const override { return reinterpret_cast<void*>(ptr_); }
  size_t size() const override { return size_; }
  int export_fd() const override { return export_fd_.get(); }
  cipc::MemoryKind kind() const override { return cipc::MemoryKind::kCuda; }
  bool event_handle(cipc::EventHandle* out) const override;

  int device() const override { return device_; }
  cipc_cuda::DevicePtr ptr() const override { return ptr_; }
  size_t bytes() const override { return size_; }
  cipc_cuda::Status begin_write(cipc_cuda::StreamHandle stream) override;
  cipc_cuda::Status end_write(cipc_cuda::StreamHandle stream) override;
  cipc_cuda::Status wait_ready(cipc_cuda::StreamHandle stream) override;
  cipc_cuda::Status record_release(cipc_cuda::StreamHandle stream) override;
  // On the release worker's thread: RELEASE goes out once the recorded reads are done.
  void drop_after_reads(std::shared_ptr<void> keepalive) override;
  cipc_cuda::Status query_reads_done(bool* done) override;
  // Returns once the reads recorded by record_release() are done, polling (release worker only).
  cipc_cuda::Status wait_released();
  // Consumer: returns once the producer's frame is complete on the GPU, waiting on the CPU
  // (polling, as wait_released()), for readers that cannot wait on a CUDA event (GL).
  cipc_cuda::Status wait_ready_on_host();
  // Consumer, imported with keep_descriptor: the slot's descriptor (still ours: dup it), or -1.
  int kept_descriptor() const { return kept_fd_.get(); }
  // The allocation's size as the driver holds it (granularity-rounded): what another API
  // importing the descriptor must be told.
  size_t allocation_bytes() const { return allocation_.mapped_size(); }

 private:
  CudaSlotMemory() = default;
  void set_mapping(int device, cipc_cuda::DevicePtr ptr, size_t size);
  cipc_cuda::Status create_readiness_event();  // producer: none with sync-mode=cpu

  cipc_cuda::DeviceAllocation allocation_;  // empty for adopted memory
  int device_ = -1;
  cipc_cuda::DevicePtr ptr_ = 0;
  size_t size_ = 0;
  cipc::UniqueFd export_fd_;
  SyncMode sync_ = SyncMode::kGpuEvents;
  cipc_cuda::Event readiness_;  // created (producer) or opened (consumer)
  cipc::EventHandle readiness_handle_{};
  cipc_cuda::Event release_;  // consumer: recorded after the last read, waited on locally
  cipc::UniqueFd kept_fd_;    // consumer with keep_descriptor
};

// The MemoryBackend for memory=cuda, on one device.
class CudaMemoryBackend final : public cipc::MemoryBackend {
 public:
  // `keep_descriptors`: every imported slot keeps its descriptor (CudaSlotMemory::import).
  CudaMemoryBackend(int device, SyncMode sync, bool keep_descriptors = false)
      : device_(device), sync_(sync), keep_descriptors_(keep_descriptors) {}
  cipc::MemoryKind kind() const override { return cipc::MemoryKind::kCuda; }
  cipc::Result<std::unique_ptr<cipc::SlotMemory>> allocate(size_t size) override;
  cipc::Result<std::unique_ptr<cipc::SlotMemory>> import(cipc::UniqueFd fd, size_t size,
                                                         const cipc::EventHandle* event) override;
  int device() const { return device_; }
  SyncMode sync_mode() const { return sync_; }

 private:
  int device_;
  SyncMode sync_;
  bool keep_descriptors_;
};

// The CUDA slot behind a slot memory of either side, or nullptr for host memory.
CudaSlotMemory* cuda_slot_of(cipc::SlotMemory* memory);

}  // namespace cipc_slots
