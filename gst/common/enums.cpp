// SPDX-License-Identifier: LGPL-2.1-or-later
#include "common/enums.h"

#include <gst/gst.h>

namespace {

template <typename E>
constexpr gint value_of(E e) {
  return static_cast<gint>(e);
}

GType register_enum(const char* name, const GEnumValue* values) {
  GType type = g_enum_register_static(name, values);
  gst_type_mark_as_plugin_api(type, static_cast<GstPluginAPIFlags>(0));
  return type;
}

}  // namespace

GType gst_cipc_sink_memory_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {value_of(cipc::MemoryKind::kHost), "Shared host memory (memfd); works without a GPU",
         "host"},
        {value_of(cipc::MemoryKind::kCuda),
         "CUDA device memory (VMM, exported as file descriptors)", "cuda"},
        {0, nullptr, nullptr}};
    return register_enum("GstCipcSinkMemory", values);
  }();
  return type;
}

GType gst_cipc_src_memory_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {value_of(cipc::MemoryKind::kAny), "Whatever the producer shares", "auto"},
        {value_of(cipc::MemoryKind::kHost), "Shared host memory only", "host"},
        {value_of(cipc::MemoryKind::kCuda), "CUDA device memory only", "cuda"},
        {0, nullptr, nullptr}};
    return register_enum("GstCipcSrcMemory", values);
  }();
  return type;
}

GType gst_cipc_copy_policy_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {GST_CIPC_COPY_IF_NEEDED,
         "Copy buffers that are not in shareable memory into a slot (counted in stats)",
         "copy-if-needed"},
        {GST_CIPC_REQUIRE_ZERO_COPY,
         "Fail with an error when upstream does not write into the shareable pool",
         "require-zero-copy"},
        {0, nullptr, nullptr}};
    return register_enum("GstCipcCopyPolicy", values);
  }();
  return type;
}

GType gst_cipc_sync_mode_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {value_of(cipc::SyncMode::kGpuEvents),
         "Interprocess CUDA events waited on by the GPU: no CPU stalls", "gpu-events"},
        {value_of(cipc::SyncMode::kCpu),
         "Synchronise streams on the CPU (for platforms without interprocess events)", "cpu"},
        {0, nullptr, nullptr}};
    return register_enum("GstCipcSyncMode", values);
  }();
  return type;
}

GType gst_cipc_io_mode_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {GST_CIPC_IO_IMPORT,
         "Output the producer's slot itself; downstream holds it (and the producer's slot) "
         "until it drops the buffer",
         "import"},
        {GST_CIPC_IO_COPY,
         "Output a private device copy and release the producer's slot at once (for consumers "
         "that keep frames long)",
         "copy"},
        {0, nullptr, nullptr}};
    return register_enum("GstCipcIoMode", values);
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
    return register_enum("GstCipcGlImport", values);
  }();
  return type;
}

GType gst_cipc_bit_alignment_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {GST_CIPC_BIT_ALIGNMENT_LSB, "10 bits in bits 9..0 of the 16-bit word (V4L2 RG10)", "lsb"},
        {GST_CIPC_BIT_ALIGNMENT_MSB,
         "10 bits in bits 15..6, low 6 bits zero or repeated (as Jetson Xavier/Orin capture "
         "hardware writes them)",
         "msb"},
        {0, nullptr, nullptr}};
    return register_enum("GstCipcBitAlignment", values);
  }();
  return type;
}

cipc_bayer::BitAlignment gst_cipc_bit_alignment_to_bayer(GstCipcBitAlignment alignment) {
  return alignment == GST_CIPC_BIT_ALIGNMENT_MSB ? cipc_bayer::BitAlignment::kMsb
                                                 : cipc_bayer::BitAlignment::kLsb;
}

GType gst_cipc_demosaic_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {GST_CIPC_DEMOSAIC_BILINEAR,
         "Bilinear interpolation (3x3): fastest, softer, colour fringes", "bilinear"},
        {GST_CIPC_DEMOSAIC_MHC,
         "Malvar-He-Cutler gradient-corrected interpolation (5x5): sharper, fewer fringes", "mhc"},
        {0, nullptr, nullptr}};
    return register_enum("GstCipcDemosaic", values);
  }();
  return type;
}

GType gst_cipc_white_balance_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {GST_CIPC_WB_FIXED, "Fixed gains from wb-red, wb-green and wb-blue", "fixed"},
        {GST_CIPC_WB_GRAY_WORLD,
         "Gray world: gains that make the previous frame's mean red, green and blue equal "
         "(gathered by the debayer kernel itself)",
         "gray-world"},
        {0, nullptr, nullptr}};
    return register_enum("GstCipcWhiteBalance", values);
  }();
  return type;
}

GType gst_cipc_transfer_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {GST_CIPC_TRANSFER_SRGB, "sRGB (IEC 61966-2-1) gamma: for display", "srgb"},
        {GST_CIPC_TRANSFER_LINEAR, "Linear: 8-bit codes proportional to light (for analysis)",
         "linear"},
        {GST_CIPC_TRANSFER_POWER, "Power law x^(1/gamma), gamma from the gamma property", "power"},
        {0, nullptr, nullptr}};
    return register_enum("GstCipcTransfer", values);
  }();
  return type;
}

GType gst_cipc_precision_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {GST_CIPC_PRECISION_FAST,
         "Every output byte within 1 code of the CPU reference, about twice as fast (exact "
         "instead where that bound cannot hold: gamma above about 1.6, gain x white balance "
         "above 64)",
         "fast"},
        {GST_CIPC_PRECISION_EXACT, "Bit-exact against the CPU reference (cuda/debayer.h)", "exact"},
        {0, nullptr, nullptr}};
    return register_enum("GstCipcPrecision", values);
  }();
  return type;
}

GType gst_cipc_input_mode_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {GST_CIPC_INPUT_AUTO,
         "Whichever of the two below is faster on this machine, timed on the negotiated frame "
         "size when the first frame arrives (the stats say which and the times)",
         "auto"},
        {GST_CIPC_INPUT_IN_PLACE,
         "The kernel reads the frame over the bus where upstream wrote it: no copy (best where "
         "host memory is the GPU's, as on Jetson)",
         "in-place"},
        {GST_CIPC_INPUT_UPLOAD,
         "A copy engine uploads the frame into device memory first, overlapping the previous "
         "frame's kernel (one HtoD per frame; best on a discrete GPU)",
         "upload"},
        {0, nullptr, nullptr}};
    return register_enum("GstCipcInputMode", values);
  }();
  return type;
}

GType gst_cipc_backpressure_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {GST_CIPC_BACKPRESSURE_AUTO,
         "block when upstream is not live (every frame reaches every consumer), drop when it is "
         "live (a slow consumer never slows the camera or the others)",
         "auto"},
        {GST_CIPC_BACKPRESSURE_BLOCK,
         "wait until every consumer can take the frame; a consumer that stops releasing still "
         "leaves at release-timeout",
         "block"},
        {GST_CIPC_BACKPRESSURE_DROP, "skip a consumer that holds max-in-flight frames", "drop"},
        {0, nullptr, nullptr}};
    return register_enum("GstCipcBackpressure", values);
  }();
  return type;
}
