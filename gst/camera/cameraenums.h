// SPDX-License-Identifier: LGPL-2.1-or-later
// The camera elements' enum GTypes: bit-alignment (bgratorg10, rg10tobgra, rg10replaysrc),
// rg10tobgra's demosaic, white balance, transfer, precision and input-mode, and cudav4l2src's
// io-mode.
// Type names carry a "Cipc" prefix (common/enumtypes.h).
#pragma once

#include <glib-object.h>

#include "cfa.h"

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

// cudav4l2src's io-mode: how the driver's frames reach GstBuffers.
typedef enum {
  GST_CIPC_V4L2_IO_AUTO = 0,
  GST_CIPC_V4L2_IO_USERPTR = 1,
  GST_CIPC_V4L2_IO_MMAP = 2,
} GstCipcV4l2IoMode;

GType gst_cipc_bit_alignment_get_type(void);
GType gst_cipc_demosaic_get_type(void);
GType gst_cipc_white_balance_get_type(void);
GType gst_cipc_transfer_get_type(void);
GType gst_cipc_precision_get_type(void);
GType gst_cipc_input_mode_get_type(void);
GType gst_cipc_v4l2_io_mode_get_type(void);
