// SPDX-License-Identifier: LGPL-2.1-or-later
// Copies a frame that does not sit in a current slot (upstream ignored the pool, or wrote into a
// pool a roll-over replaced) into one: a CPU copy into host slots; one upload (system memory) or
// one device-to-device copy (another element's CUDA memory) into CUDA slots, on the copier's own
// stream. copy() does not wait for the GPU: consumers wait for the slot on the GPU (or, with
// sync-mode=cpu, the slot's end_write waits), and upstream's buffer is kept referenced (and
// mapped) until the copy has read it.
#pragma once

#include <gst/gst.h>

#include <memory>
#include <string>

#include "slotpool.h"

namespace cipc_gst {

class SlotCopier {
 public:
  // `cuda_device` >= 0: the slots are CUDA memory on that device (the stream is made there).
  static std::unique_ptr<SlotCopier> create(int cuda_device, std::string* error);
  ~SlotCopier();
  SlotCopier(const SlotCopier&) = delete;
  SlotCopier& operator=(const SlotCopier&) = delete;

  // A buffer of the current pool holding `buffer`'s frame, flags and timestamps; nullptr with
  // `error` (a sentence) when it could not be done.
  GstBuffer* copy(const SlotPoolGenerations& pools, GstBuffer* buffer, std::string* error);

 private:
  struct Cuda;
  SlotCopier() = default;
  bool cpu_copy(const GstVideoInfo& info, GstBuffer* buffer, GstBuffer* slot, std::string* error);
  bool cuda_copy(const GstVideoInfo& info, GstBuffer* buffer, GstBuffer* slot, std::string* error);
  struct HeldInput;
  // CUDA builds: lets go of `held` (upstream's buffer) once the copy on the stream is done.
  bool release_after_copy(std::shared_ptr<HeldInput> held, GstBuffer* buffer, std::string* error);
  std::unique_ptr<Cuda> cuda_;
};

}  // namespace cipc_gst
