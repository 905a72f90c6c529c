// SPDX-License-Identifier: LGPL-2.1-or-later
#pragma once

#include <gst/base/gstbasetransform.h>
#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_BGRA_TO_RG10 (gst_bgra_to_rg10_get_type())
G_DECLARE_FINAL_TYPE(GstBgraToRg10, gst_bgra_to_rg10, GST, BGRA_TO_RG10, GstBaseTransform)

GST_ELEMENT_REGISTER_DECLARE(bgratorg10);

G_END_DECLS
