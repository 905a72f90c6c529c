// SPDX-License-Identifier: LGPL-2.1-or-later
// The consumer's memory backend for what a producer shares (its WELCOME): host memory maps
// anywhere; CUDA memory needs the producer's own GPU, found by the UUID the WELCOME carries.
// Builds without CUDA too (CUDA producers are then refused with a sentence saying why).
#pragma once

#include <memory>

#include "memorybackend.h"
#include "protocol.h"

namespace cipc_slots {

// The GPU a consumer imports on.
struct ConsumerDevice {
  int ordinal = -1;         // -1 for host memory
  bool mps_client = false;  // this process's context there is an MPS client
};

// `requested_device` >= 0 names the GPU to import on, which must be the producer's; -1 finds
// it by UUID. `device` receives the GPU used. Errors say why in a sentence: no CUDA device, the
// producer's GPU not visible here, or another GPU named. `keep_descriptors`: CUDA slots keep
// their descriptors for a second importer (GL's memory objects; CudaSlotMemory::kept_descriptor).
cipc::Result<std::shared_ptr<cipc::MemoryBackend>> backend_for_producer(
    const cipc::Welcome& welcome, int requested_device, ConsumerDevice* device,
    bool keep_descriptors = false);

}  // namespace cipc_slots
