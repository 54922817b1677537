// sim/event_handler.h: the receiver of events. A model object registers itself once with
// Simulation::add_handler and gets each of its events as on_event(arg), where arg is a 32-bit
// value it chose when scheduling (typically an index into its own arrays).
#pragma once

#include <cstdint>

namespace sim {

class EventHandler {
 public:
  virtual ~EventHandler() = default;
  virtual void on_event(uint32_t arg) = 0;
};

}  // namespace sim
