// SPDX-License-Identifier: LGPL-2.1-or-later
// Enum GTypes shared by the elements. Type names carry a "Cipc" prefix so they never collide
// with GStreamer's own nvcodec cudaipc types in one process. One enum per concept: the memory
// kind and sync mode properties hold the protocol's own values (cipc::MemoryKind,
// cipc::SyncMode); only the element-level choices have enums of their own here.
#pragma once

#include <glib-object.h>

#include "protocol.h"

#include "cfa.h"

typedef enum {
  GST_CIPC_COPY_IF_NEEDED = 0,
  GST_CIPC_REQUIRE_ZERO_COPY = 1,
} GstCipcCopyPolicy;

// cudasink-ipc's answer to a consumer that holds its max-in-flight frames.
typedef enum {
  GST_CIPC_BACKPRESSURE_AUTO = 0,   // block when upstream is not live, drop when it is
  GST_CIPC_BACKPRESSURE_BLOCK = 1,  // wait in render until every consumer can take the frame
  GST_CIPC_BACKPRESSURE_DROP = 2,   // skip that consumer for this frame
} GstCipcBackpressure;

typedef enum {
  GST_CIPC_IO_IMPORT = 0,
  GST_CIPC_IO_COPY = 1,
} GstCipcIoMode;

// How cudasrc-ipc hands a CUDA producer's frames to GL elements (memory:GLMemory).
typedef enum {
  GST_CIPC_GL_IMPORT_NONE = 0,          // not as GL memory: system memory, then GL's upload
  GST_CIPC_GL_IMPORT_CUDA_INTEROP = 1,  // one device copy into a GL texture (CUDA-GL interop)
  GST_CIPC_GL_IMPORT_AUTO = 2,  // cuda-interop, or through system memory where GL refuses it
  GST_CIPC_GL_IMPORT_MEMORY_OBJECT = 3,  // the slot imported into GL, GL copies into a texture
} GstCipcGlImport;

// Where the 10 bits of a RAW10 sample lie in its 16-bit word: the bit-alignment property of
// bgratorg10 and rg10tobgra. The concept is bayer/cfa.h's cipc_bayer::BitAlignment; this is
// only its GEnum face, mapped by gst_cipc_bit_alignment_to_bayer().
typedef enum {
  GST_CIPC_BIT_ALIGNMENT_LSB = 0,  // bits 9..0 (V4L2 RG10)
  GST_CIPC_BIT_ALIGNMENT_MSB = 1,  // bits 15..6 (Jetson Xavier/Orin VI)
} GstCipcBitAlignment;

cipc_bayer::BitAlignment gst_cipc_bit_alignment_to_bayer(GstCipcBitAlignment alignment);

typedef enum {
  GST_CIPC_DEMOSAIC_BILINEAR = 0,
  GST_CIPC_DEMOSAIC_MHC = 1,
} GstCipcDemosaic;

typedef enum {
  GST_CIPC_WB_FIXED = 0,
  GST_CIPC_WB_GRAY_WORLD = 1,
} GstCipcWhiteBalance;

// rg10tobgra's precision: cipc_cuda::Precision's GEnum face.
typedef enum {
  GST_CIPC_PRECISION_FAST = 0,   // within 1 code of the CPU reference
  GST_CIPC_PRECISION_EXACT = 1,  // bit-exact
} GstCipcPrecision;

// rg10tobgra's input-mode: how the kernel reads frames in the pinned pool it offers upstream
// (cipc_cuda::InputPath, plus auto).
typedef enum {
  GST_CIPC_INPUT_AUTO = 0,      // whichever measure_input_paths() found faster
  GST_CIPC_INPUT_IN_PLACE = 1,  // the kernel reads the host memory over the bus
  GST_CIPC_INPUT_UPLOAD = 2,    // a copy engine uploads it first, overlapping the last kernel
} GstCipcInputMode;

typedef enum {
  GST_CIPC_TRANSFER_SRGB = 0,
  GST_CIPC_TRANSFER_LINEAR = 1,
  GST_CIPC_TRANSFER_POWER = 2,
} GstCipcTransfer;

GType gst_cipc_bit_alignment_get_type(void);
GType gst_cipc_demosaic_get_type(void);
GType gst_cipc_white_balance_get_type(void);
GType gst_cipc_transfer_get_type(void);
GType gst_cipc_precision_get_type(void);
GType gst_cipc_input_mode_get_type(void);
GType gst_cipc_sync_mode_get_type(void);  // cipc::SyncMode: gpu-events | cpu
GType gst_cipc_io_mode_get_type(void);
GType gst_cipc_gl_import_get_type(void);
GType gst_cipc_sink_memory_get_type(void);  // cipc::MemoryKind: host | cuda
GType gst_cipc_src_memory_get_type(void);   // cipc::MemoryKind: auto | host | cuda
GType gst_cipc_copy_policy_get_type(void);
GType gst_cipc_backpressure_get_type(void);
