// SPDX-License-Identifier: LGPL-2.1-or-later
// This process's id, asked on every frame (is this still the process that connected, or a child
// made by fork()?) without a system call each time: cached in a page the kernel zeroes in every
// child (MADV_WIPEONFORK), so a child finds no id there and asks the kernel, whether or not it
// was made through fork() and its handlers. Where the kernel cannot wipe pages (before Linux
// 4.14), every call asks the kernel.
#pragma once

#include <sys/types.h>

namespace cipc {

pid_t this_process_id();

}  // namespace cipc
