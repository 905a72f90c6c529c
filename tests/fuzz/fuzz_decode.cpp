// SPDX-License-Identifier: LGPL-2.1-or-later
// libFuzzer target: the wire decoder (ipc/protocol.h) on arbitrary datagrams.
//
// Input: one byte whose low 3 bits are the number of descriptors that came with the datagram
// (as SCM_RIGHTS would deliver them), then the datagram itself.
//
// Invariants, each of which aborts (a crash for libFuzzer) when broken:
//  - decode() never crashes, hangs or reads outside the buffer (ASan/UBSan watch);
//  - every refusal has a non-empty explanation for the logs;
//  - whatever decode() accepts is canonical: encoding the decoded message gives back exactly
//    the input bytes (so no field is silently ignored or truncated);
//  - an accepted message respects the hard limits of protocol.h;
//  - the receivers' descriptor rule (expected_fd_count) accepts only SLOT with one descriptor.
#include <cstdint>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "fuzz_util.h"
#include "protocol.h"

using cipc_fuzz::check;

namespace {

std::string hex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n && i < 256; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

struct LimitsCheck {
  void operator()(const cipc::Hello& m) const {
    check(m.max_in_flight >= 1 && m.max_in_flight <= cipc::kMaxInFlight, "HELLO max_in_flight");
    check(m.memory_kind == cipc::MemoryKind::kAny || m.memory_kind == cipc::MemoryKind::kHost ||
              m.memory_kind == cipc::MemoryKind::kCuda,
          "HELLO memory_kind");
  }
  void operator()(const cipc::Welcome& m) const {
    check(m.max_in_flight >= 1 && m.max_in_flight <= cipc::kMaxInFlight, "WELCOME max_in_flight");
    check(m.memory_kind == cipc::MemoryKind::kHost || m.memory_kind == cipc::MemoryKind::kCuda,
          "WELCOME memory_kind");
  }
  void operator()(const cipc::Caps& m) const {
    check(!m.caps.empty() && m.caps.size() <= cipc::kMaxCapsLength, "CAPS length");
    check(m.caps.find('\0') == std::string::npos, "CAPS holds a NUL");
    check(m.frame_size > 0 && m.frame_size <= cipc::kMaxSlotSize, "CAPS frame_size");
  }
  void operator()(const cipc::Slot& m) const {
    check(m.index < cipc::kMaxSlots, "SLOT index");
    check(m.size > 0 && m.size <= cipc::kMaxSlotSize, "SLOT size");
  }
  void operator()(const cipc::Frame& m) const {
    check(m.slot < cipc::kMaxSlots, "FRAME slot");
    check(m.size > 0 && m.size <= cipc::kMaxSlotSize, "FRAME size");
    check(m.n_planes <= cipc::kMaxPlanes, "FRAME n_planes");
    for (uint32_t i = 0; i < m.n_planes; ++i) check(m.plane_offset[i] < m.size, "FRAME offset");
  }
  void operator()(const cipc::Release& m) const { check(m.slot < cipc::kMaxSlots, "RELEASE slot"); }
  void operator()(const cipc::Fence& m) const { check(m.slot < cipc::kMaxSlots, "FENCE slot"); }
  void operator()(const cipc::Retire& m) const { check(m.slot < cipc::kMaxSlots, "RETIRE slot"); }
  void operator()(const cipc::Eos&) const {}
  void operator()(const cipc::Bye& m) const { check(m.reason <= cipc::Bye::kProtocolError, "BYE"); }
  void operator()(const cipc::ErrorMessage& m) const {
    check(m.text.size() <= cipc::kMaxErrorTextLength, "ERROR text length");
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t fd_count = data[0] & 7;
  const uint8_t* datagram = data + 1;
  const size_t length = size - 1;

  cipc::DecodeResult result = cipc::decode(length ? datagram : nullptr, length);
  if (!result) {
    check(!cipc::describe(result.error()).empty(), "a refusal without an explanation");
    if (length > cipc::kMaxMessageSize)
      check(result.error().failure == cipc::DecodeFailure::kTooLarge, "oversized not kTooLarge");
    return 0;
  }
  cipc::Message& message = result.message();
  const std::vector<uint8_t> again = cipc::encode(message);
  check(again.size() == length && std::memcmp(again.data(), datagram, length) == 0,
        std::string(cipc::to_string(message.type())) + " input " + hex(datagram, length) +
            " re-encodes as " + hex(again.data(), again.size()));
  std::visit(LimitsCheck{}, message.body);

  const bool fds_acceptable = fd_count == cipc::expected_fd_count(message.type());
  check(!fds_acceptable || fd_count == (message.type() == cipc::MessageType::kSlot ? 1u : 0u),
        "descriptor rule accepts " + std::to_string(fd_count) + " descriptor(s) with " +
            cipc::to_string(message.type()));
  return 0;
}
