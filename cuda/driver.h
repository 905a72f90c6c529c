// SPDX-License-Identifier: LGPL-2.1-or-later
// Internal to cuda/: the CUDA driver API functions we need (VMM, device attributes, error
// strings), looked up once at run time through the (statically linked) runtime's
// cudaGetDriverEntryPointByVersion. Nothing here links libcuda: <cuda.h> and <cudaTypedefs.h>
// are used only for types, enums and function-pointer typedefs. A machine without a driver
// therefore loads our code fine and gets a Status saying why there is no driver.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include "cuda_api.h"

namespace cipc_cuda {
namespace detail {

// The ABI version we ask the driver for (CUDA 12.0). Every function below has had the same
// signature since CUDA 11.4 or earlier, so this matches the typedefs and works with every
// driver that can run this build's CUDA 13 runtime anyway.
constexpr unsigned int kDriverAbiVersion = 12000;

struct DriverApi {
  PFN_cuGetErrorName_v6000 cuGetErrorName = nullptr;
  PFN_cuGetErrorString_v6000 cuGetErrorString = nullptr;
  PFN_cuDeviceGet_v2000 cuDeviceGet = nullptr;
  PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 cuMemGetAllocationGranularity = nullptr;
  PFN_cuMemCreate_v10020 cuMemCreate = nullptr;
  PFN_cuMemRelease_v10020 cuMemRelease = nullptr;
  PFN_cuMemExportToShareableHandle_v10020 cuMemExportToShareableHandle = nullptr;
  PFN_cuMemImportFromShareableHandle_v10020 cuMemImportFromShareableHandle = nullptr;
  PFN_cuMemAddressReserve_v10020 cuMemAddressReserve = nullptr;
  PFN_cuMemAddressFree_v10020 cuMemAddressFree = nullptr;
  PFN_cuMemMap_v10020 cuMemMap = nullptr;
  PFN_cuMemUnmap_v10020 cuMemUnmap = nullptr;
  PFN_cuMemSetAccess_v10020 cuMemSetAccess = nullptr;
  PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent = nullptr;
};

// The table, loaded on first use (thread-safe, once per process; the outcome, success or
// failure, is remembered). On failure *out is null and the Status explains, e.g.
// "CUDA driver API unavailable: no CUDA driver is installed (...)".
Status driver_api(const DriverApi** out);
// The table if it has been loaded successfully, else null. Never triggers loading: for error
// paths and destructors.
const DriverApi* loaded_driver_api();

}  // namespace detail
}  // namespace cipc_cuda
