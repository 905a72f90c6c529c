// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ipcsrc/srcenums.h"

#include "common/enumtypes.h"

GType gst_cipc_io_mode_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {GST_CIPC_IO_IMPORT,
         "Output the producer's slot itself; downstream holds it (and the producer's slot) "
         "until it drops the buffer",
         "import"},
        {GST_CIPC_IO_COPY,
         "Output a private device copy and release the producer's slot once the copy has read "
         "it, by the next frame (for consumers that keep frames long)",
         "copy"},
        {0, nullptr, nullptr}};
    return cipc_gst::register_enum("GstCipcIoMode", values);
  }();
  return type;
}

GType gst_cipc_gl_import_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {GST_CIPC_GL_IMPORT_NONE,
         "Do not offer GL memory: GL elements take system memory (one download per frame, then "
         "GL's own upload)",
         "none"},
        {GST_CIPC_GL_IMPORT_AUTO,
         "Offer GL memory for RGBA, BGRA, RGBx and BGRx and copy each frame into it on the GPU "
         "(cuda-interop); where CUDA cannot register downstream's textures (a GL context on "
         "another GPU), warn once and fill them through system memory instead",
         "auto"},
        {GST_CIPC_GL_IMPORT_CUDA_INTEROP,
         "Offer GL memory for RGBA, BGRA, RGBx and BGRx: each frame is copied on the GPU into a "
         "texture of downstream's GL pool through CUDA-OpenGL interop (no download); an error "
         "where CUDA cannot register the textures",
         "cuda-interop"},
        {GST_CIPC_GL_IMPORT_MEMORY_OBJECT,
         "Offer GL memory for RGBA, BGRA, RGBx and BGRx: each producer slot is imported into GL "
         "once (GL_EXT_memory_object_fd) and GL copies each frame from it into a texture of "
         "downstream's GL pool on the GPU (no CUDA copy, no download); the streaming thread "
         "waits for the producer's frame on the CPU, and each imported slot keeps a descriptor "
         "open; an error where GL lacks the extension",
         "memory-object"},
        {0, nullptr, nullptr}};
    return cipc_gst::register_enum("GstCipcGlImport", values);
  }();
  return type;
}

GType gst_cipc_src_memory_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {cipc_gst::enum_value_of(cipc::MemoryKind::kAny), "Whatever the producer shares", "auto"},
        {cipc_gst::enum_value_of(cipc::MemoryKind::kHost), "Shared host memory only", "host"},
        {cipc_gst::enum_value_of(cipc::MemoryKind::kCuda), "CUDA device memory only", "cuda"},
        {0, nullptr, nullptr}};
    return cipc_gst::register_enum("GstCipcSrcMemory", values);
  }();
  return type;
}
