// SPDX-License-Identifier: LGPL-2.1-or-later
// HostMemoryBackend (slots/host_memory.h): sealed memfd slots, mapped writable by the producer and
// read-only by consumers; import refuses descriptors that could shrink or do not hold the bytes.

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "host_memory.h"
#include "test_util.h"

namespace cipc {
namespace {

using cipc_slots::HostMemoryBackend;
using cipc_test::open_fd_count;
using cipc_test::TempDir;

UniqueFd dup_fd(int fd) {
  UniqueFd d(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  EXPECT_TRUE(d.valid());
  return d;
}

std::unique_ptr<SlotMemory> allocate(HostMemoryBackend& backend, size_t size) {
  auto m = backend.allocate(size);
  EXPECT_TRUE(m.is_ok()) << (m.is_ok() ? "" : m.error().message);
  return m.is_ok() ? std::move(m.value()) : nullptr;
}

// A memfd of `size` bytes with the given seals (none: sealing still allowed but not done).
UniqueFd make_memfd(size_t size, unsigned seals, bool allow_sealing = true) {
  UniqueFd fd(
      ::memfd_create("host-memory-test", MFD_CLOEXEC | (allow_sealing ? MFD_ALLOW_SEALING : 0)));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(::ftruncate(fd.get(), static_cast<off_t>(size)), 0);
  if (seals) {
    EXPECT_EQ(::fcntl(fd.get(), F_ADD_SEALS, seals), 0);
  }
  return fd;
}

void expect_import_refused(HostMemoryBackend& backend, UniqueFd fd, size_t size,
                           const std::string& what) {
  auto m = backend.import(std::move(fd), size, nullptr);
  ASSERT_FALSE(m.is_ok()) << what << " was imported";
  EXPECT_FALSE(m.error().message.empty()) << what;
}

TEST(HostMemory, AllocateGivesAWritableMappingOfTheSizeWithADescriptor) {
  HostMemoryBackend backend;
  EXPECT_EQ(backend.kind(), MemoryKind::kHost);
  auto m = allocate(backend, 1 << 20);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->size(), size_t{1} << 20);
  EXPECT_EQ(m->kind(), MemoryKind::kHost);
  ASSERT_NE(m->data(), nullptr);
  ASSERT_GE(m->export_fd(), 0);
  EventHandle event{};
  EXPECT_FALSE(m->event_handle(&event)) << "host memory has no readiness event";

  auto* p = static_cast<uint8_t*>(m->data());
  for (size_t i = 0; i < m->size(); ++i) p[i] = static_cast<uint8_t>(i * 13);
  for (size_t i = 0; i < m->size(); i += 4093) ASSERT_EQ(p[i], static_cast<uint8_t>(i * 13));

  // The descriptor is a sealed file of exactly that size, holding what was written.
  struct stat st {};
  ASSERT_EQ(::fstat(m->export_fd(), &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), m->size());
  const int seals = ::fcntl(m->export_fd(), F_GET_SEALS);
  ASSERT_GE(seals, 0);
  EXPECT_TRUE(seals & F_SEAL_SHRINK);
  EXPECT_TRUE(seals & F_SEAL_GROW);
  EXPECT_TRUE(seals & F_SEAL_FUTURE_WRITE) << "consumers must not be able to write";
  uint8_t b = 0;
  ASSERT_EQ(::pread(m->export_fd(), &b, 1, 4097), 1);
  EXPECT_EQ(b, static_cast<uint8_t>(4097 * 13));
}

TEST(HostMemory, AllocatedSizeCannotBeChanged) {
  HostMemoryBackend backend;
  auto m = allocate(backend, 8192);
  ASSERT_TRUE(m);
  EXPECT_NE(::ftruncate(m->export_fd(), 4096), 0) << "shrinking would fault readers";
  EXPECT_NE(::ftruncate(m->export_fd(), 16384), 0);
}

TEST(HostMemory, AllocateOddSizes) {
  HostMemoryBackend backend;
  for (size_t size : {size_t{1}, size_t{4095}, size_t{4097}, size_t{1920} * 1080 * 4}) {
    auto m = allocate(backend, size);
    ASSERT_TRUE(m) << size;
    EXPECT_EQ(m->size(), size);
    static_cast<uint8_t*>(m->data())[size - 1] = 0x5a;
  }
}

TEST(HostMemory, AllocateRefusesZeroAndOversizedSlots) {
  HostMemoryBackend backend;
  for (size_t size : {size_t{0}, static_cast<size_t>(kMaxSlotSize) + 1}) {
    auto m = backend.allocate(size);
    ASSERT_FALSE(m.is_ok()) << size;
    EXPECT_EQ(m.error().code, ErrorCode::kInvalidArgument);
  }
}

TEST(HostMemory, ImportMapsTheSameBytesReadOnly) {
  HostMemoryBackend producer_side;
  HostMemoryBackend consumer_side;
  auto slot = allocate(producer_side, 65536);
  ASSERT_TRUE(slot);
  auto* w = static_cast<uint8_t*>(slot->data());
  std::memset(w, 0xaa, slot->size());

  auto imported = consumer_side.import(dup_fd(slot->export_fd()), slot->size(), nullptr);
  ASSERT_TRUE(imported.is_ok()) << imported.error().message;
  const SlotMemory& r = *imported.value();
  EXPECT_EQ(r.size(), slot->size());
  EXPECT_EQ(r.kind(), MemoryKind::kHost);
  EXPECT_EQ(r.export_fd(), -1) << "the consumer side keeps no descriptor";
  ASSERT_NE(r.data(), nullptr);
  EXPECT_NE(r.data(), slot->data()) << "a second mapping, not the same pointer";
  const auto* rp = static_cast<const uint8_t*>(r.data());
  EXPECT_EQ(rp[0], 0xaa);
  EXPECT_EQ(rp[65535], 0xaa);

  // Writes by the producer after the import are seen through the consumer's mapping.
  for (size_t i = 0; i < slot->size(); ++i) w[i] = static_cast<uint8_t>(i ^ (i >> 8));
  EXPECT_EQ(std::memcmp(rp, w, slot->size()), 0);

  // The consumer's mapping survives the producer's allocation.
  std::vector<uint8_t> expected(w, w + slot->size());
  slot.reset();
  EXPECT_EQ(std::memcmp(rp, expected.data(), expected.size()), 0);
}

TEST(HostMemory, ImportOfASmallerRangeThanTheFileIsAllowed) {
  HostMemoryBackend backend;
  auto slot = allocate(backend, 8192);
  ASSERT_TRUE(slot);
  static_cast<uint8_t*>(slot->data())[100] = 7;
  auto imported = backend.import(dup_fd(slot->export_fd()), 4096, nullptr);
  ASSERT_TRUE(imported.is_ok()) << imported.error().message;
  EXPECT_EQ(imported.value()->size(), 4096u);
  EXPECT_EQ(static_cast<const uint8_t*>(imported.value()->data())[100], 7);
}

TEST(HostMemory, ImportTakesAndClosesTheDescriptor) {
  HostMemoryBackend backend;
  auto slot = allocate(backend, 4096);
  ASSERT_TRUE(slot);
  const int baseline = open_fd_count();
  {
    auto imported = backend.import(dup_fd(slot->export_fd()), 4096, nullptr);
    ASSERT_TRUE(imported.is_ok()) << imported.error().message;
    EXPECT_EQ(open_fd_count(), baseline) << "the imported descriptor was kept open";
  }
  {
    auto refused = backend.import(dup_fd(slot->export_fd()), 8192, nullptr);
    ASSERT_FALSE(refused.is_ok());
    EXPECT_EQ(open_fd_count(), baseline) << "a refused descriptor leaked";
  }
}

TEST(HostMemory, ImportRefusesAnUnsealedMemfd) {
  HostMemoryBackend backend;
  expect_import_refused(backend, make_memfd(4096, 0), 4096, "a sealable but unsealed memfd");
  expect_import_refused(backend, make_memfd(4096, 0, false), 4096, "a memfd without sealing");
  expect_import_refused(backend, make_memfd(4096, F_SEAL_GROW), 4096, "a memfd that may shrink");
  expect_import_refused(backend, make_memfd(4096, F_SEAL_SHRINK), 4096, "a memfd that may grow");
  expect_import_refused(backend, make_memfd(4096, F_SEAL_SHRINK | F_SEAL_GROW), 4096,
                        "a memfd other consumers could write into");
}

// What a consumer holding a slot's descriptor can do to the frame other consumers read: nothing.
// (A hostile consumer that wrote 0xde into every slot used to corrupt other consumers' frames.)
TEST(HostMemory, ConsumersCannotWriteIntoASlot) {
  HostMemoryBackend producer_side;
  auto slot = allocate(producer_side, 8192);
  ASSERT_TRUE(slot);
  auto* w = static_cast<uint8_t*>(slot->data());
  std::memset(w, 0x11, slot->size());
  UniqueFd fd = dup_fd(slot->export_fd());  // what a consumer receives

  errno = 0;
  void* shared = ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  EXPECT_EQ(shared, MAP_FAILED) << "a consumer mapped the slot writable";
  EXPECT_EQ(errno, EPERM);
  if (shared != MAP_FAILED) ::munmap(shared, 8192);
  errno = 0;
  EXPECT_EQ(::pwrite(fd.get(), "\xde", 1, 0), -1) << "a consumer wrote into the slot";
  EXPECT_EQ(errno, EPERM);

  // A read-only mapping cannot be made writable later, and a private one changes nobody else's.
  void* ro = ::mmap(nullptr, 8192, PROT_READ, MAP_SHARED, fd.get(), 0);
  ASSERT_NE(ro, MAP_FAILED);
  EXPECT_NE(::mprotect(ro, 8192, PROT_READ | PROT_WRITE), 0);
  void* priv = ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd.get(), 0);
  ASSERT_NE(priv, MAP_FAILED);
  static_cast<uint8_t*>(priv)[0] = 0xde;
  EXPECT_EQ(w[0], 0x11);
  EXPECT_EQ(static_cast<const uint8_t*>(ro)[0], 0x11);

  // The producer's own mapping still writes, and readers see it.
  w[1] = 0x22;
  EXPECT_EQ(static_cast<const uint8_t*>(ro)[1], 0x22);
  ::munmap(priv, 8192);
  ::munmap(ro, 8192);
}

TEST(HostMemory, ImportAcceptsAProperlySealedForeignMemfd) {
  HostMemoryBackend backend;
  UniqueFd fd = make_memfd(4096, 0);
  ASSERT_EQ(::pwrite(fd.get(), "hello", 5, 10), 5);
  ASSERT_EQ(::fcntl(fd.get(), F_ADD_SEALS,
                    F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL),
            0);
  auto m = backend.import(std::move(fd), 4096, nullptr);
  ASSERT_TRUE(m.is_ok()) << m.error().message;
  EXPECT_EQ(std::memcmp(static_cast<const char*>(m.value()->data()) + 10, "hello", 5), 0);
}

TEST(HostMemory, ImportRefusesAMemfdSmallerThanAnnounced) {
  HostMemoryBackend backend;
  auto small = allocate(backend, 4096);
  ASSERT_TRUE(small);
  auto m = backend.import(dup_fd(small->export_fd()), 4097, nullptr);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.error().code, ErrorCode::kProtocol);
  expect_import_refused(backend, make_memfd(0, F_SEAL_SHRINK | F_SEAL_GROW), 1, "an empty memfd");
}

TEST(HostMemory, ImportRefusesNonRegularDescriptors) {
  HostMemoryBackend backend;
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd keep_write(p[1]);
  expect_import_refused(backend, UniqueFd(p[0]), 4096, "a pipe");

  UniqueFd dev_zero(::open("/dev/zero", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(dev_zero.valid());
  expect_import_refused(backend, std::move(dev_zero), 4096, "/dev/zero");

  auto pair = Channel::pair();
  ASSERT_TRUE(pair.is_ok());
  expect_import_refused(backend, dup_fd(pair->first.fd()), 4096, "a socket");

  expect_import_refused(backend, UniqueFd(), 4096, "no descriptor at all");
}

TEST(HostMemory, ImportRefusesAnOrdinaryFile) {
  // A regular file of the right size cannot be sealed, so it could be truncated under a reader.
  TempDir dir;
  const std::string path = dir.file("slot");
  UniqueFd fd(::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600));
  ASSERT_TRUE(fd.valid());
  ASSERT_EQ(::ftruncate(fd.get(), 4096), 0);
  HostMemoryBackend backend;
  expect_import_refused(backend, std::move(fd), 4096, "a regular file");
}

TEST(HostMemory, ImportRefusesZeroAndOversizedSizes) {
  HostMemoryBackend backend;
  auto slot = allocate(backend, 4096);
  ASSERT_TRUE(slot);
  for (size_t size : {size_t{0}, static_cast<size_t>(kMaxSlotSize) + 1, ~size_t{0}}) {
    auto m = backend.import(dup_fd(slot->export_fd()), size, nullptr);
    ASSERT_FALSE(m.is_ok()) << size;
    EXPECT_EQ(m.error().code, ErrorCode::kProtocol) << size;
  }
}

TEST(HostMemoryDeathTest, WritingThroughAnImportedMappingFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  HostMemoryBackend backend;
  auto slot = allocate(backend, 4096);
  ASSERT_TRUE(slot);
  auto imported = backend.import(dup_fd(slot->export_fd()), 4096, nullptr);
  ASSERT_TRUE(imported.is_ok()) << imported.error().message;
  volatile uint8_t* p = static_cast<volatile uint8_t*>(imported.value()->data());
  EXPECT_EXIT(
      {
        p[123] = 1;
        ::_exit(0);  // reached only if the mapping were writable
      },
      ::testing::KilledBySignal(SIGSEGV), "");
  EXPECT_EQ(static_cast<uint8_t*>(slot->data())[123], 0) << "the write must not have landed";
}

}  // namespace
}  // namespace cipc
