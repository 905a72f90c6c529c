// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Publishing a stream from plain C with libcudaipc: the frames are drawn by the application's
 * own CUDA kernel straight into the slots consumers map - no GStreamer, no copy.
 *
 *   publish-frames SOCKET_PATH [FRAMES] [--host]   FRAMES: how many (600; 0: until Ctrl-C)
 *
 * 1280x720 BGRx at 60 frames/s. Each frame: acquire a slot, queue the kernel into it on our
 * stream, publish the slot with that stream (the consumers' GPU work waits for the kernel; this
 * CPU does not). --host draws on the CPU into shared host memory instead (no GPU needed).
 * Watch it from another shell:
 *
 *   gst-launch-1.0 cudasrc-ipc socket-path=SOCKET_PATH ! videoconvert ! autovideosink
 *   examples/read_frames SOCKET_PATH                 (build/examples/read-frames)
 *
 * Exit status: 0 done, 1 bad arguments, 2 could not open the writer, 3 a failure while
 * publishing, 130 Ctrl-C (after ending the stream: consumers see EOS).
 */
#define _POSIX_C_SOURCE 200809L

#include <cuda_runtime_api.h>
#include <cudaipc/cudaipc.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "draw_gradient.h"

enum { WIDTH = 1280, HEIGHT = 720, FPS = 60 };

static volatile sig_atomic_t g_stop; /* set by Ctrl-C; the loop polls it between frames */

static void on_signal(int sig) {
  (void)sig;
  g_stop = 1;
}

static void draw_on_cpu(const cudaipc_slot_info* info, unsigned frame) {
  uint8_t* base = (uint8_t*)(uintptr_t)info->data;
  for (uint32_t y = 0; y < info->height; ++y) {
    uint8_t* row = base + info->plane_offset[0] + (size_t)y * (size_t)info->plane_stride[0];
    for (uint32_t x = 0; x < info->width; ++x) {
      row[4 * x + 0] = (uint8_t)(x * 255 / (info->width - 1));
      row[4 * x + 1] = (uint8_t)(y * 255 / (info->height - 1));
      row[4 * x + 2] = (uint8_t)(frame * 4 + x / 8);
      row[4 * x + 3] = 255;
    }
  }
}

int main(int argc, char** argv) {
  const char* path = NULL;
  long frames = 600;
  int host = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--host") == 0)
      host = 1;
    else if (!path)
      path = argv[i];
    else
      frames = strtol(argv[i], NULL, 10);
  }
  if (!path || frames < 0) {
    fprintf(stderr, "usage: %s SOCKET_PATH [FRAMES] [--host]\n", argv[0]);
    return 1;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  cudaipc_writer_options options;
  cudaipc_writer_options_init(&options);
  options.socket_path = path;
  options.format = "BGRx";
  options.width = WIDTH;
  options.height = HEIGHT;
  options.framerate_num = FPS;
  options.framerate_den = 1;
  options.memory = host ? CUDAIPC_MEMORY_HOST : CUDAIPC_MEMORY_CUDA;
  cudaipc_writer* writer = NULL;
  if (cudaipc_writer_open(&options, &writer) != CUDAIPC_OK) {
    fprintf(stderr, "could not publish on %s: %s\n", path, cudaipc_last_error());
    return 2;
  }
  cudaStream_t stream = NULL;
  if (!host && cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    fprintf(stderr, "cudaStreamCreate failed\n");
    cudaipc_writer_close(writer);
    return 2;
  }
  printf("publishing %dx%d BGRx at %d frames/s on %s (%s memory); Ctrl-C stops\n", WIDTH, HEIGHT,
         FPS, path, host ? "host" : "CUDA");

  int status = 0;
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  for (unsigned n = 0; !g_stop && (frames == 0 || n < (unsigned long)frames); ++n) {
    cudaipc_slot* slot = NULL;
    const int acquired = cudaipc_writer_acquire(writer, 100, &slot);
    if (acquired == CUDAIPC_TIMEOUT) continue; /* consumers hold every slot: try again */
    if (acquired != CUDAIPC_OK) {
      fprintf(stderr, "acquire: %s\n", cudaipc_last_error());
      status = 3;
      break;
    }
    cudaipc_slot_info info;
    cudaipc_slot_get_info(slot, &info);
    if (host) {
      draw_on_cpu(&info, n);
    } else if (queue_draw_gradient(info.data, (size_t)info.plane_stride[0], (int)info.width,
                                   (int)info.height, n, stream) != 0) {
      fprintf(stderr, "the kernel could not be launched\n");
      cudaipc_slot_abandon(slot);
      status = 3;
      break;
    }
    /* pts: the publish time; the slot goes out once the kernel on `stream` is done. */
    if (cudaipc_slot_publish(slot, stream, CUDAIPC_NO_TIMESTAMP, 1000000000ull / FPS) !=
        CUDAIPC_OK) {
      fprintf(stderr, "publish: %s\n", cudaipc_last_error());
      status = 3;
      break;
    }
    next.tv_nsec += 1000000000L / FPS;
    if (next.tv_nsec >= 1000000000L) {
      next.tv_nsec -= 1000000000L;
      next.tv_sec += 1;
    }
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
  }
  cudaipc_writer_stats stats;
  cudaipc_writer_get_stats(writer, &stats);
  printf("published %" PRIu64 " frames, %" PRIu64 " deliveries, %" PRIu64 " dropped, %" PRIu64
         " copies, %" PRIu64 " consumers attached in all\n",
         stats.frames_published, stats.frames_sent, stats.frames_dropped, stats.copies,
         stats.consumers_total);
  cudaipc_writer_end_stream(writer);
  cudaipc_writer_close(writer);
  if (stream) cudaStreamDestroy(stream);
  return status ? status : g_stop ? 130 : 0;
}
