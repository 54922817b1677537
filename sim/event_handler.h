// sim/event_handler.h: the receiver of events. A model object registers itself once with
// Simulation::add_handler and gets each of its events as on_event(arg), where arg is a 32-bit
// value it chose when scheduling (typically an index into its own arrays).
#pragma once

#include <cstddef>
#include <cstdint>

namespace sim {

class EventHandler {
 public:
  virtual ~EventHandler() = default;
  virtual void on_event(uint32_t arg) = 0;
  // A hint that event `arg` fires soon: the handler may ask for the memory on_event will touch.
  // The run loop calls it for an event kPrefetchStages times as the event nears the queue's head,
  // `stage` 0 first (furthest ahead), so that a handler can follow a chain of dependent loads one
  // link per stage (a record, then what it points to). Must not change anything; an `arg` that
  // is stale by then must be harmless. The queue may still hold cancelled events of a handler,
  // and they are peeked at too: a handler lives as long as the Simulation it registered with.
  virtual void prefetch(uint32_t arg, int stage) const {
    (void)arg;
    (void)stage;
  }
};

// How many stages EventHandler::prefetch is called with, and how many events ahead of the head
// each stage is (Simulation::prefetch_ahead).
inline constexpr int kPrefetchStages = 2;
inline constexpr size_t kPrefetchAhead[kPrefetchStages] = {12, 5};

}  // namespace sim
