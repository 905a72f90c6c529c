// SPDX-License-Identifier: LGPL-2.1-or-later
#include "waker.h"

#include "process_identity.h"

#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>

namespace cipc {

Waker::Waker() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)), owner_(this_process_id()) {}

void Waker::wake() {
  if (this_process_id() != owner_) return;  // a child made by fork(): the eventfd is the parent's
  std::lock_guard<std::mutex> lock(mutex_);
  if (set_.load(std::memory_order_relaxed)) return;  // already readable
  const uint64_t one = 1;
  ssize_t r = ::write(fd_.get(), &one, sizeof(one));
  (void)r;  // cannot fail short of a closed descriptor: the counter is 0 or 1
  set_.store(true, std::memory_order_release);
}

void Waker::clear() {
  if (this_process_id() != owner_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!set_.load(std::memory_order_relaxed)) return;
  uint64_t v;
  ssize_t r = ::read(fd_.get(), &v, sizeof(v));
  (void)r;
  set_.store(false, std::memory_order_release);
}

uint64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace cipc
