// SPDX-License-Identifier: LGPL-2.1-or-later
// CUDA slot memory (DESIGN.md sections 3 and 5) behind the ipc layer's MemoryBackend: VMM
// allocations exported as file descriptors, and a per-slot readiness event recorded by writers
// and waited on by readers on the GPU.
//
// Releases are not GPU fences across processes: a reader records a release event in its own
// process, and the claim (RELEASE) is handed back only once that event has completed, by a
// background thread. Measured on an H200 (driver 580): a producer waiting on a consumer's
// interprocess event after that consumer exited hit cudaErrorIllegalAddress, which kills the
// producer's CUDA context - a departing consumer must never be able to do that.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cuda_api.h"
#include "memory.h"
#include "slotmemory.h"

namespace cipc_gst {

enum class SyncMode { kGpuEvents, kCpu };

class CudaSlotMemory;

// A piece of device memory with the write/read ordering of DESIGN.md section 5: what the public
// table (gstcudaipcmemory.h) and CPU mapping operate on.
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
};

class CudaSlotMemory final : public cipc::SlotMemory, public CudaRegion {
 public:
  ~CudaSlotMemory() override;

  // Producer: an exportable allocation with its readiness event; exported once.
  static cipc::Result<std::unique_ptr<CudaSlotMemory>> allocate(int device, size_t size,
                                                                SyncMode sync);
  // Consumer: imports a producer's slot and opens its readiness event (when sent); creates this
  // process's (local) release event for it.
  static cipc::Result<std::unique_ptr<CudaSlotMemory>> import(int device, cipc::UniqueFd fd,
                                                              size_t size,
                                                              const cipc::EventHandle* readiness,
                                                              SyncMode sync);

  void* data() const override { return reinterpret_cast<void*>(allocation_.ptr()); }
  size_t size() const override { return allocation_.size(); }
  int export_fd() const override { return export_fd_.get(); }
  cipc::MemoryKind kind() const override { return cipc::MemoryKind::kCuda; }
  bool event_handle(cipc::EventHandle* out) const override;

  int device() const override { return allocation_.device(); }
  cipc_cuda::DevicePtr ptr() const override { return allocation_.ptr(); }
  size_t bytes() const override { return allocation_.size(); }
  cipc_cuda::Status begin_write(cipc_cuda::StreamHandle stream) override;
  cipc_cuda::Status end_write(cipc_cuda::StreamHandle stream) override;
  cipc_cuda::Status wait_ready(cipc_cuda::StreamHandle stream) override;
  cipc_cuda::Status record_release(cipc_cuda::StreamHandle stream) override;
  // Blocks until the reads recorded by record_release() are done (release worker only).
  cipc_cuda::Status wait_released();

 private:
  CudaSlotMemory() = default;

  cipc_cuda::DeviceAllocation allocation_;
  cipc::UniqueFd export_fd_;
  SyncMode sync_ = SyncMode::kGpuEvents;
  cipc_cuda::Event readiness_;  // created (producer) or opened (consumer)
  cipc::EventHandle readiness_handle_{};
  cipc_cuda::Event release_;  // consumer: recorded after the last read, waited on locally
};

// The MemoryBackend for memory=cuda, on one device. Keeps track of its live slots so that a
// departed consumer's opened events can be closed in all of them.
class CudaMemoryBackend final : public cipc::MemoryBackend {
 public:
  CudaMemoryBackend(int device, SyncMode sync) : device_(device), sync_(sync) {}
  cipc::MemoryKind kind() const override { return cipc::MemoryKind::kCuda; }
  cipc::Result<std::unique_ptr<cipc::SlotMemory>> allocate(size_t size) override;
  cipc::Result<std::unique_ptr<cipc::SlotMemory>> import(cipc::UniqueFd fd, size_t size,
                                                         const cipc::EventHandle* event) override;
  int device() const { return device_; }
  SyncMode sync_mode() const { return sync_; }

 private:
  int device_;
  SyncMode sync_;
};

// Private device copies of frames for cudasrc-ipc io-mode=copy, recycled: a copy returns to the
// set when the last GstMemory using it is freed. Each carries one event that orders the copy
// into it, downstream's reads, and the next copy into it - all on the GPU.
class PrivateCopies : public std::enable_shared_from_this<PrivateCopies> {
 public:
  class Copy;
  static std::shared_ptr<PrivateCopies> create(int device) {
    return std::shared_ptr<PrivateCopies>(new PrivateCopies(device));
  }
  // A copy of at least `size` bytes, from the set or newly allocated.
  cipc::Result<std::shared_ptr<Copy>> acquire(size_t size);
  size_t allocated() const { return allocated_; }

 private:
  explicit PrivateCopies(int device) : device_(device) {}
  int device_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Copy>> free_;
  size_t allocated_ = 0;
};

class PrivateCopies::Copy final : public CudaRegion {
 public:
  int device() const override { return device_; }
  cipc_cuda::DevicePtr ptr() const override { return buffer_.ptr(); }
  size_t bytes() const override { return buffer_.size(); }
  cipc_cuda::Status begin_write(cipc_cuda::StreamHandle stream) override {
    return event_.wait(stream);
  }
  cipc_cuda::Status end_write(cipc_cuda::StreamHandle stream) override {
    return event_.record(stream);
  }
  cipc_cuda::Status wait_ready(cipc_cuda::StreamHandle stream) override {
    return event_.wait(stream);
  }
  cipc_cuda::Status record_release(cipc_cuda::StreamHandle stream) override {
    return event_.record(stream);
  }

 private:
  friend class PrivateCopies;
  int device_ = -1;
  cipc_cuda::DeviceBuffer buffer_;
  cipc_cuda::Event event_;
};

// Fills binding.cuda (the public table) and binding.cpu_access for memory in `region`, which
// the binding keeps alive (producer_slot, imported_slot or keepalive).
void bind_cuda_region(GstCipcSlotBinding& binding, CudaRegion& region);

// Keeps `keepalive` (which owns a frame's claim) until the reads recorded on `slot` are done,
// then drops it - sending RELEASE - on a background thread; nobody's thread waits for the GPU.
void release_when_read(CudaSlotMemory& slot, std::shared_ptr<void> keepalive);

// Keeps `keepalive` (e.g. an input buffer a kernel reads in place) until `done` has completed,
// then drops it on the same background thread.
void drop_when_done(std::shared_ptr<cipc_cuda::Event> done, std::shared_ptr<void> keepalive);

// Page-locks host memory (a downstream buffer's) once for the life of `mem` - its pool keeps it -
// so device-to-host copies into it run at full speed. Memory that refuses is remembered (and
// copied into as is).
void register_host_memory_once(GstMemory* mem, void* data, size_t size);

// The CUDA region behind a slot memory, or nullptr.
CudaRegion* cuda_region_of(GstMemory* mem);
// The CUDA slot behind a slot memory (producer or imported), or nullptr.
CudaSlotMemory* cuda_slot_of(GstMemory* mem);

// Chooses the device: `requested` >= 0 must exist; -1 picks device 0. Fills `info`.
// `require_export`: the device must be able to export memory as file descriptors (VMM).
cipc_cuda::Status open_device(int requested, cipc_cuda::DeviceInfo* info,
                              bool require_export = true);

}  // namespace cipc_gst
