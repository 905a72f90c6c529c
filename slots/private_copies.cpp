// SPDX-License-Identifier: LGPL-2.1-or-later
#include "private_copies.h"

#include <string>

namespace cipc_slots {

cipc::Result<std::shared_ptr<PrivateCopies::Copy>> PrivateCopies::acquire(size_t size) {
  std::unique_ptr<Copy> copy;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if ((*it)->bytes() >= size) {
        copy = std::move(*it);
        free_.erase(it);
        break;
      }
    }
  }
  if (!copy) {
    copy.reset(new Copy());
    copy->device_ = device_;
    cipc_cuda::Status s = cipc_cuda::DeviceBuffer::create(device_, size, &copy->buffer_);
    if (s) s = cipc_cuda::Event::create_interprocess(device_, &copy->event_);
    if (!s)
      return cipc::Error{cipc::ErrorCode::kSystem,
                         "allocating a private frame copy: " + s.message()};
    std::lock_guard<std::mutex> lock(mutex_);
    ++allocated_;
  }
  // Back into the set when the last user lets go (the set may be gone by then).
  std::weak_ptr<PrivateCopies> owner = shared_from_this();
  return std::shared_ptr<Copy>(copy.release(), [owner](Copy* c) {
    if (auto set = owner.lock()) {
      std::lock_guard<std::mutex> lock(set->mutex_);
      set->free_.emplace_back(c);
    } else {
      delete c;
    }
  });
}

size_t PrivateCopies::allocated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocated_;
}

cipc::Result<std::shared_ptr<PrivateCopies::Copy>> copy_frame(PrivateCopies& copies,
                                                              CudaSlotMemory& slot, size_t size,
                                                              cipc_cuda::StreamHandle stream,
                                                              std::shared_ptr<void> claim_keepalive,
                                                              DeferredReleases* deferred) {
  auto copy = copies.acquire(size);
  if (!copy) return copy.error();
  PrivateCopies::Copy& dst = *copy.value();
  cipc_cuda::Status s = dst.begin_write(stream);
  if (s) s = slot.wait_ready(stream);
  if (s)
    s = cipc_cuda::copy_2d_async(reinterpret_cast<void*>(dst.ptr()), size,
                                 reinterpret_cast<const void*>(slot.ptr()), size, size, 1, stream);
  if (s) s = dst.end_write(stream);
  if (s) s = slot.record_release(stream);
  if (!s)
    return cipc::Error{cipc::ErrorCode::kSystem, "copying a frame on the GPU: " + s.message()};
  // RELEASE as soon as the copy has read the slot, without this thread waiting for it.
  if (deferred) {
    deferred->add(slot, std::move(claim_keepalive));
  } else {
    slot.drop_after_reads(std::move(claim_keepalive));
  }
  return copy;
}

}  // namespace cipc_slots
