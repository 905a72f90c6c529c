// SPDX-License-Identifier: LGPL-2.1-or-later
#include "release_worker.h"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

#include <pthread.h>

#include "deferred_destruction.h"

namespace cipc_slots {
namespace {

void warn_to_stderr(const std::string& message) {
  std::fprintf(stderr, "cudaipc: %s\n", message.c_str());
}

std::atomic<WarningHandler> warning_handler{warn_to_stderr};

// One thread per process waits for recorded GPU work and then drops what it kept alive.
class ReleaseWorker {
 public:
  static ReleaseWorker& get() {
    // Never destroyed: it must outlive every frame, including at process exit.
    static ReleaseWorker* worker = new ReleaseWorker();
    return *worker;
  }
  void push(std::function<cipc_cuda::Status()> wait, std::shared_ptr<void> keepalive) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back({std::move(wait), std::move(keepalive)});
    }
    cv_.notify_one();
  }

 private:
  struct Item {
    std::function<cipc_cuda::Status()> wait;  // what it waits on lives while `keepalive` does
    std::shared_ptr<void> keepalive;
  };
  ReleaseWorker() {
    std::thread([this] { run(); }).detach();
  }
  void run() {
    // Named so that per-thread figures (top -H, /proc/<pid>/task) say whose wake-ups these are.
    pthread_setname_np(pthread_self(), "cipc-release");
    // What this thread drops may be the last owner of CUDA objects (an imported slot after its
    // reader closed or retired it, a per-frame event): they are parked and destroyed by the next
    // call on an application thread, never here while the application launches
    // (deferred_destruction.h says why).
    cipc_cuda::DeferDestructionOnThisThread defer;
    for (;;) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return !queue_.empty(); });
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      const cipc_cuda::Status s = item.wait();
      if (!s) warn("waiting for a frame's last GPU read failed: " + s.message());
      item.keepalive.reset();  // RELEASE goes out here
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
};

}  // namespace

void drop_after(std::function<cipc_cuda::Status()> wait, std::shared_ptr<void> keepalive) {
  cipc_cuda::destroy_parked();  // an application thread: what the worker parked goes here
  ReleaseWorker::get().push(std::move(wait), std::move(keepalive));
}

void drop_when_done(std::shared_ptr<cipc_cuda::Event> done, std::shared_ptr<void> keepalive) {
  cipc_cuda::destroy_parked();
  ReleaseWorker::get().push([done] { return done->synchronize(); }, std::move(keepalive));
}

void set_warning_handler(WarningHandler handler) {
  warning_handler = handler ? handler : warn_to_stderr;
}

void warn(const std::string& message) {
  warning_handler.load()(message);
}

}  // namespace cipc_slots
