// SPDX-License-Identifier: LGPL-2.1-or-later
// A consumer that stays attached: connects (waiting up to connect-timeout for a producer to
// appear), and with `reconnect` attaches again whenever the producer goes away, flushing the
// import cache when a new producer instance answers. Turns every way a stream can end into one
// event that says why, so that cudasrc-ipc (or any application) only maps it to its own errors.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "consumer.h"
#include "status.h"
#include "waker.h"

namespace cipc {

// One failed attempt to reach a producer that the client will try again (nobody serves the
// path yet, or the producer went away), for the application's log: the first of a wait says
// what it waits for, the others each attempt.
struct ConnectAttempt {
  uint64_t number = 0;           // 1 for the first failed attempt of this wait
  bool after_loss = false;       // the wait began when an attached producer went away
  const Error* error = nullptr;  // why this attempt failed
};

struct ClientConfig {
  ConsumerConfig consumer;
  bool reconnect = false;                // wait for a producer again when it goes away
  uint32_t reconnect_interval_ms = 100;  // between attempts to reach the producer
  uint32_t connect_timeout_ms = 5000;    // to find a producer at first; 0 (or reconnect) = forever
  // Called, on the thread of next(), after each failed attempt that will be retried.
  std::function<void(const ConnectAttempt&)> on_retry;
};

struct ClientEvent {
  enum class Kind {
    kAttached,     // attached to a producer (again); `new_instance` when not the one before
    kCaps,         // caps
    kFrame,        // frame
    kEos,          // the producer sent EOS
    kLost,         // reconnect: the producer went away or misbehaved (error says how); waiting
    kEnded,        // no reconnect: the producer went away (error says how)
    kFailed,       // cannot continue; `failure` and error say why
    kInterrupted,  // the waker was set
    kTimeout,      // next(timeout_ms): nothing came in time
  };
  enum class Failure {
    kNoProducer,    // nobody served the path within connect-timeout
    kRefused,       // the handshake failed for a reason waiting will not change
    kIncompatible,  // version, memory kind or GPU mismatch announced mid-stream
    kMisbehaved,    // the producer broke the protocol (no reconnect)
  };
  Kind kind = Kind::kInterrupted;
  ReceivedFrame frame;  // kFrame
  // kFrame: the first frame since attaching to this producer, or frames the producer sent since
  // this consumer's previous one that it was not sent (it was at max-in-flight): both are a
  // discontinuity for whoever reads the stream.
  bool first_of_producer = false;
  uint64_t skipped = 0;
  Caps caps;  // kCaps
  Error error{ErrorCode::kClosed, {}};
  Failure failure = Failure::kNoProducer;  // kFailed
  bool new_instance = false;               // kAttached
  bool after_loss = false;  // kFailed with kNoProducer: the producer had been there before
  // kEnded, kLost and kFailed after attaching: what the producer said as it left (a stop, an
  // eviction, an ERROR, or nothing: it vanished).
  ConsumerEvent::Parting parting = ConsumerEvent::Parting::kNothing;
};

class ReconnectingConsumer {
 public:
  // `waker` (optional, not owned) interrupts every wait.
  ReconnectingConsumer(ClientConfig config, BackendFactory backend_factory, Waker* waker);
  ReconnectingConsumer(const ReconnectingConsumer&) = delete;
  ReconnectingConsumer& operator=(const ReconnectingConsumer&) = delete;

  // Attaches when not attached, then waits for what comes next; timeout_ms < 0: no limit (the
  // connect timeout still applies while attaching).
  ClientEvent next(int timeout_ms = -1);
  // Says BYE (frames still held stay valid until released).
  void disconnect();

  bool attached() const { return consumer_ != nullptr; }
  const Consumer* consumer() const { return consumer_.get(); }
  uint64_t connects() const { return connects_; }
  // Slot imports over every connection so far.
  uint64_t slots_imported() const;
  uint64_t slots_retired() const;  // imports dropped on the producer's RETIRE

 private:
  ClientEvent attach(uint64_t deadline_ns);
  ClientEvent lose(const ConsumerEvent& event);
  // Sleeps the reconnect interval unless the waker is set first; false when it was.
  bool pause();

  ClientConfig config_;
  BackendFactory backend_factory_;
  Waker* waker_;
  std::unique_ptr<Consumer> consumer_;
  uint64_t connects_ = 0;
  uint64_t failed_attempts_ = 0;  // of the wait under way (on_retry numbers them)
  uint64_t last_sequence_ = 0;    // of the last frame of this connection (0: none yet)
  uint64_t instance_id_ = 0;
  uint64_t slots_before_ = 0;  // slot imports of earlier connections
  uint64_t retired_before_ = 0;
};

}  // namespace cipc
