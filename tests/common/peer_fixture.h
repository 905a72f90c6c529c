// SPDX-License-Identifier: LGPL-2.1-or-later
// A GoogleTest fixture for tests that run peer programs (tests/e2e, tests/gpu): it finds the
// peer binary and the plugin (from the environment, else next to the test binary), gives each
// test a temporary folder (sockets, records, a private GStreamer registry), starts producers and
// consumers, and on teardown checks that no peer logged a GLib critical or warning nor received a
// frame that disagrees with its caps (NONCONFORMING, UNMAPPABLE lines), prints every
// peer's transcript if the test failed, and kills whatever still runs.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "process.h"

namespace cipc_test {

class PeerFixture : public ::testing::Test {
 protected:
  struct Timeouts {
    std::chrono::milliseconds start;  // until a producer prints READY
    std::chrono::milliseconds exit;   // until a stopped producer has exited
  };

  // Call from SetUp(): `env_var` may name the peer binary, else `default_name` next to the test.
  void init_peers(const char* env_var, const std::string& default_name, const char* tmp_prefix,
                  Timeouts timeouts) {
    timeouts_ = timeouts;
    const char* peer = getenv(env_var);
    peer_ = peer && *peer ? peer : self_dir() + "/" + default_name;
    ASSERT_EQ(::access(peer_.c_str(), X_OK), 0)
        << "peer binary not found at " << peer_ << " (set " << env_var << ")";
    const char* plugins = getenv("GST_PLUGIN_PATH");
    plugin_path_ = plugins && *plugins ? plugins : self_dir() + "/../../gst";
    std::string dir = std::string("/tmp/") + tmp_prefix + "-XXXXXX";
    ASSERT_NE(::mkdtemp(dir.data()), nullptr) << strerror(errno);
    dir_ = dir;
  }

  void TearDown() override {
    retire_processes();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  // Checks that no peer tripped a GLib/GStreamer assertion, shows what they said if the test
  // failed, and forgets them (killing whatever still runs).
  void retire_processes() {
    for (const auto& p : processes_) {
      const std::string err = p->stderr_text();
      EXPECT_FALSE(contains(err, "CRITICAL **") || contains(err, "WARNING **"))
          << p->name() << " logged a GLib critical or warning";
      // Every frame a consumer peer received agreed with its caps (frame_conformance.h) and
      // could be mapped again when it let the frame go.
      EXPECT_EQ(p->count("NONCONFORMING"), 0u)
          << p->name() << " received frames that disagree with their caps, first: "
          << p->first("NONCONFORMING").value_or("");
      EXPECT_EQ(p->count("UNMAPPABLE"), 0u) << p->name() << " could not map a frame it held";
    }
    if (HasFailure())
      for (const auto& p : processes_) std::cerr << p->transcript();
    processes_.clear();
  }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  Process& spawn(const std::string& name, const std::string& mode,
                 const std::vector<std::string>& args) {
    std::vector<std::string> argv{peer_, mode};
    argv.insert(argv.end(), args.begin(), args.end());
    processes_.push_back(std::make_unique<Process>(
        name, argv,
        std::map<std::string, std::string>{{"GST_REGISTRY", path("registry.bin")},
                                           {"GST_PLUGIN_PATH", plugin_path_}}));
    Process& p = *processes_.back();
    EXPECT_TRUE(p.started()) << name << ": " << p.start_error();
    return p;
  }

  // A producer; waits until its cudasink-ipc is PLAYING (READY) unless told otherwise.
  Process& producer(const std::string& name, const std::vector<std::string>& args,
                    bool wait_ready = true) {
    Process& p = spawn(name, "produce", args);
    if (wait_ready) {
      EXPECT_TRUE(p.wait_line("READY", timeouts_.start)) << name << " did not start\n"
                                                         << p.transcript();
    }
    return p;
  }

  Process& consumer(const std::string& name, const std::vector<std::string>& args) {
    return spawn(name, "consume", args);
  }

  // Stops a producer the clean way (SIGINT: EOS to consumers, then stop) and returns its final
  // STATS line.
  std::string stop_producer(Process& p) {
    p.signal(SIGINT);
    EXPECT_EQ(p.wait_exit(timeouts_.exit), std::optional<int>(0))
        << p.name() << " did not stop cleanly";
    const auto stats = p.last("STATS ");
    EXPECT_TRUE(stats) << p.name() << " printed no final STATS";
    return stats.value_or("");
  }

  std::vector<std::unique_ptr<Process>> processes_;

 private:
  Timeouts timeouts_{};
  std::string peer_;
  std::string plugin_path_;
  std::string dir_;
};

}  // namespace cipc_test
