// SPDX-License-Identifier: LGPL-2.1-or-later
#include "gl_interop.h"

#include <cuda_gl_interop.h>

#include <utility>

#include "check.h"
#include "device_scope.h"

namespace cipc_cuda {

namespace {
cudaGraphicsResource_t to_resource(void* r) {
  return static_cast<cudaGraphicsResource_t>(r);
}
}  // namespace

GlTextureTarget::~GlTextureTarget() {
  reset();
}

GlTextureTarget::GlTextureTarget(GlTextureTarget&& other) noexcept
    : resource_(std::exchange(other.resource_, nullptr)), device_(other.device_) {}

GlTextureTarget& GlTextureTarget::operator=(GlTextureTarget&& other) noexcept {
  if (this != &other) {
    reset();
    resource_ = std::exchange(other.resource_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

void GlTextureTarget::reset() {
  if (resource_ == nullptr) return;
  detail::DeviceScope scope;
  (void)scope.enter(device_);
  // Fails only when the context is already gone, where nothing is left to free.
  (void)cudaGraphicsUnregisterResource(to_resource(resource_));
  resource_ = nullptr;
}

Status GlTextureTarget::register_texture(int device, unsigned texture, unsigned target,
                                         GlTextureTarget* out) {
  detail::DeviceScope scope;
  CIPC_CUDA_TRY(scope.enter(device));
  cudaGraphicsResource_t resource = nullptr;
  CIPC_CUDA_TRY(cudaGraphicsGLRegisterImage(&resource, texture, target,
                                            cudaGraphicsRegisterFlagsWriteDiscard));
  GlTextureTarget made;
  made.resource_ = resource;
  made.device_ = device;
  *out = std::move(made);
  return Status::ok();
}

Status GlTextureTarget::copy_from(DevicePtr src, size_t src_pitch, size_t row_bytes, size_t rows,
                                  StreamHandle stream) {
  detail::DeviceScope scope;
  CIPC_CUDA_TRY(scope.enter(device_));
  auto s = static_cast<cudaStream_t>(stream);
  cudaGraphicsResource_t resource = to_resource(resource_);
  CIPC_CUDA_TRY(cudaGraphicsMapResources(1, &resource, s));
  cudaArray_t array = nullptr;
  Status st = CIPC_CUDA_CHECK(cudaGraphicsSubResourceGetMappedArray(&array, resource, 0, 0));
  if (st)
    st = CIPC_CUDA_CHECK(cudaMemcpy2DToArrayAsync(array, 0, 0, reinterpret_cast<const void*>(src),
                                                  src_pitch, row_bytes, rows,
                                                  cudaMemcpyDeviceToDevice, s));
  // Unmapped even after a failure, so that GL may use the texture again.
  const Status unmapped = CIPC_CUDA_CHECK(cudaGraphicsUnmapResources(1, &resource, s));
  return st ? unmapped : st;
}

}  // namespace cipc_cuda
