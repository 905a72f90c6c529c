// SPDX-License-Identifier: LGPL-2.1-or-later
// Message and descriptor makers for the state-machine fuzz targets: a message of any type whose
// fields all come from the input (so most of them are out of range, some are valid), and a
// descriptor of a chosen kind to attach with SCM_RIGHTS.
#pragma once

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "fuzz_util.h"
#include "posix_util.h"
#include "protocol.h"
#include "unique_fd.h"

namespace cipc_fuzz {

using cipc_test::send_with_fds;

inline std::string input_string(Input& in, size_t max) {
  const size_t n = in.u8() % (max + 1);
  const std::vector<uint8_t> b = in.bytes(n);
  return std::string(b.begin(), b.end());
}

// Reads a type byte and then every field of that type from the input.
inline cipc::Message typed_message(Input& in) {
  const uint8_t type = static_cast<uint8_t>(1 + in.u8() % 11);
  switch (static_cast<cipc::MessageType>(type)) {
    case cipc::MessageType::kHello: {
      cipc::Hello m;
      m.memory_kind = static_cast<cipc::MemoryKind>(in.u8() % 4);
      m.max_in_flight = in.u8() % 70;
      m.pid = in.u32();
      return cipc::Message{m};
    }
    case cipc::MessageType::kWelcome: {
      cipc::Welcome m;
      m.instance_id = in.u64();
      m.memory_kind = static_cast<cipc::MemoryKind>(in.u8() % 4);
      m.sync_mode = static_cast<cipc::SyncMode>(in.u8() % 4);
      m.max_in_flight = in.u8() % 70;
      return cipc::Message{m};
    }
    case cipc::MessageType::kCaps: {
      cipc::Caps m;
      m.generation = in.u8() % 4;
      m.frame_size = in.u32();
      m.caps = input_string(in, 64);
      return cipc::Message{m};
    }
    case cipc::MessageType::kSlot: {
      cipc::Slot m;
      m.generation = in.u8() % 4;
      m.index = in.u16();
      m.flags = in.u8() % 3;
      m.size = in.u32();
      return cipc::Message{m};
    }
    case cipc::MessageType::kFrame: {
      cipc::Frame m;
      m.generation = in.u8() % 4;
      m.slot = in.u16();
      m.flags = in.u8() % 17;
      m.sequence = in.u8();
      m.size = in.u32();
      m.n_planes = in.u8() % 6;
      for (auto& o : m.plane_offset) o = in.u16();
      for (auto& s : m.plane_stride) s = static_cast<int32_t>(in.u32());
      return cipc::Message{m};
    }
    case cipc::MessageType::kRelease: {
      cipc::Release m;
      m.generation = in.u8() % 4;
      m.slot = in.u16();
      m.flags = in.u8() % 3;
      m.sequence = in.u8();
      return cipc::Message{m};
    }
    case cipc::MessageType::kFence: {
      cipc::Fence m;
      m.generation = in.u8() % 4;
      m.slot = in.u16();
      return cipc::Message{m};
    }
    case cipc::MessageType::kEos: return cipc::Message{cipc::Eos{}};
    case cipc::MessageType::kBye: {
      cipc::Bye m;
      m.reason = in.u8() % 4;
      return cipc::Message{m};
    }
    case cipc::MessageType::kRetire: {
      cipc::Retire m;
      m.generation = in.u8() % 4;
      m.slot = in.u16();
      return cipc::Message{m};
    }
    case cipc::MessageType::kError:
    default: {
      cipc::ErrorMessage m;
      m.code = in.u8();
      m.text = input_string(in, 200);
      return cipc::Message{m};
    }
  }
}

// Our protocol version, or (rarely) another one.
inline uint16_t input_version(Input& in) {
  const uint8_t v = in.u8();
  return v >= 0xf0 ? static_cast<uint16_t>(v & 0x0f) : cipc::kProtocolVersion;
}

// A sealed memfd of `size` bytes (what a well-behaved producer sends), or something else.
inline cipc::UniqueFd sealed_memfd(size_t size) {
  cipc::UniqueFd fd(::memfd_create("fuzz-slot", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  check(fd.valid(), "memfd_create failed");
  check(::ftruncate(fd.get(), static_cast<off_t>(size)) == 0, "ftruncate failed");
  check(::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE) == 0,
        "F_ADD_SEALS failed");
  return fd;
}

// Descriptor kinds a hostile peer may attach: 0 sealed memfd, 1 unsealed memfd, 2 pipe,
// 3 socket, 4 /dev/null, 5 eventfd, 6 a directory.
inline cipc::UniqueFd descriptor_of_kind(uint8_t kind, size_t memfd_size) {
  switch (kind % 7) {
    case 0: return sealed_memfd(memfd_size);
    case 1: {
      cipc::UniqueFd fd(::memfd_create("fuzz-unsealed", MFD_CLOEXEC));
      check(fd.valid() && ::ftruncate(fd.get(), static_cast<off_t>(memfd_size)) == 0, "memfd");
      return fd;
    }
    case 2: {
      int p[2];
      check(::pipe2(p, O_CLOEXEC) == 0, "pipe2 failed");
      ::close(p[1]);
      return cipc::UniqueFd(p[0]);
    }
    case 3: {
      int s[2];
      check(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, s) == 0, "socketpair failed");
      ::close(s[1]);
      return cipc::UniqueFd(s[0]);
    }
    case 4: return cipc::UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    case 5: return cipc::UniqueFd(::eventfd(0, EFD_CLOEXEC));
    default: return cipc::UniqueFd(::open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
}

}  // namespace cipc_fuzz
