// SPDX-License-Identifier: LGPL-2.1-or-later
// CPU access to a CUDA region through one pinned staging copy: the first map downloads (when it
// reads), the last unmap uploads (after a write). Nested maps of one region (GStreamer maps a
// memory once per video plane) share the staging copy. Synchronous: CPU access is the slow path.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "cuda_slots.h"

namespace cipc_slots {

class StagingCopy {
 public:
  explicit StagingCopy(CudaRegion& region) : region_(region) {}
  StagingCopy(const StagingCopy&) = delete;
  StagingCopy& operator=(const StagingCopy&) = delete;

  // A host pointer to the region's bytes, downloaded first if `read`; nullptr with `error`.
  uint8_t* map(bool read, bool write, std::string* error);
  // Uploads the staging copy back after the last unmap if any map wrote; false with `error`.
  bool unmap(std::string* error);

 private:
  bool ensure_resources(std::string* error);

  CudaRegion& region_;
  std::mutex mutex_;
  cipc_cuda::Stream stream_;
  cipc_cuda::PinnedHostBuffer staging_;
  int maps_ = 0;
  bool wrote_ = false;
};

}  // namespace cipc_slots
