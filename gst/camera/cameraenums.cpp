// SPDX-License-Identifier: LGPL-2.1-or-later
#include "camera/cameraenums.h"

#include "common/enumtypes.h"

GType gst_cipc_bit_alignment_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {GST_CIPC_BIT_ALIGNMENT_LSB, "10 bits in bits 9..0 of the 16-bit word (V4L2 RG10)", "lsb"},
        {GST_CIPC_BIT_ALIGNMENT_MSB,
         "10 bits in bits 15..6, low 6 bits zero or repeated (as Jetson Xavier/Orin capture "
         "hardware writes them)",
         "msb"},
        {0, nullptr, nullptr}};
    return cipc_gst::register_enum("GstCipcBitAlignment", values);
  }();
  return type;
}

GType gst_cipc_demosaic_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {GST_CIPC_DEMOSAIC_BILINEAR,
         "Bilinear interpolation (3x3): fastest, softer, colour fringes", "bilinear"},
        {GST_CIPC_DEMOSAIC_MHC,
         "Malvar-He-Cutler gradient-corrected interpolation (5x5): sharper, fewer fringes", "mhc"},
        {0, nullptr, nullptr}};
    return cipc_gst::register_enum("GstCipcDemosaic", values);
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
    return cipc_gst::register_enum("GstCipcWhiteBalance", values);
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
    return cipc_gst::register_enum("GstCipcTransfer", values);
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
    return cipc_gst::register_enum("GstCipcPrecision", values);
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
    return cipc_gst::register_enum("GstCipcInputMode", values);
  }();
  return type;
}

cipc_bayer::BitAlignment gst_cipc_bit_alignment_to_bayer(GstCipcBitAlignment alignment) {
  return alignment == GST_CIPC_BIT_ALIGNMENT_MSB ? cipc_bayer::BitAlignment::kMsb
                                                 : cipc_bayer::BitAlignment::kLsb;
}

GType gst_cipc_v4l2_io_mode_get_type(void) {
  static GType type = [] {
    static const GEnumValue values[] = {
        {GST_CIPC_V4L2_IO_AUTO,
         "USERPTR into downstream's or our own buffers; MMAP (with a warning) if the driver "
         "refuses USERPTR",
         "auto"},
        {GST_CIPC_V4L2_IO_USERPTR,
         "USERPTR only: the driver writes into downstream's buffers when they suit, else into "
         "our page-aligned ones",
         "userptr"},
        {GST_CIPC_V4L2_IO_MMAP,
         "MMAP: the driver's own buffers, pushed without a copy and requeued when released",
         "mmap"},
        {0, nullptr, nullptr}};
    return cipc_gst::register_enum("GstCudaV4l2SrcIoMode", values);
  }();
  return type;
}
