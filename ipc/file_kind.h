// SPDX-License-Identifier: LGPL-2.1-or-later
// What kind of file stands at a path, in words for error messages ("a regular file", "a FIFO
// (named pipe)", ...): the socket path, its lock file and the private name a socket is bound at
// all say what is there when it is not what they expected.
#pragma once

#include <sys/stat.h>

#include <string>

namespace cipc {

inline std::string file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device file";
  return "a special file";
}

}  // namespace cipc
