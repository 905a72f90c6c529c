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
  CUDAIPC_ERROR_DISCONNECTED = -8
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

#ifdef __cplusplus
}
#endif

#endif /* CUDAIPC_H */
