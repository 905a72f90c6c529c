// SPDX-License-Identifier: LGPL-2.1-or-later
#pragma once

#include <gst/base/gstbasetransform.h>
#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_RG10_TO_BGRA (gst_rg10_to_bgra_get_type())
G_DECLARE_FINAL_TYPE(GstRg10ToBgra, gst_rg10_to_bgra, GST, RG10_TO_BGRA, GstBaseTransform)

GST_ELEMENT_REGISTER_DECLARE(rg10tobgra);

G_END_DECLS
