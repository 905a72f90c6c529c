// SPDX-License-Identifier: LGPL-2.1-or-later
// How the debayer reads a frame that lies in CUDA-mapped pinned host memory (the pool rg10tobgra
// offers upstream): in place, every load of the kernel a read over the bus, or after a copy
// engine has uploaded it into device memory on a stream of its own, overlapping the previous
// frame's kernel. Either way the frame's bytes cross the bus once (in place, the tile halos a
// little more); which is faster belongs to the machine. On an H200 (PCIe 5) an upload moves
// 53-55 GB/s where the kernel's reads over the bus reach about 22 GB/s; on Jetson the pinned
// memory is the GPU's own DRAM and an upload only adds a copy. measure_input_paths() times both
// on the frame size in use, so the choice is made by the machine it runs on.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda_api.h"
#include "debayer.h"

namespace cipc_cuda {

enum class InputPath { kInPlace, kUpload };

// Uploads frames into two device buffers, alternately, on a copy stream of its own. The kernel
// of frame N (on the caller's stream) waits for upload N; upload N + 2 waits for that kernel, so
// upload N + 1 runs while kernel N does. Nothing waits on the CPU.
class InputUploader {
 public:
  InputUploader() = default;
  InputUploader(InputUploader&&) noexcept = default;
  InputUploader& operator=(InputUploader&&) noexcept = default;

  static Status create(int device, InputUploader* out);

  // Queues the upload of `rows` rows of `row_bytes` bytes from `host` (pinned host memory, or
  // its mapped device address; rows `host_pitch` apart) and makes `kernel_stream` wait for it.
  // `*device_in` receives the copy, rows `*device_pitch` apart (a multiple of 256 bytes). After
  // queuing the kernel that reads it, call kernel_queued(). Work queued on copy_stream() after
  // this runs once the upload is done: the host memory may be reused then.
  Status upload(const void* host, size_t host_pitch, size_t row_bytes, size_t rows,
                StreamHandle kernel_stream, DevicePtr* device_in, size_t* device_pitch);
  // The kernel that reads the last upload is queued on `kernel_stream`.
  Status kernel_queued(StreamHandle kernel_stream);
  StreamHandle copy_stream() const { return copy_stream_.handle(); }
  uint64_t uploads() const { return uploads_; }
  bool valid() const { return copy_stream_.handle() != nullptr; }

 private:
  struct Staging {
    DeviceBuffer buffer;
    Event uploaded;  // recorded on the copy stream after the upload into `buffer`
    Event consumed;  // recorded on the kernel's stream after the kernel that read `buffer`
    bool ever_consumed = false;
  };
  int device_ = -1;
  Stream copy_stream_;
  Staging staging_[2];
  int current_ = -1;  // the buffer of the last upload
  uint64_t uploads_ = 0;
};

// Wall time of one frame on each path, best of a few runs: the debayer reading a pinned host
// frame in place, and the same frame uploaded first (upload and kernel, one after the other).
struct InputPathTimes {
  double in_place_us = 0;
  double upload_us = 0;
  InputPath faster() const {
    return upload_us > 0 && upload_us < in_place_us ? InputPath::kUpload : InputPath::kInPlace;
  }
};

// Times both paths for a `width` x `height` frame with `params` (fixed white balance), on a
// pinned buffer, an uploader and a debayer of its own: nothing of the caller's changes. Takes a
// few milliseconds (about 15 at 4K on an H200, most of it allocating the pinned buffer).
Status measure_input_paths(int device, const DebayerParams& params, int width, int height,
                           InputPathTimes* out);

const char* input_path_name(InputPath path);

}  // namespace cipc_cuda
