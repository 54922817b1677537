// traces/chrome/chrome_trace.h: an observer sink that streams the run as a Chrome Trace Event
// Format JSON file (optionally gzip'ed), viewable in Perfetto, chrome://tracing and DevTools.
//
// Output shape: {"displayTimeUnit":"ns","traceEvents":[ ... ],"otherData":{...}}, one event a
// line; otherData comes last, so that what is known only when the run ends (its summary) can go
// there (Chrome's own traces put their "metadata" after the events too). Spans become complete events "X", counters "C" (args {"value": v}), instants "i" with
// thread scope, and declared processes/threads "M" metadata (process_name, process_sort_index,
// thread_name, thread_sort_index = thread id).
//
// Units: simulated time is integer nanoseconds; the format's ts/dur are microseconds, written as
// exact decimals of the nanosecond integers (1234567 ns -> 1234.567), never through a double.
// displayTimeUnit only changes how viewers print times, never the unit of ts.
//
// Invariants:
//  * Events are streamed through a fixed-size buffer; memory does not grow with the trace (the
//    only per-track state is the last counter value seen before a time window, see below).
//  * The file appears, valid JSON, when on_finish runs (written as PATH.partial, then renamed), even
//    with no events; a writer destroyed before that writes nothing and leaves PATH as it was.
//  * Identical option + record sequences give byte-identical files, gzip included: no wall
//    clock, no pointers, no unordered iteration.
//  * Spans on one (process, thread) must nest (viewers drop partial overlaps); that is the
//    emitting model's job, this sink does not reorder or check it.
#pragma once

#include <charconv>
#include <concepts>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/observer.h"
#include "sim/time.h"

namespace traces {

struct ChromeTraceOptions {
  std::string path = {};
  // Unset: gzip exactly when path ends in ".gz".
  std::optional<bool> gzip = std::nullopt;
  // Process ids to keep; empty keeps all. Metadata of dropped processes is dropped too.
  std::set<uint32_t> processes = {};
  // Time window [window_from, window_to). Spans overlapping it are kept whole (not clipped);
  // counters and instants are kept when their time lies inside it. A counter track whose last
  // sample before the window is not at window_from gets that value repeated at window_from, so
  // the track shows the right level from the window's first instant.
  sim::Time window_from = sim::Time::ns(std::numeric_limits<int64_t>::min());
  sim::Time window_to = sim::Time::infinite();
  bool write_counters = true;
  // "ns" or "ms" (the two values viewers know).
  std::string display_time_unit = "ns";
};

class ChromeTraceWriter : public sim::Observer {
 public:
  // Opens (truncates) the output file. Throws sim::UserError naming the path and the errno text
  // when it cannot be opened, and on a bad display_time_unit or an empty window.
  explicit ChromeTraceWriter(ChromeTraceOptions options);
  // Without on_finish (the run failed) the partial file is removed: an earlier trace stays.
  ~ChromeTraceWriter() override;
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

  // Run metadata for "otherData", written when the run finishes: set it any time before on_finish.
  // A repeated key replaces the earlier value, keeping the first key's position.
  void set_metadata(std::string_view key, std::string_view value);
  void set_metadata(std::string_view key, const char* value) { set_metadata(key, std::string_view(value)); }
  void set_metadata(std::string_view key, double value);
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  void set_metadata(std::string_view key, T value) {
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, value);
    set_metadata_json(key, std::string(buf, res.ptr));
  }
  // `json_value`: a JSON value already rendered (an object, say), written as it is.
  void set_metadata_json(std::string_view key, std::string json_value);

  void on_process(uint32_t process, std::string_view name, int64_t sort_index) override;
  void on_thread(uint32_t process, uint32_t thread, std::string_view name) override;
  void on_span(const sim::SpanRecord& r, const sim::NameTable& names) override;
  void on_counter(const sim::CounterRecord& r, const sim::NameTable& names) override;
  void on_instant(const sim::InstantRecord& r, const sim::NameTable& names) override;
  // Flow events (ph "s" / "f", bound to the enclosing slice): arrows in Perfetto.
  void on_flow(const sim::FlowRecord& r, const sim::NameTable& names) override;
  // Closes the array and the object and flushes and closes the file. Records after it are
  // ignored. Throws sim::UserError on a write error.
  void on_finish(sim::Time end) override;

  // Events written so far (metadata events included; filtered records not).
  uint64_t events_written() const { return events_written_; }
  const std::string& path() const { return options_.path; }

 private:
  class Sink;  // the open (maybe gzip'ed) file

  bool keep_process(uint32_t process) const {
    return options_.processes.empty() || options_.processes.count(process) != 0;
  }
  // Writes the header if not yet written, then the separator before a new event.
  void begin_event();
  void end_event();
  // Closes an instant or flow event: its pid, tid and ts, then end_event().
  void append_track_time(uint32_t process, uint32_t thread, sim::Time time);
  void write_counter(uint32_t process, std::string_view name, sim::Time time, double value);
  void finish(sim::Time end);

  ChromeTraceOptions options_;
  std::unique_ptr<Sink> sink_;
  std::string buf_;  // pending output, flushed to the sink past a threshold
  // otherData entries as (key, rendered JSON value), in first-set order.
  std::vector<std::pair<std::string, std::string>> metadata_;
  bool header_written_ = false;
  bool finished_ = false;
  uint64_t events_written_ = 0;
  // Per counter track (process, name id): last value before window_from, not yet written.
  std::map<std::pair<uint32_t, uint32_t>, std::pair<std::string, double>> carried_counters_;
  // Counter tracks that already have a sample inside the window (late earlier samples ignored).
  std::set<std::pair<uint32_t, uint32_t>> started_counters_;
};

// JSON building blocks, shared with other JSON writers in traces/.
// Appends s as a quoted JSON string: quotes, backslashes and control characters escaped,
// valid UTF-8 passed through, each byte of an invalid UTF-8 sequence replaced by U+FFFD.
void append_json_string(std::string& out, std::string_view s);
// Appends v as a JSON number: integral values (|v| < 2^53) without a decimal point, others in
// the shortest form that reads back to the same double. Non-finite values, which JSON cannot
// hold, are written as the strings "NaN", "Infinity", "-Infinity".
void append_json_number(std::string& out, double v);
// Appends ns nanoseconds as exact decimal microseconds, trailing zeros trimmed: 1234567 -> 1234.567,
// 1500 -> 1.5, 2000 -> 2, -1 -> -0.001.
void append_us_from_ns(std::string& out, int64_t ns);
// The duration end - start in microseconds such that a viewer's floating-point ts + dur never
// passes the parsed end (see the .cc for why): exact to the nanosecond.
void append_dur_us(std::string& out, int64_t start_ns, int64_t end_ns);

}  // namespace traces
