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
// For CUDA memory it also sets `config.io_thread_scope`: the slots whose last claim ends on the
// producer's I/O thread are destroyed by destroy_parked_slots() instead.
BackendFailure open_slot_backend(cipc::MemoryKind kind, int device, cipc::SyncMode sync,
                                 cipc::ProducerConfig& config, SlotBackend* out, std::string* why);

// Destroys the CUDA slot memory and events that background threads parked (the producer's I/O
// thread, the release worker): cuda/deferred_destruction.h says why they may not. Call it on the
// publisher's own thread (a frame acquired or rendered, a close); cheap when nothing is parked,
// nothing at all in a build without CUDA.
void destroy_parked_slots();

}  // namespace cipc_publish
