// SPDX-License-Identifier: LGPL-2.1-or-later
// The two ways cudav4l2src moves frames from a V4L2 device into GstBuffers. Both keep one rule:
// a V4L2 buffer is queued to the driver only when nothing downstream can still read it.
//
// - UserptrStream: the driver's DMA writes into buffers of a GstBufferPool (downstream's, e.g.
//   the debayer's pinned CUDA-mapped host memory, or our own page-aligned pool). A buffer is
//   queued only after it was acquired from the pool, i.e. after downstream released it. The
//   frame is the pool buffer itself: no copy.
// - MmapStream: the driver's own buffers, mapped, are wrapped read-only in GstBuffers; a buffer
//   is requeued from its GstMemory's free function, in whatever thread drops the last
//   reference. The mappings (and the device) live until the last such buffer is gone.
#pragma once

#include <gst/gst.h>

#include <memory>

#include "v4l2capture.h"

// GStreamer-side code, so cipc_gst's (cipc_v4l2 is the GStreamer-free layer below).
namespace cipc_gst {

class CaptureStream {
 public:
  virtual ~CaptureStream() = default;
  virtual cipc_v4l2::Memory memory() const = 0;
  // Queues the first buffers and starts streaming.
  virtual bool start(cipc_v4l2::Error* error) = 0;
  // Gives the driver every buffer it can have without waiting (USERPTR: free pool buffers).
  // Returns false with `error` on a driver or pool failure; `*flushing` when the pool is
  // being shut down.
  virtual bool refill(bool* flushing, cipc_v4l2::Error* error) = 0;
  // Buffers the driver holds now; 0 means every buffer is downstream.
  virtual unsigned queued() const = 0;
  // Dequeues a frame (call after Device::wait_for_frame() said kReady). False with an empty
  // `error` when nothing was ready after all. `buffer` holds `frame_bytes` bytes of the frame.
  virtual bool dequeue(size_t frame_bytes, cipc_v4l2::Frame* frame, GstBuffer** buffer,
                       cipc_v4l2::Error* error) = 0;
  // Stops streaming and gives back every buffer the driver held. Idempotent.
  virtual void stop() = 0;
};

// `pool` must be configured for buffers of at least `size_image` bytes (one memory each) and
// active; `count` driver buffers must already have been granted with
// Device::request_buffers(Memory::kUserptr).
std::unique_ptr<CaptureStream> make_userptr_stream(std::shared_ptr<cipc_v4l2::Device> device,
                                                   GstBufferPool* pool, unsigned count,
                                                   size_t size_image);

// `count` MMAP buffers must already have been granted.
std::unique_ptr<CaptureStream> make_mmap_stream(std::shared_ptr<cipc_v4l2::Device> device,
                                                unsigned count);

// Whether `buffer` can be a USERPTR capture target of `size_image` bytes: one memory, mappable
// for writing, starting on a page boundary, large enough. `why` gets the reason when not.
bool buffer_suits_userptr(GstBuffer* buffer, size_t size_image, std::string* why);

// The system page size.
size_t page_size();

}  // namespace cipc_gst
