// SPDX-License-Identifier: LGPL-2.1-or-later
// "This frame's work is done" events, made once and used again: an event is free once everyone
// else let go of it (the release worker, after the frame's work completed). Creating and
// destroying one per frame costs two driver calls a frame, and a destroy on the wrong thread can
// wait on a driver lock (deferred_destruction.h).
#pragma once

#include <memory>
#include <vector>

#include "cuda_api.h"

namespace cipc_cuda {

class RecycledEvents {
 public:
  explicit RecycledEvents(int device) : device_(device) {}

  // An event nobody else holds (a new one when every event is still held); one thread at a time.
  Status next(std::shared_ptr<Event>* out);

  size_t size() const { return events_.size(); }

 private:
  int device_;
  std::vector<std::shared_ptr<Event>> events_;
};

}  // namespace cipc_cuda
