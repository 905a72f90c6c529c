// SPDX-License-Identifier: LGPL-2.1-or-later
// Choosing the GPU for a producer: a device by ordinal, able to export memory, and the sync mode
// it can do. (The consumer's choice, by the producer's GPU UUID, is consumer_backend.h.)
#pragma once

#include "cuda_api.h"
#include "protocol.h"

namespace cipc_slots {

// Makes `requested` (>= 0; -1 picks device 0) current and fills `info`. With `require_export`,
// the device must be able to export memory as file descriptors (VMM with POSIX handles).
cipc_cuda::Status open_device(int requested, cipc_cuda::DeviceInfo* info,
                              bool require_export = true);

// The sync mode a producer on `info` uses when `requested` is asked for: kGpuEvents falls back
// to kCpu where the device cannot share events (`fell_back` tells).
cipc::SyncMode usable_sync_mode(const cipc_cuda::DeviceInfo& info, cipc::SyncMode requested,
                                bool* fell_back);

}  // namespace cipc_slots
