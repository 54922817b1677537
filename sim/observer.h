// sim/observer.h: the observer bus. Model code emits typed records; sinks (summary statistics,
// the Chrome trace in traces/) decide what to write. Nothing is ever derived from the log.
//
// Records are generic timeline facts: a span on a track, a counter sample, an instant.
// A track is (process, thread): the workload layer maps process = rank and thread = stream, the
// network layer maps process = a link group and the counter = a link's utilisation. Strings are
// interned once in the bus's NameTable and records carry 32-bit name ids, so emitting a record
// allocates nothing. With no observer attached an emit costs one branch.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/time.h"

namespace sim {

// Interns strings; ids are dense and assigned in first-use order (deterministic).
class NameTable {
 public:
  uint32_t intern(std::string_view s);
  const std::string& name(uint32_t id) const { return names_[id]; }
  size_t size() const { return names_.size(); }

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> index_;
};

inline constexpr uint32_t kNoName = 0xFFFFFFFFu;

// A numeric argument shown with a span (bytes, FLOPs, micro-batch index...). key == kNoName: unused.
struct SpanArg {
  uint32_t key = kNoName;
  double value = 0.0;
};

struct SpanRecord {
  uint32_t process = 0;
  uint32_t thread = 0;
  uint32_t name = kNoName;
  uint32_t category = kNoName;
  Time start;
  Time end;
  std::array<SpanArg, 4> args{};
};

struct CounterRecord {
  uint32_t process = 0;
  uint32_t name = kNoName;  // the counter track's name, e.g. "link 12 util"
  Time time;
  double value = 0.0;
};

struct InstantRecord {
  uint32_t process = 0;
  uint32_t thread = 0;
  uint32_t name = kNoName;
  Time time;
};

// One end of an arrow between two tracks (a message from its send to its receive): the start on
// the sender's track, the end on the receiver's, matched by `id`; each binds to the span that
// encloses its time on its track.
struct FlowRecord {
  uint64_t id = 0;
  uint32_t process = 0;
  uint32_t thread = 0;
  uint32_t name = kNoName;
  Time time;
  bool start = true;
};

class Observer {
 public:
  virtual ~Observer() = default;
  // Metadata: declared before records on that process/thread are emitted.
  virtual void on_process(uint32_t process, std::string_view name, int64_t sort_index) {}
  virtual void on_thread(uint32_t process, uint32_t thread, std::string_view name) {}
  virtual void on_span(const SpanRecord& r, const NameTable& names) {}
  virtual void on_counter(const CounterRecord& r, const NameTable& names) {}
  virtual void on_instant(const InstantRecord& r, const NameTable& names) {}
  virtual void on_flow(const FlowRecord& r, const NameTable& names) {}
  // The run ended at simulated time `end`; sinks flush.
  virtual void on_finish(Time end) {}
};

// Fan-out to attached observers (not owned). Order of delivery = order of attachment.
class ObserverBus {
 public:
  void attach(Observer* o) { observers_.push_back(o); }
  bool active() const { return !observers_.empty(); }
  NameTable& names() { return names_; }
  const NameTable& names() const { return names_; }

  void declare_process(uint32_t process, std::string_view name, int64_t sort_index) {
    for (auto* o : observers_) o->on_process(process, name, sort_index);
  }
  void declare_thread(uint32_t process, uint32_t thread, std::string_view name) {
    for (auto* o : observers_) o->on_thread(process, thread, name);
  }
  void span(const SpanRecord& r) {
    for (auto* o : observers_) o->on_span(r, names_);
  }
  void counter(const CounterRecord& r) {
    for (auto* o : observers_) o->on_counter(r, names_);
  }
  void instant(const InstantRecord& r) {
    for (auto* o : observers_) o->on_instant(r, names_);
  }
  void flow(const FlowRecord& r) {
    for (auto* o : observers_) o->on_flow(r, names_);
  }
  void finish(Time end) {
    for (auto* o : observers_) o->on_finish(end);
  }

 private:
  std::vector<Observer*> observers_;
  NameTable names_;
};

}  // namespace sim
