// SPDX-License-Identifier: LGPL-2.1-or-later
// The memory-backend interface: where slot memory comes from (producer) and how a received slot
// is mapped (consumer). The backends themselves (memfd host memory, CUDA VMM slots) live in
// slots/ and are injected through this interface, so the producer and consumer never see them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "protocol.h"
#include "status.h"
#include "unique_fd.h"

namespace cipc {

// One slot's memory, in either process.
class SlotMemory {
 public:
  virtual ~SlotMemory() = default;
  // CPU-addressable pointer for host memory; the device pointer (as an integer) for CUDA.
  virtual void* data() const = 0;
  virtual size_t size() const = 0;
  // The shareable descriptor (producer side); -1 on the consumer side.
  virtual int export_fd() const = 0;
  virtual MemoryKind kind() const = 0;
  // A CUDA backend also exports a readiness event with each slot (producer side).
  virtual bool event_handle(EventHandle* out) const {
    (void)out;
    return false;
  }
};

class MemoryBackend {
 public:
  virtual ~MemoryBackend() = default;
  virtual MemoryKind kind() const = 0;
  // Producer: a new exportable allocation of at least `size` bytes.
  virtual Result<std::unique_ptr<SlotMemory>> allocate(size_t size) = 0;
  // Consumer: map a slot a producer sent. Must verify the descriptor really provides `size`
  // bytes, so that a lying producer cannot make later reads fault.
  virtual Result<std::unique_ptr<SlotMemory>> import(UniqueFd fd, size_t size,
                                                     const EventHandle* event) = 0;
};

}  // namespace cipc
