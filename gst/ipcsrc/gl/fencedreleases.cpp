// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ipcsrc/gl/fencedreleases.h"

#include <utility>

namespace cipc_gst {

FencedReleases::FencedReleases(FenceOps ops, size_t max_pending)
    : ops_(std::move(ops)), max_pending_(max_pending > 0 ? max_pending : 1) {}

FencedReleases::~FencedReleases() {
  drain();
}

void FencedReleases::drop_front() {
  Entry entry = std::move(pending_.front());
  pending_.pop_front();
  if (entry.fence) ops_.destroy(entry.fence);
  entry.keepalive.reset();  // RELEASE goes out here
}

void FencedReleases::add(Fence fence, std::shared_ptr<void> keepalive) {
  pending_.push_back(Entry{fence, std::move(keepalive)});
  while (pending_.size() > max_pending_) {
    if (pending_.front().fence) ops_.wait(pending_.front().fence);
    drop_front();
  }
}

void FencedReleases::reap(uint64_t wait_ns) {
  while (!pending_.empty()) {
    Fence fence = pending_.front().fence;
    if (fence && !ops_.signalled(fence, wait_ns)) return;
    drop_front();
  }
}

void FencedReleases::drain() {
  while (!pending_.empty()) {
    if (pending_.front().fence) ops_.wait(pending_.front().fence);
    drop_front();
  }
}

}  // namespace cipc_gst
