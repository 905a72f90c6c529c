// SPDX-License-Identifier: LGPL-2.1-or-later
// How rg10tobgra's input frame reaches the GPU: the debayer's counterpart of ipcsink/slotcopy.
// - A frame in the pinned, CUDA-mapped pool rg10tobgra offers upstream (memory/pinnedmemory) is
//   read by the kernel in place over the bus, or first uploaded by a copy engine on a stream of
//   its own (cuda/input_upload): as input-mode says, or with auto whichever was timed faster for
//   the frame size (timed once per size, on the first pinned frame).
// - Any other memory (upstream ignored the pool) is copied into a device buffer, counted, and
//   waited for: upstream may reuse its buffer as soon as transform() returns.
// Pinned input stays referenced until the GPU has read it (hold_until_read()), with no CPU wait.
//
// rg10tobgra owns one DebayerInput: start() and stop() run from its start() and stop(), locate(),
// kernel_queued() and hold_until_read() from transform(), never two at once. counters() may be
// read from any thread (the stats property). CUDA builds only.
#pragma once

#include <gst/gst.h>

#include <atomic>

#include "camera/cameraenums.h"
#include "cuda_api.h"
#include "debayer.h"
#include "input_upload.h"
#include "recycled_events.h"

namespace cipc_gst {

// Where an input frame's rows lie in its buffer: as its GstVideoMeta says, else from the start,
// GST_ROUND_UP_4 (width) samples apart (what GStreamer assumes for video/x-bayer).
struct InputRows {
  size_t offset = 0;     // the first row's first byte
  size_t stride = 0;     // bytes from one row to the next
  size_t row_bytes = 0;  // the samples of one row: 2 bytes each
  size_t needed = 0;     // from `offset` to the last row's last sample (no padding after it)
};
InputRows input_rows(GstBuffer* inbuf, gint width, gint height);

// Whether the frame lies where the kernel can read it in place: one memory, of the pinned pool
// (gst_cipc_pinned_allocator_new()). `*pinned` then gets that memory's device address.
bool in_pinned_memory(GstBuffer* inbuf, cipc_cuda::DevicePtr* pinned);

// The path input-mode fixes for pinned input; false for auto, which times both.
bool fixed_input_path(GstCipcInputMode mode, cipc_cuda::InputPath* path);

// A device address as the pointer the CUDA layer's copies take.
void* device_address(cipc_cuda::DevicePtr ptr);
// Grows `buffer` to at least `size` bytes on `device`: the staging of foreign input here, and
// rg10tobgra's output before a download.
cipc_cuda::Status ensure_staging(cipc_cuda::DeviceBuffer& buffer, int device, size_t size);

// Where the kernel reads the frame, and what must happen around the kernel.
struct InputPlacement {
  cipc_cuda::DevicePtr ptr = 0;
  size_t pitch = 0;
  bool uploaded = false;  // by the uploader: kernel_queued() tells it once the kernel is queued
  // Keep the input buffer until the work queued on this stream so far is done (our pinned
  // memory, read in place or by the upload); nullptr: nothing reads it after transform().
  cipc_cuda::StreamHandle hold_on = nullptr;
};

// rg10tobgra's stats about its input, since start().
struct DebayerInputCounters {
  std::atomic<guint64> copies{0};      // frames that were not in the pinned pool
  std::atomic<guint64> uploads{0};     // pinned frames uploaded by the copy engine
  std::atomic<int> path{-1};           // how the last pinned frame was read (InputPath); -1: none
  std::atomic<double> in_place_us{0};  // what input-mode=auto timed per frame; 0: not timed
  std::atomic<double> upload_us{0};
};

class DebayerInput {
 public:
  // Frames for a kernel on `kernel_stream` of CUDA device `device`. Resets the counters.
  void start(int device, cipc_cuda::StreamHandle kernel_stream);
  // Waits for uploads still running, then lets go of the device buffers, the uploader and what
  // auto timed. The counters stay, for the stats.
  void stop();

  // Places `inbuf`'s frame (`width` x `height` 16-bit samples) for the kernel: in place, uploaded
  // or copied. Anything but GST_FLOW_OK comes with an error posted on `element`. `params` are
  // the kernel's, for auto's timing.
  GstFlowReturn locate(GstElement* element, GstBuffer* inbuf, gint width, gint height,
                       GstCipcInputMode mode, const cipc_cuda::DebayerParams& params,
                       InputPlacement* in);
  // The kernel that reads `in` is queued: an upload's device buffer may be reused after it.
  cipc_cuda::Status kernel_queued(const InputPlacement& in);
  // Keeps `inbuf` until the work queued on `in.hold_on` so far (the kernel reading it in place,
  // or its upload) is done, without this thread waiting: upstream's pool gets the buffer back
  // then. Nothing to do when `in.hold_on` is null.
  cipc_cuda::Status hold_until_read(GstBuffer* inbuf, const InputPlacement& in);

  const DebayerInputCounters& counters() const { return counters_; }

 private:
  cipc_cuda::InputPath pinned_path(GstElement* element, GstCipcInputMode mode,
                                   const cipc_cuda::DebayerParams& params, gint width, gint height);
  GstFlowReturn upload(GstElement* element, cipc_cuda::DevicePtr frame, const InputRows& rows,
                       gint height, InputPlacement* in);
  GstFlowReturn copy_to_device(GstElement* element, GstBuffer* inbuf, const InputRows& rows,
                               gint height, InputPlacement* in);

  int device_ = -1;
  cipc_cuda::StreamHandle stream_ = nullptr;  // the kernel's
  cipc_cuda::DeviceBuffer staging_;           // foreign input, allocated on first use
  cipc_cuda::InputUploader uploader_;         // created on the first upload
  cipc_cuda::RecycledEvents read_done_{-1};   // hold_until_read()'s, for device_
  gint timed_width_ = 0, timed_height_ = 0;   // auto: the size both paths were timed for
  cipc_cuda::InputPathTimes times_;
  DebayerInputCounters counters_;
};

}  // namespace cipc_gst
