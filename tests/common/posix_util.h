// SPDX-License-Identifier: LGPL-2.1-or-later
// POSIX helpers shared by the ipc/ unit tests and the fuzz targets: no GoogleTest, no GStreamer,
// so libFuzzer builds can include them.
#pragma once

#include <dirent.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace cipc_test {

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
