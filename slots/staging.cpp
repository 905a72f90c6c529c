// SPDX-License-Identifier: LGPL-2.1-or-later
#include "staging.h"

namespace cipc_slots {

bool StagingCopy::ensure_resources(std::string* error) {
  if (staging_.data()) return true;
  cipc_cuda::Status s = cipc_cuda::Stream::create(region_.device(), &stream_);
  if (s) s = cipc_cuda::PinnedHostBuffer::create(region_.bytes(), &staging_);
  if (!s) *error = "no CPU staging memory for a CUDA slot: " + s.message();
  return static_cast<bool>(s);
}

uint8_t* StagingCopy::map(bool read, bool write, std::string* error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (maps_ == 0) {
    if (!ensure_resources(error)) return nullptr;
    if (read) {
      cipc_cuda::Status s = region_.wait_ready(stream_.handle());
      if (s)
        s = cipc_cuda::copy_2d_async(staging_.data(), region_.bytes(),
                                     reinterpret_cast<const void*>(region_.ptr()), region_.bytes(),
                                     region_.bytes(), 1, stream_.handle());
      if (s) s = stream_.synchronize();
      if (!s) {
        *error = "downloading a CUDA slot for CPU access failed: " + s.message();
        return nullptr;
      }
    }
  }
  ++maps_;
  wrote_ |= write;
  return static_cast<uint8_t*>(staging_.data());
}

bool StagingCopy::unmap(std::string* error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (maps_ == 0 || --maps_ > 0 || !wrote_) return true;
  wrote_ = false;
  cipc_cuda::Status s = region_.begin_write(stream_.handle());
  if (s)
    s = cipc_cuda::copy_2d_async(reinterpret_cast<void*>(region_.ptr()), region_.bytes(),
                                 staging_.data(), region_.bytes(), region_.bytes(), 1,
                                 stream_.handle());
  if (s) s = region_.end_write(stream_.handle());
  if (s) s = stream_.synchronize();
  if (!s) *error = "uploading a CPU write into a CUDA slot failed: " + s.message();
  return static_cast<bool>(s);
}

}  // namespace cipc_slots
