// SPDX-License-Identifier: LGPL-2.1-or-later
// CUDA-OpenGL interop for one GL texture (cudasrc-ipc's GL output, gl-import=cuda-interop): the
// texture is registered with CUDA once, then each frame is copied into it by a device-to-array
// copy queued on a CUDA stream. GL commands issued after copy_from() returns start only after
// that copy has finished (the driver orders them at unmap), so no CPU wait is needed.
//
// The GL context that owns the texture must be current on the calling thread for every call,
// the destructor included, and CUDA must run on the same GPU as that context.
#pragma once

#include <cstddef>

#include "cuda_api.h"

namespace cipc_cuda {

class GlTextureTarget {
 public:
  GlTextureTarget() = default;
  ~GlTextureTarget();
  GlTextureTarget(GlTextureTarget&& other) noexcept;
  GlTextureTarget& operator=(GlTextureTarget&& other) noexcept;
  GlTextureTarget(const GlTextureTarget&) = delete;
  GlTextureTarget& operator=(const GlTextureTarget&) = delete;

  // Registers GL texture `texture` of binding `target` (GL_TEXTURE_2D) for writing by CUDA on
  // `device`.
  static Status register_texture(int device, unsigned texture, unsigned target,
                                 GlTextureTarget* out);
  bool valid() const { return resource_ != nullptr; }

  // Copies `rows` rows of `row_bytes` bytes from `src` (rows `src_pitch` apart) into the
  // texture's level 0, top-left, queued on `stream` after what is already queued there.
  Status copy_from(DevicePtr src, size_t src_pitch, size_t row_bytes, size_t rows,
                   StreamHandle stream);

 private:
  void reset();
  void* resource_ = nullptr;  // cudaGraphicsResource_t
  int device_ = -1;
};

}  // namespace cipc_cuda
