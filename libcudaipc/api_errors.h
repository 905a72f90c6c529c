// SPDX-License-Identifier: LGPL-2.1-or-later
// What every C entry point of libcudaipc shares: the per-thread sentence behind
// cudaipc_last_error() and the mapping of the layers' error codes to cudaipc_status.
#pragma once

#include <string>

#include "status.h"

namespace cipc_libcudaipc {

// Leaves `text` for cudaipc_last_error() on this thread and returns `status`.
int fail(int status, std::string text);
const char* last_error();
int status_of(const cipc::Error& e);

}  // namespace cipc_libcudaipc
