#include "sim/event_queue.h"

#include "sim/error.h"
#include "sim/radix_front_queue.h"
#include "sim/quaternary_heap_queue.h"
#include "sim/radix_heap_queue.h"

namespace sim {

std::unique_ptr<EventQueue> make_event_queue(QueueKind kind) {
  switch (kind) {
    case QueueKind::kQuaternaryHeap:
      return std::make_unique<QuaternaryHeapQueue>();
    case QueueKind::kRadixHeap:
      return std::make_unique<RadixHeapQueue>();
    case QueueKind::kRadixFront:
      return std::make_unique<RadixFrontQueue>();
  }
  SIM_ASSERT(false, "make_event_queue: unknown QueueKind");
  return nullptr;
}

}  // namespace sim
