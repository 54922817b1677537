#include "sim/fingerprint.h"

#include <bit>
#include <cstdio>

namespace sim {

namespace {
constexpr uint64_t kFnvPrime = 0x100000001b3ull;
enum : uint64_t { kProcess = 1, kThread, kSpan, kCounter, kInstant, kFinish };
}  // namespace

bool FingerprintObserver::take() { return records_++ < limit_; }

void FingerprintObserver::mix(uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    hash_ ^= (v >> (8 * i)) & 0xFF;
    hash_ *= kFnvPrime;
  }
}

void FingerprintObserver::mix(std::string_view s) {
  mix(static_cast<uint64_t>(s.size()));
  for (char c : s) {
    hash_ ^= static_cast<unsigned char>(c);
    hash_ *= kFnvPrime;
  }
}

void FingerprintObserver::mix_name(uint32_t id, const NameTable& names) {
  if (id == kNoName)
    mix(uint64_t{0xFFFFFFFF});
  else
    mix(names.name(id));
}

void FingerprintObserver::on_process(uint32_t process, std::string_view name, int64_t sort_index) {
  if (!take()) return;
  mix(kProcess);
  mix(process);
  mix(name);
  mix(static_cast<uint64_t>(sort_index));
}

void FingerprintObserver::on_thread(uint32_t process, uint32_t thread, std::string_view name) {
  if (!take()) return;
  mix(kThread);
  mix(process);
  mix(thread);
  mix(name);
}

void FingerprintObserver::on_span(const SpanRecord& r, const NameTable& names) {
  if (!take()) return;
  mix(kSpan);
  mix(r.process);
  mix(r.thread);
  mix_name(r.name, names);
  mix_name(r.category, names);
  mix(static_cast<uint64_t>(r.start.count_ns()));
  mix(static_cast<uint64_t>(r.end.count_ns()));
  for (const auto& a : r.args) {
    if (a.key == kNoName) continue;
    mix_name(a.key, names);
    mix(std::bit_cast<uint64_t>(a.value));
  }
}

void FingerprintObserver::on_counter(const CounterRecord& r, const NameTable& names) {
  if (!take()) return;
  mix(kCounter);
  mix(r.process);
  mix_name(r.name, names);
  mix(static_cast<uint64_t>(r.time.count_ns()));
  mix(std::bit_cast<uint64_t>(r.value));
}

void FingerprintObserver::on_instant(const InstantRecord& r, const NameTable& names) {
  if (!take()) return;
  mix(kInstant);
  mix(r.process);
  mix(r.thread);
  mix_name(r.name, names);
  mix(static_cast<uint64_t>(r.time.count_ns()));
}

void FingerprintObserver::on_finish(Time end) {
  // The end time is part of the fingerprint whether or not the prefix is full.
  mix(kFinish);
  mix(static_cast<uint64_t>(end.count_ns()));
}

std::string FingerprintObserver::summary() const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%llu:%016llx", static_cast<unsigned long long>(records_),
                static_cast<unsigned long long>(hash_));
  return buf;
}

}  // namespace sim
