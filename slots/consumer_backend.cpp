// SPDX-License-Identifier: LGPL-2.1-or-later
#include "consumer_backend.h"

#include <algorithm>
#include <string>

#include "host_memory.h"
#ifdef CIPC_HAVE_CUDA
#include "cuda_slots.h"
#include "device.h"
#endif

namespace cipc_slots {

cipc::Result<std::shared_ptr<cipc::MemoryBackend>> backend_for_producer(
    const cipc::Welcome& welcome, int requested_device, ConsumerDevice* device,
    bool keep_descriptors) {
  *device = ConsumerDevice();
  if (welcome.memory_kind != cipc::MemoryKind::kCuda)
    return std::shared_ptr<cipc::MemoryBackend>(std::make_shared<HostMemoryBackend>());
#ifdef CIPC_HAVE_CUDA
  cipc_cuda::Uuid uuid;
  std::copy(welcome.gpu_uuid.begin(), welcome.gpu_uuid.end(), uuid.begin());
  int ordinal = requested_device;
  if (ordinal < 0) {
    ordinal = cipc_cuda::find_device(uuid);
    if (ordinal < 0) {
      std::string why;
      if (cipc_cuda::device_count(&why) <= 0)
        return cipc::Error{
            cipc::ErrorCode::kUnsupported,
            "the producer shares CUDA memory but this process has no CUDA device (" + why + ")"};
      return cipc::Error{cipc::ErrorCode::kGpuMismatch,
                         "the producer's GPU is not visible to this process (check "
                         "CUDA_VISIBLE_DEVICES); CUDA memory can only be shared on one GPU"};
    }
  }
  cipc_cuda::DeviceInfo info;
  const cipc_cuda::Status status = open_device(ordinal, &info);
  if (!status) return cipc::Error{cipc::ErrorCode::kUnsupported, status.message()};
  if (info.uuid != uuid)
    return cipc::Error{cipc::ErrorCode::kGpuMismatch,
                       "cuda-device-id=" + std::to_string(ordinal) +
                           " is not the GPU the producer uses; CUDA memory can only be shared "
                           "on one GPU"};
  device->ordinal = ordinal;
  device->mps_client = info.mps_client;
  const cipc::SyncMode sync =
      welcome.sync_mode == cipc::SyncMode::kCpu ? cipc::SyncMode::kCpu : cipc::SyncMode::kGpuEvents;
  return std::shared_ptr<cipc::MemoryBackend>(
      std::make_shared<CudaMemoryBackend>(ordinal, sync, keep_descriptors));
#else
  (void)requested_device;
  (void)keep_descriptors;
  return cipc::Error{cipc::ErrorCode::kUnsupported,
                     "the producer shares CUDA memory but this cudaipc plugin was built without "
                     "CUDA"};
#endif
}

}  // namespace cipc_slots
