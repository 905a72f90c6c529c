// SPDX-License-Identifier: LGPL-2.1-or-later
// The cudaipc plugin. It registers its elements whether or not a GPU or CUDA driver is present:
// gst-inspect-1.0 works everywhere, and an element that needs the GPU fails in start() with a
// clear error instead.
#include <gst/gst.h>

#include <string>

#include "camera/gstbgratorg10.h"
#include "camera/gstrg10replaysrc.h"
#ifdef CIPC_HAVE_CUDA
#include "camera/gstrg10tobgra.h"
#endif
#include "camera/gstcudav4l2src.h"
#include "ipcsink/gstcudasinkipc.h"
#include "ipcsrc/gstcudasrcipc.h"
#include "memory/slotmemory.h"
#include "memory/slotpool.h"
#ifdef CIPC_HAVE_CUDA
#include "common/cudaplanecopy.h"
#include "memory/pinnedmemory.h"
#include "release_worker.h"
#endif
#ifdef CIPC_HAVE_GST_CUDA
#include "common/gstcudainterop.h"
#endif

#ifndef PACKAGE
#define PACKAGE "gst-cudaipc"
#endif

#ifdef CIPC_HAVE_CUDA
GST_DEBUG_CATEGORY_STATIC(cipc_slots_debug);

// The slots layer has no GStreamer: its background warnings are routed into the debug log here.
static void slots_warning(const std::string& message) {
  GST_CAT_WARNING(cipc_slots_debug, "%s", message.c_str());
}
#endif

static gboolean plugin_init(GstPlugin* plugin) {
#ifdef CIPC_HAVE_CUDA
  GST_DEBUG_CATEGORY_INIT(cipc_slots_debug, "cudaipc-release", 0,
                          "cudaipc: waits for GPU reads before frames are released");
  cipc_slots::set_warning_handler(slots_warning);
  cipc_gst::init_cuda_frames_debug();
  gst_cipc_pinned_init_debug();
#endif
#ifdef CIPC_HAVE_GST_CUDA
  cipc_gst::init_cuda_interop_debug();
#endif
  // Every debug category exists once the plugin is loaded, so that --gst-debug-help lists
  // them all; the slot pool's is made with its type.
  g_type_ensure(GST_TYPE_CIPC_SLOT_POOL);
  // Registers the slot allocator by name; without it no element could make slot memory.
  if (gst_cipc_slot_allocator_get() == nullptr) {
    GST_ERROR_OBJECT(plugin, "could not create the %s allocator", GST_CIPC_SLOT_MEMORY_TYPE);
    return FALSE;
  }
  gboolean ok = GST_ELEMENT_REGISTER(cudasink_ipc, plugin);
  ok &= GST_ELEMENT_REGISTER(cudasrc_ipc, plugin);
  ok &= GST_ELEMENT_REGISTER(cudav4l2src, plugin);    // V4L2 capture: no CUDA needed
  ok &= GST_ELEMENT_REGISTER(bgratorg10, plugin);     // bayer/'s CPU mosaic: no CUDA needed
  ok &= GST_ELEMENT_REGISTER(rg10replaysrc, plugin);  // likewise
#ifdef CIPC_HAVE_CUDA
  ok &= GST_ELEMENT_REGISTER(rg10tobgra, plugin);
#endif
  return ok;
}

GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, cudaipc,
                  "Zero-copy video between processes on one GPU, and GPU debayering", plugin_init,
                  CIPC_VERSION, "LGPL", "gst-cudaipc", CIPC_ORIGIN)
