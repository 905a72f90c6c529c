// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ipcsrc/gl/glslotbuffer.h"

#include <fcntl.h>
#include <gst/gl/gstglfuncs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#ifndef GL_HANDLE_TYPE_OPAQUE_FD_EXT
#define GL_HANDLE_TYPE_OPAQUE_FD_EXT 0x9586
#endif
#ifndef GL_NUM_DEVICE_UUIDS_EXT
#define GL_NUM_DEVICE_UUIDS_EXT 0x9596
#endif
#ifndef GL_DEVICE_UUID_EXT
#define GL_DEVICE_UUID_EXT 0x9597
#endif
#ifndef GL_PIXEL_UNPACK_BUFFER
#define GL_PIXEL_UNPACK_BUFFER 0x88EC
#endif
#ifndef GL_PIXEL_UNPACK_BUFFER_BINDING
#define GL_PIXEL_UNPACK_BUFFER_BINDING 0x88EF
#endif
#ifndef GL_UNPACK_ROW_LENGTH
#define GL_UNPACK_ROW_LENGTH 0x0CF2
#endif

namespace cipc_gst {

namespace {

// GL_EXT_memory_object's entry points: GStreamer's GL function table does not carry them.
struct MemoryObjectFuncs {
  void (*create)(GLsizei, GLuint*) = nullptr;
  void (*destroy)(GLsizei, const GLuint*) = nullptr;
  void (*import_fd)(GLuint, GLuint64, GLenum, GLint) = nullptr;
  void (*buffer_storage)(GLenum, GLsizeiptr, GLuint, GLuint64) = nullptr;
  void (*get_uuid)(GLenum, GLuint, GLubyte*) = nullptr;

  explicit MemoryObjectFuncs(GstGLContext* context) {
    load(context, "glCreateMemoryObjectsEXT", &create);
    load(context, "glDeleteMemoryObjectsEXT", &destroy);
    load(context, "glImportMemoryFdEXT", &import_fd);
    load(context, "glBufferStorageMemEXT", &buffer_storage);
    load(context, "glGetUnsignedBytei_vEXT", &get_uuid);
  }
  bool complete() const { return create && destroy && import_fd && buffer_storage && get_uuid; }

 private:
  template <typename F>
  static void load(GstGLContext* context, const char* name, F* out) {
    *out = reinterpret_cast<F>(gst_gl_context_get_proc_address(context, name));
  }
};

// Clears errors of earlier calls (ours to report are the next ones). Bounded: a lost context
// may report itself on every call.
void clear_gl_errors(const GstGLFuncs* gl) {
  for (int i = 0; i < 16 && gl->GetError() != GL_NO_ERROR; ++i) {
  }
}

std::string uuid_text(const uint8_t* uuid) {
  char text[40];
  std::snprintf(text, sizeof(text),
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", uuid[0],
                uuid[1], uuid[2], uuid[3], uuid[4], uuid[5], uuid[6], uuid[7], uuid[8], uuid[9],
                uuid[10], uuid[11], uuid[12], uuid[13], uuid[14], uuid[15]);
  return text;
}

std::string gl_error_text(const char* what, GLenum error) {
  char text[96];
  std::snprintf(text, sizeof(text), "%s: GL error 0x%04x", what, error);
  return text;
}

}  // namespace

bool gl_memory_object_available(GstGLContext* context, std::string* why) {
  for (const char* ext : {"GL_EXT_memory_object", "GL_EXT_memory_object_fd"}) {
    if (!gst_gl_context_check_feature(context, ext)) {
      *why = std::string("this GL does not offer ") + ext;
      return false;
    }
  }
  const GstGLAPI api = gst_gl_context_get_gl_api(context);
  if (!(api & GST_GL_API_OPENGL) && !(api & GST_GL_API_OPENGL3) &&
      !gst_gl_context_check_gl_version(context, GST_GL_API_GLES2, 3, 0)) {
    *why = "GLES 2 has no pixel buffers with a row length (GLES 3 or desktop GL is needed)";
    return false;
  }
  if (!MemoryObjectFuncs(context).complete()) {
    *why = "this GL names GL_EXT_memory_object_fd but does not give its functions";
    return false;
  }
  return true;
}

bool gl_runs_on_device(GstGLContext* context, const std::array<uint8_t, 16>& uuid,
                       std::string* why) {
  const MemoryObjectFuncs mo(context);
  const GstGLFuncs* gl = context->gl_vtable;
  if (!mo.complete()) {
    *why = "GL_EXT_memory_object's functions are missing";
    return false;
  }
  clear_gl_errors(gl);
  GLint devices = 0;
  gl->GetIntegerv(GL_NUM_DEVICE_UUIDS_EXT, &devices);
  std::string gl_devices;
  for (GLint i = 0; i < devices && i < 16; ++i) {
    std::array<uint8_t, 16> gl_uuid{};
    mo.get_uuid(GL_DEVICE_UUID_EXT, GLuint(i), gl_uuid.data());
    if (gl->GetError() != GL_NO_ERROR) break;
    if (gl_uuid == uuid) return true;
    gl_devices += (gl_devices.empty() ? "" : ", ") + uuid_text(gl_uuid.data());
  }
  const char* renderer =
      reinterpret_cast<const char*>(gl->GetString(GL_RENDERER));  // e.g. llvmpipe
  *why = std::string("GL (") + (renderer ? renderer : "unknown renderer") + ") runs on " +
         (gl_devices.empty() ? std::string("no device it names") : "device " + gl_devices) +
         ", not on the producer's GPU " + uuid_text(uuid.data());
  return false;
}

std::unique_ptr<GlSlotBuffer> GlSlotBuffer::import(GstGLContext* context, int fd,
                                                   size_t allocation_bytes, size_t buffer_bytes,
                                                   std::string* why) {
  const MemoryObjectFuncs mo(context);
  if (!mo.complete()) {
    *why = "GL_EXT_memory_object_fd's functions are missing";
    return nullptr;
  }
  if (buffer_bytes == 0 || buffer_bytes > allocation_bytes) {
    *why = "a slot of " + std::to_string(buffer_bytes) + " bytes in an allocation of " +
           std::to_string(allocation_bytes);
    return nullptr;
  }
  // GL owns the descriptor it imports: it gets a duplicate, ours stays with the slot.
  const int gl_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (gl_fd < 0) {
    *why = std::string("duplicating the slot's descriptor: ") + std::strerror(errno);
    return nullptr;
  }
  const GstGLFuncs* gl = context->gl_vtable;
  clear_gl_errors(gl);
  std::unique_ptr<GlSlotBuffer> made(new GlSlotBuffer(context));
  mo.create(1, &made->memory_object_);
  mo.import_fd(made->memory_object_, GLuint64(allocation_bytes), GL_HANDLE_TYPE_OPAQUE_FD_EXT,
               gl_fd);
  GLenum error = gl->GetError();
  if (error != GL_NO_ERROR) {
    close(gl_fd);  // a failed import leaves it ours
    *why = gl_error_text("glImportMemoryFdEXT refused the slot", error);
    return nullptr;  // the destructor deletes the memory object
  }
  GLint bound = 0;
  gl->GetIntegerv(GL_PIXEL_UNPACK_BUFFER_BINDING, &bound);
  gl->GenBuffers(1, &made->buffer_);
  gl->BindBuffer(GL_PIXEL_UNPACK_BUFFER, made->buffer_);
  mo.buffer_storage(GL_PIXEL_UNPACK_BUFFER, GLsizeiptr(buffer_bytes), made->memory_object_, 0);
  error = gl->GetError();
  gl->BindBuffer(GL_PIXEL_UNPACK_BUFFER, GLuint(bound));
  if (error != GL_NO_ERROR) {
    *why = gl_error_text("glBufferStorageMemEXT refused the slot's memory", error);
    return nullptr;
  }
  return made;
}

GlSlotBuffer::~GlSlotBuffer() {
  const GstGLFuncs* gl = context_->gl_vtable;
  if (buffer_) gl->DeleteBuffers(1, &buffer_);
  if (memory_object_) MemoryObjectFuncs(context_).destroy(1, &memory_object_);
}

bool GlSlotBuffer::copy_to_texture(unsigned texture, size_t offset, size_t stride, int width,
                                   int height, std::string* why) {
  if (stride % 4 != 0 || stride < size_t(width) * 4) {
    *why = "rows of " + std::to_string(stride) + " bytes for " + std::to_string(width) +
           " pixels of 4 bytes";
    return false;
  }
  const GstGLFuncs* gl = context_->gl_vtable;
  clear_gl_errors(gl);
  GLint bound_buffer = 0, bound_texture = 0, row_length = 0, alignment = 4;
  gl->GetIntegerv(GL_PIXEL_UNPACK_BUFFER_BINDING, &bound_buffer);
  gl->GetIntegerv(GL_TEXTURE_BINDING_2D, &bound_texture);
  gl->GetIntegerv(GL_UNPACK_ROW_LENGTH, &row_length);
  gl->GetIntegerv(GL_UNPACK_ALIGNMENT, &alignment);
  gl->BindBuffer(GL_PIXEL_UNPACK_BUFFER, buffer_);
  gl->PixelStorei(GL_UNPACK_ROW_LENGTH, GLint(stride / 4));
  gl->PixelStorei(GL_UNPACK_ALIGNMENT, 4);
  gl->BindTexture(GL_TEXTURE_2D, texture);
  // The bytes go in as they are (GstGLMemory keeps BGRA and friends in RGBA8 textures and
  // swizzles when drawing), the same as GStreamer's own upload.
  gl->TexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE,
                    reinterpret_cast<const void*>(offset));
  const GLenum error = gl->GetError();
  gl->BindTexture(GL_TEXTURE_2D, GLuint(bound_texture));
  gl->PixelStorei(GL_UNPACK_ALIGNMENT, alignment);
  gl->PixelStorei(GL_UNPACK_ROW_LENGTH, row_length);
  gl->BindBuffer(GL_PIXEL_UNPACK_BUFFER, GLuint(bound_buffer));
  if (error != GL_NO_ERROR) {
    *why = gl_error_text("glTexSubImage2D from the slot's buffer", error);
    return false;
  }
  return true;
}

}  // namespace cipc_gst
