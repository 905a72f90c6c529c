// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Reading a cudasink-ipc stream from plain C with libcudaipc: no GStreamer, and no CUDA calls.
 *
 *   read-frames SOCKET_PATH [FRAMES]     FRAMES: how many to read (100; 0: until the stream
 *                                        ends or Ctrl-C)
 *
 * Per frame it prints the format, size, capture time (pts) and latency (producer's send ->
 * here). Host-memory frames are read in place: their bytes are summed on the CPU, straight from
 * the producer's memory. For CUDA frames it only prints the device pointer; a real program queues
 * its GPU work between cudaipc_frame_wait_ready() and cudaipc_frame_release(frame, stream)
 * (examples/embed_cuda_kernel.cpp, docs/embedding.md). Every frame is released as soon as it is
 * read: until then the producer cannot reuse its slot.
 *
 * Ctrl-C (SIGINT) and SIGTERM: SIGINT and SIGTERM are blocked in every thread and a thread of
 * our own takes them with sigwait() and calls cudaipc_reader_interrupt(), which cudaipc.h allows
 * from any thread. No signal handler runs, so nothing depends on which library calls are
 * async-signal-safe, and a mutex keeps the reader from being closed under that thread. The
 * signals are blocked before libcudaipc starts threads of its own, which inherit the mask. A
 * signal while cudaipc_reader_open() is still looking for a producer takes effect when it
 * returns (connect_timeout_ms, 5 s): there is no reader to interrupt yet.
 *
 * Exit status:
 *   0    FRAMES frames read, or the stream ended (EOS, or the producer stopped)
 *   1    bad arguments
 *   2    could not attach: no producer, refused (user, version, memory kind, GPU), unsupported
 *   3    the stream failed while reading (protocol error, CUDA error, ...)
 *   4    the stream was cut: the producer disconnected us (a frame held past its
 *        release-timeout, its error) or vanished without ending the stream
 *   128+N  stopped by signal N (130: Ctrl-C, 143: SIGTERM), after releasing every frame
 */
#define _POSIX_C_SOURCE 200809L

#include <cudaipc/cudaipc.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
  EXIT_DONE = 0,
  EXIT_USAGE = 1,
  EXIT_NO_STREAM = 2,
  EXIT_STREAM_FAILED = 3,
  EXIT_DISCONNECTED = 4,
  EXIT_SIGNALLED = 128, /* + the signal number, as shells report it */
};

enum { NEXT_TIMEOUT_MS = 1000 };

/* Shared with the signal thread, under `g_lock`. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static cudaipc_reader* g_reader;  /* the reader to interrupt; NULL before open and from close */
static int g_stop_signal;         /* the signal that asked us to stop; 0: none yet */
static int g_signal_thread_exits; /* set by main when it is done */

static void* signal_thread_main(void* arg) {
  const sigset_t* signals = arg;
  for (;;) {
    int signal_number = 0;
    if (sigwait(signals, &signal_number) != 0) continue;
    pthread_mutex_lock(&g_lock);
    const int exits = g_signal_thread_exits;
    if (!exits) {
      if (g_stop_signal == 0) g_stop_signal = signal_number;
      if (g_reader) cudaipc_reader_interrupt(g_reader);
    }
    pthread_mutex_unlock(&g_lock);
    if (exits) return NULL;
  }
}

static int stop_signal(void) {
  pthread_mutex_lock(&g_lock);
  const int signal_number = g_stop_signal;
  pthread_mutex_unlock(&g_lock);
  return signal_number;
}

static uint64_t monotonic_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* What main() prints at the end. */
typedef struct {
  uint64_t frames;
  uint64_t first_ns, last_ns; /* when the first and the last frame arrived */
  uint64_t latency_sum_ns, latency_max_ns;
  uint64_t sequence_gaps; /* frames this reader missed: gaps in sequence numbers */
  uint64_t last_sequence;
} read_totals;

/* Prints one frame and, for host memory, sums its bytes where they lie. */
static void print_frame(const cudaipc_frame_info* info, uint64_t received_ns) {
  const uint64_t latency_ns =
      received_ns > info->send_time_ns ? received_ns - info->send_time_ns : 0;
  printf("frame %" PRIu64 ": %s %" PRIu32 "x%" PRIu32 ", %" PRIu64 " bytes, stride %" PRId32,
         info->sequence, info->format, info->width, info->height, info->size,
         info->plane_stride[0]);
  if (info->pts_ns != CUDAIPC_NO_TIMESTAMP)
    printf(", pts %" PRIu64 ".%06" PRIu64 " s", info->pts_ns / 1000000000u,
           info->pts_ns % 1000000000u / 1000u);
  printf(", latency %.1f us", latency_ns / 1e3);
  if (info->memory == CUDAIPC_MEMORY_HOST) {
    /* Read-only: the producer and other readers share these bytes. */
    const uint8_t* bytes = (const uint8_t*)(uintptr_t)info->data;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < info->size; ++i) sum += bytes[i];
    printf(", host memory, byte sum %" PRIu64, sum);
  } else {
    printf(", CUDA memory on GPU %d at device pointer 0x%" PRIx64, info->device, info->data);
  }
  if (info->flags & CUDAIPC_FRAME_DISCONT) printf(" (frames missed before this one)");
  printf("\n");
}

static int read_frames(cudaipc_reader* reader, uint64_t wanted, read_totals* totals) {
  int waited_s = 0;
  while (wanted == 0 || totals->frames < wanted) {
    cudaipc_frame* frame = NULL;
    const int status = cudaipc_reader_next(reader, NEXT_TIMEOUT_MS, &frame);
    if (status == CUDAIPC_TIMEOUT) {
      fprintf(stderr, "No frame for %d s; still waiting (Ctrl-C to stop).\n", ++waited_s);
      continue;
    }
    if (status == CUDAIPC_INTERRUPTED) return EXIT_SIGNALLED + stop_signal();
    if (status == CUDAIPC_END) {
      printf("The stream ended: %s.\n", cudaipc_last_error());
      return EXIT_DONE;
    }
    if (status == CUDAIPC_ERROR_DISCONNECTED) {
      fprintf(stderr, "The stream was cut: %s.\n", cudaipc_last_error());
      return EXIT_DISCONNECTED;
    }
    if (status != CUDAIPC_OK) {
      fprintf(stderr, "Reading a frame failed (%s): %s.\n", cudaipc_status_name(status),
              cudaipc_last_error());
      return EXIT_STREAM_FAILED;
    }
    waited_s = 0;
    const uint64_t received_ns = monotonic_ns();
    cudaipc_frame_info info;
    if (cudaipc_frame_get_info(frame, &info) != CUDAIPC_OK) {
      fprintf(stderr, "Could not describe a frame: %s.\n", cudaipc_last_error());
      cudaipc_frame_release(frame, NULL);
      return EXIT_STREAM_FAILED;
    }
    print_frame(&info, received_ns);
    /* NULL stream: no GPU work reads the frame, so it goes back to the producer now. */
    if (cudaipc_frame_release(frame, NULL) != CUDAIPC_OK) {
      fprintf(stderr, "Releasing a frame failed: %s.\n", cudaipc_last_error());
      return EXIT_STREAM_FAILED;
    }
    const uint64_t latency_ns =
        received_ns > info.send_time_ns ? received_ns - info.send_time_ns : 0;
    if (totals->frames == 0)
      totals->first_ns = received_ns;
    else if (info.sequence > totals->last_sequence + 1)
      totals->sequence_gaps += info.sequence - totals->last_sequence - 1;
    totals->last_ns = received_ns;
    totals->last_sequence = info.sequence;
    totals->latency_sum_ns += latency_ns;
    if (latency_ns > totals->latency_max_ns) totals->latency_max_ns = latency_ns;
    ++totals->frames;
  }
  return EXIT_DONE;
}

static void print_summary(const read_totals* totals, const cudaipc_reader_stats* stats) {
  const double seconds = (totals->last_ns - totals->first_ns) / 1e9;
  printf("%" PRIu64 " frames", totals->frames);
  if (totals->frames > 1 && seconds > 0)
    printf(" in %.2f s (%.1f frames/s)", seconds, (totals->frames - 1) / seconds);
  if (totals->frames > 0)
    printf(", latency mean %.1f us, max %.1f us",
           totals->latency_sum_ns / 1e3 / (double)totals->frames, totals->latency_max_ns / 1e3);
  printf(", %" PRIu64 " missed.\n", totals->sequence_gaps);
  printf("reader: %" PRIu64 " received, %" PRIu64 " released, %" PRIu64 " held, %" PRIu64
         " slots imported, %" PRIu64 " retired, %" PRIu64 " connection(s).\n",
         stats->frames_received, stats->frames_released, stats->frames_held, stats->slots_imported,
         stats->slots_retired, stats->connects);
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    fprintf(stderr, "usage: %s SOCKET_PATH [FRAMES]   (FRAMES: 100; 0 reads until the end)\n",
            argv[0]);
    return EXIT_USAGE;
  }
  char* end = NULL;
  const unsigned long long wanted = argc > 2 ? strtoull(argv[2], &end, 10) : 100;
  if (argc > 2 && (*argv[2] == '\0' || *argv[2] == '-' || *end != '\0')) {
    fprintf(stderr, "FRAMES must be a number (0: until the stream ends), not '%s'.\n", argv[2]);
    return EXIT_USAGE;
  }
  setvbuf(stdout, NULL, _IOLBF, 0); /* one frame a line, also through a pipe */

  /* Before any other thread exists, libcudaipc's included: they all inherit this mask. */
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_t signal_thread;
  if (pthread_sigmask(SIG_BLOCK, &stop_signals, NULL) != 0 ||
      pthread_create(&signal_thread, NULL, signal_thread_main, &stop_signals) != 0) {
    fprintf(stderr, "Could not set up Ctrl-C handling.\n");
    return EXIT_NO_STREAM;
  }

  printf("libcudaipc %s, reading '%s'.\n", cudaipc_version(), argv[1]);
  cudaipc_reader_options options;
  cudaipc_reader_options_init(&options);
  options.socket_path = argv[1];
  cudaipc_reader* reader = NULL;
  int exit_status = EXIT_DONE;
  const int open_status = cudaipc_reader_open(&options, &reader);
  if (open_status != CUDAIPC_OK) {
    fprintf(stderr, "Could not read '%s' (%s): %s.\n", argv[1], cudaipc_status_name(open_status),
            cudaipc_last_error());
    exit_status = EXIT_NO_STREAM;
  } else {
    pthread_mutex_lock(&g_lock);
    g_reader = reader;
    const int signalled_during_open = g_stop_signal;
    pthread_mutex_unlock(&g_lock);

    read_totals totals = {0};
    exit_status = signalled_during_open ? EXIT_SIGNALLED + signalled_during_open
                                        : read_frames(reader, wanted, &totals);
    if (exit_status > EXIT_SIGNALLED)
      printf("Stopped by signal %d.\n", exit_status - EXIT_SIGNALLED);
    cudaipc_reader_stats stats;
    if (cudaipc_reader_get_stats(reader, &stats) == CUDAIPC_OK) print_summary(&totals, &stats);

    pthread_mutex_lock(&g_lock);
    g_reader = NULL; /* the signal thread must not touch it once it is closed */
    pthread_mutex_unlock(&g_lock);
    cudaipc_reader_close(reader);
  }

  pthread_mutex_lock(&g_lock);
  g_signal_thread_exits = 1;
  pthread_mutex_unlock(&g_lock);
  pthread_kill(signal_thread, SIGTERM); /* blocked, so it only wakes the thread's sigwait() */
  pthread_join(signal_thread, NULL);
  return exit_status;
}
