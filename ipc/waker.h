// SPDX-License-Identifier: LGPL-2.1-or-later
// An eventfd that ends poll() waits from another thread (unlock, stop).
#pragma once

#include "status.h"
#include "unique_fd.h"

namespace cipc {

class Waker {
 public:
  Waker();
  bool valid() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  void wake();  // level-triggered: stays readable until clear()
  void clear();
  bool is_set() const;

 private:
  UniqueFd fd_;
};

// CLOCK_MONOTONIC in nanoseconds: the time base both processes agree on.
uint64_t monotonic_ns();

}  // namespace cipc
