// SPDX-License-Identifier: LGPL-2.1-or-later
// CUDA objects whose destructors run on a thread that must not destroy them are parked, and
// destroyed later by a thread that may.
//
// Why: on driver 580 (H100, 2026-12-07) a PyTorch reader hung for good when the release worker
// (slots/release_worker.h) destroyed an imported slot's event (cudaEventDestroy, waiting for a
// driver-internal write lock) while the application's thread was inside cuLaunchKernel (torch.
// stack, holding that lock for reading and waiting for it again behind the queued writer): 3 of
// 3 runs at 4K. A background thread of ours destroying CUDA objects at moments the application
// cannot see races with whatever the application launches; the application's own threads do
// not race with themselves. So the release worker parks, and the next call of ours on an
// application thread (a frame released, a slot imported or made, a reader or writer closed)
// destroys what is parked.
#pragma once

#include <cstddef>
#include <functional>

namespace cipc_cuda {

// While one lives, the CUDA objects destroyed on this thread are parked instead (scopes nest).
class DeferDestructionOnThisThread {
 public:
  DeferDestructionOnThisThread();
  ~DeferDestructionOnThisThread();
  DeferDestructionOnThisThread(const DeferDestructionOnThisThread&) = delete;
  DeferDestructionOnThisThread& operator=(const DeferDestructionOnThisThread&) = delete;
};

// On a deferring thread: keeps `destroy` for destroy_parked() and returns true. Elsewhere:
// returns false and the caller destroys at once. `destroy` must not throw.
bool park_if_deferred(std::function<void()> destroy) noexcept;

// What every CUDA RAII destructor calls: parks `destroy` on a deferring thread, runs it at once
// elsewhere (or where it could not be parked).
void destroy_or_park(const std::function<void()>& destroy) noexcept;

// Runs everything parked so far (oldest first) and returns how many; on a deferring thread it
// runs nothing and returns 0. Any thread, any time; cheap when nothing is parked.
size_t destroy_parked();

// How many destructions wait (tests, diagnostics).
size_t parked_count();

}  // namespace cipc_cuda
