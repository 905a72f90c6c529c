// SPDX-License-Identifier: LGPL-2.1-or-later
#pragma once

#include <gst/base/gstpushsrc.h>
#include <gst/gst.h>

G_BEGIN_DECLS

// C type GstCudaSrcIpc, GType "GstCudaSrc-ipc" (default instance names "cudasrc-ipc0");
// never "GstCudaIpcSrc", which belongs to GStreamer's nvcodec.
#define GST_TYPE_CUDA_SRC_IPC (gst_cuda_src_ipc_get_type())
G_DECLARE_FINAL_TYPE(GstCudaSrcIpc, gst_cuda_src_ipc, GST, CUDA_SRC_IPC, GstPushSrc)

GST_ELEMENT_REGISTER_DECLARE(cudasrc_ipc);

G_END_DECLS
