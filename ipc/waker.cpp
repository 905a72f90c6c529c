// SPDX-License-Identifier: LGPL-2.1-or-later
#include "waker.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <time.h>

#include <cstdint>

namespace cipc {

Waker::Waker() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

void Waker::wake() {
  const uint64_t one = 1;
  ssize_t r = ::write(fd_.get(), &one, sizeof(one));
  (void)r;  // EAGAIN means the counter is already saturated, i.e. already awake
}

void Waker::clear() {
  uint64_t v;
  ssize_t r = ::read(fd_.get(), &v, sizeof(v));
  (void)r;  // EAGAIN: it was not set
}

bool Waker::is_set() const {
  pollfd p{fd_.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

uint64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace cipc
