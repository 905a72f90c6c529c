// SPDX-License-Identifier: LGPL-2.1-or-later
// Enum GTypes shared by the elements. Type names carry a "Cipc" prefix so they never collide
// with GStreamer's own nvcodec cudaipc types in one process.
#pragma once

#include <glib-object.h>

typedef enum {
  GST_CIPC_MEMORY_AUTO = 0,  // consumer only: whatever the producer shares
  GST_CIPC_MEMORY_HOST = 1,
  GST_CIPC_MEMORY_CUDA = 2,
} GstCipcMemory;

typedef enum {
  GST_CIPC_COPY_IF_NEEDED = 0,
  GST_CIPC_REQUIRE_ZERO_COPY = 1,
} GstCipcCopyPolicy;

typedef enum {
  GST_CIPC_SYNC_GPU_EVENTS = 0,
  GST_CIPC_SYNC_CPU = 1,
} GstCipcSyncMode;

typedef enum {
  GST_CIPC_IO_IMPORT = 0,
  GST_CIPC_IO_COPY = 1,
} GstCipcIoMode;

GType gst_cipc_sync_mode_get_type(void);
GType gst_cipc_io_mode_get_type(void);
GType gst_cipc_sink_memory_get_type(void);  // host | cuda
GType gst_cipc_src_memory_get_type(void);   // auto | host | cuda
GType gst_cipc_copy_policy_get_type(void);
