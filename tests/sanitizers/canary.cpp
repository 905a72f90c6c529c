// SPDX-License-Identifier: LGPL-2.1-or-later
// Planted bugs that scripts/run-sanitizers must see reported, so that a green sanitizer run
// means "nothing found" and not "nothing was watching": the options, the suppression files and
// the build flags are exercised exactly as the real test runs use them.
//
//   sanitizer-canary clean           no bug: must exit 0 (the options alone do not fail runs)
//   sanitizer-canary heap-overflow   ASan: heap-buffer-overflow
//   sanitizer-canary leak            LSan: a leak in our code through g_malloc (GLib's
//                                    allocator is in the stack, as in GLib's intentional leaks,
//                                    yet lsan.supp must not hide it)
//   sanitizer-canary undefined       UBSan: signed integer overflow
//   sanitizer-canary race            TSan: two threads write one int without a lock
#include <glib.h>
#include <stdio.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

volatile int g_index = 16;
volatile int g_sink = 0;
volatile int g_racy = 0;  // volatile: each write stays a write (no loop folded into one add)
void* volatile g_escape = nullptr;

int heap_overflow() {
  char* p = static_cast<char*>(std::malloc(16));
  std::memset(p, 0, 16);
  g_sink = p[g_index];  // one past the end
  std::free(p);
  return 0;
}

int leak() {
  g_escape = g_malloc(4096);
  g_escape = nullptr;  // the only pointer is gone
  return 0;
}

int undefined() {
  volatile int big = INT_MAX;
  g_sink = big + g_index;  // signed overflow
  return 0;
}

int race() {
  // Both threads write while the other one runs: on a loaded machine one thread could otherwise
  // finish before the other starts, and TSan (whose history of a finished thread is limited) once
  // let that pass unreported in CI. The rendezvous uses relaxed atomics, which TSan does not count
  // as synchronisation, so the writes stay unordered.
  static std::atomic<int> arrived{0};
  auto writer = [] {
    arrived.fetch_add(1, std::memory_order_relaxed);
    while (arrived.load(std::memory_order_relaxed) < 2) {
    }
    for (int i = 0; i < 100000; ++i) g_racy = g_racy + 1;
  };
  std::thread a(writer);
  std::thread b(writer);
  a.join();
  b.join();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s clean|heap-overflow|leak|undefined|race\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "clean") return 0;
  if (mode == "heap-overflow") return heap_overflow();
  if (mode == "leak") return leak();
  if (mode == "undefined") return undefined();
  if (mode == "race") return race();
  fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
