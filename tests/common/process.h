// SPDX-License-Identifier: LGPL-2.1-or-later
// Test helpers for tests that drive real peer processes (tests/e2e, tests/gpu): a child Process
// whose stdout lines are captured with timestamps and waited for with deadlines, plus small
// string and file helpers. Header-only.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace cipc_test {

using Clock = std::chrono::steady_clock;

// How long a peer producer may take to be listening and PLAYING. Generous: each test's peers
// first scan the plugins into a fresh registry, and start-up is not what the tests measure
// (Process::transcript() describes one that misses it).
constexpr std::chrono::seconds kPeerStartTimeout{60};

// The folder a path lies in.
inline std::string dirname_of(const std::string& path) {
  return std::filesystem::path(path).parent_path().string();
}

// The folder this executable lies in (peers and the plugin are found relative to it).
inline std::string self_dir() {
  std::error_code ec;
  return dirname_of(std::filesystem::read_symlink("/proc/self/exe", ec).string());
}

// Whether `path` exists and is a socket file (lstat: a link does not count).
inline bool is_socket(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

// Whether anything exists at `path` (lstat: a dangling link counts).
inline bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The value of `field=(guint64)N` in a serialized GstStructure line.
inline std::optional<uint64_t> stat_of(const std::string& line, const std::string& field) {
  const std::string key = " " + field + "=(guint64)";
  const size_t at = line.find(key);
  if (at == std::string::npos) return std::nullopt;
  return std::strtoull(line.c_str() + at + key.size(), nullptr, 10);
}

// The value of `field=(boolean)true|false` in a serialized GstStructure line.
inline std::optional<bool> flag_of(const std::string& line, const std::string& field) {
  const std::string key = " " + field + "=(boolean)";
  const size_t at = line.find(key);
  if (at == std::string::npos) return std::nullopt;
  return line.compare(at + key.size(), 4, "true") == 0;
}

// stat_of, or UINT64_MAX when the field is missing (so that comparisons with it fail loudly).
inline uint64_t stat_or_max(const std::string& line, const std::string& field) {
  return stat_of(line, field).value_or(UINT64_MAX);
}

// The first line of a small /proc file, or "?" when it cannot be read.
inline std::string proc_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  return in && std::getline(in, line) ? line : "?";
}

// What a live process is doing, for a test's failure message: its state and where each of its
// threads sleeps in the kernel, and the same for its children (a process that never printed
// anything is told apart from one stuck in a plugin scanner or a lock).
inline std::string describe_live_process(pid_t pid, int depth = 0) {
  const std::string dir = "/proc/" + std::to_string(pid);
  const std::string stat = proc_line(dir + "/stat");
  const size_t paren = stat.rfind(')');
  const std::string state =
      paren != std::string::npos && paren + 2 < stat.size() ? stat.substr(paren + 2, 1) : "?";
  std::ostringstream s;
  const std::string indent(size_t(2 + 2 * depth), ' ');
  s << indent << "pid " << pid << " (" << proc_line(dir + "/comm") << ") state " << state << "\n";
  std::error_code ec;
  std::vector<pid_t> children;
  size_t threads = 0;
  for (const auto& task : std::filesystem::directory_iterator(dir + "/task", ec)) {
    const std::string t = task.path().string();
    if (++threads <= 12)
      s << indent << "  thread " << task.path().filename().string() << " ("
        << proc_line(t + "/comm") << ") waits in " << proc_line(t + "/wchan") << "\n";
    std::ifstream kids(t + "/children");
    for (pid_t k; kids >> k;) children.push_back(k);
  }
  if (threads > 12) s << indent << "  (" << threads << " threads in all)\n";
  if (depth < 2)
    for (const auto& k : children) s << describe_live_process(k, depth + 1);
  return s.str();
}

// A child process with its stdout and stderr captured line by line (timestamped) by a reader
// thread. Killed (SIGKILL) and reaped when destroyed, so no test leaves a process behind; the
// child also gets SIGKILL if this test binary dies (PR_SET_PDEATHSIG).

class Process {
 public:
  struct Line {
    Clock::time_point at;
    std::string text;
  };

  Process(std::string name, const std::vector<std::string>& argv,
          const std::map<std::string, std::string>& env_overrides)
      : name_(std::move(name)) {
    for (const auto& a : argv) command_ += (command_.empty() ? "" : " ") + a;
    // Everything execve() needs is built before fork(): the child only calls async-signal-safe
    // functions.
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
      const std::string entry = *e;
      const std::string key = entry.substr(0, entry.find('='));
      if (!env_overrides.count(key)) env_strings.push_back(entry);
    }
    for (const auto& kv : env_overrides) env_strings.push_back(kv.first + "=" + kv.second);
    std::vector<char*> c_argv, c_env;
    for (const auto& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
    c_argv.push_back(nullptr);
    for (const auto& e : env_strings) c_env.push_back(const_cast<char*>(e.c_str()));
    c_env.push_back(nullptr);

    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
      start_error_ = std::string("pipe2: ") + strerror(errno);
      return;
    }
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      const int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) ::dup2(devnull, 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      ::execve(c_argv[0], c_argv.data(), c_env.data());
      ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    if (pid_ < 0) {
      start_error_ = std::string("fork: ") + strerror(errno);
      ::close(out[0]);
      ::close(err[0]);
      return;
    }
    reader_ = std::thread([this, o = out[0], e = err[0]] { read_loop(o, e); });
  }

  ~Process() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      wait_exit(std::chrono::seconds(10));
    }
    if (reader_.joinable()) reader_.join();
  }

  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  bool started() const { return pid_ > 0 && start_error_.empty(); }
  const std::string& start_error() const { return start_error_; }
  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }

  void signal(int sig) {
    if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
  }

  // Exit code, or 128 + signal number; nullopt if it is still running after `timeout`.
  std::optional<int> wait_exit(Clock::duration timeout) {
    if (reaped_) return status_;
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        // Let the reader take in everything the process wrote before it exited.
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait_for(lock, std::chrono::seconds(5), [this] { return out_closed_; });
        return status_;
      }
      if (r < 0 && errno != EINTR) return std::nullopt;
      if (Clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  // Waits until `pred` holds for the stdout lines so far. False on timeout, or as soon as the
  // process has closed its stdout (exited) without `pred` holding.
  bool wait_for(const std::function<bool(const std::vector<Line>&)>& pred,
                Clock::duration timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      if (pred(out_)) return true;
      if (out_closed_) return false;
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) return pred(out_);
    }
  }

  // Waits for the first stdout line starting with `prefix`.
  std::optional<Line> wait_line(const std::string& prefix, Clock::duration timeout) {
    std::optional<Line> found;
    wait_for(
        [&](const std::vector<Line>& lines) {
          for (const auto& l : lines)
            if (starts_with(l.text, prefix)) {
              found = l;
              return true;
            }
          return false;
        },
        timeout);
    return found;
  }

  // Waits for the first line starting with `prefix` that comes after line number `from`.
  std::optional<Line> wait_line_after(size_t from, const std::string& prefix,
                                      const std::function<bool(const std::string&)>& accept,
                                      Clock::duration timeout) {
    std::optional<Line> found;
    wait_for(
        [&](const std::vector<Line>& lines) {
          for (size_t i = from; i < lines.size(); ++i)
            if (starts_with(lines[i].text, prefix) && accept(lines[i].text)) {
              found = lines[i];
              return true;
            }
          return false;
        },
        timeout);
    return found;
  }

  // Number of frames a consumer has reported ("FRAME k ..." lines).
  size_t frames() const { return count("FRAME "); }

  bool wait_frames(size_t n, Clock::duration timeout) {
    return wait_for([&](const std::vector<Line>&) { return count_locked("FRAME ") >= n; }, timeout);
  }

  size_t count(const std::string& prefix) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_locked(prefix);
  }

  size_t line_count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return out_.size();
  }

  std::optional<std::string> first(const std::string& prefix) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& l : out_)
      if (starts_with(l.text, prefix)) return l.text;
    return std::nullopt;
  }

  std::optional<std::string> last(const std::string& prefix) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = out_.rbegin(); it != out_.rend(); ++it)
      if (starts_with(it->text, prefix)) return it->text;
    return std::nullopt;
  }

  std::vector<std::string> lines_with(const std::string& prefix) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> v;
    for (const auto& l : out_)
      if (starts_with(l.text, prefix)) v.push_back(l.text);
    return v;
  }

  std::string stderr_text() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return err_;
  }

  // Everything it said, for failure messages (FRAME lines abridged).
  std::string transcript() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::ostringstream s;
    s << "---- " << name_ << " (pid " << pid_ << "): " << command_ << "\n";
    size_t frames = 0, ticks = 0, total_ticks = 0;
    for (const auto& l : out_) total_ticks += starts_with(l.text, "STATS-TICK") ? 1 : 0;
    for (const auto& l : out_) {
      if (starts_with(l.text, "FRAME ") && ++frames > 3) continue;
      if (starts_with(l.text, "STATS-TICK") && ++ticks + 3 <= total_ticks) continue;
      s << "  " << l.text.substr(0, 400) << "\n";
    }
    if (frames > 3) s << "  (" << frames << " FRAME lines in all)\n";
    if (total_ticks > 3) s << "  (" << total_ticks << " STATS-TICK lines in all, last 3 shown)\n";
    if (!err_.empty()) {
      const std::string tail = err_.size() > 3000 ? err_.substr(err_.size() - 3000) : err_;
      s << "  stderr:\n" << tail << "\n";
    }
    if (pid_ > 0 && !reaped_ && !out_closed_)
      s << "  still running:\n" << describe_live_process(pid_);
    return s.str();
  }

 private:
  size_t count_locked(const std::string& prefix) const {
    size_t n = 0;
    for (const auto& l : out_) n += starts_with(l.text, prefix) ? 1 : 0;
    return n;
  }

  void read_loop(int out_fd, int err_fd) {
    std::string partial;
    pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
    int open_count = 2;
    char buf[8192];
    while (open_count > 0) {
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || fds[i].revents == 0) continue;
        const ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        std::lock_guard<std::mutex> lock(mutex_);
        if (n <= 0) {
          ::close(fds[i].fd);
          fds[i].fd = -1;
          --open_count;
          if (i == 0) {
            if (!partial.empty()) out_.push_back({Clock::now(), partial});
            out_closed_ = true;
          }
        } else if (i == 0) {
          partial.append(buf, size_t(n));
          size_t nl;
          while ((nl = partial.find('\n')) != std::string::npos) {
            out_.push_back({Clock::now(), partial.substr(0, nl)});
            partial.erase(0, nl + 1);
          }
        } else {
          err_.append(buf, size_t(n));
        }
        cv_.notify_all();
      }
    }
    for (auto& p : fds)
      if (p.fd >= 0) ::close(p.fd);
    std::lock_guard<std::mutex> lock(mutex_);
    out_closed_ = true;
    cv_.notify_all();
  }

  std::string name_;
  std::string command_;
  std::string start_error_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = -1;
  std::thread reader_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Line> out_;
  std::string err_;
  bool out_closed_ = false;
};

}  // namespace cipc_test
