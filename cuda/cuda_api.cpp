// SPDX-License-Identifier: LGPL-2.1-or-later
// cuda_api.h on top of the CUDA runtime (linked statically) and the driver's VMM entry points
// (driver.h, looked up at run time).
//
// Current device: every call that needs a device current makes it current for the duration of
// the call and then restores the thread's previous current device (DeviceScope), so that our
// objects - including their destructors, which may run on any thread - never change the caller's
// notion of the current device. set_device() is the one call meant to change it.
#include "cuda_api.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <fcntl.h>

#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "check.h"
#include "deferred_destruction.h"
#include "device_scope.h"
#include "driver.h"

namespace cipc_cuda {

using detail::DriverApi;

static_assert(sizeof(cudaIpcEventHandle_t) == kIpcEventHandleSize,
              "IpcEventHandle must hold a cudaIpcEventHandle_t");
static_assert(sizeof(DevicePtr) == sizeof(CUdeviceptr), "DevicePtr must hold a CUdeviceptr");
static_assert(sizeof(unsigned long long) == sizeof(CUmemGenericAllocationHandle),
              "DeviceAllocation::handle_ must hold a CUmemGenericAllocationHandle");

namespace {

using detail::DeviceScope;

// Enters `device` in `scope` or returns a Status naming cudaSetDevice and the caller's line.
#define CIPC_ENTER_DEVICE(scope, ...)                                                  \
  do {                                                                                 \
    const cudaError_t cipc_enter_err_ = (scope).enter(__VA_ARGS__);                    \
    if (cipc_enter_err_ != cudaSuccess)                                                \
      return detail::make_error("cudaSetDevice", cipc_enter_err_, __FILE__, __LINE__); \
  } while (0)

inline cudaStream_t to_stream(StreamHandle s) {
  return static_cast<cudaStream_t>(s);
}
inline cudaEvent_t to_event(void* e) {
  return static_cast<cudaEvent_t>(e);
}

Status invalid(const std::string& what) {
  return Status::failure(what);
}

// The properties of an exportable VMM allocation on `dev`.
CUmemAllocationProp allocation_prop(CUdevice dev) {
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  return prop;
}

Status driver_device(int ordinal, const DriverApi** d, CUdevice* dev) {
  CIPC_RETURN_IF_ERROR(detail::driver_api(d));
  CIPC_CUDA_TRY((*d)->cuDeviceGet(dev, ordinal));
  return Status::ok();
}

Status granularity_of(const DriverApi* d, CUdevice dev, size_t* out) {
  const CUmemAllocationProp prop = allocation_prop(dev);
  size_t g = 0;
  CIPC_CUDA_TRY(d->cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  if (g == 0) return invalid("cuMemGetAllocationGranularity returned 0");
  *out = g;
  return Status::ok();
}

// `size` rounded up to a multiple of `granularity`; false on overflow.
bool round_up(size_t size, size_t granularity, size_t* out) {
  const size_t rem = size % granularity;
  if (rem == 0) {
    *out = size;
    return true;
  }
  if (size > std::numeric_limits<size_t>::max() - (granularity - rem)) return false;
  *out = size + (granularity - rem);
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Devices

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky; do not leave it for the next caller to trip over
    if (why) *why = detail::explain_init_error(err, "cudaGetDeviceCount");
    return 0;
  }
  if (n <= 0) {
    if (why) *why = "no CUDA device is present (cudaGetDeviceCount returned 0)";
    return 0;
  }
  if (why) why->clear();
  return n;
}

Status query_device(int ordinal, DeviceInfo* out) {
  if (!out) return invalid("query_device: null output");
  std::string why;
  const int n = device_count(&why);
  if (ordinal < 0 || ordinal >= n) {
    std::string msg = "CUDA device " + std::to_string(ordinal) + " does not exist (" +
                      std::to_string(n) + " device(s) present)";
    if (n == 0 && !why.empty()) msg += ": " + why;
    return invalid(msg);
  }

  cudaDeviceProp prop;
  CIPC_CUDA_TRY(cudaGetDeviceProperties(&prop, ordinal));
  const DriverApi* d = nullptr;
  CUdevice dev = 0;
  CIPC_RETURN_IF_ERROR(driver_device(ordinal, &d, &dev));
  int vmm = 0, posix_fd = 0, ipc_events = 0;
  CIPC_CUDA_TRY(
      d->cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
  CIPC_CUDA_TRY(d->cuDeviceGetAttribute(
      &posix_fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev));
  CIPC_CUDA_TRY(d->cuDeviceGetAttribute(&ipc_events, CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, dev));
  size_t granularity = 0;
  if (vmm) CIPC_RETURN_IF_ERROR(granularity_of(d, dev, &granularity));
  // Creates the device's primary context without making it current on this thread.
  CIPC_CUDA_TRY(cudaInitDevice(ordinal, 0, 0));
  // Asked once the context exists (the MPS client connects when a context is made). Drivers
  // before the attribute answer CUDA_ERROR_INVALID_VALUE: not an error, just "not known to be".
  // The number, not the enumerator, so that the build takes toolkits that lack it (JetPack 6).
  constexpr int kMpsEnabledAttribute = 133;  // CU_DEVICE_ATTRIBUTE_MPS_ENABLED in CUDA 13's cuda.h
  int mps = 0;
  if (d->cuDeviceGetAttribute(&mps, static_cast<CUdevice_attribute>(kMpsEnabledAttribute), dev) !=
      CUDA_SUCCESS)
    mps = 0;

  DeviceInfo info;
  info.ordinal = ordinal;
  info.name.assign(prop.name, strnlen(prop.name, sizeof(prop.name)));
  std::memcpy(info.uuid.data(), prop.uuid.bytes, info.uuid.size());
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.vmm_supported = vmm != 0;
  info.posix_fd_supported = posix_fd != 0;
  info.ipc_events_supported = ipc_events != 0;
  info.granularity = granularity;
  info.mps_client = mps != 0;
  *out = std::move(info);
  return Status::ok();
}

int find_device(const Uuid& uuid) {
  const int n = device_count(nullptr);
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    if (std::memcmp(prop.uuid.bytes, uuid.data(), uuid.size()) == 0) return i;
  }
  return -1;
}

Status set_device(int ordinal) {
  CIPC_CUDA_TRY(cudaSetDevice(ordinal));
  return Status::ok();
}

Status primary_context(int ordinal, void** context, int* driver_device) {
  if (!context || !driver_device) return invalid("primary_context: null output");
  const detail::DriverApi* d = nullptr;
  CIPC_RETURN_IF_ERROR(detail::driver_api(&d));
  DeviceScope scope;
  CIPC_ENTER_DEVICE(scope, ordinal, /*for_driver=*/true);
  CIPC_CUDA_TRY(cudaFree(nullptr));  // makes the runtime create the primary context now
  CUcontext ctx = nullptr;
  CIPC_CUDA_TRY(d->cuCtxGetCurrent(&ctx));
  CUdevice dev = 0;
  CIPC_CUDA_TRY(d->cuDeviceGet(&dev, ordinal));
  if (!ctx) return invalid("primary_context: no context is current after initialising the device");
  *context = ctx;
  *driver_device = static_cast<int>(dev);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Stream

Stream::~Stream() {
  if (!stream_) return;
  destroy_or_park([stream = stream_, device = device_] {
    DeviceScope scope;
    (void)scope.enter(device);
    (void)cudaStreamDestroy(to_stream(stream));
  });
}

Stream::Stream(Stream&& o) noexcept : stream_(o.stream_), device_(o.device_) {
  o.stream_ = nullptr;
  o.device_ = -1;
}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    Stream old(std::move(*this));  // destroyed at the end of this block
    stream_ = std::exchange(o.stream_, nullptr);
    device_ = std::exchange(o.device_, -1);
  }
  return *this;
}

Status Stream::create(int device, Stream* out) {
  if (!out) return invalid("Stream::create: null output");
  DeviceScope scope;
  CIPC_ENTER_DEVICE(scope, device);
  cudaStream_t s = nullptr;
  CIPC_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Stream made;
  made.stream_ = s;
  made.device_ = device;
  *out = std::move(made);
  return Status::ok();
}

Status Stream::synchronize() const {
  if (!stream_) return invalid("Stream::synchronize: empty Stream");
  CIPC_CUDA_TRY(cudaStreamSynchronize(to_stream(stream_)));
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Event

Event::~Event() {
  if (!event_) return;
  destroy_or_park([event = event_, device = device_] {
    DeviceScope scope;
    (void)scope.enter(device);
    (void)cudaEventDestroy(to_event(event));
  });
}

Event::Event(Event&& o) noexcept : event_(o.event_), device_(o.device_) {
  o.event_ = nullptr;
  o.device_ = -1;
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    Event old(std::move(*this));
    event_ = std::exchange(o.event_, nullptr);
    device_ = std::exchange(o.device_, -1);
  }
  return *this;
}

Status Event::create_interprocess(int device, Event* out) {
  if (!out) return invalid("Event::create_interprocess: null output");
  return create_with_flags(device, cudaEventInterprocess | cudaEventDisableTiming, out);
}

Status Event::create_local(int device, Event* out) {
  if (!out) return invalid("Event::create_local: null output");
  return create_with_flags(device, cudaEventBlockingSync | cudaEventDisableTiming, out);
}

Status Event::create_polled(int device, Event* out) {
  if (!out) return invalid("Event::create_polled: null output");
  return create_with_flags(device, cudaEventDisableTiming, out);
}

Status Event::create_with_flags(int device, unsigned flags, Event* out) {
  DeviceScope scope;
  CIPC_ENTER_DEVICE(scope, device);
  cudaEvent_t e = nullptr;
  CIPC_CUDA_TRY(cudaEventCreateWithFlags(&e, flags));
  Event made;
  made.event_ = e;
  made.device_ = device;
  *out = std::move(made);
  return Status::ok();
}

Status Event::open(int device, const IpcEventHandle& handle, Event* out) {
  if (!out) return invalid("Event::open: null output");
  DeviceScope scope;
  CIPC_ENTER_DEVICE(scope, device);  // the event is opened in the current device's context
  cudaIpcEventHandle_t h;
  std::memcpy(h.reserved, handle.data(), sizeof(h.reserved));
  cudaEvent_t e = nullptr;
  CIPC_CUDA_TRY(cudaIpcOpenEventHandle(&e, h));
  Event made;
  made.event_ = e;
  made.device_ = device;
  *out = std::move(made);
  return Status::ok();
}

Status Event::ipc_handle(IpcEventHandle* out) const {
  if (!out) return invalid("Event::ipc_handle: null output");
  if (!event_) return invalid("Event::ipc_handle: empty Event");
  DeviceScope scope;
  CIPC_ENTER_DEVICE(scope, device_);
  cudaIpcEventHandle_t h;
  CIPC_CUDA_TRY(cudaIpcGetEventHandle(&h, to_event(event_)));
  std::memcpy(out->data(), h.reserved, out->size());
  return Status::ok();
}

Status Event::record(StreamHandle stream) const {
  if (!event_) return invalid("Event::record: empty Event");
  DeviceScope scope;
  CIPC_ENTER_DEVICE(scope, device_);
  CIPC_CUDA_TRY(cudaEventRecord(to_event(event_), to_stream(stream)));
  return Status::ok();
}

Status Event::wait(StreamHandle stream) const {
  if (!event_) return invalid("Event::wait: empty Event");
  DeviceScope scope;
  CIPC_ENTER_DEVICE(scope, device_);
  CIPC_CUDA_TRY(cudaStreamWaitEvent(to_stream(stream), to_event(event_), 0));
  return Status::ok();
}

Status Event::synchronize() const {
  if (!event_) return invalid("Event::synchronize: empty Event");
  DeviceScope scope;
  CIPC_ENTER_DEVICE(scope, device_);
  CIPC_CUDA_TRY(cudaEventSynchronize(to_event(event_)));
  return Status::ok();
}

Status Event::query(bool* done) const {
  if (!done) return invalid("Event::query: null output");
  if (!event_) return invalid("Event::query: empty Event");
  DeviceScope scope;
  CIPC_ENTER_DEVICE(scope, device_);
  const cudaError_t err = cudaEventQuery(to_event(event_));
  if (err == cudaErrorNotReady) {
    *done = false;
    return Status::ok();
  }
  if (err != cudaSuccess) return detail::make_error("cudaEventQuery", err, __FILE__, __LINE__);
  *done = true;
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// DeviceAllocation

namespace {

// The pieces of a VMM mapping under construction; whatever is held at destruction is undone in
// reverse order unless release() hands it over.
struct VmmBuild {
  const DriverApi* d = nullptr;
  CUmemGenericAllocationHandle handle = 0;
  bool have_handle = false;
  CUdeviceptr ptr = 0;
  size_t size = 0;  // reserved (and, once `mapped`, mapped) bytes
  bool mapped = false;

  ~VmmBuild() {
    if (mapped) (void)d->cuMemUnmap(ptr, size);
    if (ptr) (void)d->cuMemAddressFree(ptr, size);
    if (have_handle) (void)d->cuMemRelease(handle);
  }
  // Reserves `size` bytes of address space, maps the handle there and grants `dev` read/write,
  // or with `read_only` read access where the driver allows it (`*got_read_only` says).
  Status map(CUdevice dev, size_t granularity, bool read_only = false,
             bool* got_read_only = nullptr) {
    CIPC_CUDA_TRY(d->cuMemAddressReserve(&ptr, size, granularity, 0, 0));
    CIPC_CUDA_TRY(d->cuMemMap(ptr, size, 0, handle, 0));
    mapped = true;
    CUmemAccessDesc access;
    std::memset(&access, 0, sizeof(access));
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = dev;
    if (read_only) {
      access.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
      if (d->cuMemSetAccess(ptr, size, &access, 1) == CUDA_SUCCESS) {
        if (got_read_only) *got_read_only = true;
        return Status::ok();
      }
    }
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CIPC_CUDA_TRY(d->cuMemSetAccess(ptr, size, &access, 1));
    if (got_read_only) *got_read_only = false;
    return Status::ok();
  }
  void release() {
    have_handle = false;
    ptr = 0;
    mapped = false;
  }
};

}  // namespace

DeviceAllocation::~DeviceAllocation() {
  reset();
}

void DeviceAllocation::reset() {
  if (ptr_ == 0 && handle_ == 0) return;
  if (const DriverApi* d = detail::loaded_driver_api()) {
    destroy_or_park([d, ptr = ptr_, mapped = mapped_, handle = handle_, device = device_] {
      DeviceScope scope;
      (void)scope.enter(device, /*for_driver=*/true);
      if (ptr) {
        (void)d->cuMemUnmap(ptr, mapped);
        (void)d->cuMemAddressFree(ptr, mapped);
      }
      if (handle) (void)d->cuMemRelease(handle);
    });
  }
  ptr_ = 0;
  size_ = 0;
  mapped_ = 0;
  handle_ = 0;
  device_ = -1;
}

DeviceAllocation::DeviceAllocation(DeviceAllocation&& o) noexcept
    : read_only_(std::exchange(o.read_only_, false)),
      ptr_(std::exchange(o.ptr_, 0)),
      size_(std::exchange(o.size_, 0)),
      mapped_(std::exchange(o.mapped_, 0)),
      handle_(std::exchange(o.handle_, 0)),
      device_(std::exchange(o.device_, -1)) {}

DeviceAllocation& DeviceAllocation::operator=(DeviceAllocation&& o) noexcept {
  if (this != &o) {
    reset();
    read_only_ = std::exchange(o.read_only_, false);
    ptr_ = std::exchange(o.ptr_, 0);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, 0);
    handle_ = std::exchange(o.handle_, 0);
    device_ = std::exchange(o.device_, -1);
  }
  return *this;
}

Status DeviceAllocation::create(int device, size_t size, DeviceAllocation* out) {
  if (!out) return invalid("DeviceAllocation::create: null output");
  if (size == 0) return invalid("DeviceAllocation::create: size 0");
  const DriverApi* d = nullptr;
  CUdevice dev = 0;
  CIPC_RETURN_IF_ERROR(driver_device(device, &d, &dev));
  DeviceScope scope;
  CIPC_ENTER_DEVICE(scope, device, /*for_driver=*/true);
  size_t granularity = 0, mapped = 0;
  CIPC_RETURN_IF_ERROR(granularity_of(d, dev, &granularity));
  if (!round_up(size, granularity, &mapped))
    return invalid("DeviceAllocation::create: size " + std::to_string(size) + " is too large");

  VmmBuild b;
  b.d = d;
  b.size = mapped;
  const CUmemAllocationProp prop = allocation_prop(dev);
  CIPC_CUDA_TRY(d->cuMemCreate(&b.handle, mapped, &prop, 0));
  b.have_handle = true;
  CIPC_RETURN_IF_ERROR(b.map(dev, granularity));

  DeviceAllocation made;
  made.ptr_ = b.ptr;
  made.size_ = size;
  made.mapped_ = mapped;
  made.handle_ = b.handle;  // kept: export_fd needs it
  made.device_ = device;
  b.release();
  *out = std::move(made);
  return Status::ok();
}

Status DeviceAllocation::import(int device, int fd, size_t size, DeviceAllocation* out) {
  if (!out) return invalid("DeviceAllocation::import: null output");
  if (fd < 0) return invalid("DeviceAllocation::import: invalid descriptor " + std::to_string(fd));
  if (size == 0) return invalid("DeviceAllocation::import: size 0");
  const DriverApi* d = nullptr;
  CUdevice dev = 0;
  CIPC_RETURN_IF_ERROR(driver_device(device, &d, &dev));
  DeviceScope scope;
  CIPC_ENTER_DEVICE(scope, device, /*for_driver=*/true);
  size_t granularity = 0, mapped = 0;
  CIPC_RETURN_IF_ERROR(granularity_of(d, dev, &granularity));
  if (!round_up(size, granularity, &mapped))
    return invalid("DeviceAllocation::import: size " + std::to_string(size) + " is too large");

  VmmBuild b;
  b.d = d;
  b.size = mapped;
  // The descriptor is not consumed: the driver takes its own reference to the allocation.
  CIPC_CUDA_TRY(d->cuMemImportFromShareableHandle(
      &b.handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  b.have_handle = true;
  // A size larger than the exporter's allocation fails here (cuMemMap checks the range).
  bool read_only = false;
  CIPC_RETURN_IF_ERROR(b.map(dev, granularity, /*read_only=*/true, &read_only));
  // The mapping now holds the memory; the handle is not needed (we cannot re-export an import).
  const CUresult rel = d->cuMemRelease(b.handle);
  b.have_handle = false;
  if (rel != CUDA_SUCCESS) return detail::make_error("cuMemRelease", rel, __FILE__, __LINE__);

  DeviceAllocation made;
  made.ptr_ = b.ptr;
  made.size_ = size;
  made.mapped_ = mapped;
  made.handle_ = 0;
  made.device_ = device;
  made.read_only_ = read_only;
  b.release();
  *out = std::move(made);
  return Status::ok();
}

Status DeviceAllocation::export_fd(int* fd) const {
  if (!fd) return invalid("DeviceAllocation::export_fd: null output");
  *fd = -1;
  if (handle_ == 0) {
    return invalid(ptr_ ? "DeviceAllocation::export_fd: an imported allocation cannot be exported"
                        : "DeviceAllocation::export_fd: empty DeviceAllocation");
  }
  const DriverApi* d = nullptr;
  CIPC_RETURN_IF_ERROR(detail::driver_api(&d));
  DeviceScope scope;
  CIPC_ENTER_DEVICE(scope, device_, /*for_driver=*/true);
  int exported = -1;
  CIPC_CUDA_TRY(d->cuMemExportToShareableHandle(&exported, handle_,
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  if (exported < 0) return invalid("cuMemExportToShareableHandle returned no descriptor");
  // Not inherited by children we exec; it travels to peers over SCM_RIGHTS only.
  const int flags = fcntl(exported, F_GETFD);
  if (flags >= 0) (void)fcntl(exported, F_SETFD, flags | FD_CLOEXEC);
  *fd = exported;
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// HostRegistration

HostRegistration::~HostRegistration() {
  if (!ptr_) return;
  destroy_or_park([ptr = ptr_] { (void)cudaHostUnregister(ptr); });
}

HostRegistration::HostRegistration(HostRegistration&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)) {}

HostRegistration& HostRegistration::operator=(HostRegistration&& o) noexcept {
  if (this != &o) {
    HostRegistration old(std::move(*this));
    ptr_ = std::exchange(o.ptr_, nullptr);
  }
  return *this;
}

Status HostRegistration::create(void* ptr, size_t size, HostRegistration* out) {
  if (!out) return invalid("HostRegistration::create: null output");
  if (!ptr || size == 0) return invalid("HostRegistration::create: empty range");
  // Portable: page-locked for every device, not only the current one. With unified addressing
  // (every supported Linux system) the memory is also mapped for device access.
  CIPC_CUDA_TRY(cudaHostRegister(ptr, size, cudaHostRegisterPortable));
  HostRegistration made;
  made.ptr_ = ptr;
  *out = std::move(made);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// PinnedHostBuffer

PinnedHostBuffer::~PinnedHostBuffer() {
  if (!ptr_) return;
  destroy_or_park([ptr = ptr_] { (void)cudaFreeHost(ptr); });
}

PinnedHostBuffer::PinnedHostBuffer(PinnedHostBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)) {}

PinnedHostBuffer& PinnedHostBuffer::operator=(PinnedHostBuffer&& o) noexcept {
  if (this != &o) {
    PinnedHostBuffer old(std::move(*this));
    ptr_ = std::exchange(o.ptr_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

Status PinnedHostBuffer::create(size_t size, PinnedHostBuffer* out) {
  if (!out) return invalid("PinnedHostBuffer::create: null output");
  if (size == 0) return invalid("PinnedHostBuffer::create: size 0");
  void* p = nullptr;
  CIPC_CUDA_TRY(cudaHostAlloc(&p, size, cudaHostAllocPortable | cudaHostAllocMapped));
  PinnedHostBuffer made;
  made.ptr_ = p;
  made.size_ = size;
  *out = std::move(made);
  return Status::ok();
}

Status mapped_device_pointer(void* host, DevicePtr* out) {
  if (!host || !out) return invalid("mapped_device_pointer: null pointer");
  void* dev = nullptr;
  CIPC_CUDA_TRY(cudaHostGetDevicePointer(&dev, host, 0));
  *out = reinterpret_cast<uintptr_t>(dev);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// DeviceBuffer

DeviceBuffer::~DeviceBuffer() {
  if (!ptr_) return;
  destroy_or_park([ptr = ptr_, device = device_] {
    DeviceScope scope;
    (void)scope.enter(device);
    (void)cudaFree(reinterpret_cast<void*>(static_cast<uintptr_t>(ptr)));
  });
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, 0)),
      size_(std::exchange(o.size_, 0)),
      device_(std::exchange(o.device_, -1)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    DeviceBuffer old(std::move(*this));
    ptr_ = std::exchange(o.ptr_, 0);
    size_ = std::exchange(o.size_, 0);
    device_ = std::exchange(o.device_, -1);
  }
  return *this;
}

Status DeviceBuffer::create(int device, size_t size, DeviceBuffer* out) {
  if (!out) return invalid("DeviceBuffer::create: null output");
  if (size == 0) return invalid("DeviceBuffer::create: size 0");
  DeviceScope scope;
  CIPC_ENTER_DEVICE(scope, device);
  void* p = nullptr;
  CIPC_CUDA_TRY(cudaMalloc(&p, size));
  DeviceBuffer made;
  made.ptr_ = static_cast<DevicePtr>(reinterpret_cast<uintptr_t>(p));
  made.size_ = size;
  made.device_ = device;
  *out = std::move(made);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Copies and stream waits

Status synchronize_stream(StreamHandle stream) {
  CIPC_CUDA_TRY(cudaStreamSynchronize(to_stream(stream)));
  return Status::ok();
}

DeviceGuard::~DeviceGuard() {
  if (restore_ >= 0) (void)cudaSetDevice(restore_);
}

Status DeviceGuard::enter(int ordinal) {
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess) current = -1;
  CIPC_CUDA_TRY(cudaSetDevice(ordinal));
  if (current >= 0 && current != ordinal) restore_ = current;
  return Status::ok();
}

StreamHandle legacy_default_stream() {
  return cudaStreamLegacy;
}

Status copy_2d_async(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                     size_t row_bytes, size_t rows, StreamHandle stream) {
  if (rows == 0 || row_bytes == 0) return Status::ok();
  if (!dst || !src) return invalid("copy_2d_async: null pointer");
  // A single row has no pitch; CUDA still insists that pitch >= width.
  if (rows == 1) {
    if (dst_pitch < row_bytes) dst_pitch = row_bytes;
    if (src_pitch < row_bytes) src_pitch = row_bytes;
  }
  if (dst_pitch < row_bytes || src_pitch < row_bytes) {
    return invalid("copy_2d_async: pitch smaller than the row (" + std::to_string(row_bytes) +
                   " bytes; dst pitch " + std::to_string(dst_pitch) + ", src pitch " +
                   std::to_string(src_pitch) + ")");
  }
  CIPC_CUDA_TRY(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows,
                                  cudaMemcpyDefault, to_stream(stream)));
  return Status::ok();
}

Status copy_async(void* dst, const void* src, size_t bytes, StreamHandle stream) {
  if (bytes == 0) return Status::ok();
  if (!dst || !src) return invalid("copy_async: null pointer");
  CIPC_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, to_stream(stream)));
  return Status::ok();
}

}  // namespace cipc_cuda
