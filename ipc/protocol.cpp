// SPDX-License-Identifier: LGPL-2.1-or-later
#include "protocol.h"

#include <cstring>
#include <optional>
#include <type_traits>
#include <variant>

namespace cipc {
namespace {

// Fixed body sizes (bytes). CAPS and ERROR add their string length to the fixed part.
constexpr size_t kHelloSize = 28;
constexpr size_t kWelcomeSize = 32;
constexpr size_t kCapsFixedSize = 20;
constexpr size_t kSlotSize = 88;
constexpr size_t kFrameSize = 128;
constexpr size_t kReleaseSize = 24;
constexpr size_t kFenceSize = 80;
constexpr size_t kEosSize = 0;
constexpr size_t kByeSize = 4;
constexpr size_t kErrorFixedSize = 8;
constexpr size_t kRetireSize = 16;
constexpr int64_t kMaxStride = int64_t{1} << 28;

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  void u8s(const uint8_t* p, size_t n) { out_.insert(out_.end(), p, p + n); }
  template <typename T>
  void put(T v) {
    using U = std::make_unsigned_t<T>;
    U u = static_cast<U>(v);
    for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<uint8_t>(u >> (8 * i)));
  }

 private:
  std::vector<uint8_t>& out_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  size_t remaining() const { return n_ - pos_; }
  template <typename T>
  T get() {
    using U = std::make_unsigned_t<T>;
    U u = 0;
    for (size_t i = 0; i < sizeof(T); ++i)
      u |= static_cast<U>(static_cast<U>(p_[pos_ + i]) << (8 * i));
    pos_ += sizeof(T);
    return static_cast<T>(u);
  }
  void bytes(uint8_t* dst, size_t n) {
    std::memcpy(dst, p_ + pos_, n);
    pos_ += n;
  }
  std::string str(size_t n) {
    std::string s(reinterpret_cast<const char*>(p_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

struct BodyEncoder {
  Writer& w;
  void operator()(const Hello& m) {
    w.put(static_cast<uint16_t>(m.memory_kind));
    w.put(uint16_t{0});
    w.put(m.max_in_flight);
    w.u8s(m.gpu_uuid.data(), m.gpu_uuid.size());
    w.put(m.pid);
  }
  void operator()(const Welcome& m) {
    w.put(m.instance_id);
    w.put(static_cast<uint16_t>(m.memory_kind));
    w.put(static_cast<uint16_t>(m.sync_mode));
    w.put(m.max_in_flight);
    w.u8s(m.gpu_uuid.data(), m.gpu_uuid.size());
  }
  void operator()(const Caps& m) {
    w.put(m.generation);
    w.put(m.frame_size);
    w.put(static_cast<uint32_t>(m.caps.size()));
    w.u8s(reinterpret_cast<const uint8_t*>(m.caps.data()), m.caps.size());
  }
  void operator()(const Slot& m) {
    w.put(m.generation);
    w.put(m.index);
    w.put(m.flags);
    w.put(m.size);
    w.u8s(m.event.data(), m.event.size());
  }
  void operator()(const Frame& m) {
    w.put(m.generation);
    w.put(m.slot);
    w.put(m.flags);
    w.put(m.sequence);
    w.put(m.pts);
    w.put(m.dts);
    w.put(m.duration);
    w.put(m.offset);
    w.put(m.send_time);
    w.put(m.size);
    w.put(m.n_planes);
    w.put(uint32_t{0});
    for (uint64_t o : m.plane_offset) w.put(o);
    for (int32_t s : m.plane_stride) w.put(s);
  }
  void operator()(const Release& m) {
    w.put(m.generation);
    w.put(m.slot);
    w.put(m.flags);
    w.put(m.sequence);
  }
  void operator()(const Fence& m) {
    w.put(m.generation);
    w.put(m.slot);
    w.put(uint32_t{0});
    w.u8s(m.event.data(), m.event.size());
  }
  void operator()(const Eos&) {}
  void operator()(const Bye& m) { w.put(m.reason); }
  void operator()(const ErrorMessage& m) {
    w.put(m.code);
    w.put(static_cast<uint32_t>(m.text.size()));
    w.u8s(reinterpret_cast<const uint8_t*>(m.text.data()), m.text.size());
  }
  void operator()(const Retire& m) {
    w.put(m.generation);
    w.put(m.slot);
    w.put(uint32_t{0});
  }
};

DecodeError fail(DecodeFailure f, std::string detail) {
  return DecodeError{f, 0, std::move(detail)};
}

bool valid_memory_kind(uint16_t v, bool allow_any) {
  return (allow_any && v == 0) || v == 1 || v == 2;
}

// A header that passed every check: a known type, and exactly `length` body bytes behind it.
struct Header {
  MessageType type = MessageType::kHello;
  uint32_t length = 0;
};

// Fills `header`, or says why the message is refused.
std::optional<DecodeError> read_header(const uint8_t* data, size_t size, Header& header) {
  if (data == nullptr || size < kHeaderSize)
    return fail(DecodeFailure::kTruncated,
                "message of " + std::to_string(size) + " bytes is shorter than the header");
  if (size > kMaxMessageSize)
    return fail(DecodeFailure::kTooLarge, "message of " + std::to_string(size) + " bytes");
  Reader h(data, kHeaderSize);
  const uint32_t magic = h.get<uint32_t>();
  const uint16_t version = h.get<uint16_t>();
  const uint16_t raw_type = h.get<uint16_t>();
  const uint32_t length = h.get<uint32_t>();
  if (magic != kMagic) return fail(DecodeFailure::kBadMagic, "bad magic");
  if (version != kProtocolVersion) {
    DecodeError e = fail(DecodeFailure::kVersionMismatch, "");
    e.peer_version = version;
    return e;
  }
  if (length != size - kHeaderSize)
    return fail(DecodeFailure::kTruncated, "header announces " + std::to_string(length) +
                                               " body bytes, " +
                                               std::to_string(size - kHeaderSize) + " arrived");
  if (raw_type < 1 || raw_type > static_cast<uint16_t>(MessageType::kRetire))
    return fail(DecodeFailure::kUnknownType, "unknown message type " + std::to_string(raw_type));
  header.type = static_cast<MessageType>(raw_type);
  header.length = length;
  return std::nullopt;
}

// BodyEncoder's counterpart, one function per message type. Each checks the body's length
// before reading it: the header only vouched that the `length` bytes arrived.
struct BodyDecoder {
  MessageType type;
  uint32_t length;
  Reader r;

  DecodeError bad_length(size_t want) const {
    return fail(DecodeFailure::kBadLength, std::string(to_string(type)) + " body is " +
                                               std::to_string(length) + " bytes, expected " +
                                               std::to_string(want));
  }
  DecodeError out_of_range(const char* field, uint64_t value) const {
    return fail(DecodeFailure::kOutOfRange, std::string(to_string(type)) + " field " + field +
                                                " out of range: " + std::to_string(value));
  }

  DecodeResult hello() {
    if (length != kHelloSize) return bad_length(kHelloSize);
    Hello m;
    const uint16_t kind = r.get<uint16_t>();
    const uint16_t reserved = r.get<uint16_t>();
    m.max_in_flight = r.get<uint32_t>();
    r.bytes(m.gpu_uuid.data(), m.gpu_uuid.size());
    m.pid = r.get<uint32_t>();
    if (reserved != 0) return out_of_range("reserved", reserved);
    if (!valid_memory_kind(kind, true)) return out_of_range("memory_kind", kind);
    if (m.max_in_flight < 1 || m.max_in_flight > kMaxInFlight)
      return out_of_range("max_in_flight", m.max_in_flight);
    m.memory_kind = static_cast<MemoryKind>(kind);
    return Message{m};
  }
  DecodeResult welcome() {
    if (length != kWelcomeSize) return bad_length(kWelcomeSize);
    Welcome m;
    m.instance_id = r.get<uint64_t>();
    const uint16_t kind = r.get<uint16_t>();
    const uint16_t sync = r.get<uint16_t>();
    m.max_in_flight = r.get<uint32_t>();
    r.bytes(m.gpu_uuid.data(), m.gpu_uuid.size());
    if (!valid_memory_kind(kind, false)) return out_of_range("memory_kind", kind);
    if (sync > static_cast<uint16_t>(SyncMode::kCpu)) return out_of_range("sync_mode", sync);
    if (m.max_in_flight < 1 || m.max_in_flight > kMaxInFlight)
      return out_of_range("max_in_flight", m.max_in_flight);
    m.memory_kind = static_cast<MemoryKind>(kind);
    m.sync_mode = static_cast<SyncMode>(sync);
    return Message{m};
  }
  DecodeResult caps() {
    if (length < kCapsFixedSize) return bad_length(kCapsFixedSize);
    Caps m;
    m.generation = r.get<uint64_t>();
    m.frame_size = r.get<uint64_t>();
    const uint32_t n = r.get<uint32_t>();
    if (n == 0 || n > kMaxCapsLength) return out_of_range("caps_length", n);
    if (length != kCapsFixedSize + n) return bad_length(kCapsFixedSize + n);
    if (m.frame_size == 0 || m.frame_size > kMaxSlotSize)
      return out_of_range("frame_size", m.frame_size);
    m.caps = r.str(n);
    if (m.caps.find('\0') != std::string::npos)
      return fail(DecodeFailure::kOutOfRange, "CAPS string holds a NUL byte");
    return Message{m};
  }
  DecodeResult slot() {
    if (length != kSlotSize) return bad_length(kSlotSize);
    Slot m;
    m.generation = r.get<uint64_t>();
    m.index = r.get<uint32_t>();
    m.flags = r.get<uint32_t>();
    m.size = r.get<uint64_t>();
    r.bytes(m.event.data(), m.event.size());
    if (m.index >= kMaxSlots) return out_of_range("index", m.index);
    if ((m.flags & ~Slot::kHasEvent) != 0) return out_of_range("flags", m.flags);
    if (m.size == 0 || m.size > kMaxSlotSize) return out_of_range("size", m.size);
    return Message{m};
  }
  DecodeResult frame() {
    if (length != kFrameSize) return bad_length(kFrameSize);
    Frame m;
    m.generation = r.get<uint64_t>();
    m.slot = r.get<uint32_t>();
    m.flags = r.get<uint32_t>();
    m.sequence = r.get<uint64_t>();
    m.pts = r.get<uint64_t>();
    m.dts = r.get<uint64_t>();
    m.duration = r.get<uint64_t>();
    m.offset = r.get<uint64_t>();
    m.send_time = r.get<uint64_t>();
    m.size = r.get<uint64_t>();
    m.n_planes = r.get<uint32_t>();
    const uint32_t reserved = r.get<uint32_t>();
    if (reserved != 0) return out_of_range("reserved", reserved);
    for (auto& o : m.plane_offset) o = r.get<uint64_t>();
    for (auto& s : m.plane_stride) s = r.get<int32_t>();
    if (m.slot >= kMaxSlots) return out_of_range("slot", m.slot);
    if ((m.flags & ~Frame::kKnownFlags) != 0) return out_of_range("flags", m.flags);
    if (m.size == 0 || m.size > kMaxSlotSize) return out_of_range("size", m.size);
    if (m.n_planes > kMaxPlanes) return out_of_range("n_planes", m.n_planes);
    for (uint32_t i = 0; i < m.n_planes; ++i) {
      if (m.plane_offset[i] >= m.size) return out_of_range("plane_offset", m.plane_offset[i]);
      const int64_t s = m.plane_stride[i];
      if (s < -kMaxStride || s > kMaxStride) return out_of_range("plane_stride", s);
    }
    return Message{m};
  }
  DecodeResult release() {
    if (length != kReleaseSize) return bad_length(kReleaseSize);
    Release m;
    m.generation = r.get<uint64_t>();
    m.slot = r.get<uint32_t>();
    m.flags = r.get<uint32_t>();
    m.sequence = r.get<uint64_t>();
    if (m.slot >= kMaxSlots) return out_of_range("slot", m.slot);
    if ((m.flags & ~Release::kFenceRecorded) != 0) return out_of_range("flags", m.flags);
    return Message{m};
  }
  DecodeResult fence() {
    if (length != kFenceSize) return bad_length(kFenceSize);
    Fence m;
    m.generation = r.get<uint64_t>();
    m.slot = r.get<uint32_t>();
    const uint32_t reserved = r.get<uint32_t>();
    r.bytes(m.event.data(), m.event.size());
    if (reserved != 0) return out_of_range("reserved", reserved);
    if (m.slot >= kMaxSlots) return out_of_range("slot", m.slot);
    return Message{m};
  }
  DecodeResult eos() {
    if (length != kEosSize) return bad_length(kEosSize);
    return Message{Eos{}};
  }
  DecodeResult bye() {
    if (length != kByeSize) return bad_length(kByeSize);
    Bye m;
    m.reason = r.get<uint32_t>();
    if (m.reason > Bye::kProtocolError) return out_of_range("reason", m.reason);
    return Message{m};
  }
  DecodeResult error() {
    if (length < kErrorFixedSize) return bad_length(kErrorFixedSize);
    ErrorMessage m;
    m.code = r.get<uint32_t>();
    const uint32_t n = r.get<uint32_t>();
    if (n > kMaxErrorTextLength) return out_of_range("text_length", n);
    if (length != kErrorFixedSize + n) return bad_length(kErrorFixedSize + n);
    m.text = r.str(n);
    return Message{m};
  }
  DecodeResult retire() {
    if (length != kRetireSize) return bad_length(kRetireSize);
    Retire m;
    m.generation = r.get<uint64_t>();
    m.slot = r.get<uint32_t>();
    const uint32_t reserved = r.get<uint32_t>();
    if (reserved != 0) return out_of_range("reserved", reserved);
    if (m.slot >= kMaxSlots) return out_of_range("slot", m.slot);
    return Message{m};
  }
};

}  // namespace

const char* to_string(MessageType type) {
  switch (type) {
    case MessageType::kHello: return "HELLO";
    case MessageType::kWelcome: return "WELCOME";
    case MessageType::kCaps: return "CAPS";
    case MessageType::kSlot: return "SLOT";
    case MessageType::kFrame: return "FRAME";
    case MessageType::kRelease: return "RELEASE";
    case MessageType::kFence: return "FENCE";
    case MessageType::kEos: return "EOS";
    case MessageType::kBye: return "BYE";
    case MessageType::kError: return "ERROR";
    case MessageType::kRetire: return "RETIRE";
  }
  return "UNKNOWN";
}

const char* to_string(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kAny: return "any";
    case MemoryKind::kHost: return "host";
    case MemoryKind::kCuda: return "cuda";
  }
  return "unknown";
}

const char* to_string(SyncMode mode) {
  switch (mode) {
    case SyncMode::kNone: return "none";
    case SyncMode::kGpuEvents: return "gpu-events";
    case SyncMode::kCpu: return "cpu";
  }
  return "unknown";
}

// Body lists the messages in MessageType order, starting at 1: type() below depends on it.
template <MessageType type, typename T>
constexpr bool kBodyIs =
    std::is_same_v<std::variant_alternative_t<static_cast<size_t>(type) - 1, Body>, T>;
static_assert(kBodyIs<MessageType::kHello, Hello> && kBodyIs<MessageType::kWelcome, Welcome> &&
                  kBodyIs<MessageType::kCaps, Caps> && kBodyIs<MessageType::kSlot, Slot> &&
                  kBodyIs<MessageType::kFrame, Frame> && kBodyIs<MessageType::kRelease, Release> &&
                  kBodyIs<MessageType::kFence, Fence> && kBodyIs<MessageType::kEos, Eos> &&
                  kBodyIs<MessageType::kBye, Bye> && kBodyIs<MessageType::kError, ErrorMessage> &&
                  kBodyIs<MessageType::kRetire, Retire>,
              "Body's alternatives must follow the MessageType numbers");
static_assert(std::variant_size_v<Body> == static_cast<size_t>(MessageType::kRetire),
              "every MessageType has a Body alternative and no more");

MessageType Message::type() const {
  return static_cast<MessageType>(body.index() + 1);
}

size_t expected_fd_count(MessageType type) {
  return type == MessageType::kSlot ? 1 : 0;
}

std::vector<uint8_t> encode(const Message& message, uint16_t version) {
  std::vector<uint8_t> out;
  out.reserve(kHeaderSize + kFrameSize);
  Writer w(out);
  w.put(kMagic);
  w.put(version);
  w.put(static_cast<uint16_t>(message.type()));
  w.put(uint32_t{0});  // body length, patched below
  std::visit(BodyEncoder{w}, message.body);
  const uint32_t body = static_cast<uint32_t>(out.size() - kHeaderSize);
  for (size_t i = 0; i < 4; ++i) out[8 + i] = static_cast<uint8_t>(body >> (8 * i));
  return out;
}

DecodeResult decode(const uint8_t* data, size_t size) {
  Header header;
  if (std::optional<DecodeError> refused = read_header(data, size, header)) return *refused;
  BodyDecoder d{header.type, header.length, Reader(data + kHeaderSize, header.length)};
  switch (header.type) {
    case MessageType::kHello: return d.hello();
    case MessageType::kWelcome: return d.welcome();
    case MessageType::kCaps: return d.caps();
    case MessageType::kSlot: return d.slot();
    case MessageType::kFrame: return d.frame();
    case MessageType::kRelease: return d.release();
    case MessageType::kFence: return d.fence();
    case MessageType::kEos: return d.eos();
    case MessageType::kBye: return d.bye();
    case MessageType::kError: return d.error();
    case MessageType::kRetire: return d.retire();
  }
  return fail(DecodeFailure::kUnknownType, "unknown message type");
}

std::string describe(const DecodeError& error) {
  switch (error.failure) {
    case DecodeFailure::kVersionMismatch:
      return "peer speaks protocol version " + std::to_string(error.peer_version) +
             ", this side speaks version " + std::to_string(kProtocolVersion);
    case DecodeFailure::kBadMagic: return "not a cudaipc message (bad magic)";
    default: return "malformed message: " + error.detail;
  }
}

}  // namespace cipc
