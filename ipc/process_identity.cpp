// SPDX-License-Identifier: LGPL-2.1-or-later
#include "process_identity.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <new>

namespace cipc {
namespace {

struct IdCache {
  std::atomic<pid_t> pid{0};  // 0: not known in this process yet
};

IdCache* make_cache() {
#ifdef MADV_WIPEONFORK
  const long page = ::sysconf(_SC_PAGESIZE);
  const size_t size = page > 0 ? size_t(page) : 4096;
  void* mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return nullptr;
  if (::madvise(mem, size, MADV_WIPEONFORK) == 0) return new (mem) IdCache;
  ::munmap(mem, size);
#endif
  return nullptr;
}

}  // namespace

pid_t this_process_id() {
  // Made once and kept for the life of the process (a child inherits the mapping, wiped).
  static IdCache* const cache = make_cache();
  if (!cache) return ::getpid();
  pid_t pid = cache->pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = ::getpid();
    cache->pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

}  // namespace cipc
