// SPDX-License-Identifier: LGPL-2.1-or-later
#include "deferred_destruction.h"

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

namespace cipc_cuda {
namespace {

thread_local int defer_depth = 0;

struct Parked {
  std::mutex mutex;
  std::vector<std::function<void()>> destroys;
  std::atomic<size_t> count{0};  // read without the lock: the common case is none
};

Parked& parked() {
  // Never destroyed: objects may be parked until the process exits.
  static Parked* p = new Parked();
  return *p;
}

}  // namespace

DeferDestructionOnThisThread::DeferDestructionOnThisThread() {
  ++defer_depth;
}

DeferDestructionOnThisThread::~DeferDestructionOnThisThread() {
  --defer_depth;
}

bool park_if_deferred(std::function<void()> destroy) noexcept {
  if (defer_depth == 0) return false;
  Parked& p = parked();
  try {
    std::lock_guard<std::mutex> lock(p.mutex);
    p.destroys.push_back(std::move(destroy));
    p.count.store(p.destroys.size(), std::memory_order_release);
  } catch (...) {
    return false;  // no memory to park it: destroyed at once after all, not leaked
  }
  return true;
}

void destroy_or_park(const std::function<void()>& destroy) noexcept {
  if (!park_if_deferred(destroy)) destroy();
}

size_t destroy_parked() {
  if (defer_depth != 0) return 0;
  Parked& p = parked();
  if (p.count.load(std::memory_order_acquire) == 0) return 0;
  std::vector<std::function<void()>> due;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    due.swap(p.destroys);
    p.count.store(0, std::memory_order_release);
  }
  for (auto& destroy : due) destroy();  // outside the lock: a destroy may take its time
  return due.size();
}

size_t parked_count() {
  return parked().count.load(std::memory_order_acquire);
}

}  // namespace cipc_cuda
