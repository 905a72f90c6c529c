// SPDX-License-Identifier: LGPL-2.1-or-later
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "host_memory.h"

namespace cipc_slots {

using cipc::Error;
using cipc::ErrorCode;
using cipc::kMaxSlotSize;
using cipc::MemoryKind;
using cipc::Result;
using cipc::SlotMemory;
using cipc::system_error;
using cipc::UniqueFd;

namespace {

// Size seals: a consumer's mapping can never be cut short. The write seal (F_SEAL_FUTURE_WRITE,
// Linux 5.1): once the producer has its own writable mapping, no one else can map the slot
// writable or write() to it - a consumer holding the descriptor cannot corrupt the frames that
// other consumers read.
constexpr unsigned kSizeSeals = F_SEAL_SHRINK | F_SEAL_GROW;
constexpr unsigned kRequiredSeals = kSizeSeals | F_SEAL_FUTURE_WRITE;

class HostSlotMemory final : public SlotMemory {
 public:
  HostSlotMemory(UniqueFd fd, void* data, size_t size)
      : fd_(std::move(fd)), data_(data), size_(size) {}
  ~HostSlotMemory() override { ::munmap(data_, size_); }
  void* data() const override { return data_; }
  size_t size() const override { return size_; }
  int export_fd() const override { return fd_.get(); }
  MemoryKind kind() const override { return MemoryKind::kHost; }

 private:
  UniqueFd fd_;  // kept on the producer to export; closed at once on the consumer
  void* data_;
  size_t size_;
};

}  // namespace

Result<std::unique_ptr<SlotMemory>> HostMemoryBackend::allocate(size_t size) {
  if (size == 0 || size > kMaxSlotSize)
    return Error{ErrorCode::kInvalidArgument,
                 "slot size " + std::to_string(size) + " out of range"};
  UniqueFd fd(::memfd_create("cudaipc-slot", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return system_error("memfd_create()", errno);
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
    return system_error("ftruncate(" + std::to_string(size) + ")", errno);
  if (::fcntl(fd.get(), F_ADD_SEALS, kSizeSeals) != 0) return system_error("F_ADD_SEALS", errno);
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return system_error("mmap(" + std::to_string(size) + ")", errno);
  std::unique_ptr<SlotMemory> slot(new HostSlotMemory(std::move(fd), p, size));
  if (::fcntl(slot->export_fd(), F_ADD_SEALS, F_SEAL_FUTURE_WRITE) != 0) {
    const int e = errno;
    return Error{ErrorCode::kUnsupported,
                 "cannot seal shared frames against writes by consumers (F_SEAL_FUTURE_WRITE: " +
                     std::string(std::strerror(e)) + "; it needs Linux 5.1 or newer)"};
  }
  return slot;
}

Result<std::unique_ptr<SlotMemory>> HostMemoryBackend::import(UniqueFd fd, size_t size,
                                                              const cipc::EventHandle*) {
  if (size == 0 || size > kMaxSlotSize)
    return Error{ErrorCode::kProtocol, "slot size " + std::to_string(size) + " out of range"};
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return system_error("fstat(slot fd)", errno);
  if (!S_ISREG(st.st_mode))
    return Error{ErrorCode::kProtocol, "slot descriptor is not a shared-memory file"};
  if (static_cast<uint64_t>(st.st_size) < size)
    return Error{ErrorCode::kProtocol, "slot descriptor holds " + std::to_string(st.st_size) +
                                           " bytes, producer announced " + std::to_string(size)};
  const int seals = ::fcntl(fd.get(), F_GET_SEALS);
  if (seals < 0 || (static_cast<unsigned>(seals) & kRequiredSeals) != kRequiredSeals)
    return Error{ErrorCode::kProtocol,
                 (seals >= 0 && (static_cast<unsigned>(seals) & kSizeSeals) == kSizeSeals)
                     ? "slot descriptor is not sealed against writes (other consumers could "
                       "change the frames)"
                     : "slot descriptor is not sealed against resizing"};
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return system_error("mmap(slot)", errno);
  // The mapping keeps the memory alive; the descriptor is not needed any more.
  return std::unique_ptr<SlotMemory>(new HostSlotMemory(UniqueFd(), p, size));
}

}  // namespace cipc_slots
