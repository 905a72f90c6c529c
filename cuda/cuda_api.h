// SPDX-License-Identifier: LGPL-2.1-or-later
// The CUDA layer's public face: device discovery, RAII handles for streams, interprocess events,
// exportable VMM allocations and host registrations, plus copy helpers. CUDA toolkit only - no
// GStreamer, no ipc/. The runtime is linked statically and the driver API (VMM) is obtained at
// run time through cudaGetDriverEntryPoint, so code using this loads on machines without a
// driver and reports "no CUDA driver" instead of failing to load.
//
// Every call returns a Status whose message names the CUDA call, the error and where it
// happened, e.g. "cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY (out of memory) [cuda/vmm.cpp:57]".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace cipc_cuda {

// The same shape as cipc::Status (ipc/status.h), which this layer cannot include: ok() builds a
// success, is_ok() tests one.
class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status failure(std::string message) {
    Status s;
    s.ok_ = false;
    s.message_ = std::move(message);
    return s;
  }
  bool is_ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::string& message() const { return message_; }

 private:
  bool ok_ = true;
  std::string message_;
};

using Uuid = std::array<uint8_t, 16>;
// Opaque CUDA handles, so that callers need no CUDA headers.
using StreamHandle = void*;  // cudaStream_t
using DevicePtr = uint64_t;  // CUdeviceptr
constexpr size_t kIpcEventHandleSize = 64;
using IpcEventHandle = std::array<uint8_t, kIpcEventHandleSize>;

struct DeviceInfo {
  int ordinal = -1;
  std::string name;
  Uuid uuid{};
  int cc_major = 0, cc_minor = 0;
  bool vmm_supported = false;  // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
  bool posix_fd_supported =
      false;  // CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
  bool ipc_events_supported = false;  // CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED
  size_t granularity = 0;             // VMM allocation granularity (minimum) for this device
  // This process's contexts on the device are clients of an MPS server (CUDA Multi-Process
  // Service): CU_DEVICE_ATTRIBUTE_MPS_ENABLED. False where the driver predates the attribute.
  bool mps_client = false;
};

// Number of CUDA devices; 0 with `why` filled ("no CUDA driver", "no CUDA device") otherwise.
int device_count(std::string* why);
// Queries a device (initialising the runtime on it). Fails with a clear message for a bad ordinal.
Status query_device(int ordinal, DeviceInfo* out);
// The ordinal of the device with this UUID in this process, or -1.
int find_device(const Uuid& uuid);
// Makes `ordinal` current on the calling thread (cudaSetDevice). Cheap; call before work on a
// thread that may not have it current.
Status set_device(int ordinal);

// The device's primary context - the one the CUDA runtime, and so all of this project's CUDA
// work, runs in - as driver handles (CUcontext, CUdevice), for sharing it with other libraries
// (GStreamer's GstCudaContext). The context stays alive for the process.
Status primary_context(int ordinal, void** context, int* driver_device);

// A non-blocking CUDA stream on one device.
class Stream {
 public:
  Stream() = default;
  ~Stream();
  Stream(Stream&& o) noexcept;
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  static Status create(int device, Stream* out);
  StreamHandle handle() const { return stream_; }
  Status synchronize() const;

 private:
  StreamHandle stream_ = nullptr;
  int device_ = -1;
};

// A CUDA event usable across processes (cudaEventInterprocess | cudaEventDisableTiming), either
// created here (and exportable) or opened from a peer's handle; or a local one.
class Event {
 public:
  Event() = default;
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  static Status create_interprocess(int device, Event* out);
  // An event for this process only, whose synchronize() sleeps instead of spinning (for
  // background threads that wait for GPU work to finish).
  static Status create_local(int device, Event* out);
  // An event for this process only that asks the driver for no interrupt when it completes:
  // query() it rather than synchronize() (which would spin). A blocking-sync event recorded
  // after a GPU-side wait on another process's event wakes the driver's cuda-EvtHandlr thread
  // in both processes (tests/bench/bench-events); this one does not.
  static Status create_polled(int device, Event* out);
  static Status open(int device, const IpcEventHandle& handle, Event* out);
  bool valid() const { return event_ != nullptr; }
  Status ipc_handle(IpcEventHandle* out) const;  // only for events created here
  Status record(StreamHandle stream) const;
  Status wait(StreamHandle stream) const;  // GPU-side: `stream` waits for the last record
  Status synchronize() const;              // CPU-side
  Status query(bool* done) const;          // true when the last record has completed

 private:
  static Status create_with_flags(int device, unsigned flags, Event* out);
  void* event_ = nullptr;  // cudaEvent_t
  int device_ = -1;
};

// Device memory from cuMemCreate with POSIX file-descriptor export, reserved and mapped
// read/write for `device` in this process. Sizes are rounded up to the allocation granularity.
// Created here (exportable) or imported from a peer's descriptor.
class DeviceAllocation {
 public:
  DeviceAllocation() = default;
  ~DeviceAllocation();
  DeviceAllocation(DeviceAllocation&& o) noexcept;
  DeviceAllocation& operator=(DeviceAllocation&& o) noexcept;
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;

  static Status create(int device, size_t size, DeviceAllocation* out);
  // Imports `fd` (the descriptor is not consumed: the caller closes it). `size` is what the
  // peer announced; it must not exceed what the descriptor really holds (the driver checks).
  // The mapping is read-only for this process's GPU work (a stray write faults here instead of
  // corrupting other processes' frames); a driver that refuses read-only mappings gets a
  // read/write one, which read_only() reports.
  static Status import(int device, int fd, size_t size, DeviceAllocation* out);
  // A new descriptor for the allocation (caller owns it); -1 and `status` on failure.
  Status export_fd(int* fd) const;

  DevicePtr ptr() const { return ptr_; }
  size_t size() const { return size_; }           // requested size
  size_t mapped_size() const { return mapped_; }  // granularity-rounded size
  int device() const { return device_; }
  bool read_only() const { return read_only_; }

 private:
  void reset();
  bool read_only_ = false;
  DevicePtr ptr_ = 0;
  size_t size_ = 0;
  size_t mapped_ = 0;
  unsigned long long handle_ = 0;  // CUmemGenericAllocationHandle
  int device_ = -1;
};

// Page-locks existing host memory (cudaHostRegister) for fast, asynchronous copies; undone on
// destruction. Register once per buffer, never per frame.
class HostRegistration {
 public:
  HostRegistration() = default;
  ~HostRegistration();
  HostRegistration(HostRegistration&& o) noexcept;
  HostRegistration& operator=(HostRegistration&& o) noexcept;
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  static Status create(void* ptr, size_t size, HostRegistration* out);
  void* ptr() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// Pinned host memory of our own (cudaMallocHost).
class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  ~PinnedHostBuffer();
  PinnedHostBuffer(PinnedHostBuffer&& o) noexcept;
  PinnedHostBuffer& operator=(PinnedHostBuffer&& o) noexcept;
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;
  static Status create(size_t size, PinnedHostBuffer* out);
  void* data() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

// The device address of pinned, mapped host memory such as a PinnedHostBuffer's
// (cudaHostGetDevicePointer): kernels read and write it in place, over the bus.
Status mapped_device_pointer(void* host, DevicePtr* out);

// Plain device memory (cudaMalloc), e.g. a private copy of a frame.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  static Status create(int device, size_t size, DeviceBuffer* out);
  DevicePtr ptr() const { return ptr_; }
  size_t size() const { return size_; }
  int device() const { return device_; }

 private:
  DevicePtr ptr_ = 0;
  size_t size_ = 0;
  int device_ = -1;
};

// CPU-side wait for all work queued so far on any stream (cudaStreamSynchronize), including one
// this process did not create through Stream (e.g. an upstream element's); nullptr is the legacy
// default stream. For sync-mode=cpu, where interprocess events are not available.
Status synchronize_stream(StreamHandle stream);

// The legacy default stream (cudaStreamLegacy) of the current device's primary context: work
// queued on it starts only after all work queued earlier on the context's blocking streams
// (GStreamer's CUDA streams are such streams), so an event recorded there completes once all of
// that is done.
StreamHandle legacy_default_stream();

// Makes a device the calling thread's current one until the guard goes, then restores the
// caller's: a library call on an application's thread leaves the application's device alone.
class DeviceGuard {
 public:
  DeviceGuard() = default;
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  Status enter(int ordinal);

 private:
  int restore_ = -1;
};

// 2-D asynchronous copy in any direction (cudaMemcpy2DAsync, cudaMemcpyDefault): `rows` rows of
// `row_bytes` bytes. Pointers are host addresses or DevicePtr values cast to void*.
Status copy_2d_async(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                     size_t row_bytes, size_t rows, StreamHandle stream);
// 1-D asynchronous copy of `bytes` bytes in any direction (cudaMemcpyAsync, cudaMemcpyDefault).
Status copy_async(void* dst, const void* src, size_t bytes, StreamHandle stream);

}  // namespace cipc_cuda
