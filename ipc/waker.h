// SPDX-License-Identifier: LGPL-2.1-or-later
// An eventfd that ends poll() waits from another thread (unlock, stop).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <mutex>

#include "status.h"
#include "unique_fd.h"

namespace cipc {

// Belongs to the process that made it: after fork(), wake() and clear() in the child do nothing
// (the eventfd is shared, and a child's wake would end the parent's waits, or leave the parent's
// flag and its eventfd out of step so that its poll() returns at once forever).
class Waker {
 public:
  Waker();
  bool valid() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  void wake();  // level-triggered: stays readable until clear()
  void clear();
  // No system call: a flag kept in step with the eventfd (checked once per message received).
  bool is_set() const { return set_.load(std::memory_order_acquire); }

 private:
  UniqueFd fd_;
  std::mutex mutex_;  // wake() and clear() change the flag and the eventfd together
  std::atomic<bool> set_{false};
  const pid_t owner_;
};

// CLOCK_MONOTONIC in nanoseconds: the time base both processes agree on.
uint64_t monotonic_ns();

}  // namespace cipc
