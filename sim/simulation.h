// sim/simulation.h: one Simulation owns everything a run needs: the clock, the event queue, the
// fluid resource model, the named random streams and the observer bus. No globals: several
// simulations can live side by side in one process.
//
// Events are (handler, arg) targets: a model object registers itself once as an EventHandler and
// receives its events with a 32-bit argument it chose (an index into its own arrays). Nothing is
// allocated per event and no callable is stored.
//
// Run loop: take the next time t; dispatch every event at t (FIFO among equal times); then settle
// once (the fluid model re-solves the components that changed and moves completion events); repeat.
// When the queue drains while registered work is still pending, the run ends with a deadlock
// report naming what waits on what.
//
// A run may be split at horizons (`run(h1)`, `run(h2)`, `run()`) with the same result as one
// `run()`. run() never finishes the observers: the owner calls `finish()` once, when the whole
// run is over, which tells every observer the end time (sinks flush). finish() is idempotent; the
// destructor does not call it (sinks finish in their own destructors, without an end time).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/event_handler.h"
#include "sim/event_queue.h"
#include "sim/fluid.h"
#include "sim/observer.h"
#include "sim/random.h"
#include "sim/time.h"

namespace sim {

// Model objects that hold work which can wait (ops waiting for peers, flows stalled on a down
// link) register as PendingWork so a drained queue can be told apart from a finished run.
class PendingWork {
 public:
  virtual ~PendingWork() = default;
  virtual size_t pending_count() const = 0;
  // Appends human-readable lines "X waits on Y", at most max_lines.
  virtual void describe_pending(std::string& out, size_t max_lines) const = 0;
};

struct RunResult {
  Time end_time;
  uint64_t events = 0;
  uint64_t settles = 0;
  bool deadlocked = false;
  bool hit_horizon = false;
  std::string deadlock_report;
};

// Told every 65,536 events or so how far a run has got (a terminal's progress line); nothing on
// the hot path but one comparison per timestamp.
class Log;

class ProgressListener {
 public:
  virtual ~ProgressListener() = default;
  virtual void on_progress(Time now, uint64_t events) = 0;
};

class Simulation {
 public:
  explicit Simulation(uint64_t seed, QueueKind queue = kDefaultQueue);
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;
  ~Simulation();

  Time now() const { return now_; }
  uint64_t seed() const { return seed_; }

  HandlerId add_handler(EventHandler* h);
  EventId schedule_at(Time t, HandlerId h, uint32_t arg);
  EventId schedule_after(Time delay, HandlerId h, uint32_t arg) { return schedule_at(now_ + delay, h, arg); }
  void reschedule(EventId id, Time t);
  void cancel(EventId id);

  void add_pending_work(PendingWork* w) { pending_.push_back(w); }
  // For an object that goes away before the simulation does (not called per event).
  void remove_pending_work(PendingWork* w) { std::erase(pending_, w); }

  FluidModel& fluid() { return *fluid_; }
  ObserverBus& observers() { return observers_; }
  const RandomStreams& random() const { return random_; }
  const EventQueue& queue() const { return *queue_; }

  // Runs until the queue drains or the next event lies beyond `horizon` (events at `horizon` run).
  // May be called again to go on; observers are not finished (see finish()).
  RunResult run(Time horizon = Time::infinite());
  // Tells the observers the run ended at now(); only the first call does anything. No run() after.
  void finish();
  bool finished() const { return finished_; }
  uint64_t events_processed() const { return events_; }
  void set_progress(ProgressListener* p) { progress_ = p; }
  // Diagnostics (sim/log.h) for everything built on this simulation; null: none.
  void set_log(Log* log) { log_ = log; }
  Log* log() const { return log_; }

 private:
  void prefetch_ahead() const;
  uint64_t seed_;
  Time now_;
  uint64_t events_ = 0;
  uint64_t next_progress_ = 65536;
  ProgressListener* progress_ = nullptr;
  Log* log_ = nullptr;
  uint64_t settles_ = 0;
  bool finished_ = false;
  std::unique_ptr<EventQueue> queue_;
  std::vector<EventHandler*> handlers_;
  std::vector<PendingWork*> pending_;
  RandomStreams random_;
  ObserverBus observers_;
  std::unique_ptr<FluidModel> fluid_;
};

}  // namespace sim
