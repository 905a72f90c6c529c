// SPDX-License-Identifier: LGPL-2.1-or-later
// Shared host memory behind ipc's MemoryBackend: memfd_create + mmap. The producer seals the size
// (F_SEAL_SHRINK and F_SEAL_GROW) so a consumer's mapping can never be cut short under it, and,
// after mapping it itself, seals it against writes (F_SEAL_FUTURE_WRITE) so that no consumer can
// write into a frame another consumer reads. The consumer refuses descriptors without these
// seals and maps read-only.
#pragma once

#include <cstddef>
#include <memory>

#include "memorybackend.h"

namespace cipc_slots {

class HostMemoryBackend final : public cipc::MemoryBackend {
 public:
  cipc::MemoryKind kind() const override { return cipc::MemoryKind::kHost; }
  cipc::Result<std::unique_ptr<cipc::SlotMemory>> allocate(size_t size) override;
  cipc::Result<std::unique_ptr<cipc::SlotMemory>> import(cipc::UniqueFd fd, size_t size,
                                                         const cipc::EventHandle* event) override;
};

}  // namespace cipc_slots
