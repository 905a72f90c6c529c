// SPDX-License-Identifier: LGPL-2.1-or-later
// Where a publisher's slots come from, shared by cudasink-ipc and the writer: memfd host memory,
// or VMM allocations on a CUDA device that can export them, with the sync mode the device can
// do. Fills the producer's memory kind, sync mode and GPU UUID.
#pragma once

#include <memory>
#include <string>

#include "memorybackend.h"
#include "producer.h"

namespace cipc_publish {

struct SlotBackend {
  std::shared_ptr<cipc::MemoryBackend> backend;
  int device = -1;  // CUDA ordinal; -1 for host memory
  std::string device_name;
  cipc::SyncMode sync_mode = cipc::SyncMode::kNone;
  bool sync_fell_back = false;  // the device cannot share events: sync-mode=cpu instead
  bool mps_client = false;      // this process's context on the device is a CUDA MPS client
};

enum class BackendFailure {
  kNone,
  kNoCudaBuild,  // CUDA memory asked of a build without the CUDA toolkit
  kNoDevice,     // no usable device (none, out of range, cannot export, no driver)
};

// The slots' memory for `kind` (kHost or kCuda) on `device` (-1: device 0), with `sync` asked
// for; sets `config`'s memory_kind, sync_mode and gpu_uuid. kNone on success, else `why`.
BackendFailure open_slot_backend(cipc::MemoryKind kind, int device, cipc::SyncMode sync,
                                 cipc::ProducerConfig& config, SlotBackend* out, std::string* why);

}  // namespace cipc_publish
