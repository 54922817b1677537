#include "sim/simulation.h"

#include <string>

#include "sim/error.h"
#include "sim/log.h"

namespace sim {

Simulation::Simulation(uint64_t seed, QueueKind queue)
    : seed_(seed), queue_(make_event_queue(queue)), random_(seed), fluid_(std::make_unique<FluidModel>(*this)) {}

Simulation::~Simulation() = default;

HandlerId Simulation::add_handler(EventHandler* h) {
  handlers_.push_back(h);
  return HandlerId(static_cast<uint32_t>(handlers_.size() - 1));
}

EventId Simulation::schedule_at(Time t, HandlerId h, uint32_t arg) {
  SIM_ASSERT(t >= now_, "event scheduled in the past at " + std::to_string(t.count_ns()) + " ns, now " +
                            std::to_string(now_.count_ns()) + " ns");
  return queue_->push(t, EventTarget{h, arg});
}

void Simulation::reschedule(EventId id, Time t) {
  SIM_ASSERT(t >= now_, "event rescheduled into the past");
  queue_->reschedule(id, t);
}

void Simulation::cancel(EventId id) { queue_->cancel(id); }

// Events a few places ahead in the queue: each handler asks for what its on_event will touch, in
// stages (see EventHandler::prefetch), so that by the time each fires its lines are in the cache.
// At 16k GPUs and more the records an event touches (an activity, its constraints, a rank's
// state, a transfer's links) far outgrow the caches and are touched in no useful order.
void Simulation::prefetch_ahead() const {
  EventTarget t;
  for (int stage = 0; stage < kPrefetchStages; ++stage)
    if (queue_->peek(kPrefetchAhead[stage], t)) handlers_[t.handler.value]->prefetch(t.arg, stage);
}

RunResult Simulation::run(Time horizon) {
  SIM_ASSERT(!finished_, "Simulation::run after finish(): the observers have already been told the run ended");
  RunResult result;
  // Work started before run() (activities created during setup) is solved at the start time.
  if (fluid_->has_dirty()) {
    fluid_->settle();
    ++settles_;
  }
  while (!queue_->empty()) {
    Time t = queue_->next_time();
    if (t > horizon) {
      result.hit_horizon = true;
      break;
    }
    if (t.count_ns() >= Time::kMaxFinite)
      throw UserError("simulated time would pass 2^62 ns (146 years) after " + std::to_string(events_) +
                      " events: a duration in the scenario is beyond what the simulator represents (a bandwidth or "
                      "FLOP rate near zero, a size or latency far too large)");
    now_ = t;
    while (!queue_->empty() && queue_->next_time() == t) {
      PoppedEvent ev = queue_->pop();
      ++events_;
      prefetch_ahead();
      handlers_[ev.target.handler.value]->on_event(ev.target.arg);
    }
    if (fluid_->has_dirty()) {
      fluid_->settle();
      ++settles_;
    }
    if (progress_ && events_ >= next_progress_) {
      next_progress_ = events_ + 65536;
      progress_->on_progress(now_, events_);
    }
  }
  result.end_time = now_;
  result.events = events_;
  result.settles = settles_;
  if (log_)
    log_->at(Layer::kSim).debug("run stopped at {} ns: {} events, {} sharing solves{}", now_.count_ns(), events_,
                                settles_, result.hit_horizon ? " (horizon reached)" : "");
  if (!result.hit_horizon) {
    size_t waiting = fluid_->num_active();
    for (auto* p : pending_) waiting += p->pending_count();
    if (waiting > 0) {
      result.deadlocked = true;
      std::string& r = result.deadlock_report;
      r = "deadlock at t=" + std::to_string(now_.count_ns()) + " ns after " + std::to_string(events_) +
          " events: the event queue is empty but " + std::to_string(waiting) + " items of work are pending\n";
      fluid_->describe_stalled(r, 20);
      for (auto* p : pending_) p->describe_pending(r, 20);
      if (log_) log_->at(Layer::kSim).info("deadlock: {} items of work pending with no event left", waiting);
    }
  }
  return result;
}

void Simulation::finish() {
  if (finished_) return;
  finished_ = true;
  observers_.finish(now_);
}

}  // namespace sim
