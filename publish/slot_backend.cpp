// SPDX-License-Identifier: LGPL-2.1-or-later
#include "slot_backend.h"

#include <algorithm>

#include "host_memory.h"
#ifdef CIPC_HAVE_CUDA
#include "cuda_slots.h"
#include "deferred_destruction.h"
#include "device.h"
#endif

namespace cipc_publish {

BackendFailure open_slot_backend(cipc::MemoryKind kind, int device, cipc::SyncMode sync,
                                 cipc::ProducerConfig& config, SlotBackend* out, std::string* why) {
  *out = SlotBackend{};
  if (kind != cipc::MemoryKind::kCuda) {
    out->backend = std::make_shared<cipc_slots::HostMemoryBackend>();
    config.memory_kind = cipc::MemoryKind::kHost;
    config.sync_mode = cipc::SyncMode::kNone;
    return BackendFailure::kNone;
  }
#ifdef CIPC_HAVE_CUDA
  cipc_cuda::DeviceInfo info;
  cipc_cuda::Status status = cipc_slots::open_device(device, &info);
  if (!status) {
    *why = status.message();
    return BackendFailure::kNoDevice;
  }
  out->sync_mode = cipc_slots::usable_sync_mode(info, sync, &out->sync_fell_back);
  out->device = info.ordinal;
  out->device_name = info.name;
  out->mps_client = info.mps_client;
  out->backend = std::make_shared<cipc_slots::CudaMemoryBackend>(info.ordinal, out->sync_mode);
  config.memory_kind = cipc::MemoryKind::kCuda;
  config.sync_mode = out->sync_mode;
  std::copy(info.uuid.begin(), info.uuid.end(), config.gpu_uuid.begin());
  config.io_thread_scope = [] {
    return std::make_shared<cipc_cuda::DeferDestructionOnThisThread>();
  };
  return BackendFailure::kNone;
#else
  (void)device;
  (void)sync;
  *why = "built without the CUDA toolkit: only host memory can be shared";
  return BackendFailure::kNoCudaBuild;
#endif
}

void destroy_parked_slots() {
#ifdef CIPC_HAVE_CUDA
  cipc_cuda::destroy_parked();
#endif
}

}  // namespace cipc_publish
