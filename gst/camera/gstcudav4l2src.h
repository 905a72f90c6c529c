// SPDX-License-Identifier: LGPL-2.1-or-later
#pragma once

#include <gst/base/gstpushsrc.h>
#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_CUDA_V4L2_SRC (gst_cuda_v4l2_src_get_type())
G_DECLARE_FINAL_TYPE(GstCudaV4l2Src, gst_cuda_v4l2_src, GST, CUDA_V4L2_SRC, GstPushSrc)

GST_ELEMENT_REGISTER_DECLARE(cudav4l2src);

G_END_DECLS
