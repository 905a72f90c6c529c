// SPDX-License-Identifier: LGPL-2.1-or-later
// cudasrc-ipc's enum GTypes: io-mode, gl-import and memory (the protocol's cipc::MemoryKind,
// plus auto).
// Type names carry a "Cipc" prefix (common/enumtypes.h).
#pragma once

#include <glib-object.h>

#include "protocol.h"

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

GType gst_cipc_io_mode_get_type(void);
GType gst_cipc_gl_import_get_type(void);
GType gst_cipc_src_memory_get_type(void);  // cipc::MemoryKind: auto | host | cuda
