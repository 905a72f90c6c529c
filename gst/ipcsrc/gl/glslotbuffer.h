// SPDX-License-Identifier: LGPL-2.1-or-later
// A producer's CUDA slot seen by GL with no copy (cudasrc-ipc's gl-import=memory-object): the
// slot's descriptor imported as a GL memory object (GL_EXT_memory_object_fd) and bound as a
// pixel-unpack buffer, from which GL copies a frame into a texture on the GPU. Every call must
// be made in the GL thread of the context passed (GL's objects belong to it), the destructor
// included. Measured on an H200 (driver 580): GL reads exactly what CUDA wrote; a texture made
// directly on the memory object (glTexStorageMem2DEXT, linear tiling) is refused.
#pragma once

#include <gst/gl/gl.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace cipc_gst {

// Whether `context` offers what the import needs (GL_EXT_memory_object, ..._fd, and pixel
// buffers with a row length: desktop GL or GLES 3); if not, *why names what is missing.
bool gl_memory_object_available(GstGLContext* context, std::string* why);

// Whether GL runs on the device with this UUID (one of GL_EXT_memory_object's device UUIDs,
// which NVIDIA's GL gives as CUDA does): GL may import only memory of a device it runs on. A
// GL on another GPU, or a software GL, would otherwise be handed a descriptor it cannot map.
// If not, *why names both devices. In the GL thread.
bool gl_runs_on_device(GstGLContext* context, const std::array<uint8_t, 16>& uuid,
                       std::string* why);

class GlSlotBuffer {
 public:
  ~GlSlotBuffer();
  GlSlotBuffer(const GlSlotBuffer&) = delete;
  GlSlotBuffer& operator=(const GlSlotBuffer&) = delete;

  // Imports a duplicate of `fd` (the caller keeps its own), an allocation of `allocation_bytes`,
  // and binds its first `buffer_bytes` as a GL buffer. nullptr with *why on failure.
  static std::unique_ptr<GlSlotBuffer> import(GstGLContext* context, int fd,
                                              size_t allocation_bytes, size_t buffer_bytes,
                                              std::string* why);

  // Queues a copy of `width` x `height` 4-byte pixels at `offset`, rows `stride` bytes apart,
  // into `texture` (GL_TEXTURE_2D, RGBA8) at the top left, after what GL already has queued;
  // GL's pixel-store and binding state is left as found. False with *why on a GL error.
  bool copy_to_texture(unsigned texture, size_t offset, size_t stride, int width, int height,
                       std::string* why);

 private:
  explicit GlSlotBuffer(GstGLContext* context) : context_(context) {}
  GstGLContext* context_;  // not referenced: the owner keeps it alive
  unsigned memory_object_ = 0;
  unsigned buffer_ = 0;
};

}  // namespace cipc_gst
