// SPDX-License-Identifier: LGPL-2.1-or-later
// The one background thread per process that waits for GPU work to complete and only then drops
// what that work still needed: a frame's claim (dropping it sends RELEASE) or an input buffer a
// kernel reads in place. No thread of the application or the pipeline waits for the GPU.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cuda_api.h"

namespace cipc_slots {

// Queues `wait` (which must stay valid while `keepalive` lives) and drops `keepalive` on the
// worker thread once it has returned. A failed wait is reported to the warning handler and the
// keepalive dropped all the same (the frame is not leaked).
void drop_after(std::function<cipc_cuda::Status()> wait, std::shared_ptr<void> keepalive);

// Keeps `keepalive` until `done` has completed, then drops it on the worker thread.
void drop_when_done(std::shared_ptr<cipc_cuda::Event> done, std::shared_ptr<void> keepalive);

// Where the slots layer reports problems that have no caller to return them to (the plugin
// routes them into its GStreamer debug category). Default: standard error. Set once, early.
using WarningHandler = void (*)(const std::string& message);
void set_warning_handler(WarningHandler handler);
void warn(const std::string& message);

}  // namespace cipc_slots
