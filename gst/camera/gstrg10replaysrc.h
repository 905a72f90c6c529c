// SPDX-License-Identifier: LGPL-2.1-or-later
#pragma once

#include <gst/base/gstpushsrc.h>
#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_RG10_REPLAY_SRC (gst_rg10_replay_src_get_type())
G_DECLARE_FINAL_TYPE(GstRg10ReplaySrc, gst_rg10_replay_src, GST, RG10_REPLAY_SRC, GstPushSrc)

GST_ELEMENT_REGISTER_DECLARE(rg10replaysrc);

G_END_DECLS
