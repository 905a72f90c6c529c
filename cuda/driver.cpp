// SPDX-License-Identifier: LGPL-2.1-or-later
#include "driver.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>
#include <string>

#include "check.h"

namespace cipc_cuda {
namespace detail {

namespace {

struct Loaded {
  std::once_flag once;
  DriverApi api;
  Status status;
  std::atomic<bool> ok{false};  // set (release) once `api` is complete
};

Loaded& loaded() {
  // Never destroyed: destructors of static RAII objects may still look at it at exit.
  static Loaded* l = new Loaded();
  return *l;
}

// Looks up one symbol; false with `why` filled when the driver does not provide it.
template <typename Fn>
bool lookup(const char* symbol, Fn* fn, Status* why) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t err =
      cudaGetDriverEntryPointByVersion(symbol, &p, kDriverAbiVersion, cudaEnableDefault, &query);
  if (err != cudaSuccess) {
    // The first runtime call of the process: failing here means the runtime could not start.
    *why = Status::failure("CUDA driver API unavailable: " +
                           explain_init_error(err, "cudaGetDriverEntryPointByVersion"));
    return false;
  }
  if (query != cudaDriverEntryPointSuccess || p == nullptr) {
    *why = Status::failure(
        std::string("CUDA driver API unavailable: the installed driver does not provide ") +
        symbol + " (ABI " + std::to_string(kDriverAbiVersion / 1000) + "." +
        std::to_string(kDriverAbiVersion % 1000 / 10) + ", " +
        (query == cudaDriverEntryPointVersionNotSufficent ? "driver too old" : "symbol not found") +
        ")");
    return false;
  }
  *fn = reinterpret_cast<Fn>(p);
  return true;
}

void load(Loaded* l) {
  DriverApi api;
  Status why;
#define CIPC_LOOKUP(name)                \
  if (!lookup(#name, &api.name, &why)) { \
    l->status = why;                     \
    return;                              \
  }
  CIPC_LOOKUP(cuGetErrorName)
  CIPC_LOOKUP(cuGetErrorString)
  CIPC_LOOKUP(cuDeviceGet)
  CIPC_LOOKUP(cuDeviceGetAttribute)
  CIPC_LOOKUP(cuMemGetAllocationGranularity)
  CIPC_LOOKUP(cuMemCreate)
  CIPC_LOOKUP(cuMemRelease)
  CIPC_LOOKUP(cuMemExportToShareableHandle)
  CIPC_LOOKUP(cuMemImportFromShareableHandle)
  CIPC_LOOKUP(cuMemAddressReserve)
  CIPC_LOOKUP(cuMemAddressFree)
  CIPC_LOOKUP(cuMemMap)
  CIPC_LOOKUP(cuMemUnmap)
  CIPC_LOOKUP(cuMemSetAccess)
  CIPC_LOOKUP(cuCtxGetCurrent)
#undef CIPC_LOOKUP
  l->api = api;
  l->status = Status::ok();
  l->ok.store(true, std::memory_order_release);
}

}  // namespace

Status driver_api(const DriverApi** out) {
  Loaded& l = loaded();
  std::call_once(l.once, load, &l);
  // After call_once returns, l.ok and l.status are published (call_once synchronises).
  *out = l.ok.load(std::memory_order_acquire) ? &l.api : nullptr;
  return l.status;
}

const DriverApi* loaded_driver_api() {
  Loaded& l = loaded();
  return l.ok.load(std::memory_order_acquire) ? &l.api : nullptr;
}

}  // namespace detail
}  // namespace cipc_cuda
