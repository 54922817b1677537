// sim/units.h: parsing and printing of quantities written with units in scenarios and on the
// command line ("400Gbps", "3.35TB/s", "80GiB", "989TFLOPS", "1.5us").
// Units: bandwidths are returned in bytes per second, sizes in bytes, FLOP rates in FLOP/s,
// FLOP counts in FLOPs, durations as sim::Time (nearest nanosecond).
// Decimal prefixes (k/K, M, G, T, P, E) are powers of 1000, binary prefixes (Ki, Mi, Gi, Ti, Pi)
// powers of 1024: "1GB" and "1GiB" differ exactly. Bit rates (bps, b/s) are divided by 8.
// Invariants: every parser either returns a finite, non-negative value or throws ConfigError
// with a message quoting the bad text and naming the accepted units. Spaces between the number
// and the unit are allowed; scientific notation is allowed; NaN, inf and negatives are not.
#pragma once

#include <string>
#include <string_view>

#include "sim/time.h"

namespace sim {

// "400Gbps", "10Gb/s", "450GB/s", "12.8GiB/s", "900MB/s", "5B/s" -> bytes per second.
double parse_bandwidth(std::string_view text);
// "80GiB", "141GB", "4KB", "512B", "512" (a plain number is bytes) -> bytes.
double parse_bytes(std::string_view text);
// "989TFLOPS", "312TFLOP/s" -> FLOP/s. "459TF" is refused: it could be a count or a rate.
double parse_flop_rate(std::string_view text);
// "3.8e25FLOP", "1.2PFLOP", "1e18" (a plain number is FLOPs) -> FLOPs.
double parse_flops(std::string_view text);
// "10ns", "1.5us", "1.5µs", "2ms", "1s", "5min", "3h", "54d" -> Time. A plain number is refused:
// the unit of a bare duration is a guess nobody should have to make.
Time parse_duration(std::string_view text);

// Printing for people (summaries, logs), up to 3 significant digits; not meant to round-trip.
// format_bytes uses binary units ("1 GiB", "256 MiB", "4 KiB", "512 B"), format_bandwidth decimal
// ones ("450 GB/s"), format_duration picks ns/us/ms/s/min/h/d ("1.23 ms", "12.6 s").
std::string format_bytes(double bytes);
// "1 node", "8 nodes": n and the noun in its number.
std::string count_noun(uint64_t n, const char* one, const char* many);
std::string format_bandwidth(double bytes_per_second);
std::string format_duration(Time t);

}  // namespace sim
