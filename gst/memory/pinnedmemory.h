// SPDX-License-Identifier: LGPL-2.1-or-later
// Pinned, CUDA-mapped host memory as GstMemory, and a buffer pool of it. rg10tobgra offers such
// a pool upstream: a camera or simulator writes each frame into it with the CPU (or a capture
// device's DMA), and the debayer kernel reads it in place over the bus - no host-to-device copy.
// The memory is page-aligned (cudaHostAlloc), so V4L2 USERPTR capture can use it too.
#pragma once

#include <gst/gst.h>

#include "cuda_api.h"

#define GST_CIPC_PINNED_MEMORY_TYPE "CudaIpcPinnedMemory"

// An allocator of pinned memory mapped for `device` (a new instance; unref when done).
GstAllocator* gst_cipc_pinned_allocator_new(int device);
// Registers the "cudaipc-pinned" debug category (plugin_init calls it, for --gst-debug-help).
void gst_cipc_pinned_init_debug();

// True if `mem` is pinned memory from such an allocator; `device_ptr` then receives the device
// address of the memory's first byte (offset included).
gboolean gst_cipc_pinned_memory_device_ptr(GstMemory* mem, cipc_cuda::DevicePtr* device_ptr);

// A pool whose buffers are one pinned memory of `size` bytes each, for `caps` (any media
// type); min_buffers are allocated when it is activated, and it grows without limit so that a
// producer never waits on buffers the GPU is still reading.
GstBufferPool* gst_cipc_pinned_pool_new(int device, GstCaps* caps, guint size, guint min_buffers);
