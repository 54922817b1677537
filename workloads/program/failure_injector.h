// workloads/program/failure_injector.h: plays a list of hardware failures (topology/failure_events.h)
// against a running job: at each event's time it kills GPUs (the executor's ranks on them die),
// takes links down (what crosses them stalls) or slows GPUs and links for a window, and tells the
// executor, whose watchdog then turns the hang into an abort.
#pragma once

#include <vector>

#include "sim/event_handler.h"
#include "topology/cluster_resources.h"
#include "topology/failure_events.h"
#include "workloads/program/executor.h"

namespace wl {

class FailureInjector : public sim::EventHandler {
 public:
  // Schedules every event at now + its time. The injector must outlive the run.
  FailureInjector(topo::ClusterResources& res, ProgramExecutor& exec, std::vector<topo::FailureEvent> events);
  void on_event(uint32_t arg) override;

 private:
  topo::ClusterResources& res_;
  ProgramExecutor& exec_;
  std::vector<topo::FailureEvent> events_;
  sim::HandlerId handler_;
};

}  // namespace wl
