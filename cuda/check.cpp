// SPDX-License-Identifier: LGPL-2.1-or-later
#include "check.h"

#include <cstring>

#include "driver.h"

namespace cipc_cuda {
namespace detail {

namespace {

struct KnownResult {
  CUresult code;
  const char* name;
  const char* text;
};

// The driver's names and (abridged) descriptions for the codes our calls can plausibly return;
// used when the driver's own cuGetErrorName/cuGetErrorString are not available.
#define CIPC_CU_RESULT(code, text) \
  { code, #code, text }
constexpr KnownResult kKnownResults[] = {
    CIPC_CU_RESULT(CUDA_SUCCESS, "no error"),
    CIPC_CU_RESULT(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    CIPC_CU_RESULT(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    CIPC_CU_RESULT(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
    CIPC_CU_RESULT(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    CIPC_CU_RESULT(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library"),
    CIPC_CU_RESULT(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
    CIPC_CU_RESULT(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    CIPC_CU_RESULT(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
    CIPC_CU_RESULT(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped"),
    CIPC_CU_RESULT(CUDA_ERROR_NOT_MAPPED, "resource not mapped"),
    CIPC_CU_RESULT(CUDA_ERROR_FILE_NOT_FOUND, "file not found"),
    CIPC_CU_RESULT(CUDA_ERROR_OPERATING_SYSTEM,
                   "OS call failed or operation not supported on this OS"),
    CIPC_CU_RESULT(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    CIPC_CU_RESULT(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    CIPC_CU_RESULT(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
    CIPC_CU_RESULT(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
    CIPC_CU_RESULT(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    CIPC_CU_RESULT(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH,
                   "system has unsupported display driver / cuda driver combination"),
    CIPC_CU_RESULT(CUDA_ERROR_UNKNOWN, "unknown error"),
};
#undef CIPC_CU_RESULT

// What "busy or unavailable" means in practice: the two causes users meet, so that the error
// names them (an MPS server refused the 49th process on the H200 with exactly this code).
constexpr const char* kDeviceUnavailableHint =
    "; the GPU is in exclusive-process compute mode and another process holds it, or the MPS "
    "server this process is a client of has reached its client limit (48 processes per GPU on "
    "Volta and later)";

}  // namespace

std::string describe(cudaError_t err) {
  // Both are plain tables inside the runtime: they work without a driver.
  const char* name = cudaGetErrorName(err);
  const char* text = cudaGetErrorString(err);
  std::string out = name ? name : ("cudaError " + std::to_string(static_cast<int>(err)));
  if (text && *text) out += std::string(" (") + text + ")";
  if (err == cudaErrorDevicesUnavailable) out += kDeviceUnavailableHint;
  return out;
}

std::string describe(CUresult err) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (const DriverApi* d = loaded_driver_api()) {
    if (d->cuGetErrorName(err, &name) != CUDA_SUCCESS) name = nullptr;
    if (d->cuGetErrorString(err, &text) != CUDA_SUCCESS) text = nullptr;
  }
  if (!name) {
    for (const KnownResult& k : kKnownResults) {
      if (k.code == err) {
        name = k.name;
        if (!text) text = k.text;
        break;
      }
    }
  }
  std::string out = name ? name : ("CUresult " + std::to_string(static_cast<int>(err)));
  if (text && *text) out += std::string(" (") + text + ")";
  if (err == CUDA_ERROR_DEVICE_UNAVAILABLE) out += kDeviceUnavailableHint;
  return out;
}

std::string call_name(const char* call_text) {
  if (!call_text) return "?";
  const auto ident = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  // The first identifier directly followed by '(' (spaces allowed): the called function, past
  // any qualifier ("d->", "ns::", "obj.") or parenthesised prefix ("(*d)->").
  for (const char* paren = std::strchr(call_text, '('); paren;
       paren = std::strchr(paren + 1, '(')) {
    const char* end = paren;
    while (end > call_text && end[-1] == ' ') --end;
    const char* begin = end;
    while (begin > call_text && ident(begin[-1])) --begin;
    if (begin != end && !(*begin >= '0' && *begin <= '9')) return std::string(begin, end);
  }
  return std::string(call_text);
}

std::string short_file(const char* file) {
  if (!file) return "?";
  const char* last = std::strrchr(file, '/');
  if (!last) return file;
  const char* prev = last;
  while (prev > file && prev[-1] != '/') --prev;
  // `prev` starts the parent directory's name (or the string); skip "." and "..".
  if (prev[0] == '.' && (prev[1] == '/' || (prev[1] == '.' && prev[2] == '/'))) return last + 1;
  return prev;
}

std::string explain_init_error(cudaError_t err, const char* call) {
  const char* name = cudaGetErrorName(err);
  const std::string code = std::string(call ? call : "CUDA") + ": " + (name ? name : "?");
  // sentence (hint; call: error)
  const auto say = [&code](const std::string& sentence, const std::string& hint = std::string()) {
    return sentence + " (" + (hint.empty() ? std::string() : hint + "; ") + code + ")";
  };
  int driver_version = 0;
  switch (err) {
    case cudaErrorNoDevice: return say("no CUDA device is present");
    case cudaErrorStubLibrary:
      return say("no CUDA driver is installed", "only the toolkit's stub libcuda.so was found");
    case cudaErrorInsufficientDriver:
    case cudaErrorCallRequiresNewerDriver:
      // Both also mean "no driver" when libcuda.so.1 could not be loaded at all: the runtime
      // then reports driver version 0.
      if (cudaDriverGetVersion(&driver_version) != cudaSuccess || driver_version == 0)
        return say("no CUDA driver is installed", "libcuda.so.1 could not be loaded");
      return say("the CUDA driver is older than this build's runtime (CUDA " +
                     std::to_string(CUDART_VERSION / 1000) + ")",
                 "the driver supports CUDA " + std::to_string(driver_version / 1000) + "." +
                     std::to_string(driver_version % 1000 / 10));
    case cudaErrorSystemDriverMismatch:
      return say("the CUDA driver's kernel module and user-space library versions differ",
                 "reinstall the driver or reboot");
    case cudaErrorCompatNotSupportedOnDevice:
      return say("the CUDA forward-compatibility driver does not support this device");
    case cudaErrorDevicesUnavailable:
      return say("every CUDA device is busy or unavailable",
                 "compute mode exclusive or prohibited?");
    case cudaErrorSystemNotReady:
      return say("the CUDA system is not ready", "is nvidia-fabricmanager running?");
    default: {
      const char* text = cudaGetErrorString(err);
      return say(std::string("CUDA initialisation failed: ") + (text ? text : "unknown error"));
    }
  }
}

Status make_error(const char* call_text, cudaError_t err, const char* file, int line) {
  return Status::failure(call_name(call_text) + ": " + describe(err) + " [" + short_file(file) +
                         ":" + std::to_string(line) + "]");
}

Status make_error(const char* call_text, CUresult err, const char* file, int line) {
  return Status::failure(call_name(call_text) + ": " + describe(err) + " [" + short_file(file) +
                         ":" + std::to_string(line) + "]");
}

}  // namespace detail
}  // namespace cipc_cuda
