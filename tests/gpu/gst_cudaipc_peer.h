// SPDX-License-Identifier: LGPL-2.1-or-later
// GStreamer's own cudaipcsink and cudaipcsrc (gst-plugins-bad 1.24 and later), driven by the
// benchmark harness exactly where it drives cudasink-ipc and cudasrc-ipc, so that
// docs/performance.md has the strongest peer's rows measured in the same run by the same code
// (tests/bench/run-all runs them with the 1.28 runtime). The harness may be built against an
// older GStreamer (1.22): what came later is looked up at run time.
//
// The producer writes each frame on the GPU into the CUDA pool cudaipcsink proposes, as an
// nvcodec element upstream would: on the memory's own stream (1.24 and later), inside the
// memory's CUDA context (GStreamer makes one of its own per element, not the primary one).
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <cstdint>
#include <string>

namespace cipc_bench {

// cudaipcsink carries no buffer offset, only timestamps it converts and custom metas it
// serializes (1.24 and later): frame numbers cross as a custom meta. Both processes register it.
void register_frame_meta();
void tag_frame(GstBuffer* buffer, uint64_t index);
// The number tag_frame() gave the frame; false when it has none.
bool frame_tag(GstBuffer* buffer, uint64_t* index);

// Connections accepted on the listening Unix socket bound to `path` (counted in
// /proc/net/unix: an accepted socket carries its listener's path): cudaipcsink has no consumer
// count of its own.
int accepted_connections(const std::string& path);

// Runs GPU work of the calling thread inside GstCudaMemory `mem`'s own CUDA context, on the
// stream the memory is ordered on (nullptr: that context's default stream, where the runtime
// has no GstCudaStream, before 1.24).
class MemoryContextScope {
 public:
  explicit MemoryContextScope(GstMemory* mem);
  ~MemoryContextScope();
  MemoryContextScope(const MemoryContextScope&) = delete;
  MemoryContextScope& operator=(const MemoryContextScope&) = delete;
  bool entered() const { return entered_; }
  void* stream() const { return stream_; }

 private:
  bool entered_ = false;
  void* stream_ = nullptr;
};

// appsrc ! cudaipcsink address=<socket>, and the sink's proposed pool of `slots` CUDA buffers.
class PeerIpcSink {
 public:
  PeerIpcSink() = default;
  ~PeerIpcSink();
  PeerIpcSink(const PeerIpcSink&) = delete;
  PeerIpcSink& operator=(const PeerIpcSink&) = delete;

  // False with `error` (the pipeline's own error where it gave one).
  bool start(const std::string& socket, const GstVideoInfo& info, unsigned slots, int device,
             std::string* error);
  GstBuffer* acquire();
  bool push(GstBuffer* buffer, std::string* error);
  // EOS, then up to 5 s for every frame pushed to reach the sink.
  void finish();
  int consumers() const { return accepted_connections(socket_); }

 private:
  std::string socket_;
  GstElement* pipeline_ = nullptr;
  GstElement* appsrc_ = nullptr;
  GstBufferPool* pool_ = nullptr;
};

}  // namespace cipc_bench
