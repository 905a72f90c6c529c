// SPDX-License-Identifier: LGPL-2.1-or-later
// Soak test, host memory, real processes (tests/e2e's cudaipc-e2e-peer around the built plugin):
// one producer streams while consumers, in several lanes at once, are started over and over and
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
// Environment (defaults suit CI: 2000 lives take about 3 minutes on 2 cores):
//   CIPC_SOAK_CYCLES        consumer lives to run (default 2000)
//   CIPC_SOAK_MAX_SECONDS   stop starting new lives after this long (default 240)
//   CIPC_SOAK_LANES         consumers alive at once (default 3)
//   CIPC_SOAK_SEED          random seed (default: from the clock; printed, so a run can be
//   repeated) CUDAIPC_PEER, GST_PLUGIN_PATH   the peer binary and the plugin folder (set by meson)
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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
#include "process.h"
#include "protocol.h"

namespace {

using cipc_test::Clock;
using cipc_test::contains;
using cipc_test::Process;
using cipc_test::self_dir;
using cipc_test::starts_with;
using cipc_test::stat_of;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kReleaseTimeoutMs = 300;
constexpr int kFps = 100;
constexpr int kPoolSize = 6;
constexpr int kConsumerMaxInFlight = 2;
constexpr int kCheckpointEvery = 60;     // consumer lives between checkpoints
constexpr int kProducerKillEvery = 250;  // consumer lives between producer kills (mid-stream)
constexpr auto kProgressTimeout = seconds(20);  // a live consumer must get a frame within this

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
    case Fault::kKill:
      return "SIGKILL after frames";
    case Fault::kEarlyKill:
      return "SIGKILL while starting";
    case Fault::kStall:
      return "SIGSTOP past release-timeout, SIGCONT";
    case Fault::kCleanStop:
      return "clean stop (SIGINT)";
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
    std::string dir = "/tmp/cudaipc-soak-XXXXXX";
    ASSERT_NE(::mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    socket_ = dir_ + "/soak.sock";
  }

  void TearDown() override {
    for (auto& lane : lanes_) lane.consumer.reset();
    producer_.reset();
    std::error_code ec;
    if (HasFailure())
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
    producer_ = spawn("producer-" + std::to_string(producer_records_.size()),
                      {"produce",
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
                       std::to_string(kReleaseTimeoutMs),
                       "--max-in-flight",
                       "3",
                       "--pool-size",
                       std::to_string(kPoolSize),
                       "--stats-every-ms",
                       "50",
                       "--stop-grace-ms",
                       "3000"});
    ASSERT_TRUE(producer_->wait_line("READY", seconds(20))) << producer_->transcript();
    fd_baseline_.reset();
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
                                  "20000",
                                  "--reconnect-interval",
                                  "20",
                                  "--timeout-s",
                                  "120"};
    // Stalled consumers hold frames, so that the retired slots are checked for rewrites; some
    // others hold frames for less than the release-timeout.
    if (lane.fault == Fault::kStall || rng_() % 3 == 0) {
      args.push_back("--hold-ms");
      args.push_back(std::to_string(lane.fault == Fault::kStall ? 150 : 10 + rng_() % 100));
    }
    lane.consumer = spawn("consumer-" + std::to_string(consumer_records_.size()) + " (lane " +
                              std::to_string(lane_index) + ", " + fault_name(lane.fault) + ")",
                          args);
    lane.state = Lane::State::kRunning;
    lane.started = Clock::now();
    lane.deadline =
        lane.started + (lane.fault == Fault::kEarlyKill
                            ? milliseconds(rng_() % 80)
                            : std::chrono::duration_cast<Clock::duration>(kProgressTimeout));
  }

  // Ends a consumer's life: reaps it, checks what it said and counts how the life ended.
  void finish(Lane& lane, bool expect_clean_exit, const std::string& how) {
    Process& c = *lane.consumer;
    const std::optional<int> code = c.wait_exit(seconds(20));
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
            lane.deadline = now + seconds(20);
          } else {
            c.signal(SIGSTOP);
            lane.state = Lane::State::kStopped;
            lane.deadline = now + milliseconds(kReleaseTimeoutMs + 200 + rng_() % 300);
          }
          return true;
        }
        if (c.wait_exit(milliseconds(0))) {
          ADD_FAILURE() << c.name() << " exited by itself\n" << c.transcript();
          return false;
        }
        if (now >= lane.deadline) {
          ADD_FAILURE() << c.name() << " got " << c.frames() << " frame(s) in "
                        << kProgressTimeout.count() << " s\n"
                        << c.transcript() << producer_->transcript();
          return false;
        }
        return true;
      case Lane::State::kStopped:
        if (now >= lane.deadline) {
          c.signal(SIGCONT);
          lane.frames_at_resume = c.frames();
          lane.state = Lane::State::kResumed;
          lane.deadline = now + kProgressTimeout;
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
            lane.deadline = now + seconds(20);
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
      case Lane::State::kIdle:
        return true;
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
                seconds(10))
            .has_value();
    ASSERT_TRUE(quiet) << "consumers or claims outstanding with every consumer gone:\n"
                       << producer_->last("STATS-TICK").value_or("(no stats)");
    const Descriptors fds = descriptors_of(producer_->pid());
    ASSERT_GT(fds.other, 0);
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
    const int most_in_use = kPoolSize + static_cast<int>(lanes_.size()) * kConsumerMaxInFlight + 2;
    EXPECT_LE(fds.slots, most_in_use) << "more slot memfds than could ever be in use at once";
    ++checkpoints_;
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

  ASSERT_NO_FATAL_FAILURE(start_producer());
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
      EXPECT_TRUE(producer_->wait_exit(seconds(20)).has_value());
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
  EXPECT_EQ(producer_->wait_exit(seconds(20)), std::optional<int>(0)) << producer_->transcript();
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
            << " s (" << lanes << " lanes, seed " << seed << ")\n";
  for (const auto& [how, n] : lives_) std::cout << "SOAK RESULT:   " << how << ": " << n << "\n";
  std::cout << "SOAK RESULT: producer SIGKILLed mid-stream and restarted " << producer_kills
            << " times; " << checkpoints_ << " checkpoints with zero consumers and zero claims\n"
            << "SOAK RESULT: frames checked bit-exact: " << checked << " (consumers reported "
            << frames_received_ << ")\n"
            << "SOAK RESULT: producer descriptors at checkpoints: slot memfds " << slots_min << ".."
            << slots_max << " (pool of " << kPoolSize << "), others " << other_min << ".."
            << other_max << " (each producer flat against its first checkpoint)\n"
            << "SOAK RESULT: last producer's final " << final_stats << std::endl;
  RecordProperty("consumer_lives", std::to_string(cycles_done_));
  RecordProperty("frames_checked", std::to_string(checked));
  RecordProperty("producer_restarts", std::to_string(producer_kills));
}

// KNOWN BUG (gst/slotpool.cpp), disabled until fixed; run it with
// --gtest_also_run_disabled_tests. Every slot retired under a stuck consumer (release-timeout)
// is replaced by a new slot with a new index, indices are never reused within a pool
// generation, and at kMaxSlots (4096) the pool fails: the producer's pipeline stops with an
// error. A consumer that keeps getting stuck - or a hostile one that never releases and
// reconnects - brings the producer down after about 4096 / max-in-flight timeouts (here about
// 1400, half a minute; with the default 2 s release-timeout about 45 minutes). Expected: the
// producer keeps streaming (e.g. it starts a new pool generation before the indices run out).
TEST_F(Soak, DISABLED_ProducerOutlivesMoreRetiredSlotsThanSlotIndices) {
  const std::string record = dir_ + "/producer.rec";
  producer_ = spawn("producer", {"produce", "--socket", socket_, "--fps", "200", "--width", "64",
                                 "--height", "48", "--release-timeout", "10", "--max-in-flight",
                                 "3", "--stats-every-ms", "500"});
  ASSERT_TRUE(producer_->wait_line("READY", seconds(20))) << producer_->transcript();
  size_t timeouts = 0;
  while (timeouts < 2000) {
    // A raw consumer that says HELLO and never releases what it gets: disconnected (and its
    // slots retired) after the release-timeout, every time.
    auto channel = cipc::Channel::connect(socket_);
    ASSERT_TRUE(channel.is_ok()) << "after " << timeouts << " timeouts: " << channel.error().message
                                 << "\n"
                                 << producer_->transcript();
    cipc::Hello hello;
    hello.memory_kind = cipc::MemoryKind::kHost;
    hello.max_in_flight = 3;
    ASSERT_EQ(channel->send(cipc::Message{hello}), cipc::IoResult::kOk);
    bool ended = false;
    while (!ended) {
      ASSERT_TRUE(channel->wait_readable(5000))
          << "the producer went silent after " << timeouts << " timeouts\n"
          << producer_->transcript();
      cipc::Packet packet;
      const cipc::IoResult r = channel->receive(packet);
      ended = r == cipc::IoResult::kClosed || r == cipc::IoResult::kError;
    }
    ++timeouts;
  }
  const size_t from = producer_->line_count();
  std::unique_ptr<Process> consumer =
      spawn("consumer", {"consume", "--socket", socket_, "--frames", "10"});
  EXPECT_TRUE(consumer->wait_line("DONE", seconds(20)))
      << "no frames after " << timeouts << " stuck consumers\n"
      << consumer->transcript() << producer_->transcript();
  EXPECT_FALSE(producer_->wait_line_after(
      from, "ERROR", [](const std::string&) { return true; }, milliseconds(0)))
      << producer_->transcript();
}

}  // namespace
