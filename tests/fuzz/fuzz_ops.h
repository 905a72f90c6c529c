// SPDX-License-Identifier: LGPL-2.1-or-later
// The input language of the state-machine fuzz targets (fuzz_producer.cpp, fuzz_consumer.cpp):
// an input is a few setup bytes and then a sequence of operations, each an operation byte
// (taken modulo the number of operations) followed by that operation's parameters, read front
// to back by cipc_fuzz::Input. make_seeds.cpp writes valid scenarios in this language.
#pragma once

#include <cstdint>

namespace cipc_fuzz {

// fuzz_producer: a real Producer, driven from the streaming side (publish, caps, EOS) and
// attacked by up to kMaxClients raw consumer connections.
// Setup bytes: max_in_flight, release_timeout step, hello_timeout step, flags (bit 0: no caps
// at start).
enum class ProducerOp : uint8_t {
  kConnect,          // (nothing)                  open another raw connection
  kHello,            // client, kind, mif, version  HELLO (any field may be invalid)
  kReleaseReceived,  // client, which, flags, fault RELEASE of a received frame, maybe damaged
  kFenceReceived,    // client, which, fault        FENCE for a received slot, maybe damaged
  kTypedMessage,     // client, type, fields...     a message of any type with input fields
  kRawBytes,         // client, length(u16), bytes  any datagram
  kWithDescriptors,  // client, count, kind, type   a message carrying descriptors
  kPublish,          // slot                        the streaming thread publishes a frame
  kNewCaps,          // (nothing)                   a new pool generation (new slots)
  kEos,              // (nothing)                   the streaming thread sends EOS
  kDrain,            // client                      read what the producer sent
  kClose,            // client                      hang up
  kHalfClose,        // client                      shutdown(SHUT_WR)
  kStall,            // milliseconds                let time pass (release/hello timeouts)
  kAwaitReply,       // client                      wait briefly for the producer, then drain
  kCount
};

// fuzz_consumer: a real Consumer connected to a fake producer played by the target.
// Setup bytes: max_in_flight, handshake answer (HandshakeAnswer), then its parameters.
enum class HandshakeAnswer : uint8_t {
  kWelcome,        // instance id (u64), max_in_flight (u8), sync (u8)
  kWelcomeFields,  // memory kind (u8), sync (u8), max_in_flight (u32), version (u16)
  kError,          // code (u32), text length (u8), text
  kOtherMessage,   // type, fields...
  kRawBytes,       // length (u16), bytes
  kWelcomeWithFd,  // (nothing)
  kCount
};

enum class ConsumerOp : uint8_t {
  kCaps,          // generation (u8), frame_size (u32), caps length (u8), caps
  kSlot,          // generation (u8), index (u16), size (u32), descriptor kind (u8), fd size delta
  kFrame,         // generation (u8), slot (u16), size (u32), n_planes (u8), offsets, strides
  kEos,           // (nothing)
  kBye,           // reason (u8)
  kError,         // code (u32), text length (u8), text
  kRawBytes,      // length (u16), bytes
  kTypedMessage,  // type, fields...
  kNext,          // (nothing)  the application asks for the next event
  kDropFrame,     // which      the application lets go of a held frame (RELEASE)
  kDrain,         // (nothing)  the fake producer reads what the consumer sent
  kDestroy,       // (nothing)  the application destroys the consumer early
  kCount
};

}  // namespace cipc_fuzz
