// SPDX-License-Identifier: LGPL-2.1-or-later
// The wire protocol between cudasink-ipc (producer) and cudasrc-ipc (consumer): docs/protocol.md.
// Every message is a fixed 12-byte little-endian header
//   {u32 magic, u16 version, u16 type, u32 body_length}
// followed by a body whose layout is fixed per type (CAPS and ERROR end in a bounded string).
// The header layout is frozen across versions so that a peer of another version is recognised
// and told so, rather than misread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "status.h"

namespace cipc {

constexpr uint32_t kMagic = 0x43504943;   // bytes "CIPC" on the wire
constexpr uint16_t kProtocolVersion = 2;  // 2: RETIRE
constexpr size_t kHeaderSize = 12;

// Hard limits: nothing a peer says may exceed them.
constexpr size_t kMaxCapsLength = 8192;
constexpr size_t kMaxErrorTextLength = 1024;
constexpr size_t kMaxMessageSize = kHeaderSize + 16384;
constexpr uint32_t kMaxSlots = 4096;   // slot indices are below this
constexpr uint32_t kMaxInFlight = 64;  // frames one consumer may hold at once
constexpr uint32_t kMaxPlanes = 4;
constexpr uint64_t kMaxSlotSize = 1ull << 32;  // 4 GiB, well above an 8K RGBA64 frame
constexpr size_t kEventHandleSize = 64;        // cudaIpcEventHandle_t
constexpr size_t kUuidSize = 16;
constexpr uint64_t kNoTimestamp = ~0ull;

using GpuUuid = std::array<uint8_t, kUuidSize>;
using EventHandle = std::array<uint8_t, kEventHandleSize>;

enum class MessageType : uint16_t {
  kHello = 1,
  kWelcome = 2,
  kCaps = 3,
  kSlot = 4,
  kFrame = 5,
  kRelease = 6,
  kFence = 7,
  kEos = 8,
  kBye = 9,
  kError = 10,
  kRetire = 11,
};

enum class MemoryKind : uint16_t { kAny = 0, kHost = 1, kCuda = 2 };
enum class SyncMode : uint16_t { kNone = 0, kGpuEvents = 1, kCpu = 2 };

const char* to_string(MessageType type);
const char* to_string(MemoryKind kind);
const char* to_string(SyncMode mode);

// consumer -> producer, first message on a connection.
struct Hello {
  MemoryKind memory_kind = MemoryKind::kAny;  // what the consumer can import
  uint32_t max_in_flight = 4;                 // frames it wants to hold at most, 1..kMaxInFlight
  GpuUuid gpu_uuid{};                         // all zero: no GPU / don't care
  uint32_t pid = 0;                           // for logs only
};

// producer -> consumer, answer to HELLO.
struct Welcome {
  uint64_t instance_id = 0;  // random per producer start; a new one flushes import caches
  MemoryKind memory_kind = MemoryKind::kHost;
  SyncMode sync_mode = SyncMode::kNone;
  uint32_t max_in_flight = 4;  // what the producer grants
  GpuUuid gpu_uuid{};
};

// producer -> consumer: the stream format for one pool generation.
struct Caps {
  uint64_t generation = 0;
  uint64_t frame_size = 0;  // bytes of one frame as laid out in a slot
  std::string caps;         // GStreamer caps string, opaque to this layer
};

// producer -> consumer: a slot of the current generation, once per consumer. Carries one fd.
struct Slot {
  static constexpr uint32_t kHasEvent = 1;
  uint64_t generation = 0;
  uint32_t index = 0;
  uint32_t flags = 0;
  uint64_t size = 0;
  EventHandle event{};  // readiness event (CUDA), valid with kHasEvent
};

// producer -> consumer: a frame now sits in a slot; the consumer holds a claim until RELEASE.
struct Frame {
  static constexpr uint32_t kDiscont = 1;
  static constexpr uint32_t kDeltaUnit = 2;
  static constexpr uint32_t kGap = 4;
  // The producer's upstream is live (a camera): frames captured before a consumer's pipeline
  // started are stale there. Since version 2.
  static constexpr uint32_t kLive = 8;
  static constexpr uint32_t kKnownFlags = kDiscont | kDeltaUnit | kGap | kLive;
  uint64_t generation = 0;
  uint32_t slot = 0;
  uint32_t flags = 0;
  uint64_t sequence = 0;
  uint64_t pts = kNoTimestamp;  // CLOCK_MONOTONIC ns
  uint64_t dts = kNoTimestamp;  // CLOCK_MONOTONIC ns
  uint64_t duration = kNoTimestamp;
  uint64_t offset = kNoTimestamp;  // GstBuffer offset (frame number), passed through
  uint64_t send_time = 0;          // CLOCK_MONOTONIC ns when the producer sent it
  uint64_t size = 0;               // payload bytes inside the slot
  uint32_t n_planes = 0;
  std::array<uint64_t, kMaxPlanes> plane_offset{};
  std::array<int32_t, kMaxPlanes> plane_stride{};
};

// consumer -> producer: the claim on (generation, slot, sequence) is over.
struct Release {
  static constexpr uint32_t kFenceRecorded = 1;
  uint64_t generation = 0;
  uint32_t slot = 0;
  uint32_t flags = 0;
  uint64_t sequence = 0;
};

// consumer -> producer: the consumer's release event for a slot, once per slot. Reserved: decoded
// and checked, but never sent by this implementation - a producer must not wait on an event of
// a process that can die (docs/protocol.md, "FENCE").
struct Fence {
  uint64_t generation = 0;
  uint32_t slot = 0;
  EventHandle event{};
};

struct Eos {};

struct Bye {
  enum Reason : uint32_t { kShutdown = 0, kTimeout = 1, kProtocolError = 2 };
  uint32_t reason = kShutdown;
};

// (RETIRE is the last alternative of Body; see below.)

// Either way: a fatal condition explained, sent just before closing.
struct ErrorMessage {
  uint32_t code = 0;  // an ErrorCode value
  std::string text;
};

// producer -> consumer: a slot this consumer was given is out of the pool for good (it was
// retired under another consumer that stopped releasing). The consumer drops its import once no
// frame of its own still lives there, instead of keeping it mapped until the caps change.
struct Retire {
  uint64_t generation = 0;
  uint32_t slot = 0;
};

using Body =
    std::variant<Hello, Welcome, Caps, Slot, Frame, Release, Fence, Eos, Bye, ErrorMessage, Retire>;

struct Message {
  Body body;
  MessageType type() const;
};

// Number of file descriptors that must ride with a message of this type.
size_t expected_fd_count(MessageType type);

// Encodes with our protocol version; `version` exists so tests can impersonate other peers.
std::vector<uint8_t> encode(const Message& message, uint16_t version = kProtocolVersion);

// Why decode() refused a buffer. kVersionMismatch fills DecodeError::peer_version.
enum class DecodeFailure {
  kTruncated,
  kTooLarge,
  kBadMagic,
  kVersionMismatch,
  kUnknownType,
  kBadLength,
  kOutOfRange,
};

struct DecodeError {
  DecodeFailure failure;
  uint16_t peer_version = 0;
  std::string detail;
};

class DecodeResult {
 public:
  DecodeResult(Message m) : v_(std::move(m)) {}      // NOLINT
  DecodeResult(DecodeError e) : v_(std::move(e)) {}  // NOLINT
  bool is_ok() const { return std::holds_alternative<Message>(v_); }
  explicit operator bool() const { return is_ok(); }
  Message& message() { return std::get<Message>(v_); }
  const DecodeError& error() const { return std::get<DecodeError>(v_); }

 private:
  std::variant<Message, DecodeError> v_;
};

// Never trusts its input: checks magic, version, type, exact body length and every bound.
DecodeResult decode(const uint8_t* data, size_t size);

// A sentence for logs and element errors.
std::string describe(const DecodeError& error);

}  // namespace cipc
