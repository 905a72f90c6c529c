// SPDX-License-Identifier: LGPL-2.1-or-later
// Copies a frame that does not sit in a current slot (upstream ignored the pool, or wrote into a
// pool a roll-over replaced) into one: a CPU copy into host slots; one upload (system memory) or
// one device-to-device copy (another element's CUDA memory) into CUDA slots, on the copier's own
// stream. copy() does not wait for the GPU: consumers wait for the slot on the GPU (or, with
// sync-mode=cpu, the slot's end_write waits), and upstream's buffer is kept referenced (and
// mapped) until the copy has read it.
//
// An upload is only asynchronous from page-locked memory: from pageable memory the driver stages
// it through a buffer of its own and returns when the whole frame has been read, at a fraction of
// the bus's speed. So the copier offers upstream a pool of pinned memory to write frames into
// (upload_pool()), page-locks pooled upstream memory once for its life, and counts the uploads
// that still came from pageable memory.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <atomic>
#include <memory>
#include <string>

#include "memory/slotpool.h"
#ifdef CIPC_HAVE_CUDA
#include "cuda_api.h"
#endif

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

  // CUDA slots: a pool of pinned host memory for frames of `caps` (`size` bytes each), for
  // upstream to write system-memory frames into, kept while the caps stay the same (a new
  // reference); nullptr for host slots or when it cannot be made.
  GstBufferPool* upload_pool(GstCaps* caps, guint size);
  // Uploads that read pageable memory (each a synchronous staging copy in the driver).
  guint64 pageable_uploads() const { return pageable_uploads_; }
  // The streaming thread's time inside those uploads' copy calls, in nanoseconds (wall clock):
  // what a producer pays for frames that bypass the pinned pool.
  guint64 pageable_upload_ns() const { return pageable_upload_ns_; }

 private:
  struct Cuda;
  SlotCopier() = default;
  bool cpu_copy(const GstVideoInfo& info, GstBuffer* buffer, GstBuffer* slot, std::string* error);
  bool cuda_copy(const GstVideoInfo& info, GstBuffer* buffer, GstBuffer* slot, std::string* error);
  struct HeldInput;
#ifdef CIPC_HAVE_CUDA
  // True (and counted) when the upload will read pageable memory.
  bool note_upload_source(GstBuffer* buffer, const GstVideoFrame& frame);
  cipc_cuda::Status order_after_writer(GstMemory* mem, cipc_cuda::StreamHandle stream);
#endif
  // CUDA builds: lets go of `held` (upstream's buffer) once the copy on the stream is done.
  bool release_after_copy(std::shared_ptr<HeldInput> held, GstBuffer* buffer, std::string* error);
  std::unique_ptr<Cuda> cuda_;
  std::atomic<guint64> pageable_uploads_{0};
  std::atomic<guint64> pageable_upload_ns_{0};
};

}  // namespace cipc_gst
