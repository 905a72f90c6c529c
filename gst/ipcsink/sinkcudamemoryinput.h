// SPDX-License-Identifier: LGPL-2.1-or-later
// GstCudaMemory that an upstream element wrote into exportable memory (GStreamer >= 1.24's VMM
// pools), sent to consumers by reference as a slot, without the device copy that other
// GstCudaMemory takes (issue 29). cudasink-ipc proposes such a pool upstream for
// memory:CUDAMemory caps (make_exportable_cuda_pool). Each GstCudaMemory of it is adopted once
// per sink: its descriptor, a readiness event of its own and a slot index of the current
// generation are cached on the memory (qdata), and consumers are told to drop their import
// (RETIRE) when the memory is freed. Memory that cannot be exported is the caller's to copy.
#pragma once

#ifdef CIPC_HAVE_GST_CUDA
#include <gst/gst.h>
#include <gst/video/video.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/gstcudainterop.h"
#include "cuda_api.h"
#include "memory/slotpool.h"
#include "memorybackend.h"
#include "producer.h"

namespace cipc_gst {

// A GstCudaBufferPool on `context` for `caps` whose memory can be exported, keeping at least
// `min_buffers`; `*size` is its buffer size. nullptr with `why` where none can be made
// (GStreamer < 1.24, a device or driver without VMM descriptor handles).
GstBufferPool* make_exportable_cuda_pool(GstCudaContext* context, GstCaps* caps, guint min_buffers,
                                         guint* size, std::string* why);

// The layout of the frame in GstCudaMemory `buffer` without a video meta: the memory's own
// pitched layout (`caps_info` for other memory). describe_planes() takes a meta's planes first.
GstVideoInfo exported_frame_layout(GstBuffer* buffer, const GstVideoInfo& caps_info);

struct RetiredCudaMemory;
struct AdoptedSlot;

class SinkCudaMemoryInput {
 public:
  // Told, on any thread and possibly after this object is gone, that a slot it handed out will
  // never be sent again: its memory was freed (or replaced by a newer generation's adoption).
  using Retire = std::function<void(uint64_t generation, uint32_t index)>;
  // Told the buffer limit of each upstream pool whose frames are sent (0: it grows as needed).
  using PoolLimit = std::function<void(guint max_buffers)>;

  // Made by create(), which says why it cannot be.
  static std::unique_ptr<SinkCudaMemoryInput> create(int device, cipc::SyncMode sync, Retire retire,
                                                     PoolLimit pool_limit, std::string* why);
  // Memory kept out of its pool under a stuck consumer (FrameHold::retire) goes back once the
  // last frame hold is gone too.
  ~SinkCudaMemoryInput();
  SinkCudaMemoryInput(const SinkCudaMemoryInput&) = delete;
  SinkCudaMemoryInput& operator=(const SinkCudaMemoryInput&) = delete;

  enum class Outcome {
    kSent,           // `ref` and `hold` are set: publish them
    kNotExportable,  // not one exportable GstCudaMemory of our device's primary context: copy it
    kFailed,         // `error` says why
  };
  // `buffer`'s frame as a slot of `pools`' current generation, by reference. `hold` keeps the
  // buffer, and so the memory, until every consumer released the frame; the slot's readiness is
  // recorded after upstream's pending work on the memory (sync-mode=cpu: waited for here).
  Outcome send(GstBuffer* buffer, SlotPoolGenerations& pools, cipc::SlotRef* ref,
               std::shared_ptr<cipc::FrameHold>* hold, std::string* error);

 private:
  SinkCudaMemoryInput(int device, cipc::SyncMode sync, Retire retire, PoolLimit pool_limit);
  // The steps of send(), in order, on the streaming thread. Whether `mem` can be sent as it is:
  // GstCudaMemory from the slot's first byte, of our device's primary context, exported (its
  // descriptor `exported_fd` stays the memory's).
  bool exportable(GstMemory* mem, int* exported_fd) const;
  // This sink's adoption of `mem` in `pools`' current generation (kSent, `slot` set), made on
  // first use by adopt(); an adoption of a replaced generation is dropped (retired).
  Outcome find_or_adopt(GstMemory* mem, int exported_fd, cipc_cuda::DevicePtr device_ptr,
                        SlotPoolGenerations& pools, std::shared_ptr<AdoptedSlot>* slot,
                        std::string* error);
  Outcome adopt(GstMemory* mem, int exported_fd, cipc_cuda::DevicePtr device_ptr,
                SlotPoolGenerations& pools, std::shared_ptr<AdoptedSlot>* slot, std::string* error);
  // Records the slot's readiness after upstream's pending work on `mem`.
  bool mark_ready(AdoptedSlot& slot, GstMemory* mem, std::string* error);
  // Tells pool_limit_ the limit of the pool `buffer` came from, when that pool changes.
  void note_pool(GstBuffer* buffer);

  const int device_;
  const cipc::SyncMode sync_;
  const uint64_t serial_;  // names this sink's adoptions among others' on the same memory
  Retire retire_;
  PoolLimit pool_limit_;
  cipc_cuda::Stream idle_stream_;       // readiness of memory nothing still writes is recorded here
  GstBufferPool* last_pool_ = nullptr;  // the upstream pool whose limit was last told
  std::shared_ptr<RetiredCudaMemory> retired_;
};

}  // namespace cipc_gst
#endif  // CIPC_HAVE_GST_CUDA
