// SPDX-License-Identifier: LGPL-2.1-or-later
#include "input_upload.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "check.h"
#include "debayer_gpu.h"
#include "device_scope.h"

namespace cipc_cuda {

Status InputUploader::create(int device, InputUploader* out) {
  if (!out) return Status::failure("InputUploader::create: null output");
  InputUploader made;
  made.device_ = device;
  CIPC_RETURN_IF_ERROR(Stream::create(device, &made.copy_stream_));
  for (Staging& s : made.staging_) {
    CIPC_RETURN_IF_ERROR(Event::create_local(device, &s.uploaded));
    CIPC_RETURN_IF_ERROR(Event::create_local(device, &s.consumed));
  }
  *out = std::move(made);
  return Status::ok();
}

Status InputUploader::upload(const void* host, size_t host_pitch, size_t row_bytes, size_t rows,
                             StreamHandle kernel_stream, DevicePtr* device_in,
                             size_t* device_pitch) {
  if (!valid()) return Status::failure("InputUploader::upload: not created");
  if (!host || !device_in || !device_pitch)
    return Status::failure("InputUploader::upload: null pointer");
  const int next = current_ < 0 ? 0 : 1 - current_;
  Staging& s = staging_[next];
  // Rows start 256-byte aligned, as cudaMallocPitch would place them: the kernel's wide loads.
  const size_t pitch = (row_bytes + 255) / 256 * 256;
  const size_t bytes = pitch * rows;
  if (s.buffer.size() < bytes) {
    // A larger frame (new caps): the old buffer may still be read by a queued kernel.
    if (s.ever_consumed) CIPC_RETURN_IF_ERROR(s.consumed.synchronize());
    s.buffer = DeviceBuffer();
    CIPC_RETURN_IF_ERROR(DeviceBuffer::create(device_, bytes, &s.buffer));
  }
  // The kernel that read this buffer two frames ago must be done before it is overwritten.
  if (s.ever_consumed) CIPC_RETURN_IF_ERROR(s.consumed.wait(copy_stream_.handle()));
  CIPC_RETURN_IF_ERROR(
      copy_2d_async(reinterpret_cast<void*>(static_cast<uintptr_t>(s.buffer.ptr())), pitch, host,
                    host_pitch, row_bytes, rows, copy_stream_.handle()));
  CIPC_RETURN_IF_ERROR(s.uploaded.record(copy_stream_.handle()));
  CIPC_RETURN_IF_ERROR(s.uploaded.wait(kernel_stream));
  current_ = next;
  ++uploads_;
  *device_in = s.buffer.ptr();
  *device_pitch = pitch;
  return Status::ok();
}

Status InputUploader::kernel_queued(StreamHandle kernel_stream) {
  if (current_ < 0) return Status::failure("InputUploader::kernel_queued: nothing uploaded");
  Staging& s = staging_[current_];
  CIPC_RETURN_IF_ERROR(s.consumed.record(kernel_stream));
  s.ever_consumed = true;
  return Status::ok();
}

Status measure_input_paths(int device, const DebayerParams& params, int width, int height,
                           InputPathTimes* out) {
  if (!out || width < 1 || height < 1)
    return Status::failure("measure_input_paths: invalid arguments");
  const size_t in_pitch = 2 * static_cast<size_t>(width);
  const size_t out_pitch = 4 * static_cast<size_t>(width);
  const size_t rows = static_cast<size_t>(height);
  detail::DeviceScope scope;
  CIPC_CUDA_TRY(scope.enter(device));  // cudaHostAlloc maps into the current device
  PinnedHostBuffer host;
  CIPC_RETURN_IF_ERROR(PinnedHostBuffer::create(in_pitch * rows, &host));
  // A mid-grey mosaic: the kernel's time does not depend on the values.
  auto* words = static_cast<uint16_t*>(host.data());
  std::fill(words, words + in_pitch / 2 * rows, static_cast<uint16_t>(512));
  DevicePtr mapped = 0;
  CIPC_RETURN_IF_ERROR(mapped_device_pointer(host.data(), &mapped));
  DeviceBuffer output;
  CIPC_RETURN_IF_ERROR(DeviceBuffer::create(device, out_pitch * rows, &output));
  Stream stream;
  CIPC_RETURN_IF_ERROR(Stream::create(device, &stream));
  GpuDebayer debayer;
  CIPC_RETURN_IF_ERROR(GpuDebayer::create(device, &debayer));
  CIPC_RETURN_IF_ERROR(debayer.configure(params, WhiteBalance::kFixed, stream.handle()));
  InputUploader uploader;
  CIPC_RETURN_IF_ERROR(InputUploader::create(device, &uploader));

  // One warm-up, then the best of a few: the first run pays for loading the kernel and for
  // mapping the pages.
  constexpr int kRuns = 4;
  auto best_us = [&](auto&& frame, double* result) -> Status {
    double best = 0;
    for (int i = 0; i <= kRuns; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      CIPC_RETURN_IF_ERROR(frame());
      CIPC_RETURN_IF_ERROR(stream.synchronize());
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (i > 0 && (best == 0 || us < best)) best = us;
    }
    *result = best;
    return Status::ok();
  };
  InputPathTimes times;
  CIPC_RETURN_IF_ERROR(best_us(
      [&] {
        return debayer.run(mapped, in_pitch, output.ptr(), out_pitch, width, height,
                           stream.handle());
      },
      &times.in_place_us));
  CIPC_RETURN_IF_ERROR(best_us(
      [&]() -> Status {
        DevicePtr in = 0;
        size_t pitch = 0;
        CIPC_RETURN_IF_ERROR(
            uploader.upload(host.data(), in_pitch, in_pitch, rows, stream.handle(), &in, &pitch));
        CIPC_RETURN_IF_ERROR(
            debayer.run(in, pitch, output.ptr(), out_pitch, width, height, stream.handle()));
        return uploader.kernel_queued(stream.handle());
      },
      &times.upload_us));
  *out = times;
  return Status::ok();
}

const char* input_path_name(InputPath path) {
  return path == InputPath::kUpload ? "upload" : "in-place";
}

}  // namespace cipc_cuda
