// SPDX-License-Identifier: LGPL-2.1-or-later
#include "cudaslot.h"

#include <gst/gst.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>

GST_DEBUG_CATEGORY_STATIC(cipc_cuda_debug);
#define GST_CAT_DEFAULT cipc_cuda_debug

namespace cipc_gst {
namespace {

void init_debug() {
  static std::once_flag once;
  std::call_once(once, [] {
    GST_DEBUG_CATEGORY_INIT(cipc_cuda_debug, "cudaipc-cuda", 0, "cudaipc CUDA slot memory");
  });
}

cipc::Error cuda_error(const std::string& what, const cipc_cuda::Status& s) {
  return cipc::Error{cipc::ErrorCode::kSystem, what + ": " + s.message()};
}

// CPU access to a CUDA slot through one pinned staging copy: the first map downloads (for
// READ), the last unmap uploads (after a WRITE). Nested maps of one memory (one per video plane)
// share the staging copy.
class StagingAccess final : public GstCipcCpuAccess {
 public:
  explicit StagingAccess(CudaRegion& region) : slot_(region) {}

  uint8_t* map(GstMapFlags flags) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (maps_ == 0) {
      if (!ensure_resources()) return nullptr;
      if (flags & GST_MAP_READ) {
        cipc_cuda::Status s = slot_.wait_ready(stream_.handle());
        if (s)
          s = cipc_cuda::copy_2d_async(staging_.data(), slot_.bytes(),
                                       reinterpret_cast<const void*>(slot_.ptr()), slot_.bytes(),
                                       slot_.bytes(), 1, stream_.handle());
        if (s) s = stream_.synchronize();
        if (!s) {
          GST_ERROR("downloading a CUDA slot for CPU access failed: %s", s.message().c_str());
          return nullptr;
        }
      }
    }
    ++maps_;
    wrote_ |= (flags & GST_MAP_WRITE) != 0;
    return static_cast<uint8_t*>(staging_.data());
  }

  void unmap(bool) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (maps_ == 0 || --maps_ > 0 || !wrote_) return;
    wrote_ = false;
    cipc_cuda::Status s = slot_.begin_write(stream_.handle());
    if (s)
      s = cipc_cuda::copy_2d_async(reinterpret_cast<void*>(slot_.ptr()), slot_.bytes(),
                                   staging_.data(), slot_.bytes(), slot_.bytes(), 1,
                                   stream_.handle());
    if (s) s = slot_.end_write(stream_.handle());
    if (s) s = stream_.synchronize();
    if (!s) GST_ERROR("uploading a CPU write into a CUDA slot failed: %s", s.message().c_str());
  }

 private:
  bool ensure_resources() {
    if (staging_.data()) return true;
    cipc_cuda::Status s = cipc_cuda::Stream::create(slot_.device(), &stream_);
    if (s) s = cipc_cuda::PinnedHostBuffer::create(slot_.bytes(), &staging_);
    if (!s) GST_ERROR("no CPU staging for a CUDA slot: %s", s.message().c_str());
    return static_cast<bool>(s);
  }

  CudaRegion& slot_;
  std::mutex mutex_;
  cipc_cuda::Stream stream_;
  cipc_cuda::PinnedHostBuffer staging_;
  int maps_ = 0;
  bool wrote_ = false;
};

gboolean table_wait_ready(GstMemory* mem, gpointer stream) {
  CudaRegion* region = cuda_region_of(mem);
  return region && region->wait_ready(stream).ok();
}

gboolean table_record_release(GstMemory* mem, gpointer stream) {
  const GstCipcSlotBinding* b = gst_cipc_slot_memory_binding(mem);
  CudaRegion* region = b ? b->region : nullptr;
  if (!region || !region->record_release(stream).ok()) return FALSE;
  // An imported slot's claim now waits for these reads before RELEASE (see slot_free()).
  if (b->claim) b->release_recorded = true;
  return TRUE;
}

gboolean table_begin_write(GstMemory* mem, gpointer stream) {
  CudaRegion* region = cuda_region_of(mem);
  return region && region->begin_write(stream).ok();
}

gboolean table_end_write(GstMemory* mem, gpointer stream) {
  CudaRegion* region = cuda_region_of(mem);
  return region && region->end_write(stream).ok();
}

}  // namespace

// One thread per process waits for recorded releases and then drops the claims.
class ReleaseWorker {
 public:
  static ReleaseWorker& get() {
    // Never destroyed: it must outlive every frame, including at process exit.
    static ReleaseWorker* worker = new ReleaseWorker();
    return *worker;
  }
  void push(std::function<cipc_cuda::Status()> wait, std::shared_ptr<void> keepalive) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back({std::move(wait), std::move(keepalive)});
    }
    cv_.notify_one();
  }

 private:
  struct Item {
    std::function<cipc_cuda::Status()> wait;  // what it waits on lives while `keepalive` does
    std::shared_ptr<void> keepalive;
  };
  ReleaseWorker() {
    std::thread([this] { run(); }).detach();
  }
  void run() {
    for (;;) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return !queue_.empty(); });
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      const cipc_cuda::Status s = item.wait();
      if (!s) GST_WARNING("waiting for a frame's last read failed: %s", s.message().c_str());
      item.keepalive.reset();  // RELEASE goes out here
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
};

void release_when_read(CudaSlotMemory& slot, std::shared_ptr<void> keepalive) {
  ReleaseWorker::get().push([&slot] { return slot.wait_released(); }, std::move(keepalive));
}

void drop_when_done(std::shared_ptr<cipc_cuda::Event> done, std::shared_ptr<void> keepalive) {
  ReleaseWorker::get().push([done] { return done->synchronize(); }, std::move(keepalive));
}

void register_host_memory_once(GstMemory* mem, void* data, size_t size) {
  static const GQuark quark = g_quark_from_static_string("cudaipc-host-registration");
  if (gst_mini_object_get_qdata(GST_MINI_OBJECT_CAST(mem), quark)) return;
  auto* reg = new cipc_cuda::HostRegistration();
  const cipc_cuda::Status s = cipc_cuda::HostRegistration::create(data, size, reg);
  if (!s)
    GST_INFO("downstream memory cannot be page-locked, copying into it as is: %s",
             s.message().c_str());
  gst_mini_object_set_qdata(GST_MINI_OBJECT_CAST(mem), quark, reg, [](gpointer p) {
    delete static_cast<cipc_cuda::HostRegistration*>(p);
  });
}

CudaSlotMemory::~CudaSlotMemory() = default;

cipc::Result<std::unique_ptr<CudaSlotMemory>> CudaSlotMemory::allocate(int device, size_t size,
                                                                       SyncMode sync) {
  init_debug();
  std::unique_ptr<CudaSlotMemory> m(new CudaSlotMemory());
  m->sync_ = sync;
  cipc_cuda::Status s = cipc_cuda::DeviceAllocation::create(device, size, &m->allocation_);
  if (!s) return cuda_error("allocating a " + std::to_string(size) + "-byte CUDA slot", s);
  int fd = -1;
  s = m->allocation_.export_fd(&fd);
  if (!s) return cuda_error("exporting a CUDA slot", s);
  m->export_fd_.reset(fd);
  if (sync == SyncMode::kGpuEvents) {
    s = cipc_cuda::Event::create_interprocess(device, &m->readiness_);
    if (s) s = m->readiness_.ipc_handle(&m->readiness_handle_);
    if (!s) return cuda_error("creating a slot's readiness event", s);
  }
  return m;
}

cipc::Result<std::unique_ptr<CudaSlotMemory>> CudaSlotMemory::import(
    int device, cipc::UniqueFd fd, size_t size, const cipc::EventHandle* readiness, SyncMode sync) {
  init_debug();
  std::unique_ptr<CudaSlotMemory> m(new CudaSlotMemory());
  m->sync_ = sync;
  cipc_cuda::Status s =
      cipc_cuda::DeviceAllocation::import(device, fd.get(), size, &m->allocation_);
  if (!s) return cipc::Error{cipc::ErrorCode::kProtocol, "importing a CUDA slot: " + s.message()};
  if (sync == SyncMode::kGpuEvents) {
    if (readiness) {
      s = cipc_cuda::Event::open(device, *readiness, &m->readiness_);
      if (!s) return cuda_error("opening the producer's readiness event", s);
    }
    s = cipc_cuda::Event::create_interprocess(device, &m->release_);
    if (!s) return cuda_error("creating a release event", s);
  }
  return m;
}

bool CudaSlotMemory::event_handle(cipc::EventHandle* out) const {
  if (!readiness_.valid() || release_.valid()) return false;  // only the producer exports it
  *out = readiness_handle_;
  return true;
}

cipc_cuda::Status CudaSlotMemory::begin_write(cipc_cuda::StreamHandle) {
  // Nothing to wait for: a slot returns to the pool only after every reader's RELEASE, which
  // readers send once their reads have completed.
  return cipc_cuda::Status::success();
}

cipc_cuda::Status CudaSlotMemory::wait_released() {
  return release_.valid() ? release_.synchronize() : cipc_cuda::Status::success();
}

cipc_cuda::Status CudaSlotMemory::end_write(cipc_cuda::StreamHandle stream) {
  if (sync_ == SyncMode::kCpu) return cipc_cuda::synchronize_stream(stream);
  return readiness_.record(stream);
}

cipc_cuda::Status CudaSlotMemory::wait_ready(cipc_cuda::StreamHandle stream) {
  // CPU mode: the producer synchronised before sending the frame.
  if (sync_ == SyncMode::kCpu || !readiness_.valid()) return cipc_cuda::Status::success();
  return readiness_.wait(stream);
}

cipc_cuda::Status CudaSlotMemory::record_release(cipc_cuda::StreamHandle stream) {
  if (sync_ == SyncMode::kCpu || !release_.valid()) return cipc_cuda::synchronize_stream(stream);
  return release_.record(stream);
}

cipc::Result<std::unique_ptr<cipc::SlotMemory>> CudaMemoryBackend::allocate(size_t size) {
  auto m = CudaSlotMemory::allocate(device_, size, sync_);
  if (!m) return m.error();
  return std::unique_ptr<cipc::SlotMemory>(std::move(m.value()));
}

cipc::Result<std::unique_ptr<cipc::SlotMemory>> CudaMemoryBackend::import(
    cipc::UniqueFd fd, size_t size, const cipc::EventHandle* event) {
  auto m = CudaSlotMemory::import(device_, std::move(fd), size, event, sync_);
  if (!m) return m.error();
  return std::unique_ptr<cipc::SlotMemory>(std::move(m.value()));
}

void bind_cuda_region(GstCipcSlotBinding& binding, CudaRegion& region) {
  binding.has_cuda = true;
  binding.region = &region;
  binding.data = nullptr;
  binding.cuda.struct_size = sizeof(GstCudaIpcMemoryInfo);
  binding.cuda.device = region.device();
  binding.cuda.device_ptr = region.ptr();
  binding.cuda.slot_size = region.bytes();
  binding.cuda.wait_ready = table_wait_ready;
  binding.cuda.record_release = table_record_release;
  binding.cuda.begin_write = table_begin_write;
  binding.cuda.end_write = table_end_write;
  binding.cpu_access = std::make_unique<StagingAccess>(region);
}

CudaRegion* cuda_region_of(GstMemory* mem) {
  const GstCipcSlotBinding* b = gst_cipc_slot_memory_binding(mem);
  return b ? b->region : nullptr;
}

CudaSlotMemory* cuda_slot_of(GstMemory* mem) {
  const GstCipcSlotBinding* b = gst_cipc_slot_memory_binding(mem);
  if (!b || !b->has_cuda) return nullptr;
  cipc::SlotMemory* m = b->producer_slot   ? b->producer_slot.get()
                        : b->imported_slot ? b->imported_slot->memory.get()
                                           : nullptr;
  return m && m->kind() == cipc::MemoryKind::kCuda ? static_cast<CudaSlotMemory*>(m) : nullptr;
}

cipc::Result<std::shared_ptr<PrivateCopies::Copy>> PrivateCopies::acquire(size_t size) {
  std::unique_ptr<Copy> copy;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if ((*it)->bytes() >= size) {
        copy = std::move(*it);
        free_.erase(it);
        break;
      }
    }
  }
  if (!copy) {
    copy.reset(new Copy());
    copy->device_ = device_;
    cipc_cuda::Status s = cipc_cuda::DeviceBuffer::create(device_, size, &copy->buffer_);
    if (s) s = cipc_cuda::Event::create_interprocess(device_, &copy->event_);
    if (!s) return cuda_error("allocating a private frame copy", s);
    std::lock_guard<std::mutex> lock(mutex_);
    ++allocated_;
  }
  // Back into the set when the last user lets go (the set may be gone by then).
  std::weak_ptr<PrivateCopies> owner = shared_from_this();
  return std::shared_ptr<Copy>(copy.release(), [owner](Copy* c) {
    if (auto set = owner.lock()) {
      std::lock_guard<std::mutex> lock(set->mutex_);
      set->free_.emplace_back(c);
    } else {
      delete c;
    }
  });
}

cipc_cuda::Status open_device(int requested, cipc_cuda::DeviceInfo* info, bool require_export) {
  std::string why;
  const int count = cipc_cuda::device_count(&why);
  if (count <= 0)
    return cipc_cuda::Status::failure(why.empty() ? "no CUDA device is present" : why);
  const int ordinal = requested < 0 ? 0 : requested;
  if (ordinal >= count)
    return cipc_cuda::Status::failure("cuda-device-id=" + std::to_string(requested) +
                                      " but this machine has " + std::to_string(count) +
                                      " CUDA device(s)");
  cipc_cuda::Status s = cipc_cuda::query_device(ordinal, info);
  if (!s) return s;
  if (require_export && (!info->vmm_supported || !info->posix_fd_supported))
    return cipc_cuda::Status::failure("CUDA device " + std::to_string(ordinal) + " (" + info->name +
                                      ") cannot export memory as file descriptors (VMM with POSIX "
                                      "handles is required)");
  return cipc_cuda::set_device(ordinal);
}

}  // namespace cipc_gst
