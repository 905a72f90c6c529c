// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ipcsink/sinkcudamemoryinput.h"

#include <fcntl.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <utility>
#include <vector>

#include "common/gstcompat.h"
#include "cuda_slots.h"
#include "unique_fd.h"

// Logs go to cudasink-ipc's own category.
GST_DEBUG_CATEGORY_STATIC(cipc_exported_input_debug);
#define GST_CAT_DEFAULT cipc_exported_input_debug

namespace cipc_gst {

// Memory kept out of its pool: a stuck consumer may still read it, so upstream must not write it
// again (FrameHold::retire). A pool recycles a GstCudaMemory its buffer no longer holds, so a
// reference is kept here until the sink is gone.
struct RetiredCudaMemory {
  std::mutex lock;
  std::vector<GstMemory*> kept;
  ~RetiredCudaMemory() {
    for (GstMemory* mem : kept) gst_memory_unref(mem);
  }
  void keep(GstMemory* mem) {
    std::lock_guard<std::mutex> guard(lock);
    kept.push_back(gst_memory_ref(mem));
  }
};

// One sink's adoption of one GstCudaMemory: the slot its consumers import.
struct AdoptedSlot {
  uint64_t owner = 0;  // the SinkCudaMemoryInput's serial
  uint64_t generation = 0;
  uint32_t index = 0;
  std::shared_ptr<cipc::SlotMemory> memory;
  SinkCudaMemoryInput::Retire retire;
  AdoptedSlot() = default;
  AdoptedSlot(const AdoptedSlot&) = delete;
  AdoptedSlot& operator=(const AdoptedSlot&) = delete;
  // Gone with the memory's qdata (the memory is freed) or with its replacement, once no frame
  // hold refers to it: consumers drop their import of the slot.
  ~AdoptedSlot() {
    if (retire) retire(generation, index);
  }
};

namespace {

GQuark adoptions_quark() {
  static const GQuark quark = g_quark_from_static_string("cudaipc-exported-slots");
  return quark;
}

// What a GstCudaMemory carries (qdata): its adoptions, one per sink that sends it (a tee may
// feed several).
struct Adoptions {
  std::mutex lock;
  std::vector<std::shared_ptr<AdoptedSlot>> slots;
};

void free_adoptions(gpointer data) {
  delete static_cast<Adoptions*>(data);
}

Adoptions& adoptions_of(GstMemory* mem) {
  // The memory's qdata is set once, by the first sink that sends it; GStreamer serialises qdata
  // access, and a lost race only costs one re-export.
  auto* adoptions =
      static_cast<Adoptions*>(gst_mini_object_get_qdata(GST_MINI_OBJECT(mem), adoptions_quark()));
  if (adoptions == nullptr) {
    adoptions = new Adoptions();
    gst_mini_object_set_qdata(GST_MINI_OBJECT(mem), adoptions_quark(), adoptions, free_adoptions);
  }
  return *adoptions;
}

// Keeps a sent buffer, and so its memory, out of upstream's pool while consumers hold the frame.
class ExportedFrameHold final : public cipc::FrameHold {
 public:
  ExportedFrameHold(GstBuffer* buffer, std::shared_ptr<AdoptedSlot> slot,
                    std::shared_ptr<RetiredCudaMemory> retired)
      : buffer_(gst_buffer_ref(buffer)), slot_(std::move(slot)), retired_(std::move(retired)) {}
  ~ExportedFrameHold() override { gst_buffer_unref(buffer_); }
  ExportedFrameHold(const ExportedFrameHold&) = delete;
  ExportedFrameHold& operator=(const ExportedFrameHold&) = delete;
  void retire() override {
    retired_->keep(gst_buffer_peek_memory(buffer_, 0));
    GST_BUFFER_FLAG_SET(buffer_, GST_BUFFER_FLAG_TAG_MEMORY);  // the pool drops the buffer too
  }

 private:
  GstBuffer* buffer_;
  std::shared_ptr<AdoptedSlot> slot_;  // its readiness event outlives the consumers' waits
  std::shared_ptr<RetiredCudaMemory> retired_;
};

// A CUDA map per frame: it gives the device address, and uploads what a CPU writer left in the
// memory's staging copy (GST_CUDA_MEMORY_TRANSFER_NEED_UPLOAD) on the memory's stream.
bool device_address(GstMemory* mem, cipc_cuda::DevicePtr* device_ptr) {
  GstMapInfo map;
  if (!gst_memory_map(mem, &map, static_cast<GstMapFlags>(GST_MAP_READ | GST_MAP_CUDA)))
    return false;
  *device_ptr = static_cast<cipc_cuda::DevicePtr>(reinterpret_cast<uintptr_t>(map.data));
  gst_memory_unmap(mem, &map);
  return true;
}

std::atomic<uint64_t> next_serial{1};

}  // namespace

GstBufferPool* make_exportable_cuda_pool(GstCudaContext* context, GstCaps* caps, guint min_buffers,
                                         guint* size, std::string* why) {
  if (!gst_cuda_can_export_memory()) {
    *why = "GStreamer before 1.24 has no exportable CUDA memory";
    return nullptr;
  }
  if (!gst_cuda_context_can_export(context)) {
    *why = "the CUDA context cannot allocate memory with descriptor handles (no VMM support)";
    return nullptr;
  }
  GstVideoInfo info;
  if (!gst_video_info_from_caps(&info, caps)) {
    *why = "the caps are not raw video";
    return nullptr;
  }
  GstBufferPool* pool = new_gst_cuda_buffer_pool(context);
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
  gst_cuda_pool_config_request_exportable(config);
  gst_buffer_pool_config_set_params(config, caps, GST_VIDEO_INFO_SIZE(&info), min_buffers, 0);
  if (!gst_buffer_pool_set_config(pool, config)) {
    gst_object_unref(pool);
    *why = "GStreamer's CUDA buffer pool refused the configuration";
    return nullptr;
  }
  // The pool pads rows to the device's pitch: the size it settled on is what upstream allocates.
  config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_get_params(config, nullptr, size, nullptr, nullptr);
  gst_structure_free(config);
  return pool;
}

GstVideoInfo exported_frame_layout(GstBuffer* buffer, const GstVideoInfo& caps_info) {
  // describe_planes() takes the planes of a video meta first; this is for buffers without one.
  GstMemory* mem = gst_buffer_n_memory(buffer) == 1 ? gst_buffer_peek_memory(buffer, 0) : nullptr;
  return mem && gst_is_cuda_memory(mem) ? GST_CUDA_MEMORY_CAST(mem)->info : caps_info;
}

std::unique_ptr<SinkCudaMemoryInput> SinkCudaMemoryInput::create(int device, cipc::SyncMode sync,
                                                                 Retire retire,
                                                                 PoolLimit pool_limit,
                                                                 std::string* why) {
  if (!cipc_exported_input_debug) GST_DEBUG_CATEGORY_GET(cipc_exported_input_debug, "cudaipc-sink");
  if (!gst_cuda_can_export_memory()) {
    *why = "GStreamer before 1.24 has no exportable CUDA memory";
    return nullptr;
  }
  std::unique_ptr<SinkCudaMemoryInput> input(
      new SinkCudaMemoryInput(device, sync, std::move(retire), std::move(pool_limit)));
  const cipc_cuda::Status s = cipc_cuda::Stream::create(device, &input->idle_stream_);
  if (!s) {
    *why = "could not create a CUDA stream: " + s.message();
    return nullptr;
  }
  return input;
}

SinkCudaMemoryInput::SinkCudaMemoryInput(int device, cipc::SyncMode sync, Retire retire,
                                         PoolLimit pool_limit)
    : device_(device),
      sync_(sync),
      serial_(next_serial++),
      retire_(std::move(retire)),
      pool_limit_(std::move(pool_limit)),
      retired_(std::make_shared<RetiredCudaMemory>()) {}

SinkCudaMemoryInput::~SinkCudaMemoryInput() {
  if (last_pool_) gst_object_unref(last_pool_);
}

bool SinkCudaMemoryInput::exportable(GstMemory* mem, int* exported_fd) const {
  // Planes are described from the slot's first byte: memory that starts further in is copied.
  if (!gst_is_cuda_memory(mem) || mem->offset != 0) return false;
  // Our readiness event is recorded on the memory's stream, which must be of our context.
  if (!is_primary_context(GST_CUDA_MEMORY_CAST(mem)->context, device_)) return false;
  *exported_fd = gst_cuda_memory_export_fd(mem);
  return *exported_fd >= 0;
}

SinkCudaMemoryInput::Outcome SinkCudaMemoryInput::find_or_adopt(GstMemory* mem, int exported_fd,
                                                                cipc_cuda::DevicePtr device_ptr,
                                                                SlotPoolGenerations& pools,
                                                                std::shared_ptr<AdoptedSlot>* slot,
                                                                std::string* error) {
  Adoptions& adoptions = adoptions_of(mem);
  std::shared_ptr<AdoptedSlot> replaced;
  {
    std::lock_guard<std::mutex> guard(adoptions.lock);
    for (auto it = adoptions.slots.begin(); it != adoptions.slots.end(); ++it) {
      if ((*it)->owner != serial_) continue;
      if ((*it)->generation == pools.generation()) {
        *slot = *it;
      } else {
        replaced = std::move(*it);  // a replaced generation's: retired once no frame holds it
        adoptions.slots.erase(it);
      }
      break;
    }
  }
  replaced.reset();  // outside the lock: retiring takes the producer's
  if (*slot) return Outcome::kSent;
  const Outcome adopted = adopt(mem, exported_fd, device_ptr, pools, slot, error);
  if (adopted != Outcome::kSent) return adopted;
  std::lock_guard<std::mutex> guard(adoptions.lock);
  adoptions.slots.push_back(*slot);
  return Outcome::kSent;
}

SinkCudaMemoryInput::Outcome SinkCudaMemoryInput::adopt(GstMemory* mem, int exported_fd,
                                                        cipc_cuda::DevicePtr device_ptr,
                                                        SlotPoolGenerations& pools,
                                                        std::shared_ptr<AdoptedSlot>* slot,
                                                        std::string* error) {
  uint64_t generation = 0;
  uint32_t index = 0;
  // No index left in this generation: copied this once, the roll-over comes with the next frame.
  if (!pools.take_index(&generation, &index)) return Outcome::kNotExportable;
  cipc::UniqueFd fd(::fcntl(exported_fd, F_DUPFD_CLOEXEC, 0));
  if (!fd) {
    // Out of descriptors, say: this frame is copied into one of our slots instead, and the
    // memory is adopted with a later frame (its index stays unused).
    GST_WARNING("could not duplicate exported GStreamer CUDA memory's descriptor (%s): copying",
                g_strerror(errno));
    return Outcome::kNotExportable;
  }
  // The whole allocation is shared, as a slot is: its size is the memory's maxsize.
  auto adopted =
      cipc_slots::CudaSlotMemory::adopt(device_, std::move(fd), device_ptr, mem->maxsize, sync_);
  if (!adopted) {
    *error = adopted.error().message;
    return Outcome::kFailed;
  }
  *slot = std::make_shared<AdoptedSlot>();
  (*slot)->owner = serial_;
  (*slot)->generation = generation;
  (*slot)->index = index;
  (*slot)->memory = std::shared_ptr<cipc::SlotMemory>(std::move(adopted.value()));
  (*slot)->retire = retire_;
  GST_DEBUG("exported GStreamer CUDA memory %p (%" G_GSIZE_FORMAT
            " bytes) as slot %u of generation %" G_GUINT64_FORMAT,
            mem, mem->maxsize, index, generation);
  return Outcome::kSent;
}

bool SinkCudaMemoryInput::mark_ready(AdoptedSlot& slot, GstMemory* mem, std::string* error) {
  // After whatever upstream still has queued on the memory's stream; nothing pending: at once.
  void* pending = gst_cuda_memory_pending_stream(mem);
  const cipc_cuda::Status s = cipc_slots::cuda_slot_of(slot.memory.get())
                                  ->end_write(pending ? pending : idle_stream_.handle());
  if (s) return true;
  *error = "could not record the readiness of GStreamer CUDA memory: " + s.message();
  return false;
}

void SinkCudaMemoryInput::note_pool(GstBuffer* buffer) {
  if (buffer->pool == last_pool_) return;
  if (last_pool_) gst_object_unref(last_pool_);
  last_pool_ = buffer->pool ? GST_BUFFER_POOL(gst_object_ref(buffer->pool)) : nullptr;
  guint max_buffers = 0;
  if (last_pool_) {
    GstStructure* config = gst_buffer_pool_get_config(last_pool_);
    gst_buffer_pool_config_get_params(config, nullptr, nullptr, nullptr, &max_buffers);
    gst_structure_free(config);
  }
  if (pool_limit_) pool_limit_(max_buffers);
}

SinkCudaMemoryInput::Outcome SinkCudaMemoryInput::send(GstBuffer* buffer,
                                                       SlotPoolGenerations& pools,
                                                       cipc::SlotRef* ref,
                                                       std::shared_ptr<cipc::FrameHold>* hold,
                                                       std::string* error) {
  if (gst_buffer_n_memory(buffer) != 1) return Outcome::kNotExportable;
  GstMemory* mem = gst_buffer_peek_memory(buffer, 0);
  int exported_fd = -1;
  if (!exportable(mem, &exported_fd)) return Outcome::kNotExportable;
  cipc_cuda::DevicePtr device_ptr = 0;
  if (!device_address(mem, &device_ptr)) {
    *error = "could not map GStreamer CUDA memory on the GPU";
    return Outcome::kFailed;
  }
  std::shared_ptr<AdoptedSlot> slot;
  const Outcome found = find_or_adopt(mem, exported_fd, device_ptr, pools, &slot, error);
  if (found != Outcome::kSent) return found;
  if (!mark_ready(*slot, mem, error)) return Outcome::kFailed;
  note_pool(buffer);
  ref->generation = slot->generation;
  ref->index = slot->index;
  ref->memory = slot->memory.get();
  *hold = std::make_shared<ExportedFrameHold>(buffer, slot, retired_);
  return Outcome::kSent;
}

}  // namespace cipc_gst
