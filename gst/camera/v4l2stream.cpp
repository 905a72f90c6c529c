// SPDX-License-Identifier: LGPL-2.1-or-later
#include "camera/v4l2stream.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

GST_DEBUG_CATEGORY_EXTERN(gst_cuda_v4l2_src_debug);
#define GST_CAT_DEFAULT gst_cuda_v4l2_src_debug

namespace cipc_gst {

namespace v4l = cipc_v4l2;

size_t page_size() {
  static const size_t size = [] {
    const long s = sysconf(_SC_PAGESIZE);
    return s > 0 ? static_cast<size_t>(s) : size_t{4096};
  }();
  return size;
}

namespace {

// The checks of buffer_suits_userptr() on a buffer already mapped for writing.
bool mapped_buffer_suits(GstBuffer* buffer, const GstMapInfo& map, size_t size_image,
                         std::string* why) {
  if (gst_buffer_n_memory(buffer) != 1) {
    *why = "it has " + std::to_string(gst_buffer_n_memory(buffer)) + " memories, not one";
    return false;
  }
  if (reinterpret_cast<uintptr_t>(map.data) % page_size() != 0) {
    *why = "its data does not start on a page boundary";
    return false;
  }
  if (map.size < size_image) {
    *why = "it holds " + std::to_string(map.size) + " bytes, the frame needs " +
           std::to_string(size_image);
    return false;
  }
  return true;
}

}  // namespace

bool buffer_suits_userptr(GstBuffer* buffer, size_t size_image, std::string* why) {
  GstMapInfo map;
  if (!gst_buffer_map(buffer, &map, GST_MAP_WRITE)) {
    *why = "it cannot be mapped for writing";
    return false;
  }
  const bool ok = mapped_buffer_suits(buffer, map, size_image, why);
  gst_buffer_unmap(buffer, &map);
  return ok;
}

namespace {

v4l::Error stream_error(const v4l::Device& device, std::string text) {
  v4l::Error e;
  e.kind = v4l::ErrorKind::kFailed;
  e.message = "Capture from device '" + device.path() + "' failed: " + std::move(text) + ".";
  return e;
}

// ---- USERPTR --------------------------------------------------------------------------------

class UserptrStream final : public CaptureStream {
 public:
  UserptrStream(std::shared_ptr<v4l::Device> device, GstBufferPool* pool, unsigned count,
                size_t size_image)
      : device_(std::move(device)),
        pool_(GST_BUFFER_POOL(gst_object_ref(pool))),
        slots_(count),
        size_image_(size_image) {}
  ~UserptrStream() override {
    stop();
    gst_object_unref(pool_);
  }

  v4l::Memory memory() const override { return v4l::Memory::kUserptr; }

  bool start(v4l::Error* error) override {
    bool flushing = false;
    if (!refill(&flushing, error)) return false;
    if (!device_->stream_on(error)) return false;  // stop() reclaims what was queued
    streaming_ = true;
    return true;
  }

  bool refill(bool* flushing, v4l::Error* error) override {
    for (size_t index = 0; index < slots_.size(); ++index) {
      Slot& slot = slots_[index];
      if (slot.buffer) continue;
      GstBufferPoolAcquireParams params{};
      params.flags = GST_BUFFER_POOL_ACQUIRE_FLAG_DONTWAIT;
      GstBuffer* buffer = nullptr;
      const GstFlowReturn ret = gst_buffer_pool_acquire_buffer(pool_, &buffer, &params);
      if (ret == GST_FLOW_EOS) return true;  // every free buffer is queued; the rest are downstream
      if (ret == GST_FLOW_FLUSHING) {
        *flushing = true;
        return true;
      }
      if (ret != GST_FLOW_OK) {
        *error = stream_error(*device_, std::string("the buffer pool gave no buffer (") +
                                            gst_flow_get_name(ret) + ")");
        return false;
      }
      // Mapped for writing while the driver owns it; unmapped when it comes back with a frame.
      std::string why = "it cannot be mapped for writing";
      const bool mapped = gst_buffer_map(buffer, &slot.map, GST_MAP_WRITE);
      if (!mapped || !mapped_buffer_suits(buffer, slot.map, size_image_, &why)) {
        if (mapped) gst_buffer_unmap(buffer, &slot.map);
        gst_buffer_unref(buffer);
        *error = stream_error(*device_, "a pool buffer cannot receive frames: " + why);
        return false;
      }
      if (!device_->queue_userptr(static_cast<uint32_t>(index), slot.map.data, slot.map.size,
                                  error)) {
        gst_buffer_unmap(buffer, &slot.map);
        gst_buffer_unref(buffer);
        return false;
      }
      slot.buffer = buffer;
      ++queued_;
    }
    return true;
  }

  unsigned queued() const override { return queued_; }

  bool dequeue(size_t frame_bytes, v4l::Frame* frame, GstBuffer** buffer,
               v4l::Error* error) override {
    if (!device_->dequeue(v4l::Memory::kUserptr, frame, error)) return false;
    if (frame->index >= slots_.size() || !slots_[frame->index].buffer) {
      *error = stream_error(*device_, "the driver returned buffer " + std::to_string(frame->index) +
                                          ", which was not queued");
      return false;
    }
    Slot& slot = slots_[frame->index];
    GstBuffer* out = slot.buffer;
    gst_buffer_unmap(out, &slot.map);
    slot.buffer = nullptr;
    --queued_;
    gst_buffer_resize(out, 0, static_cast<gssize>(std::min(frame_bytes, gst_buffer_get_size(out))));
    *buffer = out;
    return true;
  }

  void stop() override {
    if (stopped_) return;
    stopped_ = true;
    v4l::Error ignored;
    // STREAMOFF hands every queued buffer back; only then may their memory go back to the pool.
    if (streaming_ || queued_ > 0) device_->stream_off(&ignored);
    streaming_ = false;
    for (Slot& slot : slots_) {
      if (!slot.buffer) continue;
      gst_buffer_unmap(slot.buffer, &slot.map);
      gst_buffer_unref(slot.buffer);
      slot.buffer = nullptr;
    }
    queued_ = 0;
    if (!device_->release_buffers(v4l::Memory::kUserptr, &ignored))
      GST_DEBUG("%s (%s)", ignored.message.c_str(), ignored.detail.c_str());
  }

 private:
  struct Slot {
    GstBuffer* buffer = nullptr;  // queued in the driver; mapped for writing
    GstMapInfo map{};
  };
  std::shared_ptr<v4l::Device> device_;
  GstBufferPool* pool_;
  std::vector<Slot> slots_;  // index = V4L2 buffer index
  size_t size_image_;
  unsigned queued_ = 0;
  bool streaming_ = false;
  bool stopped_ = false;
};

// ---- MMAP -----------------------------------------------------------------------------------

// Shared by the stream and every buffer it pushed: the mappings stay valid until the last
// buffer is freed, even after the stream stopped (the kernel keeps orphaned MMAP buffers).
struct MmapRing {
  std::shared_ptr<v4l::Device> device;              // declared first: destroyed after the mappings
  std::vector<std::unique_ptr<v4l::Mapping>> maps;  // index = V4L2 buffer index
  std::vector<bool> downstream;                     // under mutex: pushed and not yet returned
  std::mutex mutex;
  bool streaming = false;  // under mutex: whether returned buffers are requeued
  std::atomic<unsigned> queued{0};
  v4l::Error requeue_error;  // under mutex: the first failed requeue
};

struct Ticket {
  std::shared_ptr<MmapRing> ring;
  uint32_t index;
};

// GDestroyNotify of a pushed MMAP buffer's memory: the frame is no longer read by anyone.
void return_mmap_buffer(gpointer data) {
  std::unique_ptr<Ticket> ticket(static_cast<Ticket*>(data));
  MmapRing& ring = *ticket->ring;
  std::lock_guard<std::mutex> lock(ring.mutex);
  ring.downstream[ticket->index] = false;
  if (!ring.streaming) return;
  v4l::Error error;
  if (ring.device->queue_mmap(ticket->index, &error)) {
    ++ring.queued;
  } else if (!ring.requeue_error) {
    ring.requeue_error = error;
  }
}

class MmapStream final : public CaptureStream {
 public:
  MmapStream(std::shared_ptr<v4l::Device> device, unsigned count)
      : ring_(std::make_shared<MmapRing>()) {
    ring_->device = std::move(device);
    ring_->downstream.assign(count, false);
    count_ = count;
  }
  ~MmapStream() override { stop(); }

  v4l::Memory memory() const override { return v4l::Memory::kMmap; }

  bool start(v4l::Error* error) override {
    for (unsigned i = 0; i < count_; ++i) {
      auto map = ring_->device->map_buffer(i, error);
      if (!map) return false;
      ring_->maps.push_back(std::move(map));
    }
    {
      std::lock_guard<std::mutex> lock(ring_->mutex);
      for (unsigned i = 0; i < count_; ++i) {
        if (!ring_->device->queue_mmap(i, error)) return false;
        ++ring_->queued;
      }
      ring_->streaming = true;
    }
    return ring_->device->stream_on(error);
  }

  bool refill(bool* flushing, v4l::Error* error) override {
    (void)flushing;
    std::lock_guard<std::mutex> lock(ring_->mutex);
    if (ring_->requeue_error) {
      *error = ring_->requeue_error;
      return false;
    }
    return true;
  }

  unsigned queued() const override { return ring_->queued; }

  bool dequeue(size_t frame_bytes, v4l::Frame* frame, GstBuffer** buffer,
               v4l::Error* error) override {
    if (!ring_->device->dequeue(v4l::Memory::kMmap, frame, error)) return false;
    if (frame->index >= ring_->maps.size()) {
      *error = stream_error(*ring_->device, "the driver returned an unknown buffer");
      return false;
    }
    --ring_->queued;
    {
      std::lock_guard<std::mutex> lock(ring_->mutex);
      ring_->downstream[frame->index] = true;
    }
    const v4l::Mapping& map = *ring_->maps[frame->index];
    *buffer = gst_buffer_new_wrapped_full(GST_MEMORY_FLAG_READONLY, map.data(), map.length(), 0,
                                          std::min(frame_bytes, map.length()),
                                          new Ticket{ring_, frame->index}, return_mmap_buffer);
    return true;
  }

  void stop() override {
    if (stopped_) return;
    stopped_ = true;
    v4l::Error ignored;
    {
      std::lock_guard<std::mutex> lock(ring_->mutex);
      ring_->streaming = false;  // buffers still downstream are not requeued when they return
      ring_->device->stream_off(&ignored);
      ring_->queued = 0;
      // Unmap what nobody holds; the rest stay mapped until their buffers are freed.
      for (size_t i = 0; i < ring_->maps.size(); ++i)
        if (!ring_->downstream[i]) ring_->maps[i].reset();
    }
    // Buffers still mapped downstream become orphans that the kernel frees on munmap.
    if (!ring_->device->release_buffers(v4l::Memory::kMmap, &ignored))
      GST_DEBUG("%s (%s)", ignored.message.c_str(), ignored.detail.c_str());
  }

 private:
  std::shared_ptr<MmapRing> ring_;
  unsigned count_ = 0;
  bool stopped_ = false;
};

}  // namespace

std::unique_ptr<CaptureStream> make_userptr_stream(std::shared_ptr<v4l::Device> device,
                                                   GstBufferPool* pool, unsigned count,
                                                   size_t size_image) {
  return std::make_unique<UserptrStream>(std::move(device), pool, count, size_image);
}

std::unique_ptr<CaptureStream> make_mmap_stream(std::shared_ptr<v4l::Device> device,
                                                unsigned count) {
  return std::make_unique<MmapStream>(std::move(device), count);
}

}  // namespace cipc_gst
