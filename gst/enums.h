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

// Where the 10 bits of a RAW10 sample lie in its 16-bit word.
typedef enum {
  GST_CIPC_BIT_ALIGNMENT_LSB = 0,  // bits 9..0 (V4L2 RG10)
  GST_CIPC_BIT_ALIGNMENT_MSB = 1,  // bits 15..6 (Jetson Xavier/Orin VI)
} GstCipcBitAlignment;

typedef enum {
  GST_CIPC_DEMOSAIC_BILINEAR = 0,
  GST_CIPC_DEMOSAIC_MHC = 1,
} GstCipcDemosaic;

typedef enum {
  GST_CIPC_WB_FIXED = 0,
  GST_CIPC_WB_GRAY_WORLD = 1,
} GstCipcWhiteBalance;

typedef enum {
  GST_CIPC_TRANSFER_SRGB = 0,
  GST_CIPC_TRANSFER_LINEAR = 1,
  GST_CIPC_TRANSFER_POWER = 2,
} GstCipcTransfer;

GType gst_cipc_bit_alignment_get_type(void);
GType gst_cipc_demosaic_get_type(void);
GType gst_cipc_white_balance_get_type(void);
GType gst_cipc_transfer_get_type(void);
GType gst_cipc_sync_mode_get_type(void);
GType gst_cipc_io_mode_get_type(void);
GType gst_cipc_sink_memory_get_type(void);  // host | cuda
GType gst_cipc_src_memory_get_type(void);   // auto | host | cuda
GType gst_cipc_copy_policy_get_type(void);
