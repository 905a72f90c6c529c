// SPDX-License-Identifier: LGPL-2.1-or-later
// POSIX helpers shared by the ipc/ unit tests and the fuzz targets: no GoogleTest, no GStreamer,
// so libFuzzer builds can include them.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace cipc_test {

// Brings this process to its descriptor limit, as a process under `ulimit -n` would be: lowers
// the soft RLIMIT_NOFILE to a little above what is open now and fills every free slot, keeping
// `keep_free` of them free. Restores both when destroyed.
class DescriptorFiller {
 public:
  explicit DescriptorFiller(int keep_free = 0) {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    int highest = 0;
    for (int fd = 0; fd < 65536 && fd < static_cast<int>(saved_.rlim_cur); ++fd)
      if (::fcntl(fd, F_GETFD) >= 0) highest = fd;
    rlimit lowered = saved_;
    lowered.rlim_cur = static_cast<rlim_t>(highest + 17);
    limit_ = static_cast<int>(lowered.rlim_cur);
    ::setrlimit(RLIMIT_NOFILE, &lowered);
    for (;;) {
      const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) break;
      fillers_.push_back(fd);
    }
    for (int i = 0; i < keep_free && !fillers_.empty(); ++i) {
      ::close(fillers_.back());
      fillers_.pop_back();
    }
  }
  ~DescriptorFiller() {
    for (int fd : fillers_) ::close(fd);
    ::setrlimit(RLIMIT_NOFILE, &saved_);
  }
  DescriptorFiller(const DescriptorFiller&) = delete;
  DescriptorFiller& operator=(const DescriptorFiller&) = delete;
  int limit() const { return limit_; }
  // Frees one more descriptor (e.g. in a forked child that needs a few).
  void release(int count) {
    for (int i = 0; i < count && !fillers_.empty(); ++i) {
      ::close(fillers_.back());
      fillers_.pop_back();
    }
  }

 private:
  rlimit saved_{};
  int limit_ = 0;
  std::vector<int> fillers_;
};

// Puts this process under the kernel's bound on descriptors in flight over Unix sockets (sent,
// not yet received, counted per user): past its RLIMIT_NOFILE, sendmsg() with descriptors fails
// with ETOOMANYREFS - except in a thread with CAP_SYS_RESOURCE or CAP_SYS_ADMIN, as root has. So
// it drops every capability of the calling thread for good (call it in a forked child, before it
// starts threads: they inherit it) ...
inline bool drop_all_capabilities() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct none[2] = {};
  return ::syscall(SYS_capset, &header, none) == 0;
}

// ... and sets RLIMIT_NOFILE (soft and hard) to `limit`. False if either fails.
inline bool limit_descriptors_in_flight(rlim_t limit) {
  const rlimit lowered{limit, limit};
  return drop_all_capabilities() && ::setrlimit(RLIMIT_NOFILE, &lowered) == 0;
}

// Open descriptors of this process (the directory stream's own one included, every time).
inline int open_fd_count() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;
}

// Sends bytes with any number of descriptors: a hostile peer is not bound by Channel's limit.
inline ssize_t send_with_fds(int socket, const std::vector<uint8_t>& bytes,
                             const std::vector<int>& fds) {
  iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  return ::sendmsg(socket, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace cipc_test
