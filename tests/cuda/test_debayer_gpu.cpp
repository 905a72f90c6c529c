// SPDX-License-Identifier: LGPL-2.1-or-later
// The GPU debayer against its CPU reference (debayer_cpu): seeded random RAW10 input, odd
// sizes, every phase, both alignments, both methods, the 0 and 1023 extremes, padded pitches,
// mapped pinned host input (in place and uploaded), gray world across frames. Part of
// test-cuda-gpu; skips with the reason without a usable device.
//
// Precision::kExact is compiled without fused multiply-adds and must match exactly;
// Precision::kFast (the default) must be within 1 code of the reference and equal to its CPU
// model (debayer_fast_model_cpu) byte for byte; the fast tests report how many bytes differ.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_api.h"
#include "cuda_test_util.h"
#include "debayer.h"
#include "debayer_gpu.h"
#include "input_upload.h"

namespace cb = cipc_bayer;
namespace cc = cipc_cuda;

namespace {

using cipc_test::as_ptr;

struct Raw {
  int width = 0, height = 0;
  size_t pitch = 0;
  std::vector<uint8_t> bytes;
};

// Random 10-bit samples (a quarter of them forced to 0 or 1023) in the given alignment; the
// unused bits hold random garbage, which the debayer must ignore. Padding is random too.
Raw random_raw(int width, int height, size_t pitch, cb::BitAlignment a, uint32_t seed) {
  Raw raw{width, height, pitch, std::vector<uint8_t>(pitch * static_cast<size_t>(height))};
  std::mt19937 rng(seed);
  for (auto& b : raw.bytes) b = static_cast<uint8_t>(rng());
  for (int r = 0; r < height; ++r) {
    for (int c = 0; c < width; ++c) {
      int v = static_cast<int>(rng() % 1024);
      const uint32_t pick = rng() % 8;
      if (pick == 0) v = 0;
      if (pick == 1) v = 1023;
      const uint32_t garbage = rng();
      const uint16_t word = a == cb::BitAlignment::kLsb
                                ? static_cast<uint16_t>(v | ((garbage & 0x3F) << 10))
                                : static_cast<uint16_t>((v << 6) | (garbage & 0x3F));
      uint8_t* p = raw.bytes.data() + static_cast<size_t>(r) * pitch + 2 * static_cast<size_t>(c);
      p[0] = static_cast<uint8_t>(word & 0xFF);
      p[1] = static_cast<uint8_t>(word >> 8);
    }
  }
  return raw;
}

class GpuDebayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string& why = cipc_test::cuda_missing_reason();
    if (!why.empty()) GTEST_SKIP() << "no CUDA device: " << why;
    ASSERT_OK(cc::Stream::create(0, &stream_));
    ASSERT_OK(cc::GpuDebayer::create(0, &debayer_));
  }

  // Uploads `raw`, debayers it on the GPU into an output prefilled with 0x5A (padding must stay
  // so) and returns the output rows (out_pitch apart).
  std::vector<uint8_t> run_gpu(const Raw& raw, size_t out_pitch, const cc::DebayerParams& p,
                               cc::WhiteBalance wb = cc::WhiteBalance::kFixed) {
    std::vector<uint8_t> out(out_pitch * static_cast<size_t>(raw.height), 0x5A);
    cc::DeviceBuffer in_dev, out_dev;
    EXPECT_TRUE(cc::DeviceBuffer::create(0, raw.bytes.size(), &in_dev).is_ok());
    EXPECT_TRUE(cc::DeviceBuffer::create(0, out.size(), &out_dev).is_ok());
    if (!in_dev.ptr() || !out_dev.ptr()) return {};
    EXPECT_TRUE(cc::copy_2d_async(as_ptr(in_dev.ptr()), raw.bytes.size(), raw.bytes.data(),
                                  raw.bytes.size(), raw.bytes.size(), 1, stream_.handle())
                    .is_ok());
    EXPECT_TRUE(cc::copy_2d_async(as_ptr(out_dev.ptr()), out.size(), out.data(), out.size(),
                                  out.size(), 1, stream_.handle())
                    .is_ok());
    run_and_download(in_dev.ptr(), raw, out_dev, p, wb, out_pitch, &out);
    return out;
  }

  // Debayers `raw`'s frame from `in` into `out_dev` and downloads it into `*out`.
  void run_and_download(cc::DevicePtr in, const Raw& raw, const cc::DeviceBuffer& out_dev,
                        const cc::DebayerParams& p, cc::WhiteBalance wb, size_t out_pitch,
                        std::vector<uint8_t>* out) {
    EXPECT_TRUE(debayer_.configure(p, wb, stream_.handle()).is_ok());
    const cc::Status st = debayer_.run(in, raw.pitch, out_dev.ptr(), out_pitch, raw.width,
                                       raw.height, stream_.handle());
    EXPECT_TRUE(st.is_ok()) << st.message();
    EXPECT_TRUE(cc::copy_2d_async(out->data(), out->size(), as_ptr(out_dev.ptr()), out->size(),
                                  out->size(), 1, stream_.handle())
                    .is_ok());
    const cc::Status sync = stream_.synchronize();
    EXPECT_TRUE(sync.is_ok()) << sync.message();
  }

  // The same with the input read in place from mapped pinned host memory (as rg10tobgra reads
  // its upstream pool), with the fixed gains.
  std::vector<uint8_t> run_gpu_on_mapped_input(const Raw& raw, size_t out_pitch,
                                               const cc::DebayerParams& p) {
    cc::PinnedHostBuffer pinned;
    cc::DevicePtr in = 0;
    EXPECT_TRUE(cc::PinnedHostBuffer::create(raw.bytes.size(), &pinned).is_ok());
    if (!pinned.data()) return {};
    std::memcpy(pinned.data(), raw.bytes.data(), raw.bytes.size());
    EXPECT_TRUE(cc::mapped_device_pointer(pinned.data(), &in).is_ok());
    std::vector<uint8_t> out(out_pitch * static_cast<size_t>(raw.height), 0x5A);
    cc::DeviceBuffer out_dev;
    EXPECT_TRUE(cc::DeviceBuffer::create(0, out.size(), &out_dev).is_ok());
    if (!in || !out_dev.ptr()) return {};
    run_and_download(in, raw, out_dev, p, cc::WhiteBalance::kFixed, out_pitch, &out);
    return out;
  }

  static std::vector<uint8_t> run_cpu(const Raw& raw, size_t out_pitch,
                                      const cc::DebayerParams& p) {
    std::vector<uint8_t> out(out_pitch * static_cast<size_t>(raw.height), 0x5A);
    cc::debayer_cpu(raw.bytes.data(), raw.pitch, out.data(), out_pitch, raw.width, raw.height, p);
    return out;
  }

  cc::Stream stream_;
  cc::GpuDebayer debayer_;
};

// Largest difference between two outputs (padding included) and how many bytes differ.
struct Diff {
  int max = 0;
  size_t count = 0;
};
Diff compare(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  Diff d;
  if (a.size() != b.size()) return Diff{256, a.size()};
  for (size_t i = 0; i < a.size(); ++i) {
    const int delta = std::abs(static_cast<int>(a[i]) - static_cast<int>(b[i]));
    if (delta > 0) ++d.count;
    if (delta > d.max) d.max = delta;
  }
  return d;
}

// A frame size and the padding bytes per row of input and output.
struct Size {
  int w, h, extra_in, extra_out;
};
constexpr cb::CfaOrder kAllPhases[] = {cb::CfaOrder::kRGGB, cb::CfaOrder::kBGGR,
                                       cb::CfaOrder::kGRBG, cb::CfaOrder::kGBRG};

// Parameters of one case of the sweeps below: black level and pixel order vary with the seed.
cc::DebayerParams varied_params(cb::CfaOrder phase, cb::BitAlignment align, cc::Demosaic method,
                                uint32_t seed) {
  cc::DebayerParams p;
  p.phase = phase;
  p.alignment = align;
  p.method = method;
  p.black_level = static_cast<uint16_t>(seed % 3 == 0 ? 0 : 50);
  p.wb_red = 1.9f;
  p.wb_green = 1.0f;
  p.wb_blue = 1.4f;
  p.order = seed % 5 == 0 ? cc::PixelOrder::kRgba : cc::PixelOrder::kBgra;
  return p;
}

const char* phase_name(cb::CfaOrder p) {
  static const char* kNames[] = {"RGGB", "BGGR", "GRBG", "GBRG"};
  return kNames[static_cast<int>(p)];
}

TEST_F(GpuDebayerTest, MatchesCpuReferenceOverPhasesAlignmentsMethodsAndOddSizes) {
  // Odd, tiny, tile-straddling and padded sizes (extra_*: padding bytes per row); 517x77 has
  // 16-byte aligned input rows (1040 bytes), the kernel's chunked-load path.
  const Size sizes[] = {{1, 1, 0, 0},    {2, 2, 2, 4},   {3, 5, 0, 0},     {5, 3, 6, 12},
                        {63, 17, 2, 0},  {65, 15, 0, 8}, {127, 33, 10, 4}, {333, 211, 64, 36},
                        {1921, 7, 0, 0}, {64, 16, 0, 0}, {517, 77, 6, 0}};
  uint32_t seed = 1234;
  size_t compared = 0;
  for (const Size& s : sizes) {
    for (cb::CfaOrder phase : kAllPhases) {
      for (cb::BitAlignment align : {cb::BitAlignment::kLsb, cb::BitAlignment::kMsb}) {
        for (cc::Demosaic method : {cc::Demosaic::kBilinear, cc::Demosaic::kMhc}) {
          cc::DebayerParams p = varied_params(phase, align, method, seed);
          p.gain = 1.25f;
          p.transfer = seed % 2 ? cc::Transfer::kSrgb : cc::Transfer::kPower;
          p.precision = cc::Precision::kExact;
          const size_t in_pitch = 2 * static_cast<size_t>(s.w) + static_cast<size_t>(s.extra_in);
          const size_t out_pitch = 4 * static_cast<size_t>(s.w) + static_cast<size_t>(s.extra_out);
          const Raw raw = random_raw(s.w, s.h, in_pitch, align, seed++);
          const auto gpu = run_gpu(raw, out_pitch, p);
          EXPECT_EQ(debayer_.last_precision(), cc::Precision::kExact);
          const auto cpu = run_cpu(raw, out_pitch, p);
          const Diff d = compare(gpu, cpu);
          compared += cpu.size();
          ASSERT_EQ(d.count, 0u) << s.w << "x" << s.h << " " << phase_name(phase)
                                 << (align == cb::BitAlignment::kMsb ? " msb " : " lsb ")
                                 << (method == cc::Demosaic::kMhc ? "mhc" : "bilinear")
                                 << ": bytes differ by up to " << d.max;
        }
      }
    }
  }
  std::printf("[ info     ] %zu bytes compared, all equal\n", compared);
}

// The default precision over the same kind of inputs, the fast kernel's own tile edges (64 x 64)
// and more transfer curves: every byte within 1 code of debayer_cpu (alpha 255, padding
// untouched: compare() covers the whole buffers) and equal to the CPU model of the fast
// arithmetic. Where the bound does not hold (a dimension of 1, gamma 2.2) the exact kernel runs.
TEST_F(GpuDebayerTest, FastIsWithinOneCodeOverPhasesAlignmentsMethodsAndOddSizes) {
  // 517x77 and 641x479 (1282-byte rows padded to 1296) take the 16-byte chunk path; the others
  // the per-sample one; 128x130 and 641x479 have interior, edge and corner tiles.
  const Size sizes[] = {{1, 1, 0, 0},    {2, 2, 2, 4},      {3, 5, 0, 0},     {5, 3, 6, 12},
                        {67, 45, 2, 8},  {65, 66, 0, 0},    {128, 130, 0, 0}, {1921, 7, 0, 0},
                        {517, 77, 6, 0}, {641, 479, 14, 4}, {3, 1, 0, 0}};
  uint32_t seed = 4321;
  size_t compared = 0, differing = 0;
  for (const Size& s : sizes) {
    for (cb::CfaOrder phase : kAllPhases) {
      for (cb::BitAlignment align : {cb::BitAlignment::kLsb, cb::BitAlignment::kMsb}) {
        for (cc::Demosaic method : {cc::Demosaic::kBilinear, cc::Demosaic::kMhc}) {
          cc::DebayerParams p = varied_params(phase, align, method, seed);
          p.gain = seed % 4 == 0 ? 8.0f : 1.25f;  // 8 x 1.9: large gains, clipping
          p.transfer = seed % 2 ? cc::Transfer::kSrgb : cc::Transfer::kLinear;
          if (seed % 7 == 0) {
            p.transfer = cc::Transfer::kPower;  // too steep near black: runs exact
            p.gamma = 2.2f;
          }
          ASSERT_EQ(p.precision, cc::Precision::kFast) << "the default";
          const size_t in_pitch = 2 * static_cast<size_t>(s.w) + static_cast<size_t>(s.extra_in);
          const size_t out_pitch = 4 * static_cast<size_t>(s.w) + static_cast<size_t>(s.extra_out);
          const Raw raw = random_raw(s.w, s.h, in_pitch, align, seed++);
          const auto gpu = run_gpu(raw, out_pitch, p);
          const bool fast_expected = s.w >= 2 && s.h >= 2 && p.transfer != cc::Transfer::kPower;
          EXPECT_EQ(debayer_.last_precision(),
                    fast_expected ? cc::Precision::kFast : cc::Precision::kExact);
          const auto cpu = run_cpu(raw, out_pitch, p);
          const Diff d = compare(gpu, cpu);
          compared += cpu.size();
          differing += d.count;
          const std::string what = std::to_string(s.w) + "x" + std::to_string(s.h) + " " +
                                   phase_name(phase) +
                                   (align == cb::BitAlignment::kMsb ? " msb " : " lsb ") +
                                   (method == cc::Demosaic::kMhc ? "mhc" : "bilinear");
          ASSERT_LE(d.max, 1) << what << ": " << d.count << " bytes differ";
          std::vector<uint8_t> model(out_pitch * static_cast<size_t>(raw.height), 0x5A);
          cc::debayer_fast_model_cpu(raw.bytes.data(), raw.pitch, model.data(), out_pitch,
                                     raw.width, raw.height, p);
          if (fast_expected) {
            const Diff m = compare(gpu, model);
            ASSERT_EQ(m.count, 0u) << what << ": differs from the CPU model of the fast kernel";
          }
          for (int r = 0; r < raw.height; ++r)
            for (int c = 0; c < raw.width; ++c)
              ASSERT_EQ(gpu[r * out_pitch + 4 * c + 3], 255) << what << " alpha";
        }
      }
    }
  }
  std::printf("[ info     ] fast: %zu bytes compared, %zu differ by 1\n", compared, differing);
}

TEST_F(GpuDebayerTest, LinearAndRgbaOrderMatchAtFullHd) {
  cc::DebayerParams p;
  p.transfer = cc::Transfer::kLinear;
  p.order = cc::PixelOrder::kRgba;
  p.black_level = 64;
  const Raw raw = random_raw(1920, 1080, 3840, cb::BitAlignment::kLsb, 77);
  for (cc::Precision precision : {cc::Precision::kExact, cc::Precision::kFast}) {
    p.precision = precision;
    const auto gpu = run_gpu(raw, 7680, p);
    EXPECT_EQ(debayer_.last_precision(), precision);
    const Diff d = compare(gpu, run_cpu(raw, 7680, p));
    if (precision == cc::Precision::kExact) {
      EXPECT_EQ(d.count, 0u) << "exact: bytes differ by up to " << d.max;
    } else {
      EXPECT_LE(d.max, 1) << "fast: " << d.count << " bytes differ";
      std::printf("[ info     ] fast at 1080p: %zu bytes differ by 1\n", d.count);
    }
  }
}

TEST_F(GpuDebayerTest, ReadsMappedPinnedHostInputInPlace) {
  const int w = 641, h = 363;
  const size_t in_pitch = 2 * w + 14, out_pitch = 4 * w;
  const Raw raw = random_raw(w, h, in_pitch, cb::BitAlignment::kMsb, 9);
  cc::DebayerParams p;
  p.alignment = cb::BitAlignment::kMsb;
  p.phase = cb::CfaOrder::kGBRG;
  for (cc::Precision precision : {cc::Precision::kExact, cc::Precision::kFast}) {
    p.precision = precision;
    const std::vector<uint8_t> gpu = run_gpu_on_mapped_input(raw, out_pitch, p);
    EXPECT_EQ(debayer_.last_precision(), precision);
    const Diff d = compare(gpu, run_cpu(raw, out_pitch, p));
    if (precision == cc::Precision::kExact) {
      EXPECT_EQ(d.count, 0u) << "exact: bytes differ by up to " << d.max;
    } else {
      EXPECT_LE(d.max, 1) << "fast: " << d.count << " bytes differ";
    }
  }
}

// The same with 16-byte aligned rows: the fast kernel's chunked loads over the bus.
TEST_F(GpuDebayerTest, FastReadsAlignedMappedPinnedHostInput) {
  const int w = 640, h = 362;
  const size_t in_pitch = 2 * w + 32, out_pitch = 4 * w;
  const Raw raw = random_raw(w, h, in_pitch, cb::BitAlignment::kLsb, 10);
  cc::DebayerParams p;
  p.phase = cb::CfaOrder::kBGGR;
  p.method = cc::Demosaic::kBilinear;
  const std::vector<uint8_t> gpu = run_gpu_on_mapped_input(raw, out_pitch, p);
  EXPECT_EQ(debayer_.last_precision(), cc::Precision::kFast);
  const Diff d = compare(gpu, run_cpu(raw, out_pitch, p));
  EXPECT_LE(d.max, 1) << d.count << " bytes differ";
}

// Gray world: frame 1 uses the fixed gains; frame 2 uses gains from frame 1's statistics
// (computed on the GPU), which must equal gray_world_gains of the CPU sums; frame 3 uses
// frame 2's. Each output equals the reference run with those gains.
class GpuDebayerGrayWorldTest : public GpuDebayerTest,
                                public ::testing::WithParamInterface<cc::Precision> {};

TEST_P(GpuDebayerGrayWorldTest, UsesThePreviousFramesStatistics) {
  const cc::Precision precision = GetParam();
  // 520 columns: 16-byte aligned rows, the fast kernel's chunked loads (517 in the other
  // tests covers the per-sample path).
  const int w = precision == cc::Precision::kFast ? 520 : 517, h = 301;
  const size_t in_pitch = 2 * w, out_pitch = 4 * w;
  cc::DebayerParams p;
  p.precision = precision;
  p.phase = cb::CfaOrder::kGRBG;
  p.black_level = 40;
  p.wb_red = 1.5f;
  p.wb_blue = 2.5f;
  // Frames with a colour cast: red and blue samples scaled down, differently per frame.
  std::vector<Raw> frames;
  for (int f = 0; f < 3; ++f) {
    Raw raw = random_raw(w, h, in_pitch, cb::BitAlignment::kLsb, 500 + f);
    for (int r = 0; r < h; ++r) {
      for (int c = 0; c < w; ++c) {
        uint8_t* px = raw.bytes.data() + r * in_pitch + 2 * c;
        int v = (px[0] | (px[1] << 8)) & 0x3FF;
        const cb::CfaColor color = cb::cfa_color(p.phase, r, c);
        if (color == cb::kCfaRed) v = v * (f + 1) / 5;
        if (color == cb::kCfaBlue) v = v / (f + 2);
        px[0] = static_cast<uint8_t>(v & 0xFF);
        px[1] = static_cast<uint8_t>(v >> 8);
      }
    }
    frames.push_back(std::move(raw));
  }
  cc::WbGains expected{p.wb_red, p.wb_green, p.wb_blue};
  for (int f = 0; f < 3; ++f) {
    const auto gpu = run_gpu(frames[f], out_pitch, p, cc::WhiteBalance::kGrayWorld);
    const cc::WbGains used = debayer_.last_gains();
    EXPECT_EQ(used.red, expected.red) << "frame " << f;
    EXPECT_EQ(used.green, expected.green) << "frame " << f;
    EXPECT_EQ(used.blue, expected.blue) << "frame " << f;
    cc::DebayerParams with = p;
    with.wb_red = expected.red;
    with.wb_green = expected.green;
    with.wb_blue = expected.blue;
    EXPECT_EQ(debayer_.last_precision(), precision);
    const Diff d = compare(gpu, run_cpu(frames[f], out_pitch, with));
    if (precision == cc::Precision::kExact) {
      EXPECT_EQ(d.count, 0u) << "frame " << f << ": bytes differ by up to " << d.max;
    } else {
      EXPECT_LE(d.max, 1) << "frame " << f << ": " << d.count << " bytes differ";
    }
    const cc::BayerSums sums = cc::bayer_sums_cpu(frames[f].bytes.data(), in_pitch, w, h, p);
    expected = cc::gray_world_gains(sums.sum, sums.count, {p.wb_red, p.wb_green, p.wb_blue});
    EXPECT_GT(expected.red, 1.5f) << "the cast should ask for more red";
  }
  // Back to fixed: the fixed gains at once.
  run_gpu(frames[0], out_pitch, p, cc::WhiteBalance::kFixed);
  EXPECT_EQ(debayer_.last_gains().blue, p.wb_blue);
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuDebayerGrayWorldTest,
                         ::testing::Values(cc::Precision::kExact, cc::Precision::kFast),
                         [](const ::testing::TestParamInfo<cc::Precision>& info) {
                           return info.param == cc::Precision::kExact ? "Exact" : "Fast";
                         });

// rg10tobgra's upload path: frames in pinned host memory uploaded by a copy engine into two
// alternating device buffers. Three frames are queued without a CPU wait in between, so the
// third upload reuses the first frame's buffer while that frame's kernel may still be queued:
// each output must still be its own frame's reference, bit for bit.
TEST_F(GpuDebayerTest, UploadedFramesEachMatchTheReferenceWhileUploadsOverlapKernels) {
  constexpr int kFrames = 3;
  const int w = 1283, h = 721;  // odd; rows 2 * 1283 + 10 bytes apart, not 16-byte aligned
  const size_t in_pitch = 2 * w + 10, out_pitch = 4 * w + 12;
  cc::DebayerParams p;
  p.phase = cb::CfaOrder::kGRBG;
  p.method = cc::Demosaic::kMhc;
  p.black_level = 50;
  p.precision = cc::Precision::kExact;
  ASSERT_OK(debayer_.configure(p, cc::WhiteBalance::kFixed, stream_.handle()));
  cc::InputUploader uploader;
  ASSERT_OK(cc::InputUploader::create(0, &uploader));
  std::vector<Raw> raws;
  std::vector<cc::PinnedHostBuffer> pinned(kFrames);
  std::vector<cc::DeviceBuffer> outputs(kFrames);
  for (int i = 0; i < kFrames; ++i) {
    raws.push_back(random_raw(w, h, in_pitch, cb::BitAlignment::kLsb, 40 + i));
    ASSERT_OK(cc::PinnedHostBuffer::create(raws[i].bytes.size(), &pinned[i]));
    std::memcpy(pinned[i].data(), raws[i].bytes.data(), raws[i].bytes.size());
    // Prefilled as run_gpu() does: the row padding must stay so.
    const std::vector<uint8_t> fill(out_pitch * h, 0x5A);
    ASSERT_OK(cc::DeviceBuffer::create(0, fill.size(), &outputs[i]));
    ASSERT_OK(cc::copy_2d_async(as_ptr(outputs[i].ptr()), fill.size(), fill.data(), fill.size(),
                                fill.size(), 1, stream_.handle()));
  }
  ASSERT_OK(stream_.synchronize());
  for (int i = 0; i < kFrames; ++i) {
    cc::DevicePtr in = 0;
    size_t pitch = 0;
    ASSERT_OK(uploader.upload(pinned[i].data(), in_pitch, 2 * w, h, stream_.handle(), &in, &pitch));
    EXPECT_EQ(pitch % 256, 0u);
    EXPECT_GE(pitch, static_cast<size_t>(2 * w));
    ASSERT_OK(debayer_.run(in, pitch, outputs[i].ptr(), out_pitch, w, h, stream_.handle()));
    ASSERT_OK(uploader.kernel_queued(stream_.handle()));
  }
  EXPECT_EQ(uploader.uploads(), static_cast<uint64_t>(kFrames));
  ASSERT_OK(stream_.synchronize());
  for (int i = 0; i < kFrames; ++i) {
    std::vector<uint8_t> gpu(out_pitch * h);
    ASSERT_OK(cc::copy_2d_async(gpu.data(), gpu.size(), as_ptr(outputs[i].ptr()), gpu.size(),
                                gpu.size(), 1, stream_.handle()));
    ASSERT_OK(stream_.synchronize());
    const Diff d = compare(gpu, run_cpu(raws[i], out_pitch, p));
    EXPECT_EQ(d.count, 0u) << "frame " << i << ": bytes differ by up to " << d.max;
  }
}

TEST_F(GpuDebayerTest, BothInputPathsAreMeasuredAndTheFasterIsNamed) {
  cc::DebayerParams p;
  cc::InputPathTimes t;
  ASSERT_OK(cc::measure_input_paths(0, p, 1920, 1080, &t));
  EXPECT_GT(t.in_place_us, 0.0);
  EXPECT_GT(t.upload_us, 0.0);
  EXPECT_EQ(t.faster(),
            t.upload_us < t.in_place_us ? cc::InputPath::kUpload : cc::InputPath::kInPlace);
  std::printf("1080p input paths: in place %.1f us, upload + kernel %.1f us -> %s\n", t.in_place_us,
              t.upload_us, cc::input_path_name(t.faster()));
  const cc::Status bad = cc::measure_input_paths(0, p, 0, 1080, &t);
  EXPECT_FALSE(bad.is_ok());
}

TEST_F(GpuDebayerTest, RejectsBadGeometryWithAClearMessage) {
  cc::DebayerParams p;
  ASSERT_OK(debayer_.configure(p, cc::WhiteBalance::kFixed, stream_.handle()));
  cc::DeviceBuffer buf;
  ASSERT_OK(cc::DeviceBuffer::create(0, 1 << 20, &buf));
  cc::Status st = debayer_.run(buf.ptr(), 100, buf.ptr(), 400, 64, 4, stream_.handle());
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("input rows"), std::string::npos) << st.message();
  st = debayer_.run(buf.ptr(), 128, buf.ptr() + 2, 256, 64, 4, stream_.handle());
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("output rows"), std::string::npos) << st.message();
  st = debayer_.run(buf.ptr(), 128, buf.ptr(), 256, 0, 4, stream_.handle());
  EXPECT_FALSE(st.is_ok());
}

}  // namespace
