// SPDX-License-Identifier: LGPL-2.1-or-later
#include "device.h"

#include <string>

namespace cipc_slots {

cipc_cuda::Status open_device(int requested, cipc_cuda::DeviceInfo* info, bool require_export) {
  std::string why;
  const int count = cipc_cuda::device_count(&why);
  if (count <= 0)
    return cipc_cuda::Status::failure(why.empty() ? "no CUDA device is present" : why);
  const int ordinal = requested < 0 ? 0 : requested;
  if (ordinal >= count)
    return cipc_cuda::Status::failure("cuda-device-id=" + std::to_string(requested) +
                                      " but this machine has " + std::to_string(count) +
                                      " CUDA device(s)");
  cipc_cuda::Status s = cipc_cuda::query_device(ordinal, info);
  if (!s) return s;
  if (require_export && (!info->vmm_supported || !info->posix_fd_supported))
    return cipc_cuda::Status::failure("CUDA device " + std::to_string(ordinal) + " (" + info->name +
                                      ") cannot export memory as file descriptors (VMM with POSIX "
                                      "handles is required)");
  return cipc_cuda::set_device(ordinal);
}

cipc::SyncMode usable_sync_mode(const cipc_cuda::DeviceInfo& info, cipc::SyncMode requested,
                                bool* fell_back) {
  *fell_back = requested == cipc::SyncMode::kGpuEvents && !info.ipc_events_supported;
  return *fell_back || requested == cipc::SyncMode::kCpu ? cipc::SyncMode::kCpu
                                                         : cipc::SyncMode::kGpuEvents;
}

}  // namespace cipc_slots
