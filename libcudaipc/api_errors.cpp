// SPDX-License-Identifier: LGPL-2.1-or-later
#include "api_errors.h"

#include <cudaipc/cudaipc.h>

namespace cipc_libcudaipc {
namespace {

thread_local std::string t_last_error;

}  // namespace

int fail(int status, std::string text) {
  t_last_error = std::move(text);
  return status;
}

const char* last_error() {
  return t_last_error.c_str();
}

int status_of(const cipc::Error& e) {
  switch (e.code) {
    case cipc::ErrorCode::kInvalidArgument: return CUDAIPC_ERROR_INVALID_ARGUMENT;
    case cipc::ErrorCode::kSystem:
    case cipc::ErrorCode::kOutOfResources: return CUDAIPC_ERROR_SYSTEM;
    case cipc::ErrorCode::kAddressInUse:
    case cipc::ErrorCode::kNotASocket:
    case cipc::ErrorCode::kConnectFailed:
    case cipc::ErrorCode::kTimeout: return CUDAIPC_ERROR_NO_PRODUCER;
    case cipc::ErrorCode::kInterrupted: return CUDAIPC_INTERRUPTED;
    case cipc::ErrorCode::kClosed: return CUDAIPC_END;
    case cipc::ErrorCode::kProtocol: return CUDAIPC_ERROR_PROTOCOL;
    case cipc::ErrorCode::kVersionMismatch:
    case cipc::ErrorCode::kMemoryKindMismatch:
    case cipc::ErrorCode::kGpuMismatch:
    case cipc::ErrorCode::kPermissionDenied: return CUDAIPC_ERROR_REFUSED;
    case cipc::ErrorCode::kUnsupported: return CUDAIPC_ERROR_UNSUPPORTED;
  }
  return CUDAIPC_ERROR_PROTOCOL;
}

}  // namespace cipc_libcudaipc
