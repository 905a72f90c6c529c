// SPDX-License-Identifier: LGPL-2.1-or-later
// Internal to cuda/: turns a failed CUDA runtime (cudaError_t) or driver (CUresult) call into a
// Status whose message names the call, the error's name and description, and where it happened:
//   "cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY (out of memory) [cuda/cuda_api.cpp:57]"
//
//   CIPC_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));   // returns the Status
//   Status st = CIPC_CUDA_CHECK(cudaEventQuery(e));                       // just builds it
//
// Driver calls made through the entry-point table (`d->cuMemMap(...)`, see driver.h) are named
// by the function alone ("cuMemMap"); the full call text is not repeated in the message.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>

#include "cuda_api.h"

namespace cipc_cuda {
namespace detail {

// "cudaErrorNoDevice (no CUDA-capable device is detected)".
std::string describe(cudaError_t err);
// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)". Uses the driver's own strings when the driver is
// loaded, a built-in table of the common codes otherwise, "CUresult 123" as the last resort.
std::string describe(CUresult err);

// The function name inside a call's source text: "d->cuMemMap(p, n, 0, h, 0)" -> "cuMemMap".
std::string call_name(const char* call_text);
// The last two components of a source path: "../cuda/cuda_api.cpp" -> "cuda/cuda_api.cpp".
std::string short_file(const char* file);

// A sentence for why the runtime could not start, for the errors that mean "no usable driver or
// device" (cudaErrorNoDevice, cudaErrorInsufficientDriver, ...); `call` is the runtime call that
// failed. Other errors get "CUDA initialisation failed: <describe(err)>".
std::string explain_init_error(cudaError_t err, const char* call);

// "<call>: <describe(err)> [<file>:<line>]" as a failed Status.
Status make_error(const char* call_text, cudaError_t err, const char* file, int line);
Status make_error(const char* call_text, CUresult err, const char* file, int line);

inline bool failed(cudaError_t err) {
  return err != cudaSuccess;
}
inline bool failed(CUresult err) {
  return err != CUDA_SUCCESS;
}

// The Status for the result of a call: success, or make_error.
template <typename E>
Status check(E err, const char* call_text, const char* file, int line) {
  if (!failed(err)) return Status::ok();
  return make_error(call_text, err, file, line);
}

}  // namespace detail
}  // namespace cipc_cuda

// Evaluates `expr` (a cudaError_t or CUresult) once; on failure returns the Status from the
// enclosing function, which must return cipc_cuda::Status.
#define CIPC_CUDA_TRY(expr)                                                              \
  do {                                                                                   \
    const auto cipc_cuda_err_ = (expr);                                                  \
    if (::cipc_cuda::detail::failed(cipc_cuda_err_))                                     \
      return ::cipc_cuda::detail::make_error(#expr, cipc_cuda_err_, __FILE__, __LINE__); \
  } while (0)

// Evaluates `expr` once and yields its Status (success or the described failure).
#define CIPC_CUDA_CHECK(expr) ::cipc_cuda::detail::check((expr), #expr, __FILE__, __LINE__)

// Propagates a failed cipc_cuda::Status from an expression.
#define CIPC_RETURN_IF_ERROR(expr)                    \
  do {                                                \
    ::cipc_cuda::Status cipc_cuda_st_ = (expr);       \
    if (!cipc_cuda_st_.is_ok()) return cipc_cuda_st_; \
  } while (0)
