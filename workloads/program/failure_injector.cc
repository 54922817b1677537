#include "workloads/program/failure_injector.h"

namespace wl {

namespace {
constexpr uint32_t kEndOfWindow = 1u << 31;  // arg bit: a slowdown's window ends
}

FailureInjector::FailureInjector(topo::ClusterResources& res, ProgramExecutor& exec,
                                 std::vector<topo::FailureEvent> events)
    : res_(res), exec_(exec), events_(std::move(events)) {
  auto& sim = res_.simulation();
  handler_ = sim.add_handler(this);
  for (uint32_t i = 0; i < events_.size(); ++i) sim.schedule_after(events_[i].at, handler_, i);
}

void FailureInjector::on_event(uint32_t arg) {
  using A = topo::FailureEvent::Action;
  const bool end = (arg & kEndOfWindow) != 0;
  const topo::FailureEvent& e = events_[arg & ~kEndOfWindow];
  const double speed = end ? 1.0 : 1.0 / e.factor;
  switch (e.action) {
    case A::kKillGpus:
      exec_.note_failure(e.what + " died");
      for (uint32_t g : e.gpus)
        if (!res_.gpu_failed(g)) exec_.fail_gpu(g);
      return;
    case A::kKillLinks:
      exec_.note_failure(e.what + " went down");
      for (uint32_t l : e.links) res_.fail_link(l);
      return;
    case A::kSlowGpus:
      for (uint32_t g : e.gpus)
        if (!res_.gpu_failed(g)) res_.set_gpu_speed(g, speed);
      break;
    case A::kSlowLinks:
      for (uint32_t l : e.links) res_.set_link_speed(l, speed);
      break;
  }
  exec_.mark(end ? "end of slowdown: " + e.what : e.what);
  if (!end && !e.duration.is_infinite())
    res_.simulation().schedule_after(e.duration, handler_, arg | kEndOfWindow);
}

}  // namespace wl
