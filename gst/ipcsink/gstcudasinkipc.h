// SPDX-License-Identifier: LGPL-2.1-or-later
#pragma once

#include <gst/base/gstbasesink.h>
#include <gst/gst.h>

G_BEGIN_DECLS

// C type GstCudaSinkIpc, GType "GstCudaSink-ipc" (default instance names "cudasink-ipc0");
// never "GstCudaIpcSink", which belongs to GStreamer's nvcodec.
#define GST_TYPE_CUDA_SINK_IPC (gst_cuda_sink_ipc_get_type())
G_DECLARE_FINAL_TYPE(GstCudaSinkIpc, gst_cuda_sink_ipc, GST, CUDA_SINK_IPC, GstBaseSink)

GST_ELEMENT_REGISTER_DECLARE(cudasink_ipc);

G_END_DECLS
