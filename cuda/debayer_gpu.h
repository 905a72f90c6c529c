// SPDX-License-Identifier: LGPL-2.1-or-later
// The GPU debayer: one kernel pass doing the math of debayer.h (whose debayer_cpu is its
// oracle), plus gray-world white balance from statistics the same kernel gathers. Two kernels:
// Precision::kExact reproduces debayer_cpu bit for bit; Precision::kFast (the default) is
// within 1 code of it and about twice as fast, and runs wherever its bound holds
// (fast_debayer_applies() in debayer.h; the exact kernel otherwise, see last_precision()).
//
// Per frame the kernel reads each input sample about 1.1 to 1.2 times (a 64x64 or 64x32 tile
// with a 2-sample halo in shared memory) and writes each output pixel once; it needs no memset
// and no copy:
//  - the transfer table lives in device memory, uploaded by configure() only when the curve
//    changes (one small HtoD at start-up);
//  - gray-world statistics rotate through three device slots: frame N adds into slot N % 3,
//    reads the gains from slot (N - 1) % 3 and zeroes slot (N + 1) % 3, which frame N - 1 read
//    and frame N + 1 will fill. Stream order makes this race-free (one stream per GpuDebayer).
// Input may be device memory or CUDA-mapped pinned host memory (read over the bus in place).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda_api.h"
#include "debayer.h"

namespace cipc_cuda {

enum class WhiteBalance { kFixed, kGrayWorld };

class GpuDebayer {
 public:
  GpuDebayer() = default;
  GpuDebayer(GpuDebayer&&) noexcept = default;
  GpuDebayer& operator=(GpuDebayer&&) noexcept = default;

  // Allocates the table and statistics on `device` (the current device is set to it).
  static Status create(int device, GpuDebayer* out);

  // Parameters for the following frames. The table is re-uploaded (asynchronously, on `stream`)
  // only when transfer or gamma changed. Switching to gray world: the first frame uses the fixed
  // gains (it has no statistics of the frame before; in fixed mode none are gathered).
  // params.precision picks the kernel; kFast falls back to kExact where its 1-code bound does
  // not hold (debayer.h).
  Status configure(const DebayerParams& params, WhiteBalance wb, StreamHandle stream);

  // Debayers one frame on `stream`. `in`: 16-bit words, `in_pitch` bytes apart (even, >= 2 *
  // width); `out`: 4-byte pixels, `out_pitch` bytes apart (multiple of 4, >= 4 * width); both
  // device addresses (a mapped host pointer's device address for pinned host input).
  Status run(DevicePtr in, size_t in_pitch, DevicePtr out, size_t out_pitch, int width, int height,
             StreamHandle stream);

  // The gains the most recently completed frame used, written by the GPU into mapped host
  // memory: reading needs no synchronisation (and may lag a frame or two).
  WbGains last_gains() const;
  uint64_t frames() const { return frames_; }
  // The kernel the most recent run() used: kFast only where asked for and its bound holds
  // (gains, table, and width and height of at least 2).
  Precision last_precision() const { return last_precision_; }
  bool valid() const { return stats_.ptr() != 0; }

 private:
  int device_ = -1;
  DebayerParams params_;
  WhiteBalance wb_ = WhiteBalance::kFixed;
  bool table_uploaded_ = false;
  Transfer table_transfer_ = Transfer::kSrgb;
  float table_gamma_ = 0.0f;
  bool table_steps_at_most_one_ = false;  // of the uploaded table (max_adjacent_step)
  bool fast_ = false;                     // params_ ask for kFast and its bound holds
  Precision last_precision_ = Precision::kExact;
  DeviceBuffer table_;              // kTransferTableSize bytes
  PinnedHostBuffer table_staging_;  // the table's host side, kept until the upload is done
  DeviceBuffer stats_;              // 3 slots of 16 partial copies of 3 sums (unsigned long long)
  PinnedHostBuffer gains_out_;      // WbGains, written by the kernel
  DevicePtr gains_out_device_ = 0;  // its device address
  uint64_t frames_ = 0;             // frames run since create()
};

}  // namespace cipc_cuda
