// SPDX-License-Identifier: LGPL-2.1-or-later
// libcudaipc's C API (cudaipc.h) over the transport (ipc/) and the slot backends (slots/): a
// ReconnectingConsumer that stays attached, frames handed out as the producer's imported slots, and
// releases ordered after the caller's GPU work by the slots layer's release worker. No exception
// leaves this file: every entry point returns a status and leaves a sentence for
// cudaipc_last_error().
#include <cudaipc/cudaipc.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "api_errors.h"
#include "channel.h"
#include "consumer_backend.h"
#include "process_identity.h"
#include "protocol.h"
#include "reconnectingconsumer.h"
#include "video_caps.h"
#include "waker.h"
#ifdef CIPC_HAVE_CUDA
#include "cuda_slots.h"
#include "deferred_destruction.h"
#endif

namespace {

using cipc_libcudaipc::fail;
using cipc_libcudaipc::status_of;

// Counters a frame updates after its reader may be gone.
struct SharedCounters {
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> released{0};
  std::atomic<bool> cuda_mps{false};  // set by the backend choice at each WELCOME
};

}  // namespace

struct cudaipc_reader {
  // The process that opened the reader. After fork() the child inherits the reader, its
  // connection and its frames, but they stay the parent's: the child reads nothing, and what it
  // releases or closes is dropped here without a word to the producer (ipc/consumer.h).
  pid_t owner = cipc::this_process_id();
  cipc::Waker waker;
  std::unique_ptr<cipc::ReconnectingConsumer> client;
  std::shared_ptr<SharedCounters> counters = std::make_shared<SharedCounters>();
  cipc_libcudaipc::VideoCaps caps;
  bool has_caps = false;
  // Once the stream is over (END or ERROR_DISCONNECTED) every later next() says so again,
  // rather than timing out or quietly attaching to the producer again.
  int final_status = CUDAIPC_OK;
  std::string final_reason;
};

struct cudaipc_frame {
  cipc::ReceivedFrame frame;
  cudaipc_frame_info info{};
  std::shared_ptr<SharedCounters> counters;
};

extern "C" {

const char* cudaipc_version(void) {
  return CIPC_VERSION;
}

const char* cudaipc_status_name(int status) {
  switch (status) {
    case CUDAIPC_OK: return "ok";
    case CUDAIPC_TIMEOUT: return "timeout";
    case CUDAIPC_END: return "end of stream";
    case CUDAIPC_INTERRUPTED: return "interrupted";
    case CUDAIPC_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case CUDAIPC_ERROR_NO_PRODUCER: return "no producer";
    case CUDAIPC_ERROR_REFUSED: return "refused";
    case CUDAIPC_ERROR_PROTOCOL: return "protocol error";
    case CUDAIPC_ERROR_CUDA: return "CUDA error";
    case CUDAIPC_ERROR_SYSTEM: return "system error";
    case CUDAIPC_ERROR_UNSUPPORTED: return "unsupported";
    case CUDAIPC_ERROR_DISCONNECTED: return "disconnected";
    case CUDAIPC_ERROR_BUSY: return "busy";
  }
  return "unknown status";
}

const char* cudaipc_last_error(void) {
  return cipc_libcudaipc::last_error();
}

void cudaipc_reader_options_init(cudaipc_reader_options* options) {
  if (!options) return;
  std::memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(*options);
  options->socket_path = nullptr;
  options->memory = CUDAIPC_MEMORY_ANY;
  options->cuda_device = -1;
  options->max_in_flight = 4;
  options->connect_timeout_ms = 5000;
  options->reconnect = 0;
  options->reconnect_interval_ms = 100;
  options->allow_other_users = 0;
}

int cudaipc_reader_open(const cudaipc_reader_options* options, cudaipc_reader** reader) {
  if (!reader) return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "reader is NULL");
  *reader = nullptr;
  cudaipc_reader_options o;
  cudaipc_reader_options_init(&o);
  if (options) {
    if (options->struct_size < offsetof(cudaipc_reader_options, socket_path) + sizeof(char*))
      return fail(CUDAIPC_ERROR_INVALID_ARGUMENT,
                  "options.struct_size is not set: call cudaipc_reader_options_init() first");
    std::memcpy(&o, options, std::min(options->struct_size, sizeof(o)));
    o.struct_size = sizeof(o);
  }
  if (o.memory != CUDAIPC_MEMORY_ANY && o.memory != CUDAIPC_MEMORY_HOST &&
      o.memory != CUDAIPC_MEMORY_CUDA)
    return fail(CUDAIPC_ERROR_INVALID_ARGUMENT,
                "options.memory must be CUDAIPC_MEMORY_ANY, _HOST or _CUDA");
  if (o.max_in_flight < 1 || o.max_in_flight > cipc::kMaxInFlight)
    return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "options.max_in_flight must be between 1 and " +
                                                    std::to_string(cipc::kMaxInFlight));
  if (o.cuda_device < -1)
    return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "options.cuda_device must be -1 or a device");
#ifndef CIPC_HAVE_CUDA
  if (o.memory == CUDAIPC_MEMORY_CUDA)
    return fail(CUDAIPC_ERROR_UNSUPPORTED,
                "this libcudaipc was built without the CUDA toolkit: it reads host memory only");
#endif
  std::unique_ptr<cudaipc_reader> r(new (std::nothrow) cudaipc_reader);
  if (!r) return fail(CUDAIPC_ERROR_SYSTEM, "out of memory");
  if (!r->waker.valid()) return fail(CUDAIPC_ERROR_SYSTEM, "could not create an eventfd");
  cipc::ClientConfig config;
  config.consumer.socket_path =
      o.socket_path && o.socket_path[0] ? std::string(o.socket_path) : cipc::default_socket_path();
  config.consumer.memory_kind = static_cast<cipc::MemoryKind>(o.memory);
  config.consumer.max_in_flight = o.max_in_flight;
  config.consumer.allow_other_users = o.allow_other_users != 0;
  config.reconnect = o.reconnect != 0;
  config.reconnect_interval_ms = std::max<uint32_t>(o.reconnect_interval_ms, 1);
  config.connect_timeout_ms = o.connect_timeout_ms;
  const int requested_device = o.cuda_device;
  r->client = std::make_unique<cipc::ReconnectingConsumer>(
      config,
      [requested_device, counters = r->counters](const cipc::Welcome& w) {
        cipc_slots::ConsumerDevice device;
        auto backend = cipc_slots::backend_for_producer(w, requested_device, &device);
        counters->cuda_mps = backend && device.mps_client;
        return backend;
      },
      &r->waker);
  const std::string path = config.consumer.socket_path;
  for (;;) {
    cipc::ClientEvent ev = r->client->next();
    switch (ev.kind) {
      case cipc::ClientEvent::Kind::kAttached: *reader = r.release(); return CUDAIPC_OK;
      case cipc::ClientEvent::Kind::kInterrupted:
        r->waker.clear();
        return fail(CUDAIPC_INTERRUPTED, "interrupted");
      case cipc::ClientEvent::Kind::kFailed:
        if (ev.failure == cipc::ClientEvent::Failure::kNoProducer)
          return fail(CUDAIPC_ERROR_NO_PRODUCER, ev.error.message + " (waited " +
                                                     std::to_string(o.connect_timeout_ms) +
                                                     " ms for one)");
        return fail(status_of(ev.error),
                    "could not attach to the producer at '" + path + "': " + ev.error.message);
      default: continue;  // not expected before attaching
    }
  }
}

// The stream is over: says so now and on every later next().
static int finish(cudaipc_reader* r, int status, std::string reason) {
  r->final_status = status;
  r->final_reason = reason;
  return fail(status, std::move(reason));
}

// A stream that ended without the producer ending it: evicted, refused mid-stream, or gone.
static int lost(cudaipc_reader* r, const cipc::ClientEvent& ev) {
  if (ev.parting == cipc::ConsumerEvent::Parting::kNothing)
    return finish(r, CUDAIPC_ERROR_DISCONNECTED, "lost the producer: " + ev.error.message);
  return finish(r, CUDAIPC_ERROR_DISCONNECTED, ev.error.message);
}

// `first_or_gap`: the first frame of a producer, or one after frames this reader was not sent
// (ClientEvent): CUDAIPC_FRAME_DISCONT, as cudasrc-ipc marks its buffers.
static int fill_frame(cudaipc_reader* r, cipc::ReceivedFrame& received, bool first_or_gap,
                      cudaipc_frame** out) {
  std::unique_ptr<cudaipc_frame> f(new (std::nothrow) cudaipc_frame);
  if (!f) return fail(CUDAIPC_ERROR_SYSTEM, "out of memory");
  const cipc::Frame& m = received.info;
  const cipc::SlotMemory& memory = *received.slot->memory;
  cudaipc_frame_info& i = f->info;
  i.memory = memory.kind() == cipc::MemoryKind::kCuda ? CUDAIPC_MEMORY_CUDA : CUDAIPC_MEMORY_HOST;
  i.device = -1;
#ifdef CIPC_HAVE_CUDA
  if (auto* region = cipc_slots::cuda_slot_of(const_cast<cipc::SlotMemory*>(&memory)))
    i.device = region->device();
#endif
  i.data = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(memory.data()));
  i.size = m.size;
  i.width = r->caps.width;
  i.height = r->caps.height;
  std::snprintf(i.format, sizeof(i.format), "%s", r->caps.format.c_str());
  i.n_planes = m.n_planes;
  for (uint32_t p = 0; p < CUDAIPC_MAX_PLANES; ++p) {
    i.plane_offset[p] = p < m.n_planes ? m.plane_offset[p] : 0;
    i.plane_stride[p] = p < m.n_planes ? m.plane_stride[p] : 0;
  }
  i.pts_ns = m.pts;
  i.duration_ns = m.duration;
  i.sequence = m.sequence;
  i.offset = m.offset;
  i.send_time_ns = m.send_time;
  i.flags = m.flags & cipc::Frame::kKnownFlags;
  if (first_or_gap) i.flags |= CUDAIPC_FRAME_DISCONT;
  f->frame = std::move(received);
  f->counters = r->counters;
  ++r->counters->received;
  *out = f.release();
  return CUDAIPC_OK;
}

int cudaipc_reader_next(cudaipc_reader* r, int timeout_ms, cudaipc_frame** frame) {
  if (!r || !frame) return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "reader or frame is NULL");
  *frame = nullptr;
  if (cipc::this_process_id() != r->owner)
    return fail(CUDAIPC_ERROR_INVALID_ARGUMENT,
                "this reader was opened by process " + std::to_string(r->owner) +
                    " and belongs to it; process " + std::to_string(::getpid()) +
                    " (a child made by fork()) cannot read from it: open a reader of its own");
  if (r->final_status != CUDAIPC_OK) return fail(r->final_status, r->final_reason);
  const uint64_t deadline =
      timeout_ms < 0 ? UINT64_MAX : cipc::monotonic_ns() + uint64_t(timeout_ms) * 1000000;
  for (;;) {
    int left = -1;
    if (deadline != UINT64_MAX) {
      const uint64_t now = cipc::monotonic_ns();
      left = now >= deadline ? 0 : static_cast<int>((deadline - now + 999999) / 1000000);
    }
    cipc::ClientEvent ev = r->client->next(left);
    switch (ev.kind) {
      case cipc::ClientEvent::Kind::kFrame: {
        if (!r->has_caps)
          return fail(CUDAIPC_ERROR_PROTOCOL, "the producer sent a frame before its format");
        std::string why;
        if (!cipc_libcudaipc::frame_fits(r->caps, ev.frame.info, &why))
          return fail(CUDAIPC_ERROR_PROTOCOL,
                      "the producer sent a frame that does not fit " + r->caps.format + ": " + why);
        return fill_frame(r, ev.frame, ev.first_of_producer || ev.skipped != 0, frame);
      }
      case cipc::ClientEvent::Kind::kCaps: {
        std::string why;
        if (!cipc_libcudaipc::parse_video_caps(ev.caps.caps, &r->caps, &why))
          return fail(CUDAIPC_ERROR_UNSUPPORTED,
                      "the producer's format cannot be read here: " + why);
        r->has_caps = true;
        continue;
      }
      case cipc::ClientEvent::Kind::kAttached:
      case cipc::ClientEvent::Kind::kLost: continue;
      case cipc::ClientEvent::Kind::kEos:
        return finish(r, CUDAIPC_END, "the producer ended the stream");
      case cipc::ClientEvent::Kind::kEnded:
        if (ev.parting == cipc::ConsumerEvent::Parting::kStopped)
          return finish(r, CUDAIPC_END, ev.error.message);
        return lost(r, ev);
      case cipc::ClientEvent::Kind::kTimeout: return fail(CUDAIPC_TIMEOUT, "no frame in time");
      case cipc::ClientEvent::Kind::kInterrupted:
        r->waker.clear();
        return fail(CUDAIPC_INTERRUPTED, "interrupted");
      case cipc::ClientEvent::Kind::kFailed:
        if (ev.failure == cipc::ClientEvent::Failure::kNoProducer)
          return fail(CUDAIPC_ERROR_NO_PRODUCER, "no producer: " + ev.error.message);
        if (ev.parting == cipc::ConsumerEvent::Parting::kError) {
          // The producer's ERROR: a refusal waiting would not change (version, memory, GPU,
          // user) keeps its status; anything else cut a working stream.
          const int status = status_of(ev.error);
          if (status == CUDAIPC_ERROR_REFUSED || status == CUDAIPC_ERROR_UNSUPPORTED)
            return fail(status, ev.error.message);
          return lost(r, ev);
        }
        return fail(ev.failure == cipc::ClientEvent::Failure::kMisbehaved ? CUDAIPC_ERROR_PROTOCOL
                                                                          : status_of(ev.error),
                    ev.error.message);
    }
  }
}

int cudaipc_reader_interrupt(cudaipc_reader* r) {
  if (!r) return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "reader is NULL");
  r->waker.wake();
  return CUDAIPC_OK;
}

int cudaipc_reader_get_stats(const cudaipc_reader* r, cudaipc_reader_stats* stats) {
  if (!r || !stats) return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "reader or stats is NULL");
  std::memset(stats, 0, sizeof(*stats));
  stats->frames_received = r->counters->received;
  stats->frames_released = r->counters->released;
  stats->frames_held = stats->frames_received - stats->frames_released;
  stats->slots_imported = r->client->slots_imported();
  stats->slots_retired = r->client->slots_retired();
  stats->connects = r->client->connects();
  const cipc::Consumer* consumer = r->client->consumer();
  stats->max_in_flight = consumer ? consumer->welcome().max_in_flight : 0;
  stats->cuda_mps = r->counters->cuda_mps ? 1 : 0;
  std::memset(stats->reserved, 0, sizeof(stats->reserved));
  return CUDAIPC_OK;
}

void cudaipc_reader_close(cudaipc_reader* r) {
  if (!r) return;
  r->client->disconnect();
  delete r;
#ifdef CIPC_HAVE_CUDA
  // What the release worker parked (slots of frames released after their reader's last call):
  // destroyed here, on the application's thread (deferred_destruction.h).
  cipc_cuda::destroy_parked();
#endif
}

int cudaipc_frame_get_info(const cudaipc_frame* f, cudaipc_frame_info* info) {
  if (!f || !info) return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "frame or info is NULL");
  *info = f->info;
  return CUDAIPC_OK;
}

int cudaipc_frame_wait_ready(cudaipc_frame* f, void* cuda_stream) {
  if (!f) return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "frame is NULL");
#ifdef CIPC_HAVE_CUDA
  if (auto* region = cipc_slots::cuda_slot_of(f->frame.slot->memory.get())) {
    const cipc_cuda::Status s = region->wait_ready(cuda_stream);
    if (!s) return fail(CUDAIPC_ERROR_CUDA, "waiting for the producer's frame: " + s.message());
  }
#else
  (void)cuda_stream;
#endif
  return CUDAIPC_OK;
}

int cudaipc_frame_release(cudaipc_frame* f, void* cuda_stream) {
  if (!f) return fail(CUDAIPC_ERROR_INVALID_ARGUMENT, "frame is NULL");
  std::unique_ptr<cudaipc_frame> owned(f);
  ++owned->counters->released;
  int status = CUDAIPC_OK;
#ifdef CIPC_HAVE_CUDA
  if (auto* region = cipc_slots::cuda_slot_of(owned->frame.slot->memory.get())) {
    if (cuda_stream) {
      const cipc_cuda::Status s = region->record_release(cuda_stream);
      if (!s) status = fail(CUDAIPC_ERROR_CUDA, "recording the release: " + s.message());
    }
    // The claim goes back once the recorded reads are done, on the release worker's thread.
    region->drop_after_reads(std::make_shared<cipc::ReceivedFrame>(std::move(owned->frame)));
    return status;
  }
#else
  (void)cuda_stream;
#endif
  return status;  // host memory: the claim ends here, with `owned`
}

}  // extern "C"
