// SPDX-License-Identifier: LGPL-2.1-or-later
// The slot backends the producer/consumer suite runs against: host memory (memfd) everywhere,
// and with CUDA the VMM backend in both sync modes - each skipping with its reason where it cannot
// run (no GPU, or a driver that will not open an interprocess event in the process that made it).
// fill() and mismatch() write and read a slot's bytes whatever memory it is in.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "host_memory.h"
#include "memorybackend.h"
#ifdef CIPC_HAVE_CUDA
#include "cuda_slots.h"
#include "cuda_test_util.h"
#include "device.h"
#endif

namespace cipc_test {

enum class SlotBackend { kHost, kCudaCpuSync, kCudaGpuEvents };

inline std::string slot_backend_name(const ::testing::TestParamInfo<SlotBackend>& info) {
  switch (info.param) {
    case SlotBackend::kHost: return "host";
    case SlotBackend::kCudaCpuSync: return "cuda_cpu_sync";
    case SlotBackend::kCudaGpuEvents: return "cuda_gpu_events";
  }
  return "unknown";
}

// The backends this build can offer (CUDA ones only when built with the toolkit).
inline std::vector<SlotBackend> slot_backends() {
#ifdef CIPC_HAVE_CUDA
  return {SlotBackend::kHost, SlotBackend::kCudaCpuSync, SlotBackend::kCudaGpuEvents};
#else
  return {SlotBackend::kHost};
#endif
}

inline cipc::MemoryKind memory_kind_of(SlotBackend b) {
  return b == SlotBackend::kHost ? cipc::MemoryKind::kHost : cipc::MemoryKind::kCuda;
}

#ifdef CIPC_HAVE_CUDA
// Why the CUDA backend cannot run in this process, or "".
inline std::string cuda_slots_missing_reason(SlotBackend b) {
  if (!cuda_missing_reason().empty()) return "no usable CUDA device: " + cuda_missing_reason();
  static const std::string vmm = [] {
    cipc_cuda::DeviceInfo info;
    const cipc_cuda::Status s = cipc_slots::open_device(0, &info);
    return s ? std::string() : s.message();
  }();
  if (!vmm.empty()) return vmm;
  if (b != SlotBackend::kCudaGpuEvents) return "";
  // In this suite the consumer imports in the producer's own process; CUDA documents IPC event
  // handles for other processes, and some drivers refuse them in the one that created them.
  static const std::string events = [] {
    cipc_cuda::Event made, opened;
    cipc_cuda::IpcEventHandle handle{};
    cipc_cuda::Status s = cipc_cuda::Event::create_interprocess(0, &made);
    if (s) s = made.ipc_handle(&handle);
    if (s) s = cipc_cuda::Event::open(0, handle, &opened);
    return s ? std::string()
             : "this driver does not open an interprocess event in the process that created it (" +
                   s.message() + "); tests/gpu covers gpu-events across two processes";
  }();
  return events;
}
#endif

// The producer's and the consumer's backend of one kind; `skip` says why it cannot run here.
inline std::unique_ptr<cipc::MemoryBackend> make_slot_backend(SlotBackend b, std::string* skip) {
  skip->clear();
  if (b == SlotBackend::kHost) return std::make_unique<cipc_slots::HostMemoryBackend>();
#ifdef CIPC_HAVE_CUDA
  *skip = cuda_slots_missing_reason(b);
  if (!skip->empty()) return nullptr;
  return std::make_unique<cipc_slots::CudaMemoryBackend>(
      0, b == SlotBackend::kCudaCpuSync ? cipc::SyncMode::kCpu : cipc::SyncMode::kGpuEvents);
#else
  *skip = "built without CUDA";
  return nullptr;
#endif
}

inline uint8_t pattern_byte(uint8_t seed, size_t i) {
  return static_cast<uint8_t>(seed * 31 + i * 7 + (i >> 9));
}

#ifdef CIPC_HAVE_CUDA
// One stream for the suite's copies to and from CUDA slots.
inline cipc_cuda::StreamHandle test_stream() {
  static cipc_cuda::Stream* stream = [] {
    auto* s = new cipc_cuda::Stream();
    const cipc_cuda::Status st = cipc_cuda::Stream::create(0, s);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return s;
  }();
  return stream->handle();
}
#endif

// Writes the pattern of `seed` into the whole slot, as a producer's writer would (CUDA: between
// begin_write and end_write, so readiness is recorded).
inline void fill(cipc::SlotMemory& slot, uint8_t seed) {
  std::vector<uint8_t> bytes(slot.size());
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = pattern_byte(seed, i);
#ifdef CIPC_HAVE_CUDA
  if (cipc_slots::CudaSlotMemory* cuda = cipc_slots::cuda_slot_of(&slot)) {
    const cipc_cuda::StreamHandle stream = test_stream();
    cipc_cuda::Status s = cuda->begin_write(stream);
    if (s)
      s = cipc_cuda::copy_2d_async(as_ptr(cuda->ptr()), bytes.size(), bytes.data(), bytes.size(),
                                   bytes.size(), 1, stream);
    if (s) s = cuda->end_write(stream);
    if (s) s = cipc_cuda::synchronize_stream(stream);  // `bytes` is pageable and goes away
    EXPECT_TRUE(s.is_ok()) << s.message();
    return;
  }
#endif
  std::copy(bytes.begin(), bytes.end(), static_cast<uint8_t*>(slot.data()));
}

// Index of the first of `size` bytes of the slot that differs from the pattern of `seed`, or -1
// (CUDA: read after waiting for the writer's readiness, as a consumer would).
inline long mismatch(const cipc::SlotMemory& slot, size_t size, uint8_t seed) {
  std::vector<uint8_t> bytes(size);
#ifdef CIPC_HAVE_CUDA
  if (auto* cuda = cipc_slots::cuda_slot_of(const_cast<cipc::SlotMemory*>(&slot))) {
    const cipc_cuda::StreamHandle stream = test_stream();
    cipc_cuda::Status s = cuda->wait_ready(stream);
    if (s)
      s = cipc_cuda::copy_2d_async(bytes.data(), size, as_ptr(cuda->ptr()), size, size, 1, stream);
    if (s) s = cipc_cuda::synchronize_stream(stream);
    EXPECT_TRUE(s.is_ok()) << s.message();
    if (!s) return 0;
  } else
#endif
  {
    const auto* p = static_cast<const uint8_t*>(slot.data());
    std::copy(p, p + size, bytes.begin());
  }
  for (size_t i = 0; i < size; ++i)
    if (bytes[i] != pattern_byte(seed, i)) return static_cast<long>(i);
  return -1;
}

}  // namespace cipc_test
