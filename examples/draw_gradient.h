/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The example kernel of publish_frames.c, compiled by nvcc (draw_gradient.cu) and called from C:
 * plain C types cross this header. */
#ifndef DRAW_GRADIENT_H
#define DRAW_GRADIENT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Queues on `stream` (a cudaStream_t) a kernel that draws frame `frame` of a moving gradient into
 * `pixels` (device memory: a writer's slot), `width` x `height` BGRx pixels in rows `pitch` bytes
 * apart. Returns the launch's cudaError_t (0: queued). */
int queue_draw_gradient(unsigned long long pixels, size_t pitch, int width, int height,
                        unsigned frame, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* DRAW_GRADIENT_H */
