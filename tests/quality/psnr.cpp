// SPDX-License-Identifier: LGPL-2.1-or-later
// Debayer quality: photographs shipped by the Debian package libjxl-testdata are mosaicked
// (bayer/mosaic.h: RGGB, 10-bit, no black level, unity gains, as an ideal camera would sample
// them) and demosaicked again (cuda/debayer.h, linear transfer) with both methods. The PSNR of
// the result against the photograph measures the interpolation alone: the 8 -> 10 -> 8-bit
// round trip is exact on flat fields (checked below). No GPU needed. docs/quality.md has the
// numbers and the GStreamer baseline (tests/quality/gst-bayer-baseline).
#include <gtest/gtest.h>
#include <png.h>

#include <sys/stat.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "debayer.h"
#include "mosaic.h"

namespace cb = cipc_bayer;
namespace cc = cipc_cuda;

namespace {

constexpr const char* kPackage = "libjxl-testdata";
constexpr const char* kDefaultDataDir = "/usr/share/libjxl-testdata";
// Pixels this close to an edge are left out of the PSNR: both demosaics (and GStreamer's,
// which the docs compare against) handle edges differently, and edges are not what is measured.
constexpr int kBorder = 8;
// Far below what either method reaches on these photographs; a broken demosaic (wrong phase,
// swapped channels, wrong scaling) lands well under it.
constexpr double kMinPsnrDb = 25.0;

// The package's natural photographs in 8-bit sRGB (paths relative to its data directory). Left
// out: its 16-bit copies of the same photographs in other colour spaces, the 16-bit HLG
// hdr_room.png, flower.png's crops and grey / alpha / JPEG variants, the synthetic images.
struct Photograph {
  const char* path;
  // A 64x64 crop at the resolution the camera pipeline's own demosaic worked at. On 14 of the
  // 16, its interpolated samples sit on a CFA grid aligned with ours (bilinear loses 1.2-2.1 dB
  // when our grid is shifted by a pixel; on the resized photographs the shift changes nothing),
  // so bilinear partly re-creates them and beats MHC on most crops. Measured and reported, but
  // only the lower bound is asserted; docs/quality.md has the numbers.
  bool native_crop;
};
constexpr Photograph kPhotographs[] = {
    {"jxl/flower/flower.png", false},
    {"external/wesaturate/500px/cvo9xd_keong_macan_srgb8.png", false},
    {"external/wesaturate/500px/tmshre_riaphotographs_srgb8.png", false},
    {"external/wesaturate/500px/u76c0g_bliznaca_srgb8.png", false},
    {"external/wesaturate/64px/Nikon-D3-14bit_srgb8.png", true},
    {"external/wesaturate/64px/a2d1un_nkitzmiller_srgb8.png", true},
    {"external/wesaturate/64px/cvo9xd_keong_macan_srgb8.png", true},
    {"external/wesaturate/64px/l1qnb5_nkitzmiller_srgb8.png", true},
    {"external/wesaturate/64px/phu1or_alfann24_srgb8.png", true},
    {"external/wesaturate/64px/q3a0b3_d17ws_srgb8.png", true},
    {"external/wesaturate/64px/ra0ed45_alfann24_srgb8.png", true},
    {"external/wesaturate/64px/t0gho7_orlaustral_srgb8.png", true},
    {"external/wesaturate/64px/tmshre_riaphotographs_srgb8.png", true},
    {"external/wesaturate/64px/u76c0g_bliznaca_srgb8.png", true},
    {"external/wesaturate/64px/vgqcws_vin_srgb8.png", true},
    {"external/raw.pixls/DJI-FC6310-16bit_srgb8_v4_krita.png", true},
    {"external/raw.pixls/Google-Pixel2XL-16bit_srgb8_v4_krita.png", true},
    {"external/raw.pixls/HUAWEI-EVA-L09-16bit_srgb8_dt.png", true},
    {"external/raw.pixls/Nikon-D300-12bit_srgb8_dt.png", true},
    {"external/raw.pixls/Sony-DSC-RX1RM2-14bit_srgb8_v4_krita.png", true},
};

// Packed RGB8, rows 3 * width bytes apart.
struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;
};

std::string data_dir() {
  const char* dir = std::getenv("CIPC_JXL_TESTDATA");
  return dir && *dir ? dir : kDefaultDataDir;
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Decodes a PNG to 8-bit RGB with no colour management, the samples as stored (for the 8-bit
// files above, byte for byte what GStreamer's pngdec delivers): palette expanded, grey
// replicated, alpha dropped, 16-bit truncated. Kept free of objects with destructors, since
// libpng reports errors by longjmp.
bool decode_png_rgb8(std::FILE* file, RgbImage* image) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  if (!png) return false;
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_init_io(png, file);
  png_read_info(png, info);
  const png_byte color_type = png_get_color_type(png, info);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color_type == PNG_COLOR_TYPE_GRAY || color_type == PNG_COLOR_TYPE_GRAY_ALPHA) {
    png_set_expand_gray_1_2_4_to_8(png);
    png_set_gray_to_rgb(png);
  }
  if (color_type & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
  png_set_strip_16(png);
  const int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const int width = static_cast<int>(png_get_image_width(png, info));
  const int height = static_cast<int>(png_get_image_height(png, info));
  if (png_get_rowbytes(png, info) != 3 * static_cast<size_t>(width)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  image->width = width;
  image->height = height;
  image->rgb.assign(3 * static_cast<size_t>(width) * static_cast<size_t>(height), 0);
  for (int pass = 0; pass < passes; ++pass)
    for (int r = 0; r < height; ++r)
      png_read_row(png, image->rgb.data() + 3 * static_cast<size_t>(width) * r, nullptr);
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

bool load_png_rgb8(const std::string& path, RgbImage* image) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  return file && decode_png_rgb8(file.get(), image);
}

// The ideal camera: RGGB, 10-bit LSB-aligned words, no black level, unity gains.
std::vector<uint8_t> mosaic(const RgbImage& image) {
  const size_t pitch = 2 * static_cast<size_t>(image.width);
  std::vector<uint8_t> raw(pitch * static_cast<size_t>(image.height));
  cb::MosaicParams params;
  params.phase = cb::CfaOrder::kRGGB;
  params.alignment = cb::BitAlignment::kLsb;
  cb::mosaic_cpu(image.rgb.data(), 3 * static_cast<size_t>(image.width),
                 static_cast<int>(cb::MosaicInput::kRgb), raw.data(), pitch, image.width,
                 image.height, params);
  return raw;
}

// BGRA8; the linear transfer makes the 10 -> 8-bit step the inverse of the mosaic's scaling.
std::vector<uint8_t> demosaic(const std::vector<uint8_t>& raw, int width, int height,
                              cc::Demosaic method) {
  const size_t pitch = 4 * static_cast<size_t>(width);
  std::vector<uint8_t> bgra(pitch * static_cast<size_t>(height));
  cc::DebayerParams params;
  params.phase = cb::CfaOrder::kRGGB;
  params.alignment = cb::BitAlignment::kLsb;
  params.method = method;
  params.transfer = cc::Transfer::kLinear;
  cc::debayer_cpu(raw.data(), 2 * static_cast<size_t>(width), bgra.data(), pitch, width, height,
                  params);
  return bgra;
}

// PSNR (peak 255) over R, G and B of the pixels at least kBorder away from every edge;
// infinity when they are identical.
double psnr_db(const RgbImage& reference, const std::vector<uint8_t>& bgra) {
  double squared_error = 0.0;
  size_t samples = 0;
  for (int r = kBorder; r < reference.height - kBorder; ++r)
    for (int c = kBorder; c < reference.width - kBorder; ++c) {
      const size_t i = static_cast<size_t>(r) * reference.width + c;
      const uint8_t* want = &reference.rgb[3 * i];
      const uint8_t* got = &bgra[4 * i];
      const int diff[3] = {want[0] - got[2], want[1] - got[1], want[2] - got[0]};
      for (int d : diff) squared_error += static_cast<double>(d) * d;
      samples += 3;
    }
  if (squared_error == 0.0) return INFINITY;
  return 10.0 * std::log10(255.0 * 255.0 * static_cast<double>(samples) / squared_error);
}

std::string format_db(double db) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", db);
  return text;
}

// The PSNR measures interpolation only if the scaling round trip is exact: every 8-bit level,
// on every channel, must come back unchanged from a flat field through both methods.
TEST(DebayerQuality, FlatFieldsRoundTripExactly) {
  constexpr int kSize = 8;
  for (int level = 0; level < 256; ++level) {
    RgbImage flat{kSize, kSize, {}};
    for (int i = 0; i < kSize * kSize; ++i)
      for (int value : {level, 255 - level, (level * 7) % 256})
        flat.rgb.push_back(static_cast<uint8_t>(value));
    const std::vector<uint8_t> raw = mosaic(flat);
    for (cc::Demosaic method : {cc::Demosaic::kBilinear, cc::Demosaic::kMhc}) {
      const std::vector<uint8_t> bgra = demosaic(raw, kSize, kSize, method);
      for (int i = 0; i < kSize * kSize; ++i) {
        ASSERT_EQ(bgra[4 * i + 2], flat.rgb[3 * i]) << "level " << level;
        ASSERT_EQ(bgra[4 * i + 1], flat.rgb[3 * i + 1]) << "level " << level;
        ASSERT_EQ(bgra[4 * i + 0], flat.rgb[3 * i + 2]) << "level " << level;
      }
    }
  }
}

// Malvar-He-Cutler must beat bilinear on every resized photograph, and both must be sane on
// all. Prints the table and, when CIPC_QUALITY_REPORT names a file, writes it there too
// (tab-separated: image, WIDTHxHEIGHT, bilinear dB, MHC dB, "resized" or "native-crop"; lines
// starting with '#' are comments).
TEST(DebayerQuality, MhcBeatsBilinearOnPhotographs) {
  const std::string dir = data_dir();
  if (!is_directory(dir))
    GTEST_SKIP() << dir << " not found: install the Debian package " << kPackage
                 << " (or point CIPC_JXL_TESTDATA at its data directory)";

  struct Mean {
    double bilinear = 0.0;
    double mhc = 0.0;
    int count = 0;
  } means[2];  // indexed by native_crop
  std::ostringstream table;
  table << "# image\tsize\tbilinear_db\tmhc_db\tset\n";
  for (const Photograph& photo : kPhotographs) {
    RgbImage image;
    if (!load_png_rgb8(dir + "/" + photo.path, &image)) {
      ADD_FAILURE() << "cannot read " << dir << "/" << photo.path << " (package " << kPackage
                    << ")";
      continue;
    }
    ASSERT_GT(image.width, 2 * kBorder);
    ASSERT_GT(image.height, 2 * kBorder);
    const std::vector<uint8_t> raw = mosaic(image);
    const double bilinear =
        psnr_db(image, demosaic(raw, image.width, image.height, cc::Demosaic::kBilinear));
    const double mhc = psnr_db(image, demosaic(raw, image.width, image.height, cc::Demosaic::kMhc));
    EXPECT_GT(bilinear, kMinPsnrDb) << photo.path;
    EXPECT_GT(mhc, kMinPsnrDb) << photo.path;
    if (!photo.native_crop) {
      EXPECT_GT(mhc, bilinear) << photo.path;
    }
    const char* set = photo.native_crop ? "native-crop" : "resized";
    table << photo.path << '\t' << image.width << 'x' << image.height << '\t' << format_db(bilinear)
          << '\t' << format_db(mhc) << '\t' << set << '\n';
    Mean& mean = means[photo.native_crop];
    mean.bilinear += bilinear;
    mean.mhc += mhc;
    ++mean.count;
  }
  for (bool native_crop : {false, true}) {
    const Mean& mean = means[native_crop];
    if (mean.count > 0)
      table << "# mean of " << mean.count << '\t' << '\t' << format_db(mean.bilinear / mean.count)
            << '\t' << format_db(mean.mhc / mean.count) << '\t'
            << (native_crop ? "native-crop" : "resized") << '\n';
  }

  std::fputs(table.str().c_str(), stdout);
  if (const char* report = std::getenv("CIPC_QUALITY_REPORT"); report && *report) {
    std::ofstream out(report);
    out << table.str();
    EXPECT_TRUE(out.good()) << "cannot write " << report;
  }
}

}  // namespace
