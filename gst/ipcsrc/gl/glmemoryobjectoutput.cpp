// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ipcsrc/gl/glmemoryobjectoutput.h"

#include <gst/gl/gstglfuncs.h>

#include <unordered_map>
#include <utility>

#include "cuda_slots.h"
#include "ipcsrc/gl/fencedreleases.h"
#include "ipcsrc/gl/glcudainteropoutput.h"
#include "ipcsrc/gl/glslotbuffer.h"

GST_DEBUG_CATEGORY_STATIC(cipc_gl_memobj_debug);
#define GST_CAT_DEFAULT cipc_gl_memobj_debug

namespace cipc_gst {

namespace {

// Claims wait for at most this many GL reads: the frame just queued and a few behind it.
constexpr size_t kMaxPendingReads = 4;
// How long a bounded wait for a GL read may take before the claim is given back regardless.
constexpr GLuint64 kFenceWaitNs = 1000000000;
// Right after queuing a copy, the GL thread waits this long for it (a 4K frame's copy takes about
// that on an H200), so that the claim usually goes back at once, as slots/cuda_slots.cpp's
// readers do; claims still pending are collected by the streaming thread every millisecond.
constexpr uint64_t kInlineWaitNs = 20000;

// One imported slot, valid while the producer's slot lives.
struct CachedImport {
  std::weak_ptr<const cipc::ImportedSlot> slot;
  std::unique_ptr<GlSlotBuffer> buffer;
};

// The GL thread's state: the imports and the claims waiting for GL's reads. Made, used and
// destroyed in the GL thread only.
class GlThreadState {
 public:
  explicit GlThreadState(GstGLContext* context)
      : context_(context), releases_(fence_ops(context->gl_vtable), kMaxPendingReads) {}

  // The slot's GL buffer, imported on first use; nullptr with *why.
  GlSlotBuffer* buffer_for(const std::shared_ptr<const cipc::ImportedSlot>& slot,
                           cipc_slots::CudaSlotMemory* memory, std::string* why) {
    forget_retired();
    auto it = imports_.find(slot.get());
    if (it != imports_.end()) return it->second.buffer.get();
    if (memory->kept_descriptor() < 0) {
      *why = "the slot was imported without keeping its descriptor";
      return nullptr;
    }
    auto buffer = GlSlotBuffer::import(context_, memory->kept_descriptor(),
                                       memory->allocation_bytes(), memory->bytes(), why);
    if (!buffer) return nullptr;
    GST_DEBUG("imported slot %u of generation %" G_GUINT64_FORMAT " into GL", slot->index,
              slot->generation);
    GlSlotBuffer* raw = buffer.get();
    imports_[slot.get()] = CachedImport{slot, std::move(buffer)};
    return raw;
  }

  // After a frame's read is queued: its claim waits for a fence behind it.
  void hold_until_read(std::shared_ptr<void> keepalive) {
    GLsync fence = gl()->FenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0);
    gl()->Flush();  // so that the fence signals without anyone waiting on it
    releases_.add(fence, std::move(keepalive));  // a null fence: given back at the next reap
    releases_.reap(kInlineWaitNs);
  }
  void reap() { releases_.reap(); }
  void drain() { releases_.drain(); }
  size_t pending() const { return releases_.pending(); }

 private:
  const GstGLFuncs* gl() const { return context_->gl_vtable; }
  // GL sync objects as FencedReleases' fences.
  static FencedReleases::FenceOps fence_ops(const GstGLFuncs* gl) {
    FencedReleases::FenceOps ops;
    ops.signalled = [gl](FencedReleases::Fence f, uint64_t wait_ns) {
      const GLenum r = gl->ClientWaitSync(static_cast<GLsync>(f),
                                          wait_ns ? GL_SYNC_FLUSH_COMMANDS_BIT : 0, wait_ns);
      return r != GL_TIMEOUT_EXPIRED;  // signalled, or failed: let the claim go
    };
    ops.wait = [gl](FencedReleases::Fence f) {
      (void)gl->ClientWaitSync(static_cast<GLsync>(f), GL_SYNC_FLUSH_COMMANDS_BIT, kFenceWaitNs);
    };
    ops.destroy = [gl](FencedReleases::Fence f) { gl->DeleteSync(static_cast<GLsync>(f)); };
    return ops;
  }
  // Slots the producer retired (no frame or consumer holds them): their GL memory goes too.
  void forget_retired() {
    for (auto it = imports_.begin(); it != imports_.end();)
      it = it->second.slot.expired() ? imports_.erase(it) : std::next(it);
  }

  GstGLContext* context_;
  std::unordered_map<const cipc::ImportedSlot*, CachedImport> imports_;
  FencedReleases releases_;  // last: its drain() runs before the imports are deleted
};

struct CopyJob {
  GlThreadState** state;
  GstMemory* memory;
  const std::shared_ptr<const cipc::ImportedSlot>* slot;
  cipc_slots::CudaSlotMemory* slot_memory;
  const GstVideoInfo* layout;
  const GstVideoInfo* out_info;
  std::shared_ptr<void> keepalive;
  std::string error;
};

void copy_in_gl_thread(GstGLContext* context, gpointer data) {
  auto* job = static_cast<CopyJob*>(data);
  if (!*job->state) *job->state = new GlThreadState(context);
  GlThreadState& state = **job->state;
  state.reap();
  GlSlotBuffer* buffer = state.buffer_for(*job->slot, job->slot_memory, &job->error);
  if (!buffer) {
    job->error = "GL could not import the producer's slot (" + job->error + ")";
    return;
  }
  GstMapInfo map;
  if (!gst_memory_map(job->memory, &map, static_cast<GstMapFlags>(GST_MAP_WRITE | GST_MAP_GL))) {
    job->error = "could not map a GL texture for writing";
    return;
  }
  const guint texture = *reinterpret_cast<const guint*>(map.data);
  const GstVideoInfo& layout = *job->layout;
  const bool ok = buffer->copy_to_texture(texture, layout.offset[0], layout.stride[0],
                                          GST_VIDEO_INFO_WIDTH(job->out_info),
                                          GST_VIDEO_INFO_HEIGHT(job->out_info), &job->error);
  gst_memory_unmap(job->memory, &map);
  // Even a failed copy may have been partly queued: the claim waits for the fence all the same.
  state.hold_until_read(std::move(job->keepalive));
  if (!ok) job->error = "GL could not copy a frame into a texture (" + job->error + ")";
}

// The streaming thread's look at pending claims, in the GL thread: those read go back.
struct ReleaseJob {
  GlThreadState* state;
  bool drain;
  size_t pending = 0;
};

void release_in_gl_thread(GstGLContext*, gpointer data) {
  auto* job = static_cast<ReleaseJob*>(data);
  if (job->drain)
    job->state->drain();
  else
    job->state->reap();
  job->pending = job->state->pending();
}

class GlMemoryObjectOutput final : public SrcOutput {
 public:
  GlMemoryObjectOutput(const GstVideoInfo& out_info, GstGLContext* context,
                       SrcOutputCounters counters)
      : out_info_(out_info),
        context_(GST_GL_CONTEXT(gst_object_ref(context))),
        counters_(counters) {}
  ~GlMemoryObjectOutput() override {
    // In the GL thread: waits for GL's last reads, gives their claims back, deletes the imports.
    if (state_)
      gst_gl_context_thread_add(
          context_, [](GstGLContext*, gpointer s) { delete static_cast<GlThreadState*>(s); },
          state_);
    gst_object_unref(context_);
  }
  SrcOutputKind kind() const override { return SrcOutputKind::kGlMemoryObject; }

  GstFlowReturn make(GstBaseSrc* src, cipc::ReceivedFrame& frame, const GstVideoInfo& layout,
                     GstBuffer** out) override {
    GlFrameTarget target;
    const GstFlowReturn ret = acquire_gl_target(src, frame, out_info_, &target);
    if (ret != GST_FLOW_OK) return ret;
    GstBuffer* buffer = target.buffer;
    // GL cannot wait for a CUDA event: the producer's frame must be complete before GL reads.
    const cipc_cuda::Status ready = target.slot->wait_ready_on_host();
    if (!ready) {
      gst_buffer_unref(buffer);
      GST_ELEMENT_ERROR(src, RESOURCE, READ,
                        ("Could not wait for the producer's frame to be complete."),
                        ("%s", ready.message().c_str()));
      return GST_FLOW_ERROR;
    }
    CopyJob job{&state_, target.memory, &frame.slot,       target.slot,
                &layout, &out_info_,    frame.take_hold(), {}};
    gst_gl_context_thread_add(context_, copy_in_gl_thread, &job);
    pending_ = state_ ? state_->pending() : 0;  // read after the GL thread's job returned
    if (!job.error.empty()) {
      gst_buffer_unref(buffer);
      GST_ELEMENT_ERROR(src, RESOURCE, WRITE,
                        ("Could not show a frame through GL memory objects "
                         "(gl-import=memory-object; GL must run on the producer's GPU, or use "
                         "gl-import=cuda-interop)."),
                        ("%s", job.error.c_str()));
      return GST_FLOW_ERROR;
    }
    set_gl_sync_point(buffer, context_);
    ++*counters_.gl_copies;
    *out = buffer;
    return GST_FLOW_OK;
  }

  int collect_releases() override {
    if (pending_ == 0) return -1;
    pending_ = run_release_job(false);
    return pending_ > 0 ? 1 : -1;
  }
  void flush_releases() override {
    if (pending_ > 0) pending_ = run_release_job(true);
  }

 private:
  size_t run_release_job(bool drain) {
    ReleaseJob job{state_, drain};
    gst_gl_context_thread_add(context_, release_in_gl_thread, &job);
    return job.pending;
  }

  const GstVideoInfo out_info_;
  GstGLContext* context_;
  SrcOutputCounters counters_;
  GlThreadState* state_ = nullptr;  // made, used and deleted in the GL thread
  size_t pending_ = 0;              // claims waiting in state_ after the last GL job
};

}  // namespace

std::unique_ptr<SrcOutput> make_gl_memory_object_output(const GstVideoInfo& out_info,
                                                        GstGLContext* context,
                                                        const std::array<uint8_t, 16>& gpu,
                                                        SrcOutputCounters counters,
                                                        std::string* why) {
  if (!cipc_gl_memobj_debug) GST_DEBUG_CATEGORY_GET(cipc_gl_memobj_debug, "cudaipc-src");
  if (!context) {
    *why = "no GL context";
    return nullptr;
  }
  if (!gl_memory_object_available(context, why)) return nullptr;
  struct DeviceCheck {
    const std::array<uint8_t, 16>* gpu;
    std::string* why;
    bool same = false;
  } check{&gpu, why};
  gst_gl_context_thread_add(
      context,
      [](GstGLContext* c, gpointer data) {
        auto* job = static_cast<DeviceCheck*>(data);
        job->same = gl_runs_on_device(c, *job->gpu, job->why);
      },
      &check);
  if (!check.same) {
    *why += " (gl-import=auto shows its frames through system memory instead)";
    return nullptr;
  }
  return std::make_unique<GlMemoryObjectOutput>(out_info, context, counters);
}

}  // namespace cipc_gst
