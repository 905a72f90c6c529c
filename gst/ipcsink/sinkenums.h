// SPDX-License-Identifier: LGPL-2.1-or-later
// cudasink-ipc's enum GTypes: copy-policy, backpressure, sync-mode and memory. sync-mode and
// memory hold the protocol's own values (cipc::SyncMode, cipc::MemoryKind).
// Type names carry a "Cipc" prefix (common/enumtypes.h).
#pragma once

#include <glib-object.h>

#include "protocol.h"

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

GType gst_cipc_copy_policy_get_type(void);
GType gst_cipc_backpressure_get_type(void);
GType gst_cipc_sync_mode_get_type(void);    // cipc::SyncMode: gpu-events | cpu
GType gst_cipc_sink_memory_get_type(void);  // cipc::MemoryKind: host | cuda
