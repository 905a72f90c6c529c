// SPDX-License-Identifier: LGPL-2.1-or-later
// Tests of the CUDA layer that need no GPU: the CPU references (the oracles of the GPU tests),
// the error helper, and how the layer behaves on a machine without a CUDA device or driver.
// They also pass on a GPU machine.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "cuda_api.h"
#include "deferred_destruction.h"
#include "input_upload.h"
#include "test_pattern.h"

namespace cc = cipc_cuda;

namespace {

constexpr uint64_t K = 0x9E3779B97F4A7C15ull;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// ---------------------------------------------------------------------------------------------
// image_checksum_cpu

TEST(ChecksumCpu, SingleByte) {
  const uint8_t img[1] = {7};
  // 7 * (0 + 1) * ((0 + 1) * K)
  EXPECT_EQ(cc::image_checksum_cpu(img, 1, 1, 1), 7 * K);
  EXPECT_EQ(cc::image_checksum_cpu(img, 1, 1, 1), 0x538454127b096493ull);
}

TEST(ChecksumCpu, TwoByThreeByHand) {
  const uint8_t img[6] = {1, 2, 3,   // row 0
                          4, 5, 6};  // row 1
  // row 0: (1*1 + 2*2 + 3*3) * (1*K) = 14K
  // row 1: (4*1 + 5*2 + 6*3) * (2*K) = 32 * 2K = 64K
  // total 78K mod 2^64 = 0x34e71684c8b1ce66
  EXPECT_EQ(cc::image_checksum_cpu(img, 3, 3, 2), 0x34e71684c8b1ce66ull);
  EXPECT_EQ(cc::image_checksum_cpu(img, 3, 3, 2), 78 * K);
}

TEST(ChecksumCpu, LargeBytesWrapModulo64) {
  const uint8_t img[6] = {1, 2, 3, 4, 5, 255};
  // row 1: 4 + 10 + 765 = 779 -> 1558K; total (14 + 1558)K = 1572K, which wraps mod 2^64.
  EXPECT_EQ(cc::image_checksum_cpu(img, 3, 3, 2), 0x8ca77711a561f0f4ull);
}

TEST(ChecksumCpu, PaddingIsIgnored) {
  // The same 2x3 image at pitch 8; the padding bytes must not matter.
  uint8_t img[16] = {1, 2, 3, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 4, 5, 6, 0x11, 0x22, 0x33, 0x44, 0x55};
  EXPECT_EQ(cc::image_checksum_cpu(img, 8, 3, 2), 78 * K);
  for (int i : {3, 4, 7, 11, 15}) img[i] ^= 0xFF;
  EXPECT_EQ(cc::image_checksum_cpu(img, 8, 3, 2), 78 * K);
  // The last row needs no padding at all: rows * pitch may exceed the buffer's last row.
  const uint8_t tight[11] = {1, 2, 3, 9, 9, 9, 9, 9, 4, 5, 6};
  EXPECT_EQ(cc::image_checksum_cpu(tight, 8, 3, 2), 78 * K);
}

TEST(ChecksumCpu, OrderSensitive) {
  uint8_t img[6] = {1, 2, 3, 4, 5, 6};
  const uint64_t base = cc::image_checksum_cpu(img, 3, 3, 2);
  std::swap(img[0], img[1]);  // two bytes of one row
  EXPECT_NE(cc::image_checksum_cpu(img, 3, 3, 2), base);
  std::swap(img[0], img[1]);
  std::swap(img[2], img[5]);  // same column, different rows
  EXPECT_NE(cc::image_checksum_cpu(img, 3, 3, 2), base);
  std::swap(img[2], img[5]);
  EXPECT_EQ(cc::image_checksum_cpu(img, 3, 3, 2), base);
  // Whole rows swapped.
  const uint8_t swapped_rows[6] = {4, 5, 6, 1, 2, 3};
  EXPECT_NE(cc::image_checksum_cpu(swapped_rows, 3, 3, 2), base);
}

TEST(ChecksumCpu, DocumentedBlindSpotEqualWeights) {
  // Byte (r, c) weighs (c + 1) * (r + 1) * K: positions (0, 1) and (1, 0) both weigh 2K, so
  // exchanging exactly those two bytes is not detected. This pins the formula of kernels.h.
  uint8_t img[6] = {1, 2, 3, 4, 5, 6};
  const uint64_t base = cc::image_checksum_cpu(img, 3, 3, 2);
  std::swap(img[1], img[3]);
  EXPECT_EQ(cc::image_checksum_cpu(img, 3, 3, 2), base);
}

TEST(ChecksumCpu, EmptyImagesAreZero) {
  const uint8_t img[4] = {1, 2, 3, 4};
  EXPECT_EQ(cc::image_checksum_cpu(img, 4, 4, 0), 0u);
  EXPECT_EQ(cc::image_checksum_cpu(img, 4, 0, 1), 0u);
  EXPECT_EQ(cc::image_checksum_cpu(nullptr, 0, 0, 0), 0u);
}

TEST(ChecksumCpu, EqualsRowDecomposition) {
  // The per-row split the GPU uses (R(r) * W(r), then a sum) gives the same value.
  std::vector<uint8_t> img(37 * 13);
  for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<uint8_t>(i * 131 + 7);
  uint64_t split = 0;
  for (size_t r = 0; r < 13; ++r)
    split += cc::image_checksum_cpu(img.data() + r * 37, 37, 37, 1) * (r + 1);  // W(r)/W(0)
  EXPECT_EQ(cc::image_checksum_cpu(img.data(), 37, 37, 13), split);
}

// ---------------------------------------------------------------------------------------------
// fill_pattern_cpu

TEST(FillPatternCpu, KnownValues) {
  // Computed by hand from the formula of kernels.h, e.g. (1, 0, 0): 2654435761 >> 13 = 324027,
  // 324027 mod 256 = 187; (0, 1, 0): 40503 >> 13 = 4.
  uint8_t img[3 * 6];
  cc::fill_pattern_cpu(img, 6, 6, 3, 0);
  const uint8_t row0[6] = {0, 187, 119, 51, 239, 171};
  const uint8_t row1[6] = {4, 191, 115, 55, 235, 175};
  EXPECT_EQ(0, std::memcmp(img, row0, 6));
  EXPECT_EQ(0, std::memcmp(img + 6, row1, 6));

  cc::fill_pattern_cpu(img, 6, 6, 3, 7);
  const uint8_t row2_seed7[6] = {157, 38, 234, 174, 114, 54};
  EXPECT_EQ(0, std::memcmp(img + 12, row2_seed7, 6));
}

TEST(FillPatternCpu, LargeRowAndSeed) {
  std::vector<uint8_t> img(1001 * 4);
  cc::fill_pattern_cpu(img.data(), 4, 4, 1001, 0xDEADBEEFu);
  const uint8_t row1000[4] = {218, 97, 173, 233};
  EXPECT_EQ(0, std::memcmp(img.data() + 1000 * 4, row1000, 4));
}

TEST(FillPatternCpu, PaddingUntouchedAndEmptyIsNoop) {
  std::vector<uint8_t> img(4 * 10, 0xEE);
  cc::fill_pattern_cpu(img.data(), 10, 7, 4, 3);
  for (size_t r = 0; r < 4; ++r)
    for (size_t c = 7; c < 10; ++c) EXPECT_EQ(img[r * 10 + c], 0xEE) << r << "," << c;
  std::vector<uint8_t> untouched(16, 0x5A);
  cc::fill_pattern_cpu(untouched.data(), 4, 4, 0, 1);
  cc::fill_pattern_cpu(untouched.data(), 4, 0, 4, 1);
  for (uint8_t b : untouched) EXPECT_EQ(b, 0x5A);
}

TEST(FillPatternCpu, SeedsAndRowsDiffer) {
  std::vector<uint8_t> a(64 * 2), b(64 * 2);
  cc::fill_pattern_cpu(a.data(), 64, 64, 2, 1);
  cc::fill_pattern_cpu(b.data(), 64, 64, 2, 2);
  EXPECT_NE(a, b);
  EXPECT_NE(0, std::memcmp(a.data(), a.data() + 64, 64));
  EXPECT_NE(cc::image_checksum_cpu(a.data(), 64, 64, 2),
            cc::image_checksum_cpu(b.data(), 64, 64, 2));
}

// ---------------------------------------------------------------------------------------------
// The error helper (check.h)

cudaError_t fake_runtime_call(cudaError_t result, int* calls) {
  ++*calls;
  return result;
}
CUresult fake_driver_call(CUresult result, int* calls) {
  ++*calls;
  return result;
}

int g_try_line = 0;
cc::Status runtime_try(cudaError_t result, int* calls) {
  // clang-format off
  g_try_line = __LINE__; CIPC_CUDA_TRY(fake_runtime_call(result, calls));
  // clang-format on
  return cc::Status::ok();
}
cc::Status driver_try(CUresult result, int* calls) {
  // clang-format off
  g_try_line = __LINE__; CIPC_CUDA_TRY(fake_driver_call(result, calls));
  // clang-format on
  return cc::Status::ok();
}

TEST(ErrorHelper, RuntimeErrorNamesCallErrorAndPlace) {
  int calls = 0;
  const cc::Status st = runtime_try(cudaErrorMemoryAllocation, &calls);
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(calls, 1);  // evaluated once
  const std::string expected =
      "fake_runtime_call: cudaErrorMemoryAllocation (out of memory) "
      "[cuda/test_cuda_cpu.cpp:" +
      std::to_string(g_try_line) + "]";
  EXPECT_EQ(st.message(), expected);
}

TEST(ErrorHelper, DriverErrorNamesCallErrorAndPlace) {
  int calls = 0;
  const cc::Status st = driver_try(CUDA_ERROR_OUT_OF_MEMORY, &calls);
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(calls, 1);
  const std::string expected =
      "fake_driver_call: CUDA_ERROR_OUT_OF_MEMORY (out of memory) "
      "[cuda/test_cuda_cpu.cpp:" +
      std::to_string(g_try_line) + "]";
  EXPECT_EQ(st.message(), expected);
}

TEST(ErrorHelper, SuccessFallsThrough) {
  int calls = 0;
  EXPECT_TRUE(runtime_try(cudaSuccess, &calls).is_ok());
  EXPECT_TRUE(driver_try(CUDA_SUCCESS, &calls).is_ok());
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(CIPC_CUDA_CHECK(cudaSuccess).is_ok());
}

TEST(ErrorHelper, CheckBuildsStatusWithoutReturning) {
  const cc::Status st = CIPC_CUDA_CHECK(CUDA_ERROR_INVALID_VALUE);
  ASSERT_FALSE(st.is_ok());
  EXPECT_TRUE(contains(st.message(), "CUDA_ERROR_INVALID_VALUE")) << st.message();
  EXPECT_TRUE(contains(st.message(), "[cuda/test_cuda_cpu.cpp:")) << st.message();
}

TEST(ErrorHelper, UnknownCodesStillSaySomething) {
  EXPECT_TRUE(contains(cc::detail::describe(static_cast<CUresult>(987654)), "987654"))
      << cc::detail::describe(static_cast<CUresult>(987654));
  EXPECT_FALSE(cc::detail::describe(static_cast<cudaError_t>(987654)).empty());
}

// "Busy or unavailable" names its two real causes: exclusive compute mode, and an MPS server at
// its client limit (what the 49th consumer of one H200 got under MPS).
TEST(ErrorHelper, DeviceUnavailableNamesExclusiveModeAndTheMpsClientLimit) {
  for (const std::string& text : {cc::detail::describe(cudaErrorDevicesUnavailable),
                                  cc::detail::describe(CUDA_ERROR_DEVICE_UNAVAILABLE)}) {
    EXPECT_TRUE(contains(text, "exclusive-process")) << text;
    EXPECT_TRUE(contains(text, "MPS server")) << text;
  }
  EXPECT_FALSE(contains(cc::detail::describe(cudaErrorInvalidValue), "MPS"));
}

TEST(ErrorHelper, CallNameAndShortFile) {
  using cc::detail::call_name;
  using cc::detail::short_file;
  EXPECT_EQ(call_name("cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)"),
            "cudaStreamCreateWithFlags");
  EXPECT_EQ(call_name("d->cuMemMap(ptr, size, 0, handle, 0)"), "cuMemMap");
  EXPECT_EQ(call_name("(*d)->cuMemCreate (&h, n, &p, 0)"), "cuMemCreate");
  EXPECT_EQ(call_name("::cudaFree(p)"), "cudaFree");
  EXPECT_EQ(call_name("err"), "err");
  EXPECT_EQ(call_name("static_cast<CUresult>(2)"), "static_cast<CUresult>(2)");
  EXPECT_EQ(call_name("f(g(x))"), "f");
  EXPECT_EQ(short_file("../cuda/cuda_api.cpp"), "cuda/cuda_api.cpp");
  EXPECT_EQ(short_file("/work/main/cuda/test_pattern.cu"), "cuda/test_pattern.cu");
  EXPECT_EQ(short_file("../x.cpp"), "x.cpp");
  EXPECT_EQ(short_file("x.cpp"), "x.cpp");
}

TEST(ErrorHelper, InitErrorsBecomeSentences) {
  using cc::detail::explain_init_error;
  EXPECT_TRUE(contains(explain_init_error(cudaErrorNoDevice, "cudaGetDeviceCount"),
                       "no CUDA device is present"));
  EXPECT_TRUE(contains(explain_init_error(cudaErrorNoDevice, "cudaGetDeviceCount"),
                       "cudaGetDeviceCount: cudaErrorNoDevice"));
  const std::string insufficient = explain_init_error(cudaErrorInsufficientDriver, "x");
  // Which sentence depends on whether a driver is installed on this machine.
  EXPECT_TRUE(contains(insufficient, "no CUDA driver is installed") ||
              contains(insufficient, "the CUDA driver is older than this build's runtime (CUDA 13"))
      << insufficient;
}

// ---------------------------------------------------------------------------------------------
// Devices: whatever this machine has, the answers are clear.

TEST(Devices, CountIsZeroWithAReasonOrPositive) {
  std::string why = "unchanged";
  const int n = cc::device_count(&why);
  std::cout << "[          ] device_count() = " << n << (n == 0 ? ": " + why : std::string())
            << "\n";
  ASSERT_GE(n, 0);
  if (n == 0) {
    EXPECT_FALSE(why.empty());
    EXPECT_NE(why, "unchanged");
    EXPECT_TRUE(contains(why, "CUDA driver") || contains(why, "CUDA device")) << why;
  } else {
    EXPECT_TRUE(why.empty()) << why;
  }
  EXPECT_EQ(cc::device_count(nullptr), n);  // `why` is optional
}

TEST(Devices, QueryBadOrdinalSaysHowManyExist) {
  const int n = cc::device_count(nullptr);
  cc::DeviceInfo info;
  for (int bad : {-1, n, n + 7}) {
    const cc::Status st = cc::query_device(bad, &info);
    ASSERT_FALSE(st.is_ok());
    const std::string prefix = "CUDA device " + std::to_string(bad) + " does not exist (" +
                               std::to_string(n) + " device(s) present)";
    EXPECT_EQ(st.message().rfind(prefix, 0), 0u) << st.message();
  }
}

// rg10tobgra's automatic choice: the upload only where it was measured and is faster.
TEST(InputPaths, TheFasterMeasuredPathIsChosenInPlaceWhenInDoubt) {
  cc::InputPathTimes t;
  EXPECT_EQ(t.faster(), cc::InputPath::kInPlace) << "nothing measured";
  t.in_place_us = 664.0;
  t.upload_us = 330.0;  // the H200 at 4K
  EXPECT_EQ(t.faster(), cc::InputPath::kUpload);
  t.upload_us = 664.0;
  EXPECT_EQ(t.faster(), cc::InputPath::kInPlace) << "a tie keeps the frame in place";
  t.upload_us = 0.0;
  EXPECT_EQ(t.faster(), cc::InputPath::kInPlace) << "an upload not measured never wins";
  EXPECT_STREQ(cc::input_path_name(cc::InputPath::kUpload), "upload");
  EXPECT_STREQ(cc::input_path_name(cc::InputPath::kInPlace), "in-place");
}

TEST(Devices, QueryDeviceZero) {
  std::string why;
  const int n = cc::device_count(&why);
  cc::DeviceInfo info;
  const cc::Status st = cc::query_device(0, &info);
  if (n == 0) {
    ASSERT_FALSE(st.is_ok());
    std::cout << "[          ] query_device(0): " << st.message() << "\n";
    EXPECT_EQ(st.message(), "CUDA device 0 does not exist (0 device(s) present): " + why);
  } else {
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(info.ordinal, 0);
    EXPECT_FALSE(info.name.empty());
    EXPECT_GE(info.cc_major * 10 + info.cc_minor, 75);
  }
}

TEST(Devices, UnknownUuidIsNotFound) {
  cc::Uuid uuid;
  for (size_t i = 0; i < uuid.size(); ++i) uuid[i] = static_cast<uint8_t>(0xA5 ^ i);
  EXPECT_EQ(cc::find_device(uuid), -1);
}

TEST(Devices, WithoutADeviceEverythingFailsCleanly) {
  std::string why;
  if (cc::device_count(&why) > 0) GTEST_SKIP() << "a CUDA device is present (see test-cuda-gpu)";
  cc::Stream stream;
  cc::Status st = cc::Stream::create(0, &stream);
  EXPECT_FALSE(st.is_ok());
  EXPECT_FALSE(st.message().empty());
  EXPECT_EQ(stream.handle(), nullptr);

  cc::Event event;
  st = cc::Event::create_interprocess(0, &event);
  EXPECT_FALSE(st.is_ok());
  EXPECT_FALSE(event.valid());

  cc::DeviceAllocation alloc;
  st = cc::DeviceAllocation::create(0, 1 << 20, &alloc);
  ASSERT_FALSE(st.is_ok());
  std::cout << "[          ] DeviceAllocation::create: " << st.message() << "\n";
  EXPECT_TRUE(contains(st.message(), "CUDA driver API unavailable")) << st.message();
  EXPECT_EQ(alloc.ptr(), 0u);
  st = cc::DeviceAllocation::import(0, 0, 1 << 20, &alloc);  // fd 0: never reaches the driver
  EXPECT_FALSE(st.is_ok());

  cc::DeviceBuffer buffer;
  EXPECT_FALSE(cc::DeviceBuffer::create(0, 64, &buffer).is_ok());
  cc::PinnedHostBuffer pinned;
  EXPECT_FALSE(cc::PinnedHostBuffer::create(64, &pinned).is_ok());
  EXPECT_EQ(pinned.data(), nullptr);
  EXPECT_FALSE(cc::set_device(0).is_ok());
  const cc::Status sync = cc::synchronize_stream(nullptr);
  EXPECT_FALSE(sync.is_ok());
  EXPECT_TRUE(contains(sync.message(), "cudaStreamSynchronize")) << sync.message();
}

// ---------------------------------------------------------------------------------------------
// Empty RAII objects and argument checks need no GPU either.

TEST(EmptyObjects, DestroyMoveAndRefuseWork) {
  cc::Stream s1, s2;
  s2 = std::move(s1);
  cc::Stream s3(std::move(s2));
  EXPECT_EQ(s3.handle(), nullptr);
  EXPECT_FALSE(s3.synchronize().is_ok());

  cc::Event e1;
  cc::Event e2(std::move(e1));
  EXPECT_FALSE(e2.valid());
  bool done = false;
  EXPECT_FALSE(e2.record(nullptr).is_ok());
  EXPECT_FALSE(e2.wait(nullptr).is_ok());
  EXPECT_FALSE(e2.synchronize().is_ok());
  EXPECT_FALSE(e2.query(&done).is_ok());
  cc::IpcEventHandle h{};
  EXPECT_FALSE(e2.ipc_handle(&h).is_ok());

  cc::DeviceAllocation a1;
  cc::DeviceAllocation a2(std::move(a1));
  a1 = std::move(a2);
  int fd = 123;
  const cc::Status st = a1.export_fd(&fd);
  EXPECT_FALSE(st.is_ok());
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(a1.ptr(), 0u);
  EXPECT_EQ(a1.size(), 0u);
  EXPECT_EQ(a1.mapped_size(), 0u);
  EXPECT_EQ(a1.device(), -1);

  cc::HostRegistration r1;
  cc::HostRegistration r2(std::move(r1));
  EXPECT_EQ(r2.ptr(), nullptr);
  EXPECT_FALSE(cc::HostRegistration::create(nullptr, 16, &r2).is_ok());
  cc::PinnedHostBuffer p1;
  cc::PinnedHostBuffer p2(std::move(p1));
  EXPECT_EQ(p2.size(), 0u);
  EXPECT_FALSE(cc::PinnedHostBuffer::create(0, &p2).is_ok());
  cc::DeviceBuffer b1;
  cc::DeviceBuffer b2(std::move(b1));
  EXPECT_EQ(b2.ptr(), 0u);
  EXPECT_EQ(b2.device(), -1);
  EXPECT_FALSE(cc::DeviceBuffer::create(0, 0, &b2).is_ok());
}

TEST(Launchers, ArgumentChecksAndNoOps) {
  // Nothing to fill: no CUDA call at all, so this succeeds without a GPU too.
  EXPECT_TRUE(cc::launch_fill_pattern(0, 0, 0, 0, 1, nullptr).is_ok());
  EXPECT_TRUE(cc::launch_fill_pattern(0x1000, 16, 0, 5, 1, nullptr).is_ok());
  EXPECT_FALSE(cc::launch_fill_pattern(0, 16, 16, 2, 1, nullptr).is_ok());
  EXPECT_FALSE(cc::launch_fill_pattern(0x1000, 8, 16, 2, 1, nullptr).is_ok());  // pitch < row
  EXPECT_FALSE(cc::launch_image_checksum(0x1000, 16, 16, 2, 0x2000, 0, nullptr).is_ok());
  EXPECT_FALSE(cc::launch_image_checksum(0x1000, 16, 16, 2, 0x2000, 0x3004, nullptr).is_ok());
  EXPECT_FALSE(cc::launch_image_checksum(0x1000, 16, 16, 2, 0, 0x3000, nullptr).is_ok());
  EXPECT_FALSE(cc::launch_image_checksum(0, 16, 16, 2, 0x2000, 0x3000, nullptr).is_ok());
  const cc::Status st = cc::launch_image_checksum(0x1000, 8, 16, 2, 0x2000, 0x3000, nullptr);
  EXPECT_FALSE(st.is_ok());
  EXPECT_TRUE(contains(st.message(), "pitch")) << st.message();
  EXPECT_TRUE(cc::copy_2d_async(nullptr, 0, nullptr, 0, 0, 5, nullptr).is_ok());
  EXPECT_FALSE(cc::copy_2d_async(nullptr, 16, nullptr, 16, 16, 5, nullptr).is_ok());
  EXPECT_TRUE(cc::copy_async(nullptr, nullptr, 0, nullptr).is_ok());
  EXPECT_FALSE(cc::copy_async(nullptr, nullptr, 16, nullptr).is_ok());
}

// ---------------------------------------------------------------------------------------------
// Deferred destruction: the release worker's thread parks what it would destroy (a PyTorch
// reader hung in the driver when that thread destroyed an event during the reader's launch).

TEST(DeferredDestruction, ADeferringThreadParksAndAnotherThreadDestroys) {
  cc::destroy_parked();  // nothing left over from other tests
  std::vector<int> order;
  std::thread worker([&] {
    cc::DeferDestructionOnThisThread defer;
    EXPECT_TRUE(cc::park_if_deferred([&] { order.push_back(1); }));
    {
      cc::DeferDestructionOnThisThread nested;
      EXPECT_TRUE(cc::park_if_deferred([&] { order.push_back(2); }));
    }
    EXPECT_TRUE(cc::park_if_deferred([&] { order.push_back(3); }));  // still deferring
    EXPECT_EQ(cc::destroy_parked(), 0u);  // never on the deferring thread itself
  });
  worker.join();
  EXPECT_TRUE(order.empty());
  EXPECT_EQ(cc::parked_count(), 3u);
  EXPECT_EQ(cc::destroy_parked(), 3u);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));  // oldest first
  EXPECT_EQ(cc::parked_count(), 0u);
  EXPECT_EQ(cc::destroy_parked(), 0u);
}

TEST(DeferredDestruction, OtherThreadsDestroyAtOnce) {
  bool destroyed = false;
  EXPECT_FALSE(cc::park_if_deferred([&] { destroyed = true; }));
  EXPECT_FALSE(destroyed);  // the caller destroys; nothing was kept
  EXPECT_EQ(cc::parked_count(), 0u);
}

TEST(DeferredDestruction, DestroyOrParkRunsAtOnceUnlessTheThreadDefers) {
  cc::destroy_parked();
  int runs = 0;
  cc::destroy_or_park([&] { ++runs; });
  EXPECT_EQ(runs, 1);
  std::thread worker([&] {
    cc::DeferDestructionOnThisThread defer;
    cc::destroy_or_park([&] { ++runs; });
  });
  worker.join();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(cc::parked_count(), 1u);
  EXPECT_EQ(cc::destroy_parked(), 1u);
  EXPECT_EQ(runs, 2);
}

TEST(DeferredDestruction, EmptyObjectsDestroyedOnADeferringThreadParkNothing) {
  std::thread worker([] {
    cc::DeferDestructionOnThisThread defer;
    { cc::Event e; }
    { cc::Stream s; }
    { cc::DeviceAllocation a; }
  });
  worker.join();
  EXPECT_EQ(cc::parked_count(), 0u);
}

}  // namespace
