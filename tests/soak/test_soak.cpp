// SPDX-License-Identifier: LGPL-2.1-or-later
// Soak test, real processes (tests/e2e's cudaipc-e2e-peer around the built plugin), in host memory
// (default; CI) or in CUDA memory (CIPC_SOAK_MEMORY=cuda; needs a GPU).
//
// CUDA mode on a GPU machine: run the binary directly (meson test would use the absolute paths
// recorded at configure time), <build> being the meson build folder, as one command line:
//   CUDAIPC_PEER=<build>/tests/e2e/cudaipc-e2e-peer GST_PLUGIN_PATH=<build>/gst
//   CIPC_SOAK_MEMORY=cuda CIPC_SOAK_MAX_SECONDS=150
//   <build>/tests/soak/test-soak --gtest_filter='Soak.Consumers*'
// It skips, saying why, when nvidia-smi is missing or the producer finds no usable CUDA device.
// The SOAK RESULT lines at the end are the summary for docs/reliability.md.
//
// One producer streams while consumers, in several lanes at once, are started over and over and
// each life ends in a fault chosen at random - SIGKILL after a few frames or at once (during the
// handshake), SIGSTOP for longer than the producer's release-timeout and then SIGCONT (the
// producer must disconnect it and retire its slots; the consumer must come back), or a clean
// stop. Every so often the producer itself is SIGKILLed mid-stream and restarted; the consumers
// (reconnect=true) must follow it.
//
// Checked throughout:
//  - every frame any consumer received is bit-exact: its checksum (CRC-32 of the visible pixels,
//    keyed by frame number) is one the producer recorded before sending;
//  - no consumer ever saw a frame it held change under it (peer --hold-ms: the producer never
//    rewrites a slot a consumer may still read, even after disconnecting it);
//  - at each checkpoint (all consumers gone) the producer reports zero consumers and zero
//    outstanding claims; its open descriptors (/proc/<pid>/fd) other than slot memfds are exactly
//    as many as at its first checkpoint, and its slot memfds no more than the pool holds: no
//    socket, descriptor or slot leaks;
//  - no peer logs an error, a GLib critical or warning, and no producer dies by itself.
//
// In CUDA memory the sink uploads each frame into exportable CUDA slots, and consumers take the
// slots themselves (a CPU map downloads the slot afresh, so the held-frame check above reads the
// slot again at release) or, one life in four, --system-memory (cudasrc-ipc downloads each frame
// and releases the slot at once; the held-frame check then proves nothing, see peer.cpp).
// Frames are checked against the producers' records as in host memory. At each checkpoint:
//  - zero consumers and zero claims, as in host memory;
//  - CUDA slot descriptors cannot be told from the driver's own, so the producer's total open
//    descriptors are checked: at most its first checkpoint's plus the most slots that can exist
//    at once (its slot count at that first checkpoint is unknown, anywhere from a few up to the
//    most; host runs see 2..7 with a pool of 6). A descriptor lost per consumer life or per
//    retired slot exceeds that within a checkpoint or two;
//  - the producer's GPU memory (nvidia-smi per process; where the producer is not listed, e.g.
//    in a container, the whole device's) stays within 64 MiB of the first checkpoint's (and, per
//    process, of each producer's own first checkpoint): slots retired under stalled consumers
//    are freed, not kept.
// Timeouts are longer in CUDA memory, and the release-timeout too: a consumer creates its CUDA
// context (100-300 ms) after WELCOME, while its first frames are already claimed.
//
// Environment (defaults suit CI: 2000 lives take about 3 minutes on 2 cores):
//   CIPC_SOAK_MEMORY        host (default) or cuda
//   CIPC_SOAK_CYCLES        consumer lives to run (default 2000)
//   CIPC_SOAK_MAX_SECONDS   stop starting new lives after this long (default 240)
//   CIPC_SOAK_LANES         consumers alive at once (default 3)
//   CIPC_SOAK_SEED          random seed (default: from the clock; printed, so that a run can
//                           be repeated)
//   CUDAIPC_PEER, GST_PLUGIN_PATH   the peer binary and the plugin folder (set by meson)
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "channel.h"
#include "nvidia_smi.h"
#include "process.h"
#include "protocol.h"

namespace {

using cipc_test::Clock;
using cipc_test::CommandResult;
using cipc_test::contains;
using cipc_test::Process;
using cipc_test::run_command;
using cipc_test::self_dir;
using cipc_test::starts_with;
using cipc_test::stat_of;
using cipc_test::stat_or_max;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kReleaseTimeoutMs = 300;
constexpr int kFps = 100;
constexpr int kPoolSize = 6;
constexpr int kConsumerMaxInFlight = 2;
constexpr int kCheckpointEvery = 60;     // consumer lives between checkpoints
constexpr int kProducerKillEvery = 250;  // consumer lives between producer kills (mid-stream)
constexpr auto kProgressTimeout = seconds(20);  // a live consumer must get a frame within this
constexpr int kEarlyKillWindowMs = 80;          // "SIGKILL while starting": this soon after start
// CUDA memory (see the header): the release-timeout, a factor for every wait, and an early-kill
// window that also covers the consumer's CUDA context creation and slot imports.
constexpr int kCudaReleaseTimeoutMs = 1000;
constexpr int kCudaTimeScale = 3;
constexpr int kCudaEarlyKillWindowMs = 400;
constexpr uint64_t kGpuMemoryToleranceMiB = 64;

long env_long(const char* name, long fallback) {
  const char* v = getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long n = strtol(v, &end, 10);
  return (end && *end == '\0') ? n : fallback;
}

// Open descriptors of a process: slot memory (memfds named by ipc/host_memory.cpp) apart from
// everything else (sockets, eventfds, pipes, files).
struct Descriptors {
  int slots = 0;
  int other = 0;
};

// What a process's descriptors point to, counted by kind ("socket 5, /dev/nvidiactl 12, ..."),
// for the CUDA-mode printouts: the driver's descriptors are not known in advance.
std::string descriptor_kinds(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd";
  std::map<std::string, int> kinds;
  DIR* d = ::opendir(path.c_str());
  if (!d) return "(unreadable)";
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char target[256] = {};
    const ssize_t n = ::readlink((path + "/" + e->d_name).c_str(), target, sizeof(target) - 1);
    std::string kind = n > 0 ? std::string(target, static_cast<size_t>(n)) : "?";
    const size_t inode = kind.find(":[");  // socket:[123], pipe:[456]: one kind each
    if (inode != std::string::npos && isdigit(static_cast<unsigned char>(kind[inode + 2])))
      kind.resize(inode);
    ++kinds[kind];
  }
  ::closedir(d);
  std::string out;
  for (const auto& [kind, n] : kinds)
    out += (out.empty() ? "" : ", ") + kind + " " + std::to_string(n);
  return out;
}

// Why the CUDA soak cannot run here ("" when nvidia-smi lists a GPU).
std::string gpu_unusable_reason() {
  const CommandResult r = run_command("nvidia-smi --query-gpu=name --format=csv,noheader");
  if (r.status != 0) {
    std::string text = r.text;
    while (!text.empty() && isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
    return "nvidia-smi is not usable (exit status " + std::to_string(r.status) + "): " + text;
  }
  if (r.text.find_first_not_of(" \n") == std::string::npos) return "nvidia-smi lists no GPU";
  return "";
}

// GPU memory (MiB) used by process `pid`, nullopt when nvidia-smi does not list it (a pid
// namespace of a container, no per-process accounting).
std::optional<uint64_t> gpu_memory_of_process(pid_t pid) {
  const CommandResult r =
      run_command("nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits");
  if (r.status != 0) return std::nullopt;
  std::istringstream in(r.text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    long listed = 0;
    char comma = 0;
    uint64_t used = 0;
    if (fields >> listed >> comma >> used && comma == ',' && listed == pid) return used;
  }
  return std::nullopt;
}

Descriptors descriptors_of(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd";
  Descriptors out;
  DIR* d = ::opendir(path.c_str());
  if (!d) return {-1, -1};
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char target[256] = {};
    const ssize_t n = ::readlink((path + "/" + e->d_name).c_str(), target, sizeof(target) - 1);
    if (n > 0 && starts_with(std::string(target, static_cast<size_t>(n)), "/memfd:cudaipc-slot"))
      ++out.slots;
    else
      ++out.other;
  }
  ::closedir(d);
  return out;
}

// (frame number, crc) pairs of a record file (peer.cpp --record: index pts duration offset crc).
// A line cut short by a SIGKILL has no newline and is not counted.
std::vector<std::pair<uint64_t, std::string>> read_record(const std::string& path) {
  std::vector<std::pair<uint64_t, std::string>> out;
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t start = 0;
  for (size_t nl; (nl = all.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::istringstream s(all.substr(start, nl - start));
    std::string index, pts, duration, offset, crc;
    if (!(s >> index >> pts >> duration >> offset >> crc) || offset == "none") continue;
    out.emplace_back(std::strtoull(offset.c_str(), nullptr, 10), crc);
  }
  return out;
}

enum class Fault { kKill, kEarlyKill, kStall, kCleanStop };
const char* fault_name(Fault f) {
  switch (f) {
    case Fault::kKill: return "SIGKILL after frames";
    case Fault::kEarlyKill: return "SIGKILL while starting";
    case Fault::kStall: return "SIGSTOP past release-timeout, SIGCONT";
    case Fault::kCleanStop: return "clean stop (SIGINT)";
  }
  return "?";
}

class Soak : public ::testing::Test {
 protected:
  struct Lane {
    enum class State { kIdle, kRunning, kStopped, kResumed, kExiting };
    State state = State::kIdle;
    std::unique_ptr<Process> consumer;
    Fault fault = Fault::kKill;
    size_t frames_wanted = 0;
    size_t frames_at_resume = 0;
    std::string exit_how;
    Clock::time_point started, deadline;
  };

  void SetUp() override {
    const char* peer = getenv("CUDAIPC_PEER");
    peer_ = peer && *peer ? peer : self_dir() + "/../e2e/cudaipc-e2e-peer";
    ASSERT_EQ(::access(peer_.c_str(), X_OK), 0) << "peer not found at " << peer_;
    const char* plugins = getenv("GST_PLUGIN_PATH");
    plugins_ = plugins && *plugins ? plugins : self_dir() + "/../../gst";
    const char* memory = getenv("CIPC_SOAK_MEMORY");
    const std::string mode = memory && *memory ? memory : "host";
    ASSERT_TRUE(mode == "host" || mode == "cuda")
        << "CIPC_SOAK_MEMORY must be host or cuda, not '" << mode << "'";
    cuda_ = mode == "cuda";
    if (cuda_) {
      release_timeout_ms_ = kCudaReleaseTimeoutMs;
      time_scale_ = kCudaTimeScale;
      early_kill_window_ms_ = kCudaEarlyKillWindowMs;
    }
    std::string dir = "/tmp/cudaipc-soak-XXXXXX";
    ASSERT_NE(::mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    socket_ = dir_ + "/soak.sock";
  }

  void TearDown() override {
    for (auto& lane : lanes_) lane.consumer.reset();
    producer_.reset();
    std::error_code ec;
    if (HasFailure() && !dir_.empty())
      std::cerr << "soak files kept in " << dir_ << "\n";
    else
      std::filesystem::remove_all(dir_, ec);
  }

  std::unique_ptr<Process> spawn(const std::string& name, const std::vector<std::string>& args) {
    std::vector<std::string> argv{peer_};
    argv.insert(argv.end(), args.begin(), args.end());
    auto p = std::make_unique<Process>(
        name, argv,
        std::map<std::string, std::string>{{"GST_REGISTRY", dir_ + "/registry.bin"},
                                           {"GST_PLUGIN_PATH", plugins_}});
    EXPECT_TRUE(p->started()) << name << ": " << p->start_error();
    return p;
  }

  // Problems a peer reported on stdout or stderr (a killed peer may be cut short: not one).
  void check_peer_output(const Process& p) {
    const std::string err = p.stderr_text();
    EXPECT_FALSE(contains(err, "CRITICAL **") || contains(err, "WARNING **"))
        << p.name() << " logged a GLib critical or warning\n"
        << p.transcript();
    EXPECT_TRUE(p.lines_with("ERROR").empty()) << p.transcript();
    EXPECT_TRUE(p.lines_with("CHANGED").empty())
        << p.name() << ": a frame changed while the consumer held it\n"
        << p.transcript();
  }

  void start_producer() {
    if (producer_) check_peer_output(*producer_);
    const std::string record =
        dir_ + "/producer-" + std::to_string(producer_records_.size()) + ".rec";
    producer_records_.push_back(record);
    std::vector<std::string> args{"produce",
                                  "--socket",
                                  socket_,
                                  "--fps",
                                  std::to_string(kFps),
                                  "--width",
                                  "160",
                                  "--height",
                                  "120",
                                  "--format",
                                  "I420",
                                  "--pattern",
                                  "snow",
                                  "--record",
                                  record,
                                  "--release-timeout",
                                  std::to_string(release_timeout_ms_),
                                  "--max-in-flight",
                                  "3",
                                  "--pool-size",
                                  std::to_string(kPoolSize),
                                  "--stats-every-ms",
                                  "50",
                                  "--stop-grace-ms",
                                  "3000"};
    if (cuda_) {
      args.push_back("--memory");
      args.push_back("cuda");
    }
    producer_ = spawn("producer-" + std::to_string(producer_records_.size()), args);
    const bool ready =
        producer_->wait_line("READY", scaled(cipc_test::kPeerStartTimeout)).has_value();
    // A GPU the sink cannot use, found at the first start, is a reason to skip, not a failure.
    if (!ready && cuda_ && producer_records_.size() == 1) {
      const std::optional<std::string> error = producer_->first("ERROR");
      if (error && (contains(*error, "No usable CUDA device") ||
                    contains(*error, "built without the CUDA toolkit"))) {
        skip_reason_ = "CIPC_SOAK_MEMORY=cuda: the producer cannot use CUDA memory: " + *error;
        return;
      }
    }
    ASSERT_TRUE(ready) << producer_->transcript();
    fd_baseline_.reset();
    gpu_producer_first_.reset();
  }

  void start_consumer(Lane& lane, int lane_index) {
    const double pick = std::uniform_real_distribution<double>(0, 1)(rng_);
    lane.fault = pick < 0.50   ? Fault::kKill
                 : pick < 0.65 ? Fault::kEarlyKill
                 : pick < 0.85 ? Fault::kStall
                               : Fault::kCleanStop;
    lane.frames_wanted = 1 + rng_() % 8;
    const std::string record =
        dir_ + "/consumer-" + std::to_string(consumer_records_.size()) + ".rec";
    consumer_records_.push_back(record);
    std::vector<std::string> args{"consume",
                                  "--socket",
                                  socket_,
                                  "--reconnect",
                                  "--record",
                                  record,
                                  "--max-in-flight",
                                  std::to_string(kConsumerMaxInFlight),
                                  "--connect-timeout",
                                  std::to_string(20000 * time_scale_),
                                  "--reconnect-interval",
                                  "20",
                                  "--timeout-s",
                                  std::to_string(120 * time_scale_)};
    // Stalled consumers hold frames, so that the retired slots are checked for rewrites; some
    // others hold frames for less than the release-timeout.
    if (lane.fault == Fault::kStall || rng_() % 3 == 0) {
      args.push_back("--hold-ms");
      args.push_back(std::to_string(lane.fault == Fault::kStall ? 150 : 10 + rng_() % 100));
    }
    // CUDA memory: some consumers take downloads (system memory) rather than the slots.
    const bool download = cuda_ && rng_() % 4 == 0;
    if (download) {
      args.push_back("--system-memory");
      ++download_lives_;
    }
    lane.consumer = spawn("consumer-" + std::to_string(consumer_records_.size()) + " (lane " +
                              std::to_string(lane_index) + ", " + fault_name(lane.fault) +
                              (download ? ", system memory" : "") + ")",
                          args);
    lane.state = Lane::State::kRunning;
    lane.started = Clock::now();
    lane.deadline = lane.started + (lane.fault == Fault::kEarlyKill
                                        ? milliseconds(rng_() % early_kill_window_ms_)
                                        : progress_timeout());
  }

  // Ends a consumer's life: reaps it, checks what it said and counts how the life ended.
  void finish(Lane& lane, bool expect_clean_exit, const std::string& how) {
    Process& c = *lane.consumer;
    const std::optional<int> code = c.wait_exit(scaled(seconds(20)));
    EXPECT_TRUE(code.has_value()) << c.name() << " did not exit\n" << c.transcript();
    if (expect_clean_exit) {
      EXPECT_EQ(code, std::optional<int>(0)) << c.transcript();
    }
    check_peer_output(c);
    frames_received_ += c.frames();
    ++lives_[how];
    ++cycles_done_;
    lane.consumer.reset();
    lane.state = Lane::State::kIdle;
  }

  void kill_now(Lane& lane, const std::string& how) {
    lane.consumer->signal(SIGKILL);
    finish(lane, false, how);
  }

  // One step of a lane's life; false when the lane failed (the test then stops).
  bool advance(Lane& lane) {
    if (lane.state == Lane::State::kIdle) return true;
    Process& c = *lane.consumer;
    const auto now = Clock::now();
    switch (lane.state) {
      case Lane::State::kRunning:
        if (lane.fault == Fault::kEarlyKill) {
          if (now >= lane.deadline) kill_now(lane, "SIGKILL while starting or connecting");
          return true;
        }
        if (c.frames() >= lane.frames_wanted) {
          if (lane.fault == Fault::kKill) {
            kill_now(lane, "SIGKILL while streaming");
          } else if (lane.fault == Fault::kCleanStop) {
            c.signal(SIGINT);
            lane.state = Lane::State::kExiting;
            lane.exit_how = "clean stop (SIGINT)";
            lane.deadline = now + scaled(seconds(20));
          } else {
            c.signal(SIGSTOP);
            lane.state = Lane::State::kStopped;
            lane.deadline = now + milliseconds(release_timeout_ms_ + 200 + rng_() % 300);
          }
          return true;
        }
        if (c.wait_exit(milliseconds(0))) {
          ADD_FAILURE() << c.name() << " exited by itself\n" << c.transcript();
          return false;
        }
        if (now >= lane.deadline) {
          ADD_FAILURE() << c.name() << " got " << c.frames() << " frame(s) in "
                        << std::chrono::duration_cast<seconds>(progress_timeout()).count() << " s\n"
                        << c.transcript() << producer_->transcript();
          return false;
        }
        return true;
      case Lane::State::kStopped:
        if (now >= lane.deadline) {
          c.signal(SIGCONT);
          lane.frames_at_resume = c.frames();
          lane.state = Lane::State::kResumed;
          lane.deadline = now + progress_timeout();
        }
        return true;
      case Lane::State::kResumed:
        // Back: it read what was queued, learnt it had been disconnected, reconnected and
        // streams again. Then it ends, half the time cleanly.
        if (c.frames() > lane.frames_at_resume + 2) {
          if (rng_() % 2) {
            kill_now(lane, "SIGSTOP past release-timeout, SIGCONT, streams again, SIGKILL");
          } else {
            c.signal(SIGINT);
            lane.state = Lane::State::kExiting;
            lane.exit_how = "SIGSTOP past release-timeout, SIGCONT, streams again, clean stop";
            lane.deadline = now + scaled(seconds(20));
          }
        } else if (now >= lane.deadline) {
          ADD_FAILURE() << c.name() << " did not stream again after SIGCONT\n"
                        << c.transcript() << producer_->transcript();
          return false;
        }
        return true;
      case Lane::State::kExiting:
        if (c.wait_exit(milliseconds(0))) {
          finish(lane, true, lane.exit_how);
        } else if (now >= lane.deadline) {
          ADD_FAILURE() << c.name() << " did not stop on SIGINT\n" << c.transcript();
          return false;
        }
        return true;
      case Lane::State::kIdle: return true;
    }
    return true;
  }

  // All consumers gone (SIGKILL): the producer must report no consumer and no claim, and keep
  // as many descriptors open as at its first checkpoint.
  void checkpoint() {
    for (auto& lane : lanes_)
      if (lane.state != Lane::State::kIdle) {
        lane.consumer->signal(SIGCONT);  // a stopped process dies of SIGKILL all the same
        kill_now(lane, "SIGKILL at a checkpoint (any state)");
      }
    const size_t from = producer_->line_count();
    const bool quiet =
        producer_
            ->wait_line_after(
                from, "STATS-TICK",
                [](const std::string& l) {
                  return stat_of(l, "consumers") == 0u && stat_of(l, "claims-outstanding") == 0u;
                },
                scaled(seconds(10)))
            .has_value();
    ASSERT_TRUE(quiet) << "consumers or claims outstanding with every consumer gone:\n"
                       << producer_->last("STATS-TICK").value_or("(no stats)");
    const Descriptors fds = descriptors_of(producer_->pid());
    ASSERT_GT(fds.other, 0);
    if (cuda_) {
      cuda_checkpoint(fds.slots + fds.other);
      ++checkpoints_;
      return;
    }
    if (!fd_baseline_) fd_baseline_ = fds.other;
    fd_samples_.push_back({fds.slots, fds.other});
    // Everything but slots must not change at all. Slots come and go: the pool starts with
    // pool-size, adds slots while consumers hold many frames and keeps them, and frees a retired
    // slot (replacing it when needed). So their number may grow up to the most ever in use at
    // once - pool-size, plus what all lanes may hold, plus what the source and the sink hold -
    // and never beyond: more would be slots lost with the consumers that held them.
    EXPECT_EQ(fds.other, *fd_baseline_)
        << "producer descriptors other than slots at checkpoint " << fd_samples_.size()
        << " differ from its first checkpoint";
    EXPECT_LE(fds.slots, most_slots_in_use())
        << "more slot memfds than could ever be in use at once";
    ++checkpoints_;
  }

  // The most slots a producer can have at once: pool-size, plus what all lanes may hold, plus what
  // the source and the sink hold.
  int most_slots_in_use() const {
    return kPoolSize + static_cast<int>(lanes_.size()) * kConsumerMaxInFlight + 2;
  }

  Clock::duration scaled(Clock::duration d) const { return d * time_scale_; }
  Clock::duration progress_timeout() const {
    return scaled(std::chrono::duration_cast<Clock::duration>(kProgressTimeout));
  }

  // CUDA memory, at a checkpoint: the producer's total descriptors and GPU memory (see header).
  void cuda_checkpoint(int descriptors) {
    const pid_t pid = producer_->pid();
    const bool first = !fd_baseline_;
    if (first) fd_baseline_ = descriptors;
    fd_totals_.push_back(descriptors);
    EXPECT_LE(descriptors, *fd_baseline_ + most_slots_in_use())
        << "producer descriptors at checkpoint " << checkpoints_ + 1 << " exceed its first "
        << "checkpoint's (" << *fd_baseline_ << ") by more than the slots that can exist at once ("
        << most_slots_in_use() << "): " << descriptor_kinds(pid);

    // Per process where the producer is listed at the first checkpoint, else the whole device;
    // the same source for the whole run.
    std::optional<uint64_t> used;
    if (!gpu_per_process_) {
      used = gpu_memory_of_process(pid);
      gpu_per_process_ = used.has_value();
      if (!used) used = cipc_test::gpu_memory_used_mib(milliseconds(200));
    } else {
      used = *gpu_per_process_ ? gpu_memory_of_process(pid)
                               : cipc_test::gpu_memory_used_mib(milliseconds(200));
    }
    const char* source = *gpu_per_process_ ? "producer process" : "whole device";
    std::cout << "soak: checkpoint " << checkpoints_ + 1 << ": producer pid " << pid << ", "
              << descriptors << " descriptors (its first checkpoint " << *fd_baseline_
              << "), GPU memory "
              << (used ? std::to_string(*used) + " MiB" : std::string("unreadable")) << " ("
              << source << ")" << std::endl;
    if (first) std::cout << "soak:   descriptors: " << descriptor_kinds(pid) << std::endl;
    if (!used) {
      ADD_FAILURE() << "GPU memory (" << source << ") could not be read with nvidia-smi:\n"
                    << run_command("nvidia-smi").text;
      return;
    }
    gpu_samples_.push_back(*used);
    if (!gpu_first_) gpu_first_ = *used;
    EXPECT_LE(*used, *gpu_first_ + kGpuMemoryToleranceMiB)
        << "GPU memory (" << source << ") grew from " << *gpu_first_ << " MiB at the first "
        << "checkpoint to " << *used << " MiB";
    if (*gpu_per_process_) {
      if (!gpu_producer_first_) gpu_producer_first_ = *used;
      EXPECT_LE(*used, *gpu_producer_first_ + kGpuMemoryToleranceMiB)
          << "producer pid " << pid << " GPU memory grew from " << *gpu_producer_first_
          << " MiB at its first checkpoint to " << *used << " MiB";
    }
  }

  std::string peer_, plugins_, dir_, socket_;
  std::unique_ptr<Process> producer_;
  std::vector<Lane> lanes_;
  std::vector<std::string> producer_records_, consumer_records_;
  std::mt19937 rng_;
  std::map<std::string, size_t> lives_;  // how consumer lives ended
  size_t cycles_done_ = 0, frames_received_ = 0, checkpoints_ = 0;
  std::optional<int> fd_baseline_;
  std::vector<std::pair<int, int>> fd_samples_;  // (slot memfds, other descriptors) per checkpoint
  // CIPC_SOAK_MEMORY=cuda: longer waits and release-timeout (see the header).
  bool cuda_ = false;
  int release_timeout_ms_ = kReleaseTimeoutMs;
  int time_scale_ = 1;
  int early_kill_window_ms_ = kEarlyKillWindowMs;
  std::string skip_reason_;              // set by the first start_producer() when CUDA is unusable
  size_t download_lives_ = 0;            // consumers with --system-memory
  std::vector<int> fd_totals_;           // the producer's descriptors per checkpoint
  std::optional<bool> gpu_per_process_;  // GPU memory source, fixed at the first checkpoint
  std::optional<uint64_t> gpu_first_, gpu_producer_first_;
  std::vector<uint64_t> gpu_samples_;  // MiB per checkpoint
};

TEST_F(Soak, ConsumersAndProducerKilledStalledAndRestartedWhileStreaming) {
  const long cycles = env_long("CIPC_SOAK_CYCLES", 2000);
  const long max_seconds = env_long("CIPC_SOAK_MAX_SECONDS", 240);
  const long lanes = std::max(1L, env_long("CIPC_SOAK_LANES", 3));
  const long seed = env_long("CIPC_SOAK_SEED", static_cast<long>(time(nullptr)));
  rng_.seed(static_cast<uint32_t>(seed));
  std::cout << "soak: " << cycles << " consumer lives, " << lanes << " lanes, seed " << seed
            << " (CIPC_SOAK_SEED=" << seed << " repeats this schedule)" << std::endl;
  RecordProperty("seed", std::to_string(seed));
  if (cuda_) {
    const std::string why = gpu_unusable_reason();
    if (!why.empty()) GTEST_SKIP() << "CIPC_SOAK_MEMORY=cuda needs a GPU: " << why;
    std::cout << "soak: CUDA memory: release-timeout " << release_timeout_ms_ << " ms, waits x"
              << time_scale_ << ", GPU memory tolerance " << kGpuMemoryToleranceMiB << " MiB"
              << std::endl;
  }

  ASSERT_NO_FATAL_FAILURE(start_producer());
  if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  lanes_.resize(static_cast<size_t>(lanes));
  const auto start = Clock::now();
  const auto end = start + seconds(max_seconds);
  long started = 0;
  size_t producer_kills = 0;
  long next_checkpoint = kCheckpointEvery, next_producer_kill = kProducerKillEvery / 2;
  bool capped = false;

  while (true) {
    if (Clock::now() >= end && !capped) {
      capped = true;
      std::cout << "soak: time cap of " << max_seconds << " s reached after " << started
                << " consumer lives" << std::endl;
    }
    const bool starting = started < cycles && !capped;
    if (static_cast<long>(cycles_done_) >= next_checkpoint) {
      ASSERT_NO_FATAL_FAILURE(checkpoint());
      next_checkpoint += kCheckpointEvery;
    }
    if (starting && started >= next_producer_kill) {
      // Mid-stream: consumers are running, stalled or starting right now.
      producer_->signal(SIGKILL);
      EXPECT_TRUE(producer_->wait_exit(scaled(seconds(20))).has_value());
      ASSERT_NO_FATAL_FAILURE(start_producer());
      ++producer_kills;
      next_producer_kill += kProducerKillEvery;
    }
    ASSERT_FALSE(producer_->wait_exit(milliseconds(0)).has_value())
        << "the producer died by itself\n"
        << producer_->transcript();
    bool all_idle = true;
    for (size_t i = 0; i < lanes_.size(); ++i) {
      Lane& lane = lanes_[i];
      if (lane.state == Lane::State::kIdle && starting && started < cycles) {
        start_consumer(lane, static_cast<int>(i));
        ++started;
      }
      ASSERT_TRUE(advance(lane));
      all_idle = all_idle && lane.state == Lane::State::kIdle;
    }
    if (HasFailure()) return;
    if (!starting && all_idle) break;
    std::this_thread::sleep_for(milliseconds(2));
  }
  ASSERT_NO_FATAL_FAILURE(checkpoint());
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  // The producer stops cleanly at the end: EOS, final stats.
  producer_->signal(SIGINT);
  EXPECT_EQ(producer_->wait_exit(scaled(seconds(20))), std::optional<int>(0))
      << producer_->transcript();
  check_peer_output(*producer_);
  const std::string final_stats = producer_->last("STATS ").value_or("");

  // Every frame a consumer recorded is one a producer recorded, bit for bit.
  std::set<std::pair<uint64_t, std::string>> sent;
  for (const auto& path : producer_records_)
    for (const auto& r : read_record(path)) sent.insert(r);
  size_t checked = 0, wrong = 0;
  std::string first_wrong;
  for (const auto& path : consumer_records_)
    for (const auto& r : read_record(path)) {
      ++checked;
      if (!sent.count(r)) {
        if (first_wrong.empty())
          first_wrong = path + ": frame " + std::to_string(r.first) + " crc " + r.second;
        ++wrong;
      }
    }
  EXPECT_EQ(wrong, 0u) << wrong << " of " << checked << " received frames match nothing the "
                       << "producers sent; first: " << first_wrong;
  EXPECT_GT(checked, static_cast<size_t>(cycles_done_)) << "too few frames to prove anything";

  int slots_min = INT32_MAX, slots_max = 0, other_min = INT32_MAX, other_max = 0;
  for (const auto& [slots, other] : fd_samples_) {
    slots_min = std::min(slots_min, slots);
    slots_max = std::max(slots_max, slots);
    other_min = std::min(other_min, other);
    other_max = std::max(other_max, other);
  }
  std::cout << "SOAK RESULT: " << cycles_done_ << " consumer lives in " << static_cast<int>(elapsed)
            << " s (" << lanes << " lanes, seed " << seed << (cuda_ ? ", CUDA memory" : "")
            << ")\n";
  for (const auto& [how, n] : lives_) std::cout << "SOAK RESULT:   " << how << ": " << n << "\n";
  std::cout << "SOAK RESULT: producer SIGKILLed mid-stream and restarted " << producer_kills
            << " times; " << checkpoints_ << " checkpoints with zero consumers and zero claims\n"
            << "SOAK RESULT: frames checked bit-exact: " << checked << " (consumers reported "
            << frames_received_ << ")\n";
  if (!cuda_) {
    std::cout << "SOAK RESULT: producer descriptors at checkpoints: slot memfds " << slots_min
              << ".." << slots_max << " (pool of " << kPoolSize << "), others " << other_min << ".."
              << other_max << " (each producer flat against its first checkpoint)\n";
  } else {
    std::string fds, gpu;
    for (int n : fd_totals_) fds += (fds.empty() ? "" : " ") + std::to_string(n);
    for (uint64_t n : gpu_samples_) gpu += (gpu.empty() ? "" : " ") + std::to_string(n);
    const auto [gpu_min, gpu_max] = std::minmax_element(gpu_samples_.begin(), gpu_samples_.end());
    std::cout << "SOAK RESULT: CUDA memory, release-timeout " << release_timeout_ms_ << " ms; "
              << download_lives_ << " consumer lives took downloads (system memory), the others "
              << "the slots\n"
              << "SOAK RESULT: producer descriptors at checkpoints (total; CUDA slots not told "
              << "apart): " << fds << " (each producer at most its first checkpoint's + "
              << most_slots_in_use() << ")\n"
              << "SOAK RESULT: GPU memory at checkpoints ("
              << (gpu_per_process_.value_or(false) ? "producer process" : "whole device")
              << ", MiB): " << gpu;
    if (!gpu_samples_.empty())
      std::cout << " (" << *gpu_min << ".." << *gpu_max << ", last - first "
                << static_cast<int64_t>(gpu_samples_.back()) -
                       static_cast<int64_t>(gpu_samples_.front())
                << "; tolerance " << kGpuMemoryToleranceMiB << ")";
    std::cout << "\n";
  }
  std::cout << "SOAK RESULT: last producer's final " << final_stats << std::endl;
  RecordProperty("consumer_lives", std::to_string(cycles_done_));
  RecordProperty("frames_checked", std::to_string(checked));
  RecordProperty("producer_restarts", std::to_string(producer_kills));
  RecordProperty("memory", cuda_ ? "cuda" : "host");
}

// Every slot retired under a stuck consumer (release-timeout) is replaced by a slot with a new
// index, and indices are never reused within a pool generation (consumers cache imports by
// index). The pool used to fail at kMaxSlots (4096), stopping the producer's pipeline: a consumer
// that keeps getting stuck - or a hostile one that never releases and reconnects - brought it
// down after about 4096 / max-in-flight timeouts. cudasink-ipc now rolls over to a new generation
// (same caps) before the indices run out. Raw consumers here never release: each takes up to 64
// frames (1000 fps, 30 ms release-timeout) before it is dropped, until more distinct slots than
// kMaxSlots have been shared in all (about 150 timeouts, a few seconds). They must have been
// told of a second generation, the producer must report the roll-over in its stats, log no
// error and still stream to an ordinary consumer.
TEST_F(Soak, ProducerOutlivesMoreRetiredSlotsThanSlotIndices) {
  producer_ = spawn("producer", {"produce", "--socket", socket_, "--fps", "1000", "--width", "64",
                                 "--height", "48", "--release-timeout", "30", "--max-in-flight",
                                 "64", "--stats-every-ms", "250"});
  ASSERT_TRUE(producer_->wait_line("READY", scaled(cipc_test::kPeerStartTimeout)))
      << producer_->transcript();
  const auto start = Clock::now();
  size_t timeouts = 0;
  std::set<std::pair<uint64_t, uint32_t>> slots;  // (generation, index) shared with any consumer
  uint64_t last_generation = 0;
  // Past the limit by a margin, so that the second generation has been used for a while too.
  while (slots.size() <= cipc::kMaxSlots + 256 && timeouts < 1500) {
    // A raw consumer that says HELLO and never releases what it gets: disconnected (and its
    // slots retired) after the release-timeout, every time.
    auto channel = cipc::Channel::connect(socket_);
    ASSERT_TRUE(channel.is_ok()) << "after " << timeouts << " timeouts: " << channel.error().message
                                 << "\n"
                                 << producer_->transcript();
    cipc::Hello hello;
    hello.memory_kind = cipc::MemoryKind::kHost;
    hello.max_in_flight = cipc::kMaxInFlight;
    ASSERT_EQ(channel->send(cipc::Message{hello}), cipc::IoResult::kOk);
    bool ended = false;
    while (!ended) {
      ASSERT_TRUE(channel->wait_readable(5000))
          << "the producer went silent after " << timeouts << " timeouts\n"
          << producer_->transcript();
      cipc::Packet packet;
      const cipc::IoResult r = channel->receive(packet);
      ended = r == cipc::IoResult::kClosed || r == cipc::IoResult::kError;
      if (r != cipc::IoResult::kOk) continue;
      cipc::DecodeResult d = cipc::decode(packet.bytes.data(), packet.bytes.size());
      ASSERT_TRUE(d) << cipc::describe(d.error());
      const cipc::Message& m = d.message();
      if (const auto* caps = std::get_if<cipc::Caps>(&m.body)) {
        EXPECT_GE(caps->generation, last_generation) << "generations only move forward";
        last_generation = caps->generation;
      } else if (const auto* slot = std::get_if<cipc::Slot>(&m.body)) {
        EXPECT_EQ(slot->generation, last_generation) << "a slot of a generation not announced";
        slots.emplace(slot->generation, slot->index);
      }
    }
    ++timeouts;
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::cout << "ROLLOVER RESULT: " << timeouts << " stuck consumers timed out in "
            << static_cast<int>(elapsed) << " s; " << slots.size()
            << " distinct slots shared; last generation " << last_generation << std::endl;
  EXPECT_GT(slots.size(), cipc::kMaxSlots) << "the test did not get past the index limit";
  EXPECT_GE(last_generation, 2u) << "no roll-over to a new pool generation";

  const size_t from = producer_->line_count();
  std::unique_ptr<Process> consumer =
      spawn("consumer", {"consume", "--socket", socket_, "--frames", "10"});
  EXPECT_TRUE(consumer->wait_line("DONE", seconds(20)))
      << "no frames after " << timeouts << " stuck consumers\n"
      << consumer->transcript() << producer_->transcript();
  EXPECT_TRUE(producer_->wait_line_after(
      from, "STATS-TICK",
      [](const std::string& line) { return stat_of(line, "pool-rollovers").value_or(0) >= 1; },
      seconds(5)))
      << "the producer's stats report no roll-over\n"
      << producer_->transcript();
  EXPECT_EQ(producer_->count("ERROR"), 0u) << producer_->transcript();
  // videotestsrc writes into the sink's pool: told to renegotiate, it leaves the replaced pool
  // after a frame or two (copied meanwhile) and writes into the new one.
  const std::string stats = producer_->last("STATS-TICK").value_or("");
  std::cout << "ROLLOVER RESULT: producer " << stats << std::endl;
  EXPECT_LE(stat_or_max(stats, "copies"), 8u) << "upstream did not move to the new pool";
}

}  // namespace
