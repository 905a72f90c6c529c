// SPDX-License-Identifier: LGPL-2.1-or-later
// libcudaipc's publishing half (cudaipc_writer_*, cudaipc_slot_*) over publish/'s Writer: the
// program's own slots, lent and published without a copy. No exception leaves this file: every
// entry point returns a status and leaves a sentence for cudaipc_last_error().
#include <cudaipc/cudaipc.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "api_errors.h"
#include "channel.h"
#include "frame_layout.h"
#include "process_identity.h"
#include "writer.h"

namespace {

using cipc_libcudaipc::fail;
using cipc_publish::Code;
using cipc_publish::Outcome;

int status_of(const Outcome& o) {
  switch (o.code) {
    case Code::kOk: return CUDAIPC_OK;
    case Code::kTimeout: return CUDAIPC_TIMEOUT;
    case Code::kInterrupted: return CUDAIPC_INTERRUPTED;
    case Code::kEnded:
    case Code::kClosed: return CUDAIPC_END;
    case Code::kInvalid: return CUDAIPC_ERROR_INVALID_ARGUMENT;
    case Code::kBusy: return CUDAIPC_ERROR_BUSY;
    case Code::kCuda:
    case Code::kNoDevice: return CUDAIPC_ERROR_CUDA;
    case Code::kSystem: return CUDAIPC_ERROR_SYSTEM;
    case Code::kUnsupported: return CUDAIPC_ERROR_UNSUPPORTED;
  }
  return CUDAIPC_ERROR_SYSTEM;
}

// The outcome as a status, its sentence left for cudaipc_last_error() when it is not OK.
int report(const Outcome& o) {
  return o ? CUDAIPC_OK : fail(status_of(o), o.message);
}

template <typename F>
int guarded(F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(CUDAIPC_ERROR_SYSTEM, "out of memory");
  } catch (const std::exception& e) {
    return fail(CUDAIPC_ERROR_SYSTEM, e.what());
  }
}

}  // namespace

struct cudaipc_writer {
  pid_t owner =
      cipc::this_process_id();  // a forked child can only free its copy (see cudaipc.h, fork())
  std::unique_ptr<cipc_publish::Writer> writer;
};

// A slot may outlive its writer: the loan keeps what publishing needs (or says it is closed).
struct cudaipc_slot {
  pid_t owner = cipc::this_process_id();
  std::unique_ptr<cipc_publish::Loan> loan;
  cudaipc_slot_info info{};
};

namespace {

// A writer that may be used from this process.
int check_writer(const cudaipc_writer* w) {
  if (!w) return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "writer is NULL");
  if (w->owner != cipc::this_process_id())
    return fail(CUDAIPC_ERROR_INVALID_ARGUMENT,
                "this writer belongs to the process that opened it (this is a fork() child)");
  return CUDAIPC_OK;
}

bool valid_memory(cudaipc_memory m) {
  return m == CUDAIPC_MEMORY_HOST || m == CUDAIPC_MEMORY_CUDA;
}

int layout_for(const char* format, uint32_t width, uint32_t height,
               cipc_publish::FrameLayout* out) {
  if (!format || !format[0]) return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "no format is given");
  std::string why;
  if (!cipc_publish::make_frame_layout(format, width, height, out, &why))
    return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, why);
  return CUDAIPC_OK;
}

int make_config(const cudaipc_writer_options& o, cipc_publish::WriterConfig* config) {
  if (!valid_memory(o.memory))
    return fail(CUDAIPC_ERROR_INVALID_ARGUMENT,
                "options.memory must be CUDAIPC_MEMORY_CUDA or CUDAIPC_MEMORY_HOST");
  if (o.pool_size < 1 || o.pool_size > 64)
    return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "options.pool_size must be between 1 and 64");
  if (o.max_in_flight < 1 || o.max_in_flight > cipc::kMaxInFlight)
    return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "options.max_in_flight must be between 1 and " +
                                                    std::to_string(cipc::kMaxInFlight));
  if (o.backpressure != CUDAIPC_BACKPRESSURE_DROP && o.backpressure != CUDAIPC_BACKPRESSURE_BLOCK)
    return fail(CUDAIPC_ERROR_INVALID_ARGUMENT,
                "options.backpressure must be CUDAIPC_BACKPRESSURE_DROP or _BLOCK");
  if (o.cuda_device < -1)
    return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "options.cuda_device must be -1 or a device");
  if (o.socket_mode > 0777)
    return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "options.socket_mode must be at most 0777");
  if (o.framerate_num != 0 && o.framerate_den == 0)
    return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "options.framerate_den must not be 0");
  if (const int s = layout_for(o.format, o.width, o.height, &config->format); s != CUDAIPC_OK)
    return s;
  config->format.framerate_num = o.framerate_num;
  config->format.framerate_den = o.framerate_den ? o.framerate_den : 1;
  cipc::ProducerConfig& p = config->producer;
  p.socket_path =
      o.socket_path && o.socket_path[0] ? std::string(o.socket_path) : cipc::default_socket_path();
  p.socket_mode = o.socket_mode;
  p.allow_other_users = o.allow_other_users != 0;
  p.max_in_flight = o.max_in_flight;
  p.release_timeout_ms = o.release_timeout_ms;
  p.instance_id = o.instance_id;
  config->memory = static_cast<cipc::MemoryKind>(o.memory);
  config->cuda_device = o.cuda_device;
  config->pool_size = o.pool_size;
  config->backpressure = o.backpressure == CUDAIPC_BACKPRESSURE_BLOCK
                             ? cipc_publish::Backpressure::kBlock
                             : cipc_publish::Backpressure::kDrop;
  config->live = o.live != 0;
  return CUDAIPC_OK;
}

void fill_slot_info(const cipc_publish::Loan& loan, int device, cudaipc_slot_info* info) {
  const cipc_publish::FrameLayout& l = loan.layout();
  *info = cudaipc_slot_info{};
  info->memory =
      loan.memory_kind() == cipc::MemoryKind::kCuda ? CUDAIPC_MEMORY_CUDA : CUDAIPC_MEMORY_HOST;
  info->device = info->memory == CUDAIPC_MEMORY_CUDA ? device : -1;
  info->data = reinterpret_cast<uint64_t>(loan.data());
  info->size = l.size;
  info->capacity = loan.capacity();
  info->width = l.width;
  info->height = l.height;
  std::snprintf(info->format, sizeof(info->format), "%s", l.format.c_str());
  info->n_planes = l.n_planes;
  for (uint32_t p = 0; p < l.n_planes && p < CUDAIPC_MAX_PLANES; ++p) {
    info->plane_offset[p] = l.plane_offset[p];
    info->plane_stride[p] = l.plane_stride[p];
  }
  info->generation = loan.generation();
  info->index = loan.index();
}

}  // namespace

extern "C" {

void cudaipc_writer_options_init(cudaipc_writer_options* options) {
  if (!options) return;
  std::memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(*options);
  options->format = "BGRx";
  options->framerate_num = 0;
  options->framerate_den = 1;
  options->memory = CUDAIPC_MEMORY_CUDA;
  options->cuda_device = -1;
  options->pool_size = 6;
  options->backpressure = CUDAIPC_BACKPRESSURE_DROP;
  options->max_in_flight = 4;
  options->release_timeout_ms = 2000;
  options->socket_mode = 0600;
  options->live = 1;
}

int cudaipc_writer_open(const cudaipc_writer_options* options, cudaipc_writer** writer) {
  if (!writer) return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "writer is NULL");
  *writer = nullptr;
  if (!options) return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "options is NULL: set a format");
  if (options->struct_size < offsetof(cudaipc_writer_options, socket_path) + sizeof(char*))
    return fail(CUDAIPC_ERROR_INVALID_ARGUMENT,
                "options.struct_size is not set: call cudaipc_writer_options_init() first");
  cudaipc_writer_options o;
  cudaipc_writer_options_init(&o);
  std::memcpy(&o, options, std::min(options->struct_size, sizeof(o)));
  o.struct_size = sizeof(o);
  return guarded([&]() -> int {
    cipc_publish::WriterConfig config;
    if (const int s = make_config(o, &config); s != CUDAIPC_OK) return s;
    std::unique_ptr<cudaipc_writer> w(new cudaipc_writer);
    const Outcome opened = cipc_publish::Writer::open(config, nullptr, &w->writer);
    if (!opened) return report(opened);
    *writer = w.release();
    return CUDAIPC_OK;
  });
}

int cudaipc_writer_acquire(cudaipc_writer* w, int timeout_ms, cudaipc_slot** slot) {
  if (!slot) return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "slot is NULL");
  *slot = nullptr;
  if (const int s = check_writer(w); s != CUDAIPC_OK) return s;
  return guarded([&]() -> int {
    std::unique_ptr<cudaipc_slot> lent(new cudaipc_slot);
    const Outcome o = w->writer->acquire(timeout_ms, &lent->loan);
    if (!o) return report(o);
    fill_slot_info(*lent->loan, w->writer->cuda_device(), &lent->info);
    *slot = lent.release();
    return CUDAIPC_OK;
  });
}

int cudaipc_slot_get_info(const cudaipc_slot* slot, cudaipc_slot_info* info) {
  if (!slot || !info) return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "slot or info is NULL");
  *info = slot->info;
  return CUDAIPC_OK;
}

int cudaipc_slot_publish(cudaipc_slot* slot, void* cuda_stream, uint64_t pts_ns,
                         uint64_t duration_ns) {
  if (!slot) return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "slot is NULL");
  std::unique_ptr<cudaipc_slot> owned(slot);
  if (owned->owner != cipc::this_process_id()) {
    (void)owned->loan.release();  // the parent's slot: not ours to give back
    return fail(CUDAIPC_ERROR_INVALID_ARGUMENT,
                "this slot belongs to the process that acquired it (this is a fork() child)");
  }
  return guarded([&]() -> int {
    cipc_publish::PublishOptions options;
    options.cuda_stream = cuda_stream;
    options.pts_ns = pts_ns;
    options.duration_ns = duration_ns;
    return report(owned->loan->publish(options));
  });
}

void cudaipc_slot_abandon(cudaipc_slot* slot) {
  if (!slot) return;
  std::unique_ptr<cudaipc_slot> owned(slot);
  if (owned->owner != cipc::this_process_id()) (void)owned->loan.release();
  // Otherwise the loan, dropped unpublished, gives the slot back.
}

int cudaipc_writer_publish_copy(cudaipc_writer* w, const void* src, size_t src_stride,
                                void* cuda_stream, uint64_t pts_ns, uint64_t duration_ns,
                                int timeout_ms) {
  if (const int s = check_writer(w); s != CUDAIPC_OK) return s;
  return guarded([&]() -> int {
    cipc_publish::PublishOptions options;
    options.cuda_stream = cuda_stream;
    options.pts_ns = pts_ns;
    options.duration_ns = duration_ns;
    return report(w->writer->publish_copy(src, src_stride, timeout_ms, options));
  });
}

int cudaipc_writer_set_format(cudaipc_writer* w, const char* format, uint32_t width,
                              uint32_t height) {
  if (const int s = check_writer(w); s != CUDAIPC_OK) return s;
  return guarded([&]() -> int {
    cipc_publish::FrameLayout layout;
    if (const int s = layout_for(format, width, height, &layout); s != CUDAIPC_OK) return s;
    const cipc_publish::FrameLayout current = w->writer->format();
    layout.framerate_num = current.framerate_num;
    layout.framerate_den = current.framerate_den;
    return report(w->writer->set_format(layout));
  });
}

int cudaipc_writer_end_stream(cudaipc_writer* w) {
  if (const int s = check_writer(w); s != CUDAIPC_OK) return s;
  return guarded([&]() -> int { return report(w->writer->end_stream()); });
}

int cudaipc_writer_wait_for_consumer(cudaipc_writer* w, int timeout_ms) {
  if (const int s = check_writer(w); s != CUDAIPC_OK) return s;
  return guarded([&]() -> int { return report(w->writer->wait_for_consumer(timeout_ms)); });
}

int cudaipc_writer_interrupt(cudaipc_writer* w) {
  if (!w) return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "writer is NULL");
  if (w->owner != cipc::this_process_id()) return CUDAIPC_OK;
  w->writer->interrupt();
  return CUDAIPC_OK;
}

int cudaipc_writer_get_stats(const cudaipc_writer* w, cudaipc_writer_stats* stats) {
  if (!stats) return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "stats is NULL");
  if (const int s = check_writer(w); s != CUDAIPC_OK) return s;
  const cipc_publish::WriterStats s = w->writer->stats();
  *stats = cudaipc_writer_stats{};
  stats->frames_published = s.frames_published;
  stats->frames_sent = s.frames_sent;
  stats->frames_dropped = s.frames_dropped;
  stats->frames_abandoned = s.frames_abandoned;
  stats->acquire_timeouts = s.acquire_timeouts;
  stats->copies = s.copies;
  stats->consumers = s.consumers;
  stats->consumers_total = s.consumers_total;
  stats->consumers_evicted = s.consumers_evicted;
  stats->slots_allocated = s.slots_allocated;
  stats->slots_retired = s.slots_retired;
  stats->generations = s.generations;
  stats->cuda_mps = s.cuda_mps ? 1 : 0;
  return CUDAIPC_OK;
}

void cudaipc_writer_close(cudaipc_writer* w) {
  if (!w) return;
  std::unique_ptr<cudaipc_writer> owned(w);
  // A fork() child's copy: the producer, its socket and its slots stay the parent's.
  if (owned->owner != cipc::this_process_id()) (void)owned->writer.release();
}

}  // extern "C"
