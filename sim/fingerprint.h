// sim/fingerprint.h: an observer that condenses a run's timeline into a short, stable fingerprint.
//
// It counts every record on the bus and hashes the first `limit` of them (process and thread
// declarations, spans, counters, instants, in emission order) with 64-bit FNV-1a over their
// fields: names as strings (not interned ids), times in integer ns, values as IEEE bits. Two runs
// that emit the same records in the same order have the same hash; any change in a time, a name,
// a value or the order changes it. Golden tests (tests/golden/) keep one fingerprint per example
// scenario and validation row, so a change to outputs cannot go unnoticed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sim/observer.h"

namespace sim {

class FingerprintObserver : public Observer {
 public:
  explicit FingerprintObserver(uint64_t limit = 10000) : limit_(limit) {}

  void on_process(uint32_t process, std::string_view name, int64_t sort_index) override;
  void on_thread(uint32_t process, uint32_t thread, std::string_view name) override;
  void on_span(const SpanRecord& r, const NameTable& names) override;
  void on_counter(const CounterRecord& r, const NameTable& names) override;
  void on_instant(const InstantRecord& r, const NameTable& names) override;
  void on_finish(Time end) override;

  uint64_t records() const { return records_; }
  uint64_t hash() const { return hash_; }
  // "<records>:<hash as 16 hex digits>"
  std::string summary() const;

 private:
  bool take();  // counts a record; true while it is within the hashed prefix
  void mix(uint64_t v);
  void mix(std::string_view s);
  void mix_name(uint32_t id, const NameTable& names);

  uint64_t limit_;
  uint64_t records_ = 0;
  uint64_t hash_ = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
};

}  // namespace sim
