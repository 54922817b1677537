// sim/time.h: simulated time as a strong type over int64 nanoseconds.
// Range: +-292 years, enough for a whole training campaign on one clock.
// Durations derived from rates are rounded to the nearest nanosecond (from_seconds), or up
// (from_seconds_ceil) where an event must not fire before the work it ends is done.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace sim {

class Time {
 public:
  constexpr Time() = default;
  static constexpr Time ns(int64_t v) { return Time(v); }
  static constexpr Time us(int64_t v) { return Time(v * 1000); }
  static constexpr Time ms(int64_t v) { return Time(v * 1000000); }
  static constexpr Time sec(int64_t v) { return Time(v * 1000000000); }
  static constexpr Time zero() { return Time(0); }
  static constexpr Time infinite() { return Time(std::numeric_limits<int64_t>::max()); }
  // Nearest nanosecond. Conversions saturate at kMaxFinite (about 146 years) so that a rate close
  // to zero gives a far-future time instead of an overflow.
  static Time from_seconds(double s) { return Time(saturate(std::nearbyint(s * 1e9))); }
  // Smallest whole nanosecond not before s (a hair of slack absorbs floating-point noise).
  static Time from_seconds_ceil(double s) { return Time(saturate(std::ceil(s * 1e9 - 1e-6))); }
  static constexpr int64_t kMaxFinite = int64_t{1} << 62;

  constexpr int64_t count_ns() const { return ns_; }
  constexpr double seconds() const { return static_cast<double>(ns_) * 1e-9; }
  constexpr double microseconds() const { return static_cast<double>(ns_) * 1e-3; }
  constexpr bool is_infinite() const { return ns_ == std::numeric_limits<int64_t>::max(); }

  // Arithmetic saturates instead of wrapping: a sum past the int64 range is infinite() (or its
  // negative), so far-future times stay far in the future; Simulation::run refuses events at or
  // past kMaxFinite with a clear error.
  constexpr auto operator<=>(const Time&) const = default;
  constexpr Time operator+(Time o) const { return Time(sat_add(ns_, o.ns_)); }
  constexpr Time operator-(Time o) const { return Time(sat_sub(ns_, o.ns_)); }
  constexpr Time& operator+=(Time o) { ns_ = sat_add(ns_, o.ns_); return *this; }
  constexpr Time& operator-=(Time o) { ns_ = sat_sub(ns_, o.ns_); return *this; }
  constexpr Time operator*(int64_t k) const {
    int64_t r = 0;
    if (__builtin_mul_overflow(ns_, k, &r)) return Time((ns_ < 0) != (k < 0) ? kMin : kMax);
    return Time(r);
  }

 private:
  constexpr explicit Time(int64_t v) : ns_(v) {}
  static constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  static constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  static constexpr int64_t sat_add(int64_t a, int64_t b) {
    int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r)) return b > 0 ? kMax : kMin;
    return r;
  }
  static constexpr int64_t sat_sub(int64_t a, int64_t b) {
    int64_t r = 0;
    if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? kMax : kMin;
    return r;
  }
  static int64_t saturate(double ns) {
    if (!(ns < static_cast<double>(kMaxFinite))) return kMaxFinite;  // also catches NaN and +inf
    if (ns < -static_cast<double>(kMaxFinite)) return -kMaxFinite;
    return static_cast<int64_t>(ns);
  }
  int64_t ns_ = 0;
};

}  // namespace sim
