// sim/event_queue.h: the pending-event set.
//
// Order: (time, sequence number), the sequence assigned when an event is pushed or rescheduled,
// so events at equal times pop in FIFO order. Times pushed are never earlier than the last time
// popped (simulated time is monotone); implementations may rely on that.
// An event is a target (handler, arg): no callable is stored, nothing is allocated per event once
// the slot pool has grown to the peak number of pending events.
// EventId names a slot; it stays valid from push until the event pops or is cancelled, after
// which the slot may be reused. Holders must drop their id when the event fires.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "sim/ids.h"
#include "sim/time.h"

namespace sim {

struct EventTarget {
  HandlerId handler;
  uint32_t arg = 0;
};

struct PoppedEvent {
  Time time;
  EventTarget target;
  EventId id;
};

class EventQueue {
 public:
  virtual ~EventQueue() = default;
  virtual EventId push(Time t, EventTarget target) = 0;
  // Moves a pending event to time t (it takes a fresh sequence number, as if pushed now).
  virtual void reschedule(EventId id, Time t) = 0;
  virtual void cancel(EventId id) = 0;
  virtual bool empty() const = 0;
  virtual size_t size() const = 0;
  // Time of the next event; only when !empty().
  virtual Time next_time() = 0;
  virtual PoppedEvent pop() = 0;
  // The target of the event `ahead` places after the next one, when the queue knows it cheaply
  // (it may since have been cancelled or moved): for prefetching only, never for deciding.
  virtual bool peek(size_t ahead, EventTarget& out) const {
    (void)ahead;
    (void)out;
    return false;
  }
  virtual std::string_view name() const = 0;
};

enum class QueueKind { kQuaternaryHeap, kRadixHeap, kRadixFront };
// Chosen by tests/bench/bench_engine.cc: on the hold model the radix-front queue is about twice
// as fast as the radix heap at 10^4-10^6 pending (and the 4-ary heap falls behind both beyond
// 10^4); on whole scenarios the two radix queues are level.
inline constexpr QueueKind kDefaultQueue = QueueKind::kRadixFront;

std::unique_ptr<EventQueue> make_event_queue(QueueKind kind);

}  // namespace sim
