// Tests for sim/units.h: every expected value is worked out by hand in the comment next to it.
#include "sim/units.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/error.h"

namespace sim {
namespace {

// The message of the ConfigError thrown by f, or "" if none was thrown.
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(UnitsBandwidth, BitRates) {
  // 400Gbps = 400e9 bit/s / 8 = 5e10 B/s
  EXPECT_DOUBLE_EQ(parse_bandwidth("400Gbps"), 5e10);
  // 100Mbps = 100e6 / 8 = 1.25e7 B/s
  EXPECT_DOUBLE_EQ(parse_bandwidth("100Mbps"), 1.25e7);
  // 1.6Tbps = 1.6e12 / 8 = 2e11 B/s
  EXPECT_DOUBLE_EQ(parse_bandwidth("1.6Tbps"), 2e11);
  // 10Gb/s = 10e9 / 8 = 1.25e9 B/s
  EXPECT_DOUBLE_EQ(parse_bandwidth("10Gb/s"), 1.25e9);
  // 8kbps = 8e3 / 8 = 1000 B/s
  EXPECT_DOUBLE_EQ(parse_bandwidth("8kbps"), 1000.0);
}

TEST(UnitsBandwidth, ByteRates) {
  // 450GB/s = 450e9 B/s
  EXPECT_DOUBLE_EQ(parse_bandwidth("450GB/s"), 450e9);
  // 3.35TB/s = 3.35e12 B/s
  EXPECT_DOUBLE_EQ(parse_bandwidth("3.35TB/s"), 3.35e12);
  // 12.8GiB/s = 12.8 * 2^30 = 12.8 * 1073741824 = 13743895347.2 B/s
  EXPECT_DOUBLE_EQ(parse_bandwidth("12.8GiB/s"), 13743895347.2);
  // 900MB/s = 9e8 B/s
  EXPECT_DOUBLE_EQ(parse_bandwidth("900MB/s"), 9e8);
  // 7B/s = 7 B/s
  EXPECT_DOUBLE_EQ(parse_bandwidth("7B/s"), 7.0);
  // 1MiB/s = 2^20 = 1048576 B/s; differs from 1MB/s = 1e6
  EXPECT_DOUBLE_EQ(parse_bandwidth("1MiB/s"), 1048576.0);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1MB/s"), 1e6);
}

TEST(UnitsBandwidth, SpacesAndScientificNotation) {
  // "400 Gbps" = 400Gbps = 5e10 B/s
  EXPECT_DOUBLE_EQ(parse_bandwidth("400 Gbps"), 5e10);
  // " 4.5e2 GB/s " = 450e9 B/s
  EXPECT_DOUBLE_EQ(parse_bandwidth(" 4.5e2 GB/s "), 450e9);
  // 5e10B/s = 5e10 B/s
  EXPECT_DOUBLE_EQ(parse_bandwidth("5e10B/s"), 5e10);
  // +8bps = 1 B/s
  EXPECT_DOUBLE_EQ(parse_bandwidth("+8bps"), 1.0);
  // 0GB/s = 0
  EXPECT_DOUBLE_EQ(parse_bandwidth("0GB/s"), 0.0);
}

TEST(UnitsBandwidth, Errors) {
  EXPECT_EQ(error_of([] { parse_bandwidth("40Gbs"); }),
            "bad bandwidth \"40Gbs\": expected a number and a unit such as Gbps, GB/s or GiB/s");
  EXPECT_EQ(error_of([] { parse_bandwidth("-5GB/s"); }),
            "bandwidth must not be negative, got \"-5GB/s\"");
  EXPECT_EQ(error_of([] { parse_bandwidth(""); }),
            "bad bandwidth \"\": expected a number and a unit such as Gbps, GB/s or GiB/s");
  // A plain number has no unit to tell bits from bytes.
  EXPECT_NE(error_of([] { parse_bandwidth("100"); }).find("bad bandwidth \"100\""), std::string::npos);
  EXPECT_NE(error_of([] { parse_bandwidth("nan GB/s"); }).find("bad bandwidth"), std::string::npos);
  EXPECT_NE(error_of([] { parse_bandwidth("inf"); }).find("bad bandwidth"), std::string::npos);
  EXPECT_NE(error_of([] { parse_bandwidth("GB/s"); }).find("bad bandwidth"), std::string::npos);
  // Binary prefixes on bit rates and lower-case byte units are refused, not guessed.
  EXPECT_NE(error_of([] { parse_bandwidth("1Gibps"); }).find("bad bandwidth"), std::string::npos);
  EXPECT_NE(error_of([] { parse_bandwidth("1gb/s"); }).find("bad bandwidth"), std::string::npos);
  EXPECT_NE(error_of([] { parse_bandwidth("1.2.3GB/s"); }).find("bad bandwidth"), std::string::npos);
  // 1e308TB/s = 1e320 B/s overflows a double.
  EXPECT_EQ(error_of([] { parse_bandwidth("1e308TB/s"); }), "bandwidth \"1e308TB/s\" is out of range");
  EXPECT_EQ(error_of([] { parse_bandwidth("1e999GB/s"); }), "bandwidth \"1e999GB/s\" is out of range");
}

TEST(UnitsBytes, DecimalAndBinary) {
  // 80GiB = 80 * 2^30 = 85899345920
  EXPECT_DOUBLE_EQ(parse_bytes("80GiB"), 85899345920.0);
  // 141GB = 141e9
  EXPECT_DOUBLE_EQ(parse_bytes("141GB"), 141e9);
  // 1MiB = 2^20 = 1048576
  EXPECT_DOUBLE_EQ(parse_bytes("1MiB"), 1048576.0);
  // 4KB = 4e3 (K is decimal kilo); 4KiB = 4096
  EXPECT_DOUBLE_EQ(parse_bytes("4KB"), 4000.0);
  EXPECT_DOUBLE_EQ(parse_bytes("4kB"), 4000.0);
  EXPECT_DOUBLE_EQ(parse_bytes("4KiB"), 4096.0);
  // 512B = 512; plain 512 = 512 bytes
  EXPECT_DOUBLE_EQ(parse_bytes("512B"), 512.0);
  EXPECT_DOUBLE_EQ(parse_bytes("512"), 512.0);
  // 1TiB = 2^40 = 1099511627776; 2PiB = 2 * 2^50 = 2251799813685248
  EXPECT_DOUBLE_EQ(parse_bytes("1TiB"), 1099511627776.0);
  EXPECT_DOUBLE_EQ(parse_bytes("2PiB"), 2251799813685248.0);
  // 1.5 GiB = 1.5 * 1073741824 = 1610612736
  EXPECT_DOUBLE_EQ(parse_bytes("1.5 GiB"), 1610612736.0);
}

TEST(UnitsBytes, Errors) {
  EXPECT_EQ(error_of([] { parse_bytes("80Gib"); }),
            "bad size \"80Gib\": expected a number of bytes, optionally with a unit such as KB, "
            "MiB, GB or GiB");
  EXPECT_EQ(error_of([] { parse_bytes("-1GiB"); }), "size must not be negative, got \"-1GiB\"");
  EXPECT_NE(error_of([] { parse_bytes(""); }).find("bad size \"\""), std::string::npos);
  EXPECT_NE(error_of([] { parse_bytes("GiB"); }).find("bad size"), std::string::npos);
  EXPECT_NE(error_of([] { parse_bytes("nan"); }).find("bad size"), std::string::npos);
  EXPECT_NE(error_of([] { parse_bytes("1GB/s"); }).find("bad size"), std::string::npos);
}

TEST(UnitsFlops, Rates) {
  // 989TFLOPS = 989e12 FLOP/s
  EXPECT_DOUBLE_EQ(parse_flop_rate("989TFLOPS"), 989e12);
  // 1.979PFLOPS = 1.979e15 FLOP/s
  EXPECT_DOUBLE_EQ(parse_flop_rate("1.979PFLOPS"), 1.979e15);
  // 312TFLOP/s = 312e12 FLOP/s
  EXPECT_DOUBLE_EQ(parse_flop_rate("312TFLOP/s"), 312e12);
  // 5EFLOPS = 5e18: the 'E' is the exa prefix, not an exponent, because no digit follows it.
  EXPECT_DOUBLE_EQ(parse_flop_rate("5EFLOPS"), 5e18);
}

TEST(UnitsFlops, RateErrors) {
  EXPECT_EQ(error_of([] { parse_flop_rate("459TF"); }),
            "bad FLOP rate \"459TF\": expected a number and a unit such as TFLOPS or TFLOP/s");
  EXPECT_NE(error_of([] { parse_flop_rate("989"); }).find("bad FLOP rate"), std::string::npos);
  EXPECT_NE(error_of([] { parse_flop_rate("989TFLOP"); }).find("bad FLOP rate"), std::string::npos);
  EXPECT_EQ(error_of([] { parse_flop_rate("-1TFLOPS"); }),
            "FLOP rate must not be negative, got \"-1TFLOPS\"");
}

TEST(UnitsFlops, Counts) {
  // 3.8e25FLOP = 3.8e25
  EXPECT_DOUBLE_EQ(parse_flops("3.8e25FLOP"), 3.8e25);
  // 1.2PFLOP = 1.2e15
  EXPECT_DOUBLE_EQ(parse_flops("1.2PFLOP"), 1.2e15);
  // plain 1e18 = 1e18 FLOPs
  EXPECT_DOUBLE_EQ(parse_flops("1e18"), 1e18);
  EXPECT_NE(error_of([] { parse_flops("1.2PFLOPS"); }).find("bad FLOP count"), std::string::npos);
  EXPECT_EQ(error_of([] { parse_flops("-3FLOP"); }), "FLOP count must not be negative, got \"-3FLOP\"");
}

TEST(UnitsDuration, AllUnits) {
  // 1.5us = 1500 ns
  EXPECT_EQ(parse_duration("1.5us").count_ns(), 1500);
  // 1.5µs = 1500 ns (micro sign spelling)
  EXPECT_EQ(parse_duration("1.5\u00b5s").count_ns(), 1500);
  // 10ns = 10 ns
  EXPECT_EQ(parse_duration("10ns").count_ns(), 10);
  // 2ms = 2e6 ns
  EXPECT_EQ(parse_duration("2ms").count_ns(), 2000000);
  // 1s = 1e9 ns
  EXPECT_EQ(parse_duration("1s").count_ns(), 1000000000);
  // 5min = 300 s = 3e11 ns
  EXPECT_EQ(parse_duration("5min").count_ns(), 300000000000);
  // 3h = 10800 s = 1.08e13 ns
  EXPECT_EQ(parse_duration("3h").count_ns(), 10800000000000);
  // 54d = 54 * 86400 s = 4665600 s = 4.6656e15 ns
  EXPECT_EQ(parse_duration("54d").count_ns(), 4665600000000000);
  // "2.5 ms" = 2.5e6 ns
  EXPECT_EQ(parse_duration("2.5 ms").count_ns(), 2500000);
  // 1e3ns = 1000 ns
  EXPECT_EQ(parse_duration("1e3ns").count_ns(), 1000);
}

TEST(UnitsDuration, RoundsToNearestNanosecond) {
  // 1.4ns -> 1 ns, 1.6ns -> 2 ns, 0.0015us = 1.5 ns -> 2 ns (half away from zero)
  EXPECT_EQ(parse_duration("1.4ns").count_ns(), 1);
  EXPECT_EQ(parse_duration("1.6ns").count_ns(), 2);
  EXPECT_EQ(parse_duration("0.0015us").count_ns(), 2);
}

TEST(UnitsDuration, Errors) {
  EXPECT_EQ(error_of([] { parse_duration("5"); }),
            "bad duration \"5\": expected a number and a unit such as ns, us, ms, s, min, h or d");
  EXPECT_EQ(error_of([] { parse_duration("-1s"); }), "duration must not be negative, got \"-1s\"");
  EXPECT_NE(error_of([] { parse_duration("5sec"); }).find("bad duration"), std::string::npos);
  EXPECT_NE(error_of([] { parse_duration("5 hours"); }).find("bad duration"), std::string::npos);
  EXPECT_NE(error_of([] { parse_duration(""); }).find("bad duration"), std::string::npos);
  // 1e6d = 8.64e10 s, about 2700 years: beyond int64 nanoseconds (292 years).
  EXPECT_NE(error_of([] { parse_duration("1e6d"); }).find("out of range"), std::string::npos);
}

TEST(UnitsFormat, Bytes) {
  // 2^30 = 1 GiB; 256 * 2^20 = 256 MiB; 4096 = 4 KiB; 512 = 512 B
  EXPECT_EQ(format_bytes(1073741824.0), "1 GiB");
  EXPECT_EQ(format_bytes(268435456.0), "256 MiB");
  EXPECT_EQ(format_bytes(4096.0), "4 KiB");
  EXPECT_EQ(format_bytes(512.0), "512 B");
  EXPECT_EQ(format_bytes(0.0), "0 B");
  // 80e9 / 2^30 = 74.505... -> 3 digits: "74.5 GiB"
  EXPECT_EQ(format_bytes(80e9), "74.5 GiB");
  // 1.5 * 2^30 -> "1.5 GiB"; 1.2345 * 2^20 -> "1.23 MiB"
  EXPECT_EQ(format_bytes(1610612736.0), "1.5 GiB");
  EXPECT_EQ(format_bytes(1.2345 * 1048576.0), "1.23 MiB");
}

TEST(UnitsFormat, Bandwidth) {
  // 450e9 -> "450 GB/s"; 5e10 -> "50 GB/s"; 3.35e12 -> "3.35 TB/s"; 12.5e6 -> "12.5 MB/s"
  EXPECT_EQ(format_bandwidth(450e9), "450 GB/s");
  EXPECT_EQ(format_bandwidth(5e10), "50 GB/s");
  EXPECT_EQ(format_bandwidth(3.35e12), "3.35 TB/s");
  EXPECT_EQ(format_bandwidth(12.5e6), "12.5 MB/s");
  EXPECT_EQ(format_bandwidth(100.0), "100 B/s");
  // 999.7e6 rounds to 1000 MB/s at 3 digits, printed as the next unit: "1 GB/s"
  EXPECT_EQ(format_bandwidth(999.7e6), "1 GB/s");
}

TEST(UnitsFormat, Duration) {
  // 1234567 ns = 1.234567 ms -> "1.23 ms"; 12.6e9 ns -> "12.6 s"
  EXPECT_EQ(format_duration(Time::ns(1234567)), "1.23 ms");
  EXPECT_EQ(format_duration(Time::ns(12600000000)), "12.6 s");
  EXPECT_EQ(format_duration(Time::ns(10)), "10 ns");
  EXPECT_EQ(format_duration(Time::ns(1500)), "1.5 us");
  // 999999 ns = 999.999 us -> rounds to 1000 us -> "1 ms"
  EXPECT_EQ(format_duration(Time::ns(999999)), "1 ms");
  // 5 min = 300 s (>= 120 s) -> "5 min"; 3 h = 180 min (>= 120 min) -> "3 h"; 54 d -> "54 d"
  EXPECT_EQ(format_duration(Time::sec(300)), "5 min");
  EXPECT_EQ(format_duration(Time::sec(10800)), "3 h");
  EXPECT_EQ(format_duration(Time::sec(54 * 86400)), "54 d");
  EXPECT_EQ(format_duration(Time::infinite()), "inf");
}

// What the engine can represent (reliability battery r01, r04, c18, w13, w14, w35, p30, and the
// nic_latency overflow): sizes stay below 2^63 bytes (an int64 byte count); a positive rate below 1 per second is
// refused (a 1 MiB transfer at 1e-30 B/s would take 1e36 s); durations stay under 2^62 ns
// (4.61e18 ns, 146 years: 100000 d = 8.64e18 ns is over) and at or above 1 ns unless 0.
TEST(UnitsRange, WhatTheEngineCannotRepresentIsRefused) {
  EXPECT_EQ(parse_bytes("4611686018427387904"), 4611686018427387904.0);  // 2^62: accepted
  EXPECT_NE(error_of([] { parse_bytes("9223372036854775808"); }).find("below 2^63 bytes"), std::string::npos);
  EXPECT_NE(error_of([] { parse_bytes("1e30"); }).find("below 2^63 bytes"), std::string::npos);
  EXPECT_NE(error_of([] { parse_bytes("1.7e308"); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([] { parse_bandwidth("1e-30B/s"); }).find("below 1 per second"), std::string::npos);
  EXPECT_EQ(parse_bandwidth("1B/s"), 1.0);
  EXPECT_EQ(parse_bandwidth("0B/s"), 0.0);  // zero is the binding's to refuse, naming the key
  EXPECT_NE(error_of([] { parse_flop_rate("1e-300FLOPS"); }).find("below 1 per second"), std::string::npos);
  EXPECT_NE(error_of([] { parse_duration("100000d"); }).find("at most 146 years"), std::string::npos);
  EXPECT_EQ(parse_duration("50000d").count_ns(), 50000LL * 86400 * 1000000000);  // 4.32e18 < 2^62
  EXPECT_NE(error_of([] { parse_duration("0.0001ns"); }).find("resolution of 1 ns"), std::string::npos);
  EXPECT_EQ(parse_duration("0ns").count_ns(), 0);
  EXPECT_EQ(parse_duration("0.5ns").count_ns(), 1);  // rounds to the nearest nanosecond
}

}  // namespace
}  // namespace sim
