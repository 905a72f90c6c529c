// SPDX-License-Identifier: LGPL-2.1-or-later
#include "memory/slotpool.h"

#include <atomic>

#include "memory/slotmemory.h"
#include "protocol.h"
#include "slot_indices.h"

GST_DEBUG_CATEGORY_STATIC(gst_cipc_slot_pool_debug);
#define GST_CAT_DEFAULT gst_cipc_slot_pool_debug

struct _GstCipcSlotPool {
  GstBufferPool parent;
  std::shared_ptr<cipc::MemoryBackend>* backend;
  CipcSlotPoolHooks* hooks;
  std::atomic<bool> failure_told;
  uint64_t generation;
  cipc_publish::SlotIndices* indices;  // the numbering rules shared with the writer
  GstVideoInfo info;
  gboolean configured;
};

G_DEFINE_TYPE_WITH_CODE(GstCipcSlotPool, gst_cipc_slot_pool, GST_TYPE_BUFFER_POOL,
                        GST_DEBUG_CATEGORY_INIT(gst_cipc_slot_pool_debug, "cudaipc-slotpool", 0,
                                                "cudaipc exportable slot pool"))

static const gchar** slot_pool_get_options(GstBufferPool*) {
  static const gchar* options[] = {GST_BUFFER_POOL_OPTION_VIDEO_META, nullptr};
  return options;
}

static gboolean slot_pool_set_config(GstBufferPool* pool, GstStructure* config) {
  auto* self = GST_CIPC_SLOT_POOL(pool);
  GstCaps* caps = nullptr;
  guint size, min, max;
  if (!gst_buffer_pool_config_get_params(config, &caps, &size, &min, &max) || caps == nullptr) {
    GST_WARNING_OBJECT(pool, "configuration without caps");
    return FALSE;
  }
  GstVideoInfo info;
  if (!gst_video_info_from_caps(&info, caps)) {
    GST_WARNING_OBJECT(pool, "caps %" GST_PTR_FORMAT " are not raw video", caps);
    return FALSE;
  }
  // A slot must hold the whole frame as we lay it out, whatever size upstream asked for. Compared
  // in 64 bits: the frame may not fit the pool's guint size (nor the protocol's slot limit).
  const guint requested_size = size;
  const uint64_t needed =
      MAX(static_cast<uint64_t>(size), static_cast<uint64_t>(GST_VIDEO_INFO_SIZE(&info)));
  if (needed > cipc::kMaxSlotSize || needed > G_MAXUINT) {
    GST_WARNING_OBJECT(pool, "frame of %" G_GUINT64_FORMAT " bytes exceeds the slot size limit",
                       needed);
    return FALSE;
  }
  size = static_cast<guint>(needed);
  GST_OBJECT_LOCK(pool);
  self->info = info;
  self->configured = TRUE;
  GST_OBJECT_UNLOCK(pool);
  const gboolean resized = size != requested_size;
  gst_buffer_pool_config_set_params(config, caps, size, min, max);
  const gboolean ok =
      GST_BUFFER_POOL_CLASS(gst_cipc_slot_pool_parent_class)->set_config(pool, config);
  if (ok && self->hooks && self->hooks->on_configured) self->hooks->on_configured(max);
  // Per the GstBufferPool contract, a changed configuration is applied and reported as FALSE
  // so the caller can re-read and validate it.
  return ok && !resized;
}

gboolean gst_cipc_slot_pool_take_index(GstCipcSlotPool* self, guint* index) {
  uint32_t taken = 0;
  bool first_past_limit = false;
  if (self->indices->take(&taken, &first_past_limit) ==
      cipc_publish::SlotIndices::Taken::kExhausted) {
    GST_ERROR_OBJECT(self, "slot index space exhausted in generation %" G_GUINT64_FORMAT,
                     self->generation);
    return FALSE;
  }
  if (first_past_limit)
    GST_WARNING_OBJECT(self,
                       "slot index limit of %u passed in generation %" G_GUINT64_FORMAT
                       "; further slots of this pool are not shareable",
                       cipc::kMaxSlots, self->generation);
  *index = taken;
  return TRUE;
}

static GstFlowReturn slot_pool_alloc_buffer(GstBufferPool* pool, GstBuffer** out,
                                            GstBufferPoolAcquireParams*) {
  auto* self = GST_CIPC_SLOT_POOL(pool);
  GstStructure* config = gst_buffer_pool_get_config(pool);
  guint size = 0;
  gst_buffer_pool_config_get_params(config, nullptr, &size, nullptr, nullptr);
  gst_structure_free(config);

  // Past kMaxSlots a slot is still allocated, so upstream writing into this pool never fails, but
  // it cannot be shared by index: cudasink-ipc rolls over to a new generation long before
  // (gst_cipc_slot_pool_needs_rollover) and copies such a frame into the new one.
  guint index = 0;
  if (!gst_cipc_slot_pool_take_index(self, &index)) return GST_FLOW_ERROR;
  auto slot = (*self->backend)->allocate(size);
  if (!slot) {
    GST_ERROR_OBJECT(pool, "could not allocate a %u-byte slot: %s", size,
                     slot.error().message.c_str());
    guint min_buffers = 0;
    GstStructure* current = gst_buffer_pool_get_config(pool);
    gst_buffer_pool_config_get_params(current, nullptr, nullptr, &min_buffers, nullptr);
    gst_structure_free(current);
    if (self->hooks->on_failure && !self->failure_told.exchange(true)) {
      const double mib = size / (1024.0 * 1024.0);
      gchar* what = g_strdup_printf(
          "could not allocate shareable slot %u of %.1f MiB (%u bytes; the pool keeps at least "
          "%u slots, %.0f MiB in all): %s",
          index + 1, mib, size, min_buffers, mib * min_buffers, slot.error().message.c_str());
      self->hooks->on_failure(what);
      g_free(what);
    }
    return GST_FLOW_ERROR;
  }
  std::shared_ptr<cipc::SlotMemory> memory(std::move(slot.value()));
  if (self->hooks && self->hooks->on_allocated && index < cipc::kMaxSlots)
    self->hooks->on_allocated(self->generation, index, memory);
  GstMemory* mem = gst_cipc_slot_memory_new_producer(std::move(memory), self->generation, index,
                                                     size, self->backend->get());
  if (mem == nullptr) {
    GST_ERROR_OBJECT(pool, "the slot memory allocator is not available");
    return GST_FLOW_ERROR;
  }
  GstBuffer* buffer = gst_buffer_new();
  gst_buffer_append_memory(buffer, mem);
  GstVideoInfo* info = &self->info;
  gst_buffer_add_video_meta_full(buffer, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_INFO_FORMAT(info),
                                 GST_VIDEO_INFO_WIDTH(info), GST_VIDEO_INFO_HEIGHT(info),
                                 GST_VIDEO_INFO_N_PLANES(info), info->offset, info->stride);
  GST_DEBUG_OBJECT(pool, "allocated slot %u of generation %" G_GUINT64_FORMAT " (%u bytes)", index,
                   self->generation, size);
  *out = buffer;
  return GST_FLOW_OK;
}

static GstFlowReturn slot_pool_acquire_buffer(GstBufferPool* pool, GstBuffer** out,
                                              GstBufferPoolAcquireParams* params) {
  auto* self = GST_CIPC_SLOT_POOL(pool);
  auto* parent = GST_BUFFER_POOL_CLASS(gst_cipc_slot_pool_parent_class);
  const bool may_wait =
      params == nullptr || !(params->flags & GST_BUFFER_POOL_ACQUIRE_FLAG_DONTWAIT);
  if (!may_wait || !self->hooks->before_wait) return parent->acquire_buffer(pool, out, params);
  // Try without waiting first; only a pool with every slot out (at its maximum) has to wait,
  // and then for a consumer's RELEASE, which the producer must read at once.
  GstBufferPoolAcquireParams now{};
  if (params) now = *params;
  now.flags =
      static_cast<GstBufferPoolAcquireFlags>(now.flags | GST_BUFFER_POOL_ACQUIRE_FLAG_DONTWAIT);
  const GstFlowReturn ret = parent->acquire_buffer(pool, out, &now);
  if (ret != GST_FLOW_EOS) return ret;
  self->hooks->before_wait();
  return parent->acquire_buffer(pool, out, params);
}

static void slot_pool_flush_start(GstBufferPool* pool) {
  auto* self = GST_CIPC_SLOT_POOL(pool);
  if (self->hooks->on_flushing) self->hooks->on_flushing(true);
}

static void slot_pool_flush_stop(GstBufferPool* pool) {
  auto* self = GST_CIPC_SLOT_POOL(pool);
  if (self->hooks->on_flushing) self->hooks->on_flushing(false);
}

static void slot_pool_finalize(GObject* object) {
  auto* self = GST_CIPC_SLOT_POOL(object);
  delete self->backend;
  delete self->hooks;
  delete self->indices;
  G_OBJECT_CLASS(gst_cipc_slot_pool_parent_class)->finalize(object);
}

static void gst_cipc_slot_pool_class_init(GstCipcSlotPoolClass* klass) {
  auto* object_class = G_OBJECT_CLASS(klass);
  auto* pool_class = GST_BUFFER_POOL_CLASS(klass);
  object_class->finalize = slot_pool_finalize;
  pool_class->get_options = slot_pool_get_options;
  pool_class->set_config = slot_pool_set_config;
  pool_class->alloc_buffer = slot_pool_alloc_buffer;
  pool_class->acquire_buffer = slot_pool_acquire_buffer;
  pool_class->flush_start = slot_pool_flush_start;
  pool_class->flush_stop = slot_pool_flush_stop;
}

static void gst_cipc_slot_pool_init(GstCipcSlotPool* self) {
  self->backend = nullptr;
  self->hooks = nullptr;
  self->generation = 0;
  self->indices = new cipc_publish::SlotIndices;
  new (&self->failure_told) std::atomic<bool>(false);
  self->configured = FALSE;
}

GstBufferPool* gst_cipc_slot_pool_new(std::shared_ptr<cipc::MemoryBackend> backend,
                                      uint64_t generation, CipcSlotPoolHooks hooks) {
  auto* self = GST_CIPC_SLOT_POOL(g_object_new(GST_TYPE_CIPC_SLOT_POOL, nullptr));
  gst_object_ref_sink(self);
  self->backend = new std::shared_ptr<cipc::MemoryBackend>(std::move(backend));
  self->hooks = new CipcSlotPoolHooks(std::move(hooks));
  self->generation = generation;
  return GST_BUFFER_POOL_CAST(self);
}

uint64_t gst_cipc_slot_pool_generation(GstCipcSlotPool* pool) {
  return pool->generation;
}

guint gst_cipc_slot_pool_slots_allocated(GstCipcSlotPool* pool) {
  return pool->indices->used();
}

gboolean gst_cipc_slot_pool_needs_rollover(GstCipcSlotPool* pool) {
  return pool->indices->needs_rollover();
}

gboolean gst_cipc_slot_pool_video_info(GstCipcSlotPool* pool, GstVideoInfo* info) {
  GST_OBJECT_LOCK(pool);
  const gboolean ok = pool->configured;
  if (ok) *info = pool->info;
  GST_OBJECT_UNLOCK(pool);
  return ok;
}

namespace cipc_gst {

SlotPoolGenerations::SlotPoolGenerations(std::shared_ptr<cipc::MemoryBackend> backend,
                                         guint pool_size, Announce announce,
                                         CipcSlotPoolHooks hooks)
    : backend_(std::move(backend)),
      pool_size_(pool_size),
      announce_(std::move(announce)),
      hooks_(std::move(hooks)) {
  current_->on_flushing = std::move(hooks_.on_flushing);
  current_->on_configured = std::move(hooks_.on_configured);
  gst_video_info_init(&info_);
}

SlotPoolGenerations::~SlotPoolGenerations() {
  {
    std::lock_guard<std::mutex> lock(current_->lock);
    current_->generation = 0;
  }
  drop_pool(true);
}

void SlotPoolGenerations::drop_pool(bool deactivate) {
  if (pool_) {
    if (deactivate) gst_buffer_pool_set_active(pool_, FALSE);
    gst_object_unref(pool_);
    pool_ = nullptr;
  }
  gst_clear_caps(&caps_);
}

bool SlotPoolGenerations::start_generation(GstCaps* caps, const GstVideoInfo& info, bool new_caps,
                                           std::string* error) {
  const uint64_t generation = generation_ + 1;
  CipcSlotPoolHooks hooks = hooks_;
  hooks.on_flushing = [state = current_, generation](bool flushing) {
    std::lock_guard<std::mutex> lock(state->lock);
    if (state->generation == generation && state->on_flushing) state->on_flushing(flushing);
  };
  hooks.on_configured = [state = current_, generation](guint max_slots) {
    std::lock_guard<std::mutex> lock(state->lock);
    if (state->generation == generation && state->on_configured) state->on_configured(max_slots);
  };
  // Current before its first configuration, which is ours below.
  {
    std::lock_guard<std::mutex> lock(current_->lock);
    current_->generation = generation;
    if (current_->on_flushing) current_->on_flushing(false);  // the new pool is not flushing
  }
  GstBufferPool* pool = gst_cipc_slot_pool_new(backend_, generation, std::move(hooks));
  GstStructure* config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, GST_VIDEO_INFO_SIZE(&info), pool_size_, 0);
  gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
  if (!gst_buffer_pool_set_config(pool, config)) {
    gst_object_unref(pool);
    gchar* text = gst_caps_to_string(caps);
    *error = std::string("could not configure the shareable buffer pool for ") + text;
    g_free(text);
    return false;
  }
  // A replaced pool is deactivated on a caps change only: after a roll-over upstream may still
  // write into it, and frames consumers hold stay valid either way until released.
  caps = gst_caps_ref(caps);  // `caps` may be caps_ itself
  drop_pool(new_caps);
  pool_ = pool;
  caps_ = caps;
  info_ = info;
  ++generation_;
  reconfigure_sent_ = false;
  if (new_caps) caps_generation_ = generation_;
  const std::string text = announced_caps(caps);
  GST_DEBUG("generation %" G_GUINT64_FORMAT ": %s", generation_, text.c_str());
  if (announce_) announce_(generation_, text, GST_VIDEO_INFO_SIZE(&info));
  return true;
}

std::string SlotPoolGenerations::announced_caps(GstCaps* caps) {
  GstCaps* plain = gst_caps_copy(caps);
  gst_caps_set_features(plain, 0, nullptr);
  gchar* text = gst_caps_to_string(plain);
  gst_caps_unref(plain);
  std::string out = text ? text : "";
  g_free(text);
  return out;
}

bool SlotPoolGenerations::ensure(GstCaps* caps, std::string* error) {
  if (pool_ && caps_ && gst_caps_is_equal(caps, caps_)) return true;
  GstVideoInfo info;
  if (!gst_video_info_from_caps(&info, caps)) {
    gchar* text = gst_caps_to_string(caps);
    *error = std::string("not a raw video format: ") + text;
    g_free(text);
    return false;
  }
  return start_generation(caps, info, true, error);
}

bool SlotPoolGenerations::roll_over_if_needed(bool* rolled, std::string* error) {
  *rolled = false;
  if (!pool_ || !gst_cipc_slot_pool_needs_rollover(GST_CIPC_SLOT_POOL(pool_))) return true;
  GST_INFO("generation %" G_GUINT64_FORMAT " used %u slot indices: starting a new one", generation_,
           gst_cipc_slot_pool_slots_allocated(GST_CIPC_SLOT_POOL(pool_)));
  const GstVideoInfo info = info_;
  if (!start_generation(caps_, info, false, error)) return false;
  ++rollovers_;
  *rolled = true;
  return true;
}

const GstCipcSlotBinding* SlotPoolGenerations::own_slot(GstBuffer* buffer) const {
  if (gst_buffer_n_memory(buffer) != 1) return nullptr;
  const GstCipcSlotBinding* b = gst_cipc_slot_memory_binding(gst_buffer_peek_memory(buffer, 0));
  return b && b->producer_slot && b->owner == backend_.get() ? b : nullptr;
}

const GstCipcSlotBinding* SlotPoolGenerations::current_slot(GstBuffer* buffer) const {
  const GstCipcSlotBinding* b = own_slot(buffer);
  if (b == nullptr || b->generation != generation_ || b->index >= cipc::kMaxSlots) return nullptr;
  return b;
}

bool SlotPoolGenerations::stale_slot(GstBuffer* buffer) const {
  const GstCipcSlotBinding* b = own_slot(buffer);
  return b && b->generation >= caps_generation_ && b->generation <= generation_ &&
         !current_slot(buffer);
}

bool SlotPoolGenerations::take_index(uint64_t* generation, uint32_t* index) {
  guint taken = 0;
  if (!pool_ || !gst_cipc_slot_pool_take_index(GST_CIPC_SLOT_POOL(pool_), &taken) ||
      taken >= cipc::kMaxSlots)
    return false;
  *generation = generation_;
  *index = taken;
  return true;
}

bool SlotPoolGenerations::take_reconfigure() {
  if (reconfigure_sent_) return false;
  reconfigure_sent_ = true;
  return true;
}

}  // namespace cipc_gst
