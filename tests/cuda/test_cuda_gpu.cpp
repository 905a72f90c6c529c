// SPDX-License-Identifier: LGPL-2.1-or-later
// GPU tests of the CUDA layer. Every test skips with the reason when there is no usable CUDA
// device ("no CUDA device: no CUDA driver is installed ..."). Self-contained: run the binary
// directly on a GPU machine (no meson, no build paths); the cross-process test re-executes this
// same binary (/proc/self/exe) as the importing child.
//
//   test-cuda-gpu                      all tests
//   test-cuda-gpu --gtest_filter=Vmm*  a subset
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "cuda_api.h"
#include "cuda_test_util.h"
#include "mps_expectation.h"
#include "recycled_events.h"
#include "test_pattern.h"

namespace cc = cipc_cuda;

namespace {

constexpr const char* kChildFlag = "--cipc-cuda-child-socket=";

// ---------------------------------------------------------------------------------------------
// Helpers

using cipc_test::as_ptr;

std::string ptr_str(cc::DevicePtr p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(p));
  return buf;
}

// Checksums a device image on `stream` with the GPU kernel. scratch and result are prefilled
// with garbage first: the kernels must overwrite, not accumulate (no memset anywhere).
cc::Status gpu_checksum(int device, cc::DevicePtr image, size_t pitch, size_t row_bytes,
                        size_t rows, cc::StreamHandle stream, uint64_t* out) {
  cc::DeviceBuffer scratch, result;
  cc::Status st = cc::DeviceBuffer::create(device, std::max<size_t>(rows, 1) * 8, &scratch);
  if (!st.is_ok()) return st;
  st = cc::DeviceBuffer::create(device, 8, &result);
  if (!st.is_ok()) return st;
  std::vector<uint8_t> garbage(std::max<size_t>(rows, 1) * 8, 0xAB);
  st = cc::copy_2d_async(as_ptr(scratch.ptr()), garbage.size(), garbage.data(), garbage.size(),
                         garbage.size(), 1, stream);
  if (!st.is_ok()) return st;
  st = cc::copy_2d_async(as_ptr(result.ptr()), 8, garbage.data(), 8, 8, 1, stream);
  if (!st.is_ok()) return st;
  st =
      cc::launch_image_checksum(image, pitch, row_bytes, rows, scratch.ptr(), result.ptr(), stream);
  if (!st.is_ok()) return st;
  uint64_t host = 0;
  st = cc::copy_2d_async(&host, 8, as_ptr(result.ptr()), 8, 8, 1, stream);
  if (!st.is_ok()) return st;
  if (cudaStreamSynchronize(static_cast<cudaStream_t>(stream)) != cudaSuccess)
    return cc::Status::failure("cudaStreamSynchronize failed");
  *out = host;
  return cc::Status::ok();
}

// The pattern's expected bytes: the CPU reference on a buffer prefilled like the device one.
std::vector<uint8_t> expected_pattern(size_t pitch, size_t row_bytes, size_t rows, uint32_t seed,
                                      uint8_t prefill) {
  std::vector<uint8_t> v(pitch * rows, prefill);
  cc::fill_pattern_cpu(v.data(), pitch, row_bytes, rows, seed);
  return v;
}

const std::string& no_device_reason() {
  return cipc_test::cuda_missing_reason();
}

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!no_device_reason().empty()) GTEST_SKIP() << "no CUDA device: " << no_device_reason();
    ASSERT_OK(cc::query_device(0, &info_));
    ASSERT_OK(cc::Stream::create(0, &stream_));
  }
  cc::DeviceInfo info_;
  cc::Stream stream_;
};

// For VMM tests (inside a Gpu test): skips unless device 0 exports VMM memory as POSIX fds.
#define NEED_VMM()                                                    \
  do {                                                                \
    if (!info_.vmm_supported || !info_.posix_fd_supported)            \
      GTEST_SKIP() << "device 0 lacks VMM / POSIX-fd export support"; \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Devices

TEST_F(Gpu, QueryDevice) {
  std::cout << "[          ] device 0: " << info_.name << ", sm_" << info_.cc_major
            << info_.cc_minor << ", vmm " << info_.vmm_supported << ", posix fd "
            << info_.posix_fd_supported << ", ipc events " << info_.ipc_events_supported
            << ", granularity " << info_.granularity << "\n";
  EXPECT_FALSE(info_.name.empty());
  EXPECT_GE(info_.cc_major * 10 + info_.cc_minor, 75);
  EXPECT_NE(info_.uuid, cc::Uuid{});
  EXPECT_EQ(cc::find_device(info_.uuid), 0);
  if (info_.vmm_supported) {
    EXPECT_GT(info_.granularity, 0u);
    EXPECT_EQ(info_.granularity & (info_.granularity - 1), 0u);  // a power of two
  }
  EXPECT_TRUE(cc::set_device(0).is_ok());
  const cc::Status bad = cc::set_device(cc::device_count(nullptr));
  EXPECT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("cudaSetDevice"), std::string::npos) << bad.message();
}

// CU_DEVICE_ATTRIBUTE_MPS_ENABLED, as query_device reports it: true exactly when run-on-gpu's mps
// step has started a daemon for this process (CIPC_EXPECT_MPS=1).
TEST_F(Gpu, QueryDeviceSaysWhetherThisProcessIsAnMpsClient) {
  EXPECT_EQ(info_.mps_client, cipc_test::mps_expected())
      << (cipc_test::mps_expected() ? "an MPS daemon serves this process, but the device says no"
                                    : "no MPS daemon was started, but the device says MPS");
}

TEST_F(Gpu, CallsRestoreTheCurrentDevice) {
  const int n = cc::device_count(nullptr);
  if (n < 2) GTEST_SKIP() << "needs two CUDA devices (" << n << " present)";
  ASSERT_OK(cc::set_device(0));
  cc::Stream s;
  ASSERT_OK(cc::Stream::create(1, &s));
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0);
  s = cc::Stream();  // destroyed on device 1
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0);
}

// ---------------------------------------------------------------------------------------------
// Kernels against the CPU references

struct Shape {
  size_t row_bytes, rows, pitch;
  size_t offset;  // bytes added to the (256-aligned) device base: unaligned rows
};

std::string describe(const Shape& s) {
  return std::to_string(s.row_bytes) + "x" + std::to_string(s.rows) + " pitch " +
         std::to_string(s.pitch) + " offset " + std::to_string(s.offset);
}

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> v = {
      {1, 1, 1, 0},
      {3, 7, 3, 0},
      {7, 3, 9, 0},
      {16, 1, 16, 0},
      {17, 1, 17, 0},
      {31, 5, 48, 0},
      {641, 479, 641, 0},
      {641, 479, 704, 0},
      {1920 * 4, 1080, 1920 * 4, 0},
      {4096, 64, 4352, 0},
      {4096, 64, 4352, 1},
      {33, 9, 35, 3},
      {100000, 2, 100032, 0},
      {1, 70000, 1, 0},
      {5, 70001, 16, 0},
      {3840 * 4, 2160, 3840 * 4 + 256, 0},
  };
  return v;
}

TEST_F(Gpu, ChecksumMatchesCpuOnRandomImages) {
  std::mt19937_64 rng(0xC0FFEEu);
  for (const Shape& s : shapes()) {
    SCOPED_TRACE(describe(s));
    const size_t bytes = s.pitch * s.rows + s.offset;
    std::vector<uint8_t> host(bytes);
    for (auto& b : host) b = static_cast<uint8_t>(rng());
    cc::DeviceBuffer dev;
    ASSERT_OK(cc::DeviceBuffer::create(0, bytes, &dev));
    ASSERT_OK(cc::copy_2d_async(as_ptr(dev.ptr()), bytes, host.data(), bytes, bytes, 1,
                                stream_.handle()));
    const uint8_t* img = host.data() + s.offset;
    const uint64_t want = cc::image_checksum_cpu(img, s.pitch, s.row_bytes, s.rows);
    uint64_t got = 0;
    ASSERT_OK(gpu_checksum(0, dev.ptr() + s.offset, s.pitch, s.row_bytes, s.rows, stream_.handle(),
                           &got));
    EXPECT_EQ(got, want);
    // Changing padding changes nothing; changing one image byte changes the sum.
    if (s.pitch > s.row_bytes) {
      uint8_t junk = 0x5C;
      ASSERT_OK(cc::copy_2d_async(as_ptr(dev.ptr() + s.offset + s.row_bytes), 1, &junk, 1, 1, 1,
                                  stream_.handle()));
      ASSERT_OK(gpu_checksum(0, dev.ptr() + s.offset, s.pitch, s.row_bytes, s.rows,
                             stream_.handle(), &got));
      EXPECT_EQ(got, want);
    }
    uint8_t flipped = static_cast<uint8_t>(img[s.row_bytes - 1] ^ 0x01);
    ASSERT_OK(cc::copy_2d_async(as_ptr(dev.ptr() + s.offset + s.row_bytes - 1), 1, &flipped, 1, 1,
                                1, stream_.handle()));
    ASSERT_OK(gpu_checksum(0, dev.ptr() + s.offset, s.pitch, s.row_bytes, s.rows, stream_.handle(),
                           &got));
    EXPECT_NE(got, want);
  }
}

TEST_F(Gpu, ChecksumOfEmptyImagesIsZeroWithoutMemset) {
  cc::DeviceBuffer dev;
  ASSERT_OK(cc::DeviceBuffer::create(0, 256, &dev));
  uint64_t got = 1;
  ASSERT_OK(gpu_checksum(0, dev.ptr(), 16, 16, 0, stream_.handle(), &got));  // rows 0
  EXPECT_EQ(got, 0u);
  got = 1;
  ASSERT_OK(gpu_checksum(0, dev.ptr(), 16, 0, 4, stream_.handle(), &got));  // row_bytes 0
  EXPECT_EQ(got, 0u);
}

TEST_F(Gpu, FillPatternMatchesCpuAndLeavesPadding) {
  uint32_t seed = 1;
  for (const Shape& s : shapes()) {
    SCOPED_TRACE(describe(s));
    ++seed;
    const size_t bytes = s.pitch * s.rows + s.offset;
    std::vector<uint8_t> prefill(bytes, 0xEE);
    cc::DeviceBuffer dev;
    ASSERT_OK(cc::DeviceBuffer::create(0, bytes, &dev));
    ASSERT_OK(cc::copy_2d_async(as_ptr(dev.ptr()), bytes, prefill.data(), bytes, bytes, 1,
                                stream_.handle()));
    ASSERT_OK(cc::launch_fill_pattern(dev.ptr() + s.offset, s.pitch, s.row_bytes, s.rows, seed,
                                      stream_.handle()));
    std::vector<uint8_t> back(bytes, 0);
    ASSERT_OK(cc::copy_2d_async(back.data(), bytes, as_ptr(dev.ptr()), bytes, bytes, 1,
                                stream_.handle()));
    ASSERT_OK(stream_.synchronize());
    std::vector<uint8_t> want(bytes, 0xEE);
    cc::fill_pattern_cpu(want.data() + s.offset, s.pitch, s.row_bytes, s.rows, seed);
    ASSERT_EQ(back.size(), want.size());
    const auto mismatch = std::mismatch(back.begin(), back.end(), want.begin());
    EXPECT_TRUE(mismatch.first == back.end())
        << "first difference at byte " << (mismatch.first - back.begin()) << ": got "
        << int(*mismatch.first) << ", want " << int(*mismatch.second);
    // And the checksum kernel agrees with the CPU on the pattern.
    uint64_t got = 0;
    ASSERT_OK(gpu_checksum(0, dev.ptr() + s.offset, s.pitch, s.row_bytes, s.rows, stream_.handle(),
                           &got));
    EXPECT_EQ(got, cc::image_checksum_cpu(want.data() + s.offset, s.pitch, s.row_bytes, s.rows));
  }
}

// ---------------------------------------------------------------------------------------------
// VMM allocations

TEST_F(Gpu, VmmCreateExportImportSameProcess) {
  NEED_VMM();
  const size_t row_bytes = 1920 * 4, rows = 1080, pitch = 1920 * 4 + 256;
  const size_t size = pitch * rows + 5;  // not a multiple of the granularity
  cc::DeviceAllocation a;
  ASSERT_OK(cc::DeviceAllocation::create(0, size, &a));
  EXPECT_NE(a.ptr(), 0u);
  EXPECT_EQ(a.size(), size);
  EXPECT_GE(a.mapped_size(), size);
  EXPECT_EQ(a.mapped_size() % info_.granularity, 0u);
  EXPECT_EQ(a.device(), 0);

  int fd = -1;
  ASSERT_OK(a.export_fd(&fd));
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC);

  cc::DeviceAllocation b;
  ASSERT_OK(cc::DeviceAllocation::import(0, fd, size, &b));
  EXPECT_NE(fcntl(fd, F_GETFD), -1) << "import must not consume the descriptor";
  close(fd);
  EXPECT_NE(b.ptr(), 0u);
  EXPECT_NE(b.ptr(), a.ptr()) << "a second mapping of the same memory";
  EXPECT_EQ(b.size(), size);
  EXPECT_EQ(b.mapped_size(), a.mapped_size());
  std::cout << "[          ] created at " << ptr_str(a.ptr()) << ", imported at "
            << ptr_str(b.ptr()) << ", " << a.mapped_size() << " bytes mapped\n";

  // Write through the exporter's mapping, read through the import.
  ASSERT_OK(cc::launch_fill_pattern(a.ptr(), pitch, row_bytes, rows, 11, stream_.handle()));
  uint64_t got = 0;
  ASSERT_OK(gpu_checksum(0, b.ptr(), pitch, row_bytes, rows, stream_.handle(), &got));
  const std::vector<uint8_t> want11 = expected_pattern(pitch, row_bytes, rows, 11, 0);
  EXPECT_EQ(got, cc::image_checksum_cpu(want11.data(), pitch, row_bytes, rows));

  ASSERT_OK(cc::launch_fill_pattern(a.ptr(), pitch, row_bytes, rows, 12, stream_.handle()));
  ASSERT_OK(gpu_checksum(0, b.ptr(), pitch, row_bytes, rows, stream_.handle(), &got));
  const std::vector<uint8_t> want12 = expected_pattern(pitch, row_bytes, rows, 12, 0);
  EXPECT_EQ(got, cc::image_checksum_cpu(want12.data(), pitch, row_bytes, rows));
  // Imports are read-only for this process's GPU work (a write through `b` would fault and take
  // this test's context with it: tests/gpu checks that in a process of its own).
  EXPECT_TRUE(b.read_only()) << "this driver refused a read-only mapping";
  EXPECT_FALSE(a.read_only());

  // The creator's handle survives the importer's cuMemRelease: it can still export.
  int fd2 = -1;
  ASSERT_OK(a.export_fd(&fd2));
  close(fd2);
  // An import cannot be re-exported.
  int fd3 = 7;
  const cc::Status reexport = b.export_fd(&fd3);
  EXPECT_FALSE(reexport.is_ok());
  EXPECT_EQ(fd3, -1);

  // The imported mapping keeps the memory alive after the creator lets go.
  a = cc::DeviceAllocation();
  ASSERT_OK(gpu_checksum(0, b.ptr(), pitch, row_bytes, rows, stream_.handle(), &got));
  EXPECT_EQ(got, cc::image_checksum_cpu(want12.data(), pitch, row_bytes, rows));
}

TEST_F(Gpu, VmmImportSizes) {
  NEED_VMM();
  cc::DeviceAllocation a;
  ASSERT_OK(cc::DeviceAllocation::create(0, info_.granularity + 1, &a));  // two granules
  int fd = -1;
  ASSERT_OK(a.export_fd(&fd));
  {
    cc::DeviceAllocation b;
    ASSERT_OK(cc::DeviceAllocation::import(0, fd, a.mapped_size(), &b));
  }
  {
    // Announced larger than the real allocation: the driver refuses the mapping; nothing leaks.
    cc::DeviceAllocation b;
    const cc::Status st = cc::DeviceAllocation::import(0, fd, a.mapped_size() + 1, &b);
    EXPECT_FALSE(st.is_ok());
    std::cout << "[          ] oversized import: " << st.message() << "\n";
    EXPECT_EQ(b.ptr(), 0u);
  }
  {
    cc::DeviceAllocation b;
    EXPECT_FALSE(cc::DeviceAllocation::import(0, fd, size_t(1) << 50, &b).is_ok());
    EXPECT_FALSE(cc::DeviceAllocation::import(0, fd, 0, &b).is_ok());
  }
  // Repeated failures leave nothing behind: a failing import 200 times, then normal work.
  for (int i = 0; i < 200; ++i) {
    cc::DeviceAllocation b;
    ASSERT_FALSE(cc::DeviceAllocation::import(0, fd, a.mapped_size() * 2, &b).is_ok());
  }
  cc::DeviceAllocation ok;
  ASSERT_OK(cc::DeviceAllocation::import(0, fd, a.size(), &ok));
  close(fd);
}

TEST_F(Gpu, VmmImportOfPartOfAnAllocationIsRefusedCleanly) {
  // cuMemMap maps whole allocations of an imported handle: announcing less than the allocation
  // holds is refused (driver 580: CUDA_ERROR_NOT_SUPPORTED) - a lying producer gets an error,
  // never a partial mapping - and the same descriptor still imports with its real size.
  NEED_VMM();
  cc::DeviceAllocation a;
  ASSERT_OK(cc::DeviceAllocation::create(0, 2 * info_.granularity, &a));
  ASSERT_OK(
      cc::launch_fill_pattern(a.ptr(), 4096, 4096, info_.granularity / 4096, 3, stream_.handle()));
  ASSERT_OK(stream_.synchronize());
  int fd = -1;
  ASSERT_OK(a.export_fd(&fd));
  cc::DeviceAllocation part;
  const cc::Status st = cc::DeviceAllocation::import(0, fd, 1, &part);
  EXPECT_FALSE(st.is_ok());
  EXPECT_EQ(part.ptr(), 0u);
  std::cout << "[          ] partial import: " << st.message() << "\n";
  cc::DeviceAllocation whole;
  ASSERT_OK(cc::DeviceAllocation::import(0, fd, a.size(), &whole));
  close(fd);
  uint64_t sum = 0;
  const size_t rows = info_.granularity / 4096;
  ASSERT_OK(gpu_checksum(0, whole.ptr(), 4096, 4096, rows, stream_.handle(), &sum));
  const std::vector<uint8_t> want = expected_pattern(4096, 4096, rows, 3, 0);
  EXPECT_EQ(sum, cc::image_checksum_cpu(want.data(), 4096, 4096, rows));
}

TEST_F(Gpu, VmmImportBogusDescriptorsFailCleanly) {
  NEED_VMM();
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  cc::DeviceAllocation b;
  cc::Status st = cc::DeviceAllocation::import(0, p[0], 1 << 20, &b);
  EXPECT_FALSE(st.is_ok());
  std::cout << "[          ] pipe import: " << st.message() << "\n";
  EXPECT_EQ(b.ptr(), 0u);
  close(p[0]);
  close(p[1]);

  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(devnull, 0);
  st = cc::DeviceAllocation::import(0, devnull, 1 << 20, &b);
  EXPECT_FALSE(st.is_ok());
  std::cout << "[          ] /dev/null import: " << st.message() << "\n";
  close(devnull);

  st = cc::DeviceAllocation::import(0, -1, 1 << 20, &b);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("invalid descriptor"), std::string::npos) << st.message();

  // A descriptor number that is not open.
  const int closed = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(closed, 0);
  close(closed);
  st = cc::DeviceAllocation::import(0, closed, 1 << 20, &b);
  EXPECT_FALSE(st.is_ok());
  std::cout << "[          ] closed-fd import: " << st.message() << "\n";
}

TEST_F(Gpu, VmmCreateFailsCleanly) {
  NEED_VMM();
  cc::DeviceAllocation a;
  EXPECT_FALSE(cc::DeviceAllocation::create(0, 0, &a).is_ok());
  const cc::Status huge = cc::DeviceAllocation::create(0, size_t(1) << 50, &a);  // 1 PiB
  EXPECT_FALSE(huge.is_ok());
  std::cout << "[          ] 1 PiB create: " << huge.message() << "\n";
  EXPECT_EQ(a.ptr(), 0u);
  EXPECT_FALSE(cc::DeviceAllocation::create(0, SIZE_MAX, &a).is_ok());
  EXPECT_FALSE(cc::DeviceAllocation::create(cc::device_count(nullptr), 4096, &a).is_ok());
  // And afterwards everything still works.
  ASSERT_OK(cc::DeviceAllocation::create(0, 4096, &a));
}

// ---------------------------------------------------------------------------------------------
// Cross-process: a child process (this binary, re-executed) imports the descriptor received over
// a socketpair with SCM_RIGHTS, waits GPU-side on the parent's interprocess event, reads the
// bytes the parent wrote, then writes a new pattern the parent reads back.

struct ChildRequest {
  uint64_t size, pitch, row_bytes, rows;
  uint32_t seed, new_seed;
  uint8_t uuid[16];
  uint8_t event[cc::kIpcEventHandleSize];
};

struct ChildReply {
  int32_t ok;
  uint64_t checksum;  // GPU checksum of what the child read
  char message[512];
};

bool send_with_fd(int sock, const void* data, size_t len, int fd) {
  iovec iov{const_cast<void*>(data), len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  return sendmsg(sock, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(len);
}

bool recv_with_fd(int sock, void* data, size_t len, int* fd) {
  iovec iov{data, len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != static_cast<ssize_t>(len)) return false;
  *fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      std::memcpy(fd, CMSG_DATA(c), sizeof(int));
  }
  return *fd >= 0;
}

// The child's side. Returns its exit status; reports details in the reply.
int child_main(int sock) {
  ChildReply reply{};
  auto fail = [&](const std::string& what) {
    reply.ok = 0;
    std::snprintf(reply.message, sizeof(reply.message), "%s", what.c_str());
    (void)send(sock, &reply, sizeof(reply), MSG_NOSIGNAL);
    return 1;
  };
  ChildRequest req{};
  int fd = -1;
  if (!recv_with_fd(sock, &req, sizeof(req), &fd)) return fail("child: no request/descriptor");

  cc::Uuid uuid;
  std::memcpy(uuid.data(), req.uuid, uuid.size());
  const int device = cc::find_device(uuid);
  if (device < 0) return fail("child: the parent's GPU is not visible here");
  cc::DeviceAllocation mem;
  cc::Status st = cc::DeviceAllocation::import(device, fd, req.size, &mem);
  close(fd);
  if (!st.is_ok()) return fail("child import: " + st.message());
  cc::IpcEventHandle handle;
  std::memcpy(handle.data(), req.event, handle.size());
  cc::Event ready;
  st = cc::Event::open(device, handle, &ready);
  if (!st.is_ok()) return fail("child Event::open: " + st.message());
  cc::Stream stream;
  st = cc::Stream::create(device, &stream);
  if (!st.is_ok()) return fail("child stream: " + st.message());
  st = ready.wait(stream.handle());  // GPU-side: the parent did not synchronise
  if (!st.is_ok()) return fail("child wait: " + st.message());

  const size_t bytes = req.pitch * req.rows;
  cc::PinnedHostBuffer host;
  st = cc::PinnedHostBuffer::create(bytes, &host);
  if (!st.is_ok()) return fail("child pinned: " + st.message());
  st = cc::copy_2d_async(host.data(), req.pitch, as_ptr(mem.ptr()), req.pitch, req.row_bytes,
                         req.rows, stream.handle());
  if (!st.is_ok()) return fail("child copy: " + st.message());
  uint64_t sum = 0;
  st = gpu_checksum(device, mem.ptr(), req.pitch, req.row_bytes, req.rows, stream.handle(), &sum);
  if (!st.is_ok()) return fail("child checksum: " + st.message());
  const std::vector<uint8_t> want =
      expected_pattern(req.pitch, req.row_bytes, req.rows, req.seed, 0);
  for (size_t r = 0; r < req.rows; ++r) {
    if (std::memcmp(static_cast<uint8_t*>(host.data()) + r * req.pitch, want.data() + r * req.pitch,
                    req.row_bytes) != 0)
      return fail("child: row " + std::to_string(r) + " differs from the parent's pattern");
  }
  // Try to write a new pattern into the parent's memory: the import is read-only, so the write
  // must fault here (it takes this child's context with it) and never reach the parent. Not as
  // MPS clients: there the fault tears down every client on the GPU, the parent too (measured:
  // GpuTwoProcess.ConsumerKernelWritingIntoAFrameFaultsAloneExceptUnderMps).
  if (cipc_test::mps_expected()) {
    st = cc::Status::failure("not tried as an MPS client, where the fault would end the parent");
  } else {
    st = cc::launch_fill_pattern(mem.ptr(), req.pitch, req.row_bytes, req.rows, req.new_seed,
                                 stream.handle());
    if (st.is_ok()) st = stream.synchronize();
    if (st.is_ok()) return fail("child: wrote into an import that should be read-only");
  }
  reply.ok = 1;
  reply.checksum = sum;
  std::snprintf(reply.message, sizeof(reply.message),
                "child: imported at %s on device %d; its write was refused (%.120s)",
                ptr_str(mem.ptr()).c_str(), device, st.message().c_str());
  return send(sock, &reply, sizeof(reply), MSG_NOSIGNAL) == sizeof(reply) ? 0 : 1;
}

TEST_F(Gpu, ChildProcessImportsOverSocket) {
  NEED_VMM();
  if (!info_.ipc_events_supported) GTEST_SKIP() << "device 0 lacks interprocess events";
  const size_t row_bytes = 1283, rows = 517, pitch = 1536;
  const size_t size = pitch * rows;
  cc::DeviceAllocation mem;
  ASSERT_OK(cc::DeviceAllocation::create(0, size, &mem));
  cc::Event ready;
  ASSERT_OK(cc::Event::create_interprocess(0, &ready));
  ASSERT_OK(cc::launch_fill_pattern(mem.ptr(), pitch, row_bytes, rows, 21, stream_.handle()));
  ASSERT_OK(ready.record(stream_.handle()));  // no synchronisation: the child waits GPU-side

  ChildRequest req{};
  req.size = size;
  req.pitch = pitch;
  req.row_bytes = row_bytes;
  req.rows = rows;
  req.seed = 21;
  req.new_seed = 22;
  std::memcpy(req.uuid, info_.uuid.data(), sizeof(req.uuid));
  cc::IpcEventHandle handle;
  ASSERT_OK(ready.ipc_handle(&handle));
  std::memcpy(req.event, handle.data(), sizeof(req.event));
  int fd = -1;
  ASSERT_OK(mem.export_fd(&fd));

  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  // The child end must survive exec: clear FD_CLOEXEC on it (in the parent, before fork, so
  // that the child runs nothing but async-signal-safe calls before exec).
  ASSERT_EQ(fcntl(sv[1], F_SETFD, 0), 0);
  const std::string arg = std::string(kChildFlag) + std::to_string(sv[1]);
  char self[] = "/proc/self/exe";
  char* argv[] = {self, const_cast<char*>(arg.c_str()), nullptr};
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execv(self, argv);
    _exit(127);
  }
  close(sv[1]);
  ASSERT_TRUE(send_with_fd(sv[0], &req, sizeof(req), fd));
  close(fd);  // the child holds its own copy now

  ChildReply reply{};
  pollfd pfd{sv[0], POLLIN, 0};
  const int ready_n = poll(&pfd, 1, 120 * 1000);
  ssize_t got = -1;
  if (ready_n == 1) got = recv(sv[0], &reply, sizeof(reply), 0);
  close(sv[0]);
  if (ready_n != 1) kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_EQ(ready_n, 1) << "the child did not answer within 120 s";
  ASSERT_EQ(got, static_cast<ssize_t>(sizeof(reply))) << "child exit status " << status;
  reply.message[sizeof(reply.message) - 1] = 0;
  ASSERT_EQ(reply.ok, 1) << reply.message;
  std::cout << "[          ] " << reply.message << "\n";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;

  const std::vector<uint8_t> want21 = expected_pattern(pitch, row_bytes, rows, 21, 0);
  EXPECT_EQ(reply.checksum, cc::image_checksum_cpu(want21.data(), pitch, row_bytes, rows));
  // The child's attempted write did not land: the memory still holds the parent's pattern.
  uint64_t sum = 0;
  ASSERT_OK(gpu_checksum(0, mem.ptr(), pitch, row_bytes, rows, stream_.handle(), &sum));
  EXPECT_EQ(sum, cc::image_checksum_cpu(want21.data(), pitch, row_bytes, rows))
      << "a consumer process wrote into the producer's memory";
}

// ---------------------------------------------------------------------------------------------
// Events

TEST_F(Gpu, InterprocessEventInOneProcess) {
  if (!info_.ipc_events_supported) GTEST_SKIP() << "device 0 lacks interprocess events";
  cc::Event e;
  ASSERT_OK(cc::Event::create_interprocess(0, &e));
  ASSERT_TRUE(e.valid());
  bool done = false;
  ASSERT_OK(e.query(&done));
  EXPECT_TRUE(done) << "an event never recorded counts as complete";
  cc::IpcEventHandle h{};
  ASSERT_OK(e.ipc_handle(&h));
  EXPECT_NE(h, cc::IpcEventHandle{});

  // Record after a sizeable kernel, wait on it from a second stream, then CPU-synchronise.
  cc::DeviceBuffer buf;
  const size_t pitch = 8192, rows = 4096;
  ASSERT_OK(cc::DeviceBuffer::create(0, pitch * rows, &buf));
  ASSERT_OK(cc::launch_fill_pattern(buf.ptr(), pitch, pitch, rows, 5, stream_.handle()));
  ASSERT_OK(e.record(stream_.handle()));
  cc::Stream other;
  ASSERT_OK(cc::Stream::create(0, &other));
  ASSERT_OK(e.wait(other.handle()));
  uint64_t sum = 0;
  ASSERT_OK(gpu_checksum(0, buf.ptr(), pitch, pitch, rows, other.handle(), &sum));
  const std::vector<uint8_t> want = expected_pattern(pitch, pitch, rows, 5, 0);
  EXPECT_EQ(sum, cc::image_checksum_cpu(want.data(), pitch, pitch, rows));
  ASSERT_OK(e.synchronize());
  ASSERT_OK(e.query(&done));
  EXPECT_TRUE(done);

  // Opening our own handle in the same process: CUDA documents IPC handles for use in *other*
  // processes; drivers have answered cudaErrorInvalidContext here. Either outcome is accepted,
  // but it must be clean, and an opened event must work.
  cc::Event opened;
  const cc::Status st = cc::Event::open(0, h, &opened);
  std::cout << "[          ] same-process Event::open: "
            << (st.is_ok() ? std::string("works") : "fails: " + st.message()) << "\n";
  if (st.is_ok()) {
    ASSERT_TRUE(opened.valid());
    ASSERT_OK(opened.record(stream_.handle()));
    ASSERT_OK(opened.wait(other.handle()));
    ASSERT_OK(opened.synchronize());
    ASSERT_OK(opened.query(&done));
    EXPECT_TRUE(done);
  } else {
    EXPECT_FALSE(opened.valid());
    EXPECT_FALSE(st.message().empty());
  }
}

TEST_F(Gpu, QueryReportsNotReady) {
  // A kernel that takes a while, recorded, queried at once: usually not done yet. We cannot
  // force "not ready", so only check that both answers come back as success.
  cc::Event e;
  ASSERT_OK(cc::Event::create_interprocess(0, &e));
  cc::DeviceBuffer buf;
  const size_t pitch = 1 << 16, rows = 4096;  // 256 MiB
  ASSERT_OK(cc::DeviceBuffer::create(0, pitch * rows, &buf));
  for (int i = 0; i < 4; ++i)
    ASSERT_OK(cc::launch_fill_pattern(buf.ptr(), pitch, pitch, rows, i, stream_.handle()));
  ASSERT_OK(e.record(stream_.handle()));
  bool done = true;
  ASSERT_OK(e.query(&done));
  std::cout << "[          ] query right after record: " << (done ? "done" : "not ready") << "\n";
  ASSERT_OK(e.synchronize());
  ASSERT_OK(e.query(&done));
  EXPECT_TRUE(done);
}

TEST_F(Gpu, RecycledEventsReuseOnlyWhatNobodyElseHolds) {
  cc::RecycledEvents events(0);
  std::shared_ptr<cc::Event> first, second, again;
  ASSERT_OK(events.next(&first));
  ASSERT_TRUE(first && first->valid());
  ASSERT_OK(first->record(stream_.handle()));
  ASSERT_OK(events.next(&second));  // `first` is still held: a new one
  EXPECT_NE(first.get(), second.get());
  EXPECT_EQ(events.size(), 2u);
  cc::Event* const first_raw = first.get();
  first.reset();  // let go (the release worker, once the frame's work is done)
  ASSERT_OK(events.next(&again));
  EXPECT_EQ(again.get(), first_raw) << "a free event was not used again";
  EXPECT_EQ(events.size(), 2u) << "no new event while one was free";
  ASSERT_OK(again->record(stream_.handle()));
  ASSERT_OK(again->synchronize());
}

// ---------------------------------------------------------------------------------------------
// Host memory and copies

TEST_F(Gpu, HostRegistrationAndPitchedCopies) {
  const size_t row_bytes = 1001, rows = 77;
  const size_t host_pitch = 1024, dev_pitch = 1280, back_pitch = 1100;
  // Page-aligned host buffers, as a GStreamer pool would hand out.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto page_alloc = [&](size_t n) {
    return static_cast<uint8_t*>(std::aligned_alloc(page, (n + page - 1) / page * page));
  };
  uint8_t* src = page_alloc(host_pitch * rows);
  uint8_t* dst = page_alloc(back_pitch * rows);
  ASSERT_TRUE(src && dst);
  std::memset(dst, 0xEE, back_pitch * rows);
  std::mt19937 rng(7);
  for (size_t i = 0; i < host_pitch * rows; ++i) src[i] = static_cast<uint8_t>(rng());
  {
    cc::HostRegistration reg_src, reg_dst;
    ASSERT_OK(cc::HostRegistration::create(src, host_pitch * rows, &reg_src));
    ASSERT_OK(cc::HostRegistration::create(dst, back_pitch * rows, &reg_dst));
    EXPECT_EQ(reg_src.ptr(), src);
    // Registering the same range twice fails cleanly.
    cc::HostRegistration twice;
    const cc::Status st = cc::HostRegistration::create(src, host_pitch * rows, &twice);
    EXPECT_FALSE(st.is_ok());
    EXPECT_EQ(twice.ptr(), nullptr);

    cc::DeviceBuffer dev;
    ASSERT_OK(cc::DeviceBuffer::create(0, dev_pitch * rows, &dev));
    ASSERT_OK(cc::copy_2d_async(as_ptr(dev.ptr()), dev_pitch, src, host_pitch, row_bytes, rows,
                                stream_.handle()));
    uint64_t sum = 0;
    ASSERT_OK(gpu_checksum(0, dev.ptr(), dev_pitch, row_bytes, rows, stream_.handle(), &sum));
    EXPECT_EQ(sum, cc::image_checksum_cpu(src, host_pitch, row_bytes, rows));
    ASSERT_OK(cc::copy_2d_async(dst, back_pitch, as_ptr(dev.ptr()), dev_pitch, row_bytes, rows,
                                stream_.handle()));
    ASSERT_OK(stream_.synchronize());
    for (size_t r = 0; r < rows; ++r) {
      ASSERT_EQ(0, std::memcmp(dst + r * back_pitch, src + r * host_pitch, row_bytes)) << r;
      for (size_t c = row_bytes; c < back_pitch; ++c)
        ASSERT_EQ(dst[r * back_pitch + c], 0xEE) << "padding written at " << r << "," << c;
    }
    // Moving a registration moves the duty to unregister.
    cc::HostRegistration moved(std::move(reg_src));
    EXPECT_EQ(reg_src.ptr(), nullptr);
    EXPECT_EQ(moved.ptr(), src);
  }
  // Both were unregistered on scope exit: registering again works.
  {
    cc::HostRegistration again;
    ASSERT_OK(cc::HostRegistration::create(src, host_pitch * rows, &again));
  }
  std::free(src);
  std::free(dst);
}

TEST_F(Gpu, PinnedHostBufferAndDeviceToDevice) {
  cc::PinnedHostBuffer pinned;
  ASSERT_OK(cc::PinnedHostBuffer::create(640 * 480, &pinned));
  ASSERT_NE(pinned.data(), nullptr);
  EXPECT_EQ(pinned.size(), 640u * 480u);
  cc::DeviceBuffer a, b;
  ASSERT_OK(cc::DeviceBuffer::create(0, 640 * 480, &a));
  ASSERT_OK(cc::DeviceBuffer::create(0, 704 * 480, &b));
  EXPECT_EQ(b.size(), 704u * 480u);
  ASSERT_OK(cc::launch_fill_pattern(a.ptr(), 640, 640, 480, 99, stream_.handle()));
  ASSERT_OK(cc::copy_2d_async(as_ptr(b.ptr()), 704, as_ptr(a.ptr()), 640, 640, 480,
                              stream_.handle()));  // device to device, new pitch
  ASSERT_OK(
      cc::copy_2d_async(pinned.data(), 640, as_ptr(b.ptr()), 704, 640, 480, stream_.handle()));
  ASSERT_OK(cc::synchronize_stream(stream_.handle()));  // the free function, on a raw handle
  const std::vector<uint8_t> want = expected_pattern(640, 640, 480, 99, 0);
  EXPECT_EQ(0, std::memcmp(pinned.data(), want.data(), want.size()));
  // A pitch smaller than the row is refused before CUDA sees it.
  EXPECT_FALSE(cc::copy_2d_async(pinned.data(), 100, as_ptr(b.ptr()), 704, 640, 2, stream_.handle())
                   .is_ok());
}

// ---------------------------------------------------------------------------------------------
// RAII

TEST_F(Gpu, MoveSemantics) {
  cc::Stream s1;
  ASSERT_OK(cc::Stream::create(0, &s1));
  const cc::StreamHandle h1 = s1.handle();
  ASSERT_NE(h1, nullptr);
  cc::Stream s2(std::move(s1));
  EXPECT_EQ(s1.handle(), nullptr);
  EXPECT_EQ(s2.handle(), h1);
  cc::Stream s3;
  ASSERT_OK(cc::Stream::create(0, &s3));
  s3 = std::move(s2);  // s3's own stream is destroyed
  EXPECT_EQ(s3.handle(), h1);
  EXPECT_EQ(s2.handle(), nullptr);
  ASSERT_OK(s3.synchronize());
  ASSERT_OK(cc::Stream::create(0, &s3));  // create into a live object replaces it
  EXPECT_NE(s3.handle(), nullptr);

  cc::Event e1;
  ASSERT_OK(cc::Event::create_interprocess(0, &e1));
  cc::Event e2(std::move(e1));
  EXPECT_FALSE(e1.valid());
  EXPECT_TRUE(e2.valid());
  e1 = std::move(e2);
  EXPECT_TRUE(e1.valid());
  EXPECT_FALSE(e2.valid());
  ASSERT_OK(e1.record(s3.handle()));
  ASSERT_OK(e1.synchronize());

  cc::DeviceBuffer b1;
  ASSERT_OK(cc::DeviceBuffer::create(0, 4096, &b1));
  const cc::DevicePtr p = b1.ptr();
  cc::DeviceBuffer b2(std::move(b1));
  EXPECT_EQ(b1.ptr(), 0u);
  EXPECT_EQ(b1.size(), 0u);
  EXPECT_EQ(b2.ptr(), p);
  EXPECT_EQ(b2.size(), 4096u);
  EXPECT_EQ(b2.device(), 0);
  EXPECT_EQ(b1.device(), -1);

  cc::PinnedHostBuffer h;
  ASSERT_OK(cc::PinnedHostBuffer::create(4096, &h));
  void* hp = h.data();
  cc::PinnedHostBuffer h2;
  h2 = std::move(h);
  EXPECT_EQ(h.data(), nullptr);
  EXPECT_EQ(h2.data(), hp);

  if (info_.vmm_supported && info_.posix_fd_supported) {
    cc::DeviceAllocation a1;
    ASSERT_OK(cc::DeviceAllocation::create(0, 1000, &a1));
    const cc::DevicePtr ap = a1.ptr();
    const size_t mapped = a1.mapped_size();
    cc::DeviceAllocation a2(std::move(a1));
    EXPECT_EQ(a1.ptr(), 0u);
    EXPECT_EQ(a1.mapped_size(), 0u);
    EXPECT_EQ(a1.device(), -1);
    EXPECT_EQ(a2.ptr(), ap);
    EXPECT_EQ(a2.size(), 1000u);
    EXPECT_EQ(a2.mapped_size(), mapped);
    int fd = -1;
    EXPECT_FALSE(a1.export_fd(&fd).is_ok());
    ASSERT_OK(a2.export_fd(&fd));  // the handle moved along
    close(fd);
    cc::DeviceAllocation a3;
    ASSERT_OK(cc::DeviceAllocation::create(0, 1000, &a3));
    a3 = std::move(a2);  // a3's first allocation is unmapped and released
    EXPECT_EQ(a3.ptr(), ap);
  }
}

TEST_F(Gpu, ManyCreateDestroyCyclesDoNotLeak) {
  NEED_VMM();
  size_t free_before = 0, free_after = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  for (int i = 0; i < 50; ++i) {
    cc::DeviceAllocation a, b;
    ASSERT_OK(cc::DeviceAllocation::create(0, 64 << 20, &a));
    int fd = -1;
    ASSERT_OK(a.export_fd(&fd));
    ASSERT_OK(cc::DeviceAllocation::import(0, fd, a.size(), &b));
    close(fd);
  }
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  // 50 x 64 MiB went through; allow a little slack for driver bookkeeping.
  EXPECT_LT(free_before > free_after ? free_before - free_after : 0, size_t(32) << 20)
      << "free before " << free_before << ", after " << free_after;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], kChildFlag, std::strlen(kChildFlag)) == 0)
      return child_main(std::atoi(argv[i] + std::strlen(kChildFlag)));
  }
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  // Without a device every test skips; exit 77 then, so that `meson test` shows SKIP rather
  // than OK (on a GPU machine, or when something failed, the usual 0/1).
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  if (rc == 0 && unit.test_to_run_count() > 0 &&
      unit.skipped_test_count() == unit.test_to_run_count()) {
    std::cout << "test-cuda-gpu: every test skipped (" << no_device_reason()
              << "); exit status 77\n";
    return 77;
  }
  return rc;
}
