// SPDX-License-Identifier: LGPL-2.1-or-later
#include "reconnectingconsumer.h"

#include <poll.h>

#include <algorithm>
#include <utility>

namespace cipc {

ReconnectingConsumer::ReconnectingConsumer(ClientConfig config, BackendFactory backend_factory,
                                           Waker* waker)
    : config_(std::move(config)), backend_factory_(std::move(backend_factory)), waker_(waker) {}

uint64_t ReconnectingConsumer::slots_imported() const {
  return slots_before_ + (consumer_ ? consumer_->stats().slots_imported : 0);
}

uint64_t ReconnectingConsumer::slots_retired() const {
  return retired_before_ + (consumer_ ? consumer_->stats().slots_retired : 0);
}

void ReconnectingConsumer::disconnect() {
  if (!consumer_) return;
  slots_before_ += consumer_->stats().slots_imported;
  retired_before_ += consumer_->stats().slots_retired;
  consumer_.reset();
}

bool ReconnectingConsumer::pause() {
  const int ms = static_cast<int>(std::max<uint32_t>(config_.reconnect_interval_ms, 1));
  if (!waker_) {
    ::poll(nullptr, 0, ms);
    return true;
  }
  pollfd p{waker_->fd(), POLLIN, 0};
  return ::poll(&p, 1, ms) == 0;
}

ClientEvent ReconnectingConsumer::attach(uint64_t deadline_ns) {
  ClientEvent out;
  const bool forever = config_.reconnect || config_.connect_timeout_ms == 0;
  const uint64_t deadline = monotonic_ns() + uint64_t(config_.connect_timeout_ms) * 1000000;
  for (;;) {
    auto consumer = Consumer::connect(config_.consumer, backend_factory_, waker_);
    if (consumer) {
      consumer_ = std::move(consumer.value());
      ++connects_;
      failed_attempts_ = 0;
      last_sequence_ = 0;
      out.kind = ClientEvent::Kind::kAttached;
      out.new_instance = consumer_->instance_id() != instance_id_;
      instance_id_ = consumer_->instance_id();
      return out;
    }
    const Error& e = consumer.error();
    if (e.code == ErrorCode::kInterrupted) return out;  // kInterrupted
    const bool transient = e.code == ErrorCode::kConnectFailed || e.code == ErrorCode::kClosed ||
                           e.code == ErrorCode::kTimeout;
    if (!transient || (!forever && monotonic_ns() >= deadline)) {
      out.kind = ClientEvent::Kind::kFailed;
      out.failure = transient ? ClientEvent::Failure::kNoProducer : ClientEvent::Failure::kRefused;
      out.error = e;
      out.after_loss = connects_ > 0;
      return out;
    }
    if (config_.on_retry) {
      ConnectAttempt attempt;
      attempt.number = ++failed_attempts_;
      attempt.after_loss = connects_ > 0;
      attempt.error = &e;
      config_.on_retry(attempt);
    }
    if (monotonic_ns() >= deadline_ns) {
      out.kind = ClientEvent::Kind::kTimeout;
      return out;
    }
    if (!pause()) return out;  // kInterrupted
  }
}

ClientEvent ReconnectingConsumer::lose(const ConsumerEvent& event) {
  ClientEvent out;
  out.error = event.error;
  out.parting = event.parting;
  const bool protocol = event.kind == ConsumerEvent::Kind::kError;
  disconnect();
  if (protocol && event.error.code != ErrorCode::kProtocol) {
    // Version, memory kind or GPU mismatch, or a connection another process made (read after
    // fork()): waiting would not change it.
    out.kind = ClientEvent::Kind::kFailed;
    out.failure = ClientEvent::Failure::kIncompatible;
  } else if (config_.reconnect) {
    out.kind = ClientEvent::Kind::kLost;
  } else if (protocol) {
    out.kind = ClientEvent::Kind::kFailed;
    out.failure = ClientEvent::Failure::kMisbehaved;
  } else {
    out.kind = ClientEvent::Kind::kEnded;
  }
  return out;
}

ClientEvent ReconnectingConsumer::next(int timeout_ms) {
  const uint64_t deadline =
      timeout_ms < 0 ? UINT64_MAX : monotonic_ns() + uint64_t(timeout_ms) * 1000000;
  if (!consumer_) return attach(deadline);
  ConsumerEvent ev = consumer_->next(timeout_ms);
  ClientEvent out;
  switch (ev.kind) {
    case ConsumerEvent::Kind::kCaps:
      out.kind = ClientEvent::Kind::kCaps;
      out.caps = std::move(ev.caps);
      return out;
    case ConsumerEvent::Kind::kFrame: {
      out.kind = ClientEvent::Kind::kFrame;
      out.frame = std::move(ev.frame);
      const uint64_t sequence = out.frame.info.sequence;
      out.first_of_producer = last_sequence_ == 0;
      if (last_sequence_ != 0 && sequence > last_sequence_ + 1)
        out.skipped = sequence - last_sequence_ - 1;
      last_sequence_ = sequence;
      return out;
    }
    case ConsumerEvent::Kind::kEos: out.kind = ClientEvent::Kind::kEos; return out;
    case ConsumerEvent::Kind::kInterrupted: return out;  // kInterrupted
    case ConsumerEvent::Kind::kTimeout: out.kind = ClientEvent::Kind::kTimeout; return out;
    case ConsumerEvent::Kind::kClosed:
    case ConsumerEvent::Kind::kError: break;
  }
  return lose(ev);
}

}  // namespace cipc
