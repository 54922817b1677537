// libFuzzer target: the unit parser (sim/units.h) on any text. A bad quantity must be a
// sim::UserError; an accepted one must be finite and within the representable range.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sim/error.h"
#include "sim/units.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto finite = [](double v) {
    if (!std::isfinite(v) || v < 0) std::abort();  // accepted values are finite and not negative
  };
  try { finite(sim::parse_bandwidth(text)); } catch (const sim::UserError&) {}
  try { finite(sim::parse_bytes(text)); } catch (const sim::UserError&) {}
  try { finite(sim::parse_flop_rate(text)); } catch (const sim::UserError&) {}
  try { finite(sim::parse_flops(text)); } catch (const sim::UserError&) {}
  try {
    const sim::Time t = sim::parse_duration(text);
    if (t < sim::Time::zero()) std::abort();
  } catch (const sim::UserError&) {}
  return 0;
}
