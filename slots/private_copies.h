// SPDX-License-Identifier: LGPL-2.1-or-later
// Private device copies of frames (cudasrc-ipc io-mode=copy), recycled: a copy returns to its set
// when its last user lets go. Each carries one event that orders the copy into it, the reads of
// it and the next copy into it - all on the GPU.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "cuda_slots.h"
#include "deferred_releases.h"

namespace cipc_slots {

class PrivateCopies : public std::enable_shared_from_this<PrivateCopies> {
 public:
  class Copy;
  static std::shared_ptr<PrivateCopies> create(int device) {
    return std::shared_ptr<PrivateCopies>(new PrivateCopies(device));
  }
  // A copy of at least `size` bytes, from the set or newly allocated.
  cipc::Result<std::shared_ptr<Copy>> acquire(size_t size);
  size_t allocated() const;
  int device() const { return device_; }

 private:
  explicit PrivateCopies(int device) : device_(device) {}
  int device_;
  mutable std::mutex mutex_;
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

// io-mode=copy of one received frame: the copy is ordered on `stream` after the producer's
// write, and the slot's claim (inside `claim_keepalive`) is dropped - RELEASE - as soon as the
// copy has read the slot, without the calling thread waiting for it: by `deferred` (the
// receiving thread's, see deferred_releases.h) or, without one, by the slot itself
// (drop_after_reads: a short poll, then the release worker).
cipc::Result<std::shared_ptr<PrivateCopies::Copy>> copy_frame(PrivateCopies& copies,
                                                              CudaSlotMemory& slot, size_t size,
                                                              cipc_cuda::StreamHandle stream,
                                                              std::shared_ptr<void> claim_keepalive,
                                                              DeferredReleases* deferred = nullptr);

}  // namespace cipc_slots
