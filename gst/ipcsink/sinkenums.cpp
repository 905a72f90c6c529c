// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ipcsink/sinkenums.h"

#include "common/enumtypes.h"

GType gst_cipc_copy_policy_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {GST_CIPC_COPY_IF_NEEDED,
         "Copy buffers that are not in shareable memory into a slot (counted in stats)",
         "copy-if-needed"},
        {GST_CIPC_REQUIRE_ZERO_COPY,
         "Fail with an error when upstream does not write into the shareable pool",
         "require-zero-copy"},
        {0, nullptr, nullptr}};
    return cipc_gst::register_enum("GstCipcCopyPolicy", values);
  }();
  return type;
}

GType gst_cipc_backpressure_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {GST_CIPC_BACKPRESSURE_AUTO,
         "block when upstream is not live (every frame reaches every consumer), drop when it is "
         "live (a slow consumer never slows the camera or the others)",
         "auto"},
        {GST_CIPC_BACKPRESSURE_BLOCK,
         "wait until every consumer can take the frame; a consumer that stops releasing still "
         "leaves at release-timeout",
         "block"},
        {GST_CIPC_BACKPRESSURE_DROP, "skip a consumer that holds max-in-flight frames", "drop"},
        {0, nullptr, nullptr}};
    return cipc_gst::register_enum("GstCipcBackpressure", values);
  }();
  return type;
}

GType gst_cipc_sync_mode_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {cipc_gst::enum_value_of(cipc::SyncMode::kGpuEvents),
         "Interprocess CUDA events waited on by the GPU: no CPU stalls", "gpu-events"},
        {cipc_gst::enum_value_of(cipc::SyncMode::kCpu),
         "Synchronise streams on the CPU (for platforms without interprocess events)", "cpu"},
        {0, nullptr, nullptr}};
    return cipc_gst::register_enum("GstCipcSyncMode", values);
  }();
  return type;
}

GType gst_cipc_sink_memory_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {cipc_gst::enum_value_of(cipc::MemoryKind::kHost),
         "Shared host memory (memfd); works without a GPU", "host"},
        {cipc_gst::enum_value_of(cipc::MemoryKind::kCuda),
         "CUDA device memory (VMM, exported as file descriptors)", "cuda"},
        {0, nullptr, nullptr}};
    return cipc_gst::register_enum("GstCipcSinkMemory", values);
  }();
  return type;
}
