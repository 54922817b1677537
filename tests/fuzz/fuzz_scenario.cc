// libFuzzer target: YAML text -> a bound scenario (every key checked, the topology built). Bad
// input must end as sim::UserError (exit 2 in the CLI); anything else (an assertion, a signal, a
// sanitizer report, a timeout, a leak) is a bug. Build and run with scripts/fuzz.sh.
// Clusters whose network model would need more than 1 MiB (1,024 accelerators at 1 KiB each) are
// refused by the memory estimate before they are built, as `--max-memory` does. Binding is the
// same code for any size; building big fabrics only slows the fuzzer: with the example scenarios'
// 16k-GPU fabrics it ran 40 inputs/s, with a 16 MiB cap 174/s over 45 minutes (an 8,096-GPU input
// took 370 ms); with 1 MiB, 10^6 inputs ran clean at 147/s on average on a shared machine
// (README, Fuzzing). Big clusters are the battery's and the set-up limits' business.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/config.h"
#include "sim/error.h"
#include "workloads/job/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    wl::Scenario sc = wl::bind_scenario(sim::ConfigDoc::load_string(text, "<fuzz>"), "fuzz", true,
                                        /*max_memory_bytes=*/1ull << 20);
    sc.doc.check_all_used();
  } catch (const sim::UserError&) {
  }
  return 0;
}
