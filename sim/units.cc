// sim/units.cc: quantity parsing by table lookup of "<prefix><base unit>" suffixes.
#include "sim/units.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <span>

#include "sim/error.h"

namespace sim {

std::string count_noun(uint64_t n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); }
namespace {

struct Prefix {
  std::string_view text;
  double factor;
};

// "K" is accepted as kilo because "4KB" is how sizes are commonly written; binary prefixes are
// always the explicit "Ki".."Pi" so that a GB is never silently a GiB.
constexpr Prefix kNoPrefix[] = {{"", 1.0}};
constexpr Prefix kDecimalPrefixes[] = {{"", 1.0},   {"k", 1e3},  {"K", 1e3},  {"M", 1e6},
                                       {"G", 1e9},  {"T", 1e12}, {"P", 1e15}, {"E", 1e18}};
constexpr Prefix kAllPrefixes[] = {
    {"", 1.0},   {"k", 1e3},  {"K", 1e3},  {"M", 1e6},  {"G", 1e9},
    {"T", 1e12}, {"P", 1e15}, {"E", 1e18}, {"Ki", 1024.0},
    {"Mi", 1024.0 * 1024.0},  {"Gi", 1024.0 * 1024.0 * 1024.0},
    {"Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0},
    {"Pi", 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0}};

struct BaseUnit {
  std::string_view text;
  double factor;  // value of one base unit in the result unit
  std::span<const Prefix> prefixes;
};

struct QuantityKind {
  std::string_view name;  // as in 'bad <name> "...": ...' and '<name> must not be negative'
  std::span<const BaseUnit> units;
  bool plain_number_ok;
  std::string_view hint;  // completes "expected ..."
};

// Bit rates only take decimal prefixes: nobody quotes links in Gibit/s, and refusing it keeps
// "Gib" from being a typo that parses.
constexpr BaseUnit kBandwidthUnits[] = {{"bps", 1.0 / 8.0, kDecimalPrefixes},
                                        {"b/s", 1.0 / 8.0, kDecimalPrefixes},
                                        {"B/s", 1.0, kAllPrefixes}};
constexpr BaseUnit kByteUnits[] = {{"B", 1.0, kAllPrefixes}};
constexpr BaseUnit kFlopRateUnits[] = {{"FLOPS", 1.0, kDecimalPrefixes},
                                       {"FLOP/s", 1.0, kDecimalPrefixes}};
constexpr BaseUnit kFlopUnits[] = {{"FLOP", 1.0, kDecimalPrefixes}};
// Factors in nanoseconds, so that whole numbers of any unit convert exactly.
constexpr BaseUnit kDurationUnits[] = {
    {"ns", 1.0, kNoPrefix},      {"us", 1e3, kNoPrefix},      {"\u00b5s", 1e3, kNoPrefix},
    {"ms", 1e6, kNoPrefix},      {"s", 1e9, kNoPrefix},       {"min", 60e9, kNoPrefix},
    {"h", 3600e9, kNoPrefix},    {"d", 86400e9, kNoPrefix}};

constexpr QuantityKind kBandwidth{"bandwidth", kBandwidthUnits, false,
                                  "a number and a unit such as Gbps, GB/s or GiB/s"};
constexpr QuantityKind kBytes{"size", kByteUnits, true,
                              "a number of bytes, optionally with a unit such as KB, MiB, GB or GiB"};
constexpr QuantityKind kFlopRate{"FLOP rate", kFlopRateUnits, false,
                                 "a number and a unit such as TFLOPS or TFLOP/s"};
constexpr QuantityKind kFlops{"FLOP count", kFlopUnits, true,
                              "a number of FLOPs, optionally with a unit such as TFLOP or PFLOP"};
constexpr QuantityKind kDuration{"duration", kDurationUnits, false,
                                 "a number and a unit such as ns, us, ms, s, min, h or d"};

bool is_space(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

[[noreturn]] void bad(const QuantityKind& kind, std::string_view text) {
  throw ConfigError("bad " + std::string(kind.name) + " \"" + std::string(text) + "\": expected " +
                    std::string(kind.hint));
}

// Length of the leading decimal number ([+-]digits[.digits][e[+-]digits]); 0 if none. An 'e' or
// 'E' only belongs to the number when digits follow, so "5EFLOP" is 5 exaFLOP.
size_t number_length(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t digits = 0;
  while (i < s.size() && is_digit(s[i])) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i, ++digits;
  }
  if (digits == 0) return 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    if (j < s.size() && is_digit(s[j])) {
      while (j < s.size() && is_digit(s[j])) ++j;
      i = j;
    }
  }
  return i;
}

// The value of `text` in the result unit of `kind` (bytes/s, bytes, FLOP/s, FLOPs, ns).
double parse_quantity(const QuantityKind& kind, std::string_view original) {
  std::string_view text = trim(original);
  size_t n = number_length(text);
  if (n == 0) bad(kind, original);
  std::string_view number = text.substr(0, n);
  std::string_view unit = trim(text.substr(n));
  bool negative = number.front() == '-';
  if (number.front() == '+' || negative) number.remove_prefix(1);

  double value = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec == std::errc::result_out_of_range) {
    throw ConfigError(std::string(kind.name) + " \"" + std::string(original) + "\" is out of range");
  }
  if (ec != std::errc() || end != number.data() + number.size()) bad(kind, original);

  double factor = 0;
  if (unit.empty()) {
    if (!kind.plain_number_ok) bad(kind, original);
    factor = 1.0;
  } else {
    for (const BaseUnit& base : kind.units) {
      if (unit.size() < base.text.size() || !unit.ends_with(base.text)) continue;
      std::string_view prefix = unit.substr(0, unit.size() - base.text.size());
      for (const Prefix& p : base.prefixes) {
        if (p.text == prefix) factor = p.factor * base.factor;
      }
      if (factor != 0) break;
    }
    if (factor == 0) bad(kind, original);
  }
  if (negative && value != 0) {
    throw ConfigError(std::string(kind.name) + " must not be negative, got \"" +
                      std::string(original) + "\"");
  }
  double result = value * factor;
  if (!std::isfinite(result)) {
    throw ConfigError(std::string(kind.name) + " \"" + std::string(original) + "\" is out of range");
  }
  return result;
}

// Rounds to 3 significant digits and prints without trailing zeros: 1.5, 256, 12.6, 0.5.
std::string three_digits(double v) {
  if (v == 0) return "0";
  int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(v))));
  int decimals = std::max(0, 2 - magnitude);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

double round_three_digits(double v) {
  if (v == 0) return 0;
  double scale = std::pow(10.0, 2 - std::floor(std::log10(std::fabs(v))));
  return std::round(v * scale) / scale;
}

struct DisplayUnit {
  std::string_view name;
  double size;
};

// Picks the largest unit not above |value|, then moves up one unit when rounding reaches the
// next one (999.7 MB/s prints as "1 GB/s", not "1000 MB/s").
std::string format_scaled(double value, std::span<const DisplayUnit> units, double step) {
  if (std::isnan(value)) return "nan";
  std::string sign = value < 0 ? "-" : "";
  double mag = std::fabs(value);
  if (std::isinf(mag)) return sign + "inf";
  size_t u = 0;
  while (u + 1 < units.size() && mag >= units[u + 1].size) ++u;
  double scaled = round_three_digits(mag / units[u].size);
  if (u + 1 < units.size() && scaled >= step && units[u + 1].size / units[u].size == step) {
    ++u;
    scaled = round_three_digits(mag / units[u].size);
  }
  return sign + three_digits(scaled) + " " + std::string(units[u].name);
}

}  // namespace

// Rates and sizes the engine can represent: a positive rate below 1 per second makes a step
// outlast the 2^62 ns (146 years) of Time; a size above 2^63 bytes overflows byte counts.
namespace {
double positive_rate_at_least_one(double v, std::string_view text, const char* what) {
  if (v > 0 && v < 1.0)
    throw ConfigError(std::string(what) + " \"" + std::string(text) +
                      "\" is below 1 per second: at that rate a step would outlast the 146 years the simulator "
                      "represents");
  return v;
}
}  // namespace

double parse_bandwidth(std::string_view text) {
  return positive_rate_at_least_one(parse_quantity(kBandwidth, text), text, "bandwidth");
}
double parse_bytes(std::string_view text) {
  const double b = parse_quantity(kBytes, text);
  if (std::abs(b) >= 9223372036854775808.0)  // 2^63: an int64 byte count must hold it
    throw ConfigError("size \"" + std::string(text) + "\" is out of range (below 2^63 bytes, 8 EiB)");
  return b;
}
double parse_flop_rate(std::string_view text) {
  return positive_rate_at_least_one(parse_quantity(kFlopRate, text), text, "FLOP rate");
}
double parse_flops(std::string_view text) { return parse_quantity(kFlops, text); }

Time parse_duration(std::string_view text) {
  double ns = parse_quantity(kDuration, text);
  // Time holds int64 nanoseconds and saturates at 2^62 ns (about 146 years): a longer duration, or
  // one that rounds to 0 without being 0, is not what the user meant.
  if (std::abs(ns) >= static_cast<double>(Time::kMaxFinite)) {
    throw ConfigError("duration \"" + std::string(text) + "\" is out of range (at most 146 years, 2^62 ns)");
  }
  if (ns != 0 && std::abs(ns) < 0.5) {
    throw ConfigError("duration \"" + std::string(text) + "\" is below the simulator's resolution of 1 ns");
  }
  return Time::ns(static_cast<int64_t>(std::llround(ns)));
}

std::string format_bytes(double bytes) {
  static constexpr DisplayUnit kUnits[] = {{"B", 1.0},
                                           {"KiB", 1024.0},
                                           {"MiB", 1024.0 * 1024.0},
                                           {"GiB", 1024.0 * 1024.0 * 1024.0},
                                           {"TiB", 1024.0 * 1024.0 * 1024.0 * 1024.0},
                                           {"PiB", 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0}};
  return format_scaled(bytes, kUnits, 1024.0);
}

std::string format_bandwidth(double bytes_per_second) {
  static constexpr DisplayUnit kUnits[] = {{"B/s", 1.0},   {"kB/s", 1e3},  {"MB/s", 1e6},
                                           {"GB/s", 1e9},  {"TB/s", 1e12}, {"PB/s", 1e15}};
  return format_scaled(bytes_per_second, kUnits, 1000.0);
}

std::string format_duration(Time t) {
  if (t.is_infinite()) return "inf";
  // Seconds stay seconds up to two minutes and so on: "90 s" reads better than "1.5 min".
  static constexpr DisplayUnit kUnits[] = {{"ns", 1.0},      {"us", 1e3},       {"ms", 1e6},
                                           {"s", 1e9},       {"min", 120e9},    {"h", 7200e9},
                                           {"d", 48 * 3600e9}};
  static constexpr double kUnitSize[] = {1.0, 1e3, 1e6, 1e9, 60e9, 3600e9, 86400e9};
  double ns = static_cast<double>(t.count_ns());
  std::string sign = ns < 0 ? "-" : "";
  double mag = std::fabs(ns);
  size_t u = 0;
  while (u + 1 < std::size(kUnits) && mag >= kUnits[u + 1].size) ++u;
  double scaled = round_three_digits(mag / kUnitSize[u]);
  // Up to seconds the units step by 1000: let rounding carry over ("999.7 us" -> "1 ms").
  if (u < 3 && scaled >= 1000.0) {
    ++u;
    scaled = round_three_digits(mag / kUnitSize[u]);
  }
  return sign + three_digits(scaled) + " " + std::string(kUnits[u].name);
}

}  // namespace sim
