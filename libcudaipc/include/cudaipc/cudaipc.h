/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libcudaipc: read a live cudasink-ipc stream from any program - C, C++, Python (ctypes) -
 * without GStreamer. Frames arrive as the producer's own memory (CUDA device memory or shared
 * host memory), described by pointer, planes, size, format and timestamps; nothing is copied.
 *
 *   cudaipc_reader_options options;
 *   cudaipc_reader_options_init(&options);
 *   options.socket_path = "/tmp/cam0.sock";
 *   cudaipc_reader* reader = NULL;
 *   if (cudaipc_reader_open(&options, &reader) != CUDAIPC_OK) fail(cudaipc_last_error());
 *   for (;;) {
 *     cudaipc_frame* frame = NULL;
 *     int status = cudaipc_reader_next(reader, 1000, &frame);
 *     if (status == CUDAIPC_TIMEOUT) continue;
 *     if (status != CUDAIPC_OK) break;  // CUDAIPC_END, _ERROR_DISCONNECTED (cut off) or an error
 *     cudaipc_frame_info info;
 *     cudaipc_frame_get_info(frame, &info);
 *     cudaipc_frame_wait_ready(frame, stream);             // GPU waits; the CPU does not
 *     my_kernel<<<..., stream>>>((const uint8_t*)info.data, info.plane_stride[0], ...);
 *     cudaipc_frame_release(frame, stream);                // after the kernel; no CPU wait
 *   }
 *   cudaipc_reader_close(reader);
 *
 * Lifetimes: a frame is the producer's slot. Until it is released the producer will not write
 * into it, and it holds one of the reader's max_in_flight claims (a reader holding them all
 * receives nothing more; a frame held longer than the producer's release-timeout gets the reader
 * disconnected: next() returns CUDAIPC_ERROR_DISCONNECTED). Frames stay valid after
 * cudaipc_reader_close() and after the producer is gone, until released. Frame memory is
 * read-only: writing into it faults (CUDA) or is refused.
 *
 * Threads: a reader is used from one thread at a time, except cudaipc_reader_interrupt(),
 * which any thread may call. cudaipc_frame_release() may be called from any thread.
 *
 * fork(): a reader, its connection and its frames belong to the process that opened the reader.
 * A child made by fork() inherits them but cannot use them: its cudaipc_reader_next() returns
 * CUDAIPC_ERROR_INVALID_ARGUMENT and reads nothing, its cudaipc_reader_interrupt() does nothing,
 * and its cudaipc_frame_release() and cudaipc_reader_close() (as run at its exit, e.g. by
 * Python's sys.exit()) only free its own copies: nothing is said to the producer, so the
 * parent's frames stay claimed and unchanged and the parent stays connected. A child that wants
 * frames opens a reader of its own. (CUDA itself cannot be used in a child forked after CUDA was
 * initialised: fork before opening a CUDA reader, or use exec.)
 *
 * Errors: functions return a cudaipc_status; after an error, cudaipc_last_error() is a sentence
 * saying why (per thread, valid until the next call into the library on that thread).
 *
 * Publishing (since 0.2): a program serves a stream itself, as cudasink-ipc does, and writes each
 * frame straight into a slot consumers map - no copy on either side. Consumers (cudasrc-ipc,
 * cudaipc:// URIs, readers) cannot tell a writer from cudasink-ipc.
 *
 *   cudaipc_writer_options options;
 *   cudaipc_writer_options_init(&options);
 *   options.socket_path = "/tmp/cam0.sock";
 *   options.format = "BGRx"; options.width = 1920; options.height = 1080;
 *   cudaipc_writer* writer = NULL;
 *   if (cudaipc_writer_open(&options, &writer) != CUDAIPC_OK) fail(cudaipc_last_error());
 *   for (;;) {
 *     cudaipc_slot* slot = NULL;
 *     if (cudaipc_writer_acquire(writer, 1000, &slot) != CUDAIPC_OK) continue;  // TIMEOUT: full
 *     cudaipc_slot_info info;
 *     cudaipc_slot_get_info(slot, &info);
 *     draw<<<..., stream>>>((uint8_t*)info.data, info.plane_stride[0], ...);
 *     cudaipc_slot_publish(slot, stream, CUDAIPC_NO_TIMESTAMP, CUDAIPC_NO_TIMESTAMP);
 *   }                                         // readiness recorded on `stream`; no CPU wait
 *   cudaipc_writer_close(writer);
 *
 * A slot is lent between acquire and publish (or abandon); each of the two ends the loan,
 * whatever it returns, and the slot must not be used afterwards. A slot is back in the ring once
 * every consumer released the frame in it (at once when nobody received it). acquire() waits
 * while consumers hold every slot (at most pool_size - 2 consumers are admitted, so that the
 * writer keeps two), or, with CUDAIPC_BACKPRESSURE_BLOCK, until every consumer has room for one
 * more frame; a consumer holding a frame the writer needs back past release_timeout_ms is
 * disconnected. CUDA: write the slot on the stream you publish with, or order your writes after
 * the slot's previous publish yourself (a slot nobody received is lent again at once).
 *
 * Writer threads: every cudaipc_writer_* and cudaipc_slot_* function may be called from any
 * thread, also concurrently (several threads may hold slots at once), except close, which must
 * be the writer's last call. None of them is async-signal-safe: a signal handler sets a flag, or a
 * thread that takes signals with sigwait() calls cudaipc_writer_interrupt().
 * Frames consumers hold stay valid after close, and after the writing process is gone; slots
 * still lent at close can only be abandoned (publish returns CUDAIPC_END and frees the slot).
 */
#ifndef CUDAIPC_H
#define CUDAIPC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CUDAIPC_API __attribute__((visibility("default")))
#else
#define CUDAIPC_API
#endif

#define CUDAIPC_MAX_PLANES 4
#define CUDAIPC_NO_TIMESTAMP UINT64_MAX

typedef enum {
  CUDAIPC_OK = 0,
  CUDAIPC_TIMEOUT = 1,     /* next(): no frame within timeout_ms (not an error) */
  CUDAIPC_END = 2,         /* next(): EOS, or the producer stopped; so does every later next() */
  CUDAIPC_INTERRUPTED = 3, /* next()/open(): cudaipc_reader_interrupt() was called */
  CUDAIPC_ERROR_INVALID_ARGUMENT = -1,
  CUDAIPC_ERROR_NO_PRODUCER = -2, /* nobody served the socket within connect_timeout_ms */
  CUDAIPC_ERROR_REFUSED = -3,     /* refused either way: user, protocol version, memory, GPU */
  CUDAIPC_ERROR_PROTOCOL = -4,    /* the producer broke the protocol */
  CUDAIPC_ERROR_CUDA = -5,        /* a CUDA call failed */
  CUDAIPC_ERROR_SYSTEM = -6,      /* a system call failed or a limit was reached */
  CUDAIPC_ERROR_UNSUPPORTED = -7, /* e.g. CUDA memory in a build without CUDA */
  /* next(), no reconnect: the stream was cut, not ended - the producer disconnected this reader
   * (a frame held past its release-timeout, frames left unread while the producer waited for
   * them, its ERROR) or vanished without EOS (a crash, a kill). cudaipc_last_error() says which;
   * every later next() returns this again. Frames still queued when the producer disconnected
   * the reader are not handed out: the first next() after it returns this. */
  CUDAIPC_ERROR_DISCONNECTED = -8,
  CUDAIPC_ERROR_BUSY = -9 /* writer open: another producer serves the socket path (since 0.2) */
} cudaipc_status;

typedef enum {
  CUDAIPC_MEMORY_ANY = 0, /* options: whatever the producer shares */
  CUDAIPC_MEMORY_HOST = 1,
  CUDAIPC_MEMORY_CUDA = 2
} cudaipc_memory;

/* cudaipc_frame_info.flags */
#define CUDAIPC_FRAME_DISCONT 1u    /* first frame of a producer, or frames skipped before it */
#define CUDAIPC_FRAME_DELTA_UNIT 2u /* GStreamer's DELTA_UNIT */
#define CUDAIPC_FRAME_GAP 4u        /* GStreamer's GAP */
#define CUDAIPC_FRAME_LIVE 8u       /* the producer's source is live */

typedef struct {
  size_t struct_size;          /* set by cudaipc_reader_options_init(); lets it grow */
  const char* socket_path;     /* NULL: the elements' per-user default */
  cudaipc_memory memory;       /* what to accept (ANY) */
  int cuda_device;             /* -1: the producer's GPU, found by UUID */
  uint32_t max_in_flight;      /* frames held at once, 1..64 (4) */
  uint32_t connect_timeout_ms; /* to find a producer at open (5000); 0: wait forever */
  int reconnect; /* wait for a producer again when it goes away (0); open() then waits for one
                    however long it takes, as cudasrc-ipc reconnect=true does */
  uint32_t reconnect_interval_ms; /* between attempts (100) */
  int allow_other_users;          /* trust a producer running as another user (0) */
} cudaipc_reader_options;

typedef struct {
  cudaipc_memory memory; /* HOST or CUDA */
  int device;            /* CUDA device ordinal; -1 for host memory */
  uint64_t data;         /* host pointer or CUdeviceptr of byte 0 of the frame (read-only) */
  uint64_t size;         /* payload bytes from data */
  uint32_t width, height;
  char format[16]; /* GStreamer video format name: "BGRA", "NV12", "I420", "GRAY8", ... */
  uint32_t n_planes;
  uint64_t plane_offset[CUDAIPC_MAX_PLANES]; /* from data */
  int32_t plane_stride[CUDAIPC_MAX_PLANES];  /* bytes per row */
  uint64_t pts_ns;       /* capture time, CLOCK_MONOTONIC; CUDAIPC_NO_TIMESTAMP if none */
  uint64_t duration_ns;  /* CUDAIPC_NO_TIMESTAMP if none */
  uint64_t sequence;     /* the producer's frame counter (gaps: frames this reader missed) */
  uint64_t offset;       /* GstBuffer offset upstream gave (a frame number); UINT64_MAX: none */
  uint64_t send_time_ns; /* when the producer sent it, CLOCK_MONOTONIC */
  uint32_t flags;        /* CUDAIPC_FRAME_* */
  uint32_t reserved0;
  uint64_t reserved[8]; /* zero: room for later versions to grow without breaking callers */
} cudaipc_frame_info;

typedef struct {
  uint64_t frames_received;
  uint64_t frames_released;
  uint64_t frames_held; /* received and not yet released */
  uint64_t slots_imported;
  uint64_t slots_retired;
  uint64_t connects;
  uint32_t max_in_flight; /* frames the producer lets this reader hold (it may grant fewer) */
  uint32_t cuda_mps;      /* 1: CUDA memory, and this process's context runs as an MPS client */
  uint64_t reserved[8];   /* zero: room for later versions to grow without breaking callers */
} cudaipc_reader_stats;

typedef struct cudaipc_reader cudaipc_reader;
typedef struct cudaipc_frame cudaipc_frame;

CUDAIPC_API const char* cudaipc_version(void);
CUDAIPC_API const char* cudaipc_status_name(int status);
CUDAIPC_API const char* cudaipc_last_error(void);

CUDAIPC_API void cudaipc_reader_options_init(cudaipc_reader_options* options);
/* Connects (waiting up to connect_timeout_ms for a producer) and completes the handshake. */
CUDAIPC_API int cudaipc_reader_open(const cudaipc_reader_options* options, cudaipc_reader** reader);
/* The next frame; timeout_ms < 0 waits forever. Caps changes are followed silently. */
CUDAIPC_API int cudaipc_reader_next(cudaipc_reader* reader, int timeout_ms, cudaipc_frame** frame);
/* Makes a next() or open() in progress, or the next one, return CUDAIPC_INTERRUPTED. */
CUDAIPC_API int cudaipc_reader_interrupt(cudaipc_reader* reader);
CUDAIPC_API int cudaipc_reader_get_stats(const cudaipc_reader* reader, cudaipc_reader_stats* stats);
/* Leaves the producer; frames not yet released stay valid until they are. NULL is ignored. */
CUDAIPC_API void cudaipc_reader_close(cudaipc_reader* reader);

CUDAIPC_API int cudaipc_frame_get_info(const cudaipc_frame* frame, cudaipc_frame_info* info);
/* CUDA: makes work queued on `cuda_stream` (a cudaStream_t; NULL: the legacy default stream)
 * after this call wait until the producer has finished writing the frame - on the GPU, the CPU
 * does not wait. Host memory: nothing to wait for. */
CUDAIPC_API int cudaipc_frame_wait_ready(cudaipc_frame* frame, void* cuda_stream);
/* Gives the frame back once the work queued on `cuda_stream` so far is done (NULL: no GPU work
 * reads it any more). Never waits on the CPU. The frame must not be used afterwards. Any thread. */
CUDAIPC_API int cudaipc_frame_release(cudaipc_frame* frame, void* cuda_stream);

/* ---- Publishing (since 0.2) ------------------------------------------------------------- */

typedef enum {
  CUDAIPC_BACKPRESSURE_DROP = 0, /* a consumer with no room misses frames; never waits for one */
  CUDAIPC_BACKPRESSURE_BLOCK = 1 /* acquire() waits until every consumer has room */
} cudaipc_backpressure;

typedef struct {
  size_t struct_size;      /* set by cudaipc_writer_options_init(); lets it grow */
  const char* socket_path; /* NULL: the elements' per-user default */
  const char* format; /* GStreamer video format name ("BGRx"): BGRA, BGRx, RGBA, RGBx, ARGB, ABGR,
                         xRGB, xBGR, RGB, BGR, GRAY8, GRAY16_LE, YUY2, UYVY, NV12, I420 */
  uint32_t width, height;
  uint32_t framerate_num, framerate_den; /* announced in the caps; 0/1 (default): variable */
  cudaipc_memory memory;                 /* CUDA (default) or HOST */
  int cuda_device;                       /* -1: device 0 */
  uint32_t pool_size;                    /* slots, 1..64 (6) */
  cudaipc_backpressure backpressure;     /* DROP */
  uint32_t max_in_flight;                /* frames one consumer may hold, 1..64 (4) */
  uint32_t release_timeout_ms; /* a needed-back frame held longer disconnects its consumer (2000);
                                  0: never */
  uint32_t socket_mode;        /* permissions of the socket file (0600) */
  int allow_other_users;       /* let consumers of other users attach (0) */
  uint64_t instance_id;        /* 0: a random one per open */
  int live; /* frames are live (1): consumers drop frames made before they started, as with a
               camera; 0: every frame is kept (a file, a simulation run) */
} cudaipc_writer_options;

typedef struct {
  cudaipc_memory memory; /* HOST or CUDA */
  int device;            /* CUDA device ordinal; -1 for host memory */
  uint64_t data;         /* writable host pointer or CUdeviceptr of byte 0 of the frame */
  uint64_t size;         /* bytes of one frame in this layout */
  uint64_t capacity;     /* bytes of the slot (>= size) */
  uint32_t width, height;
  char format[16];
  uint32_t n_planes;
  uint64_t plane_offset[CUDAIPC_MAX_PLANES]; /* from data; GStreamer's default layout */
  int32_t plane_stride[CUDAIPC_MAX_PLANES];  /* bytes per row */
  uint64_t generation;                       /* changes with cudaipc_writer_set_format() */
  uint32_t index;                            /* the slot's number within its generation */
  uint32_t reserved0;
  uint64_t reserved[8];
} cudaipc_slot_info;

typedef struct {
  uint64_t frames_published;
  uint64_t frames_sent;      /* FRAME messages, summed over consumers */
  uint64_t frames_dropped;   /* deliveries consumers missed: they had no room (DROP) */
  uint64_t frames_abandoned; /* slots given back unpublished (abandon, a failed publish) */
  uint64_t acquire_timeouts;
  uint64_t copies; /* full-frame copies: one per cudaipc_writer_publish_copy() */
  uint64_t consumers;
  uint64_t consumers_total;
  uint64_t consumers_evicted; /* disconnected for holding a frame past release_timeout_ms */
  uint64_t slots_allocated;
  uint64_t slots_retired; /* taken out under an evicted consumer and replaced */
  uint64_t generations;
  uint32_t cuda_mps; /* 1: CUDA memory, and this process runs as an MPS client */
  uint32_t reserved0;
  uint64_t reserved[8];
} cudaipc_writer_stats;

typedef struct cudaipc_writer cudaipc_writer;
typedef struct cudaipc_slot cudaipc_slot;

CUDAIPC_API void cudaipc_writer_options_init(cudaipc_writer_options* options);
/* Allocates the slots and serves the socket. CUDAIPC_ERROR_BUSY when another producer (a writer
 * or cudasink-ipc) serves the path; CUDAIPC_ERROR_UNSUPPORTED for CUDA memory in a build without
 * CUDA; CUDAIPC_ERROR_CUDA when no usable device can export memory; CUDAIPC_ERROR_SYSTEM when the
 * slots cannot be allocated. */
CUDAIPC_API int cudaipc_writer_open(const cudaipc_writer_options* options, cudaipc_writer** writer);
/* Lends a free slot. TIMEOUT after timeout_ms (< 0: wait forever): consumers hold every slot
 * (or with BLOCK, one has no room); END after end_stream; INTERRUPTED after interrupt(). */
CUDAIPC_API int cudaipc_writer_acquire(cudaipc_writer* writer, int timeout_ms, cudaipc_slot** slot);
CUDAIPC_API int cudaipc_slot_get_info(const cudaipc_slot* slot, cudaipc_slot_info* info);
/* Sends the slot to every consumer with room once the work queued on `cuda_stream` so far is
 * done (a cudaStream_t; NULL: the legacy default stream of the writer's device; host memory:
 * ignored). Never waits on the CPU. pts_ns: CLOCK_MONOTONIC; CUDAIPC_NO_TIMESTAMP stamps the
 * publish time. Ends the loan whatever it returns. */
CUDAIPC_API int cudaipc_slot_publish(cudaipc_slot* slot, void* cuda_stream, uint64_t pts_ns,
                                     uint64_t duration_ns);
/* Gives the slot back unsent; ends the loan. NULL is ignored. */
CUDAIPC_API void cudaipc_slot_abandon(cudaipc_slot* slot);
/* Copies a frame into a slot and publishes it: one counted copy (a CUDA copy on `cuda_stream`
 * for CUDA memory, from host or device memory; memcpy for host memory). `src` holds plane 0 in
 * rows of `src_stride` bytes and the other planes right after it, scaled to that stride (NV12:
 * the same stride, I420: half); src_stride 0: the slot's own layout (cudaipc_slot_info). */
CUDAIPC_API int cudaipc_writer_publish_copy(cudaipc_writer* writer, const void* src,
                                            size_t src_stride, void* cuda_stream, uint64_t pts_ns,
                                            uint64_t duration_ns, int timeout_ms);
/* A new format or size: a new generation of slots, announced to consumers before its first
 * frame. Slots lent before it are not sent (publish returns CUDAIPC_ERROR_INVALID_ARGUMENT). */
CUDAIPC_API int cudaipc_writer_set_format(cudaipc_writer* writer, const char* format,
                                          uint32_t width, uint32_t height);
/* Ends the stream (consumers see EOS); acquire returns CUDAIPC_END from then on. */
CUDAIPC_API int cudaipc_writer_end_stream(cudaipc_writer* writer);
/* Waits until at least one consumer is attached: OK, TIMEOUT or INTERRUPTED. */
CUDAIPC_API int cudaipc_writer_wait_for_consumer(cudaipc_writer* writer, int timeout_ms);
/* Makes an acquire() or wait_for_consumer() in progress, or the next one, return INTERRUPTED. */
CUDAIPC_API int cudaipc_writer_interrupt(cudaipc_writer* writer);
CUDAIPC_API int cudaipc_writer_get_stats(const cudaipc_writer* writer, cudaipc_writer_stats* stats);
/* Says goodbye to the consumers and frees the writer; NULL is ignored. */
CUDAIPC_API void cudaipc_writer_close(cudaipc_writer* writer);

#ifdef __cplusplus
}
#endif

#endif /* CUDAIPC_H */
