// SPDX-License-Identifier: LGPL-2.1-or-later
#include "recycled_events.h"

namespace cipc_cuda {

Status RecycledEvents::next(std::shared_ptr<Event>* out) {
  for (const auto& event : events_) {
    // Only this object and the holders it handed the event to count: 1 is ours alone.
    if (event.use_count() == 1) {
      *out = event;
      return Status::ok();
    }
  }
  auto event = std::make_shared<Event>();
  Status s = Event::create_local(device_, event.get());
  if (!s) return s;
  events_.push_back(event);
  *out = std::move(event);
  return s;
}

}  // namespace cipc_cuda
