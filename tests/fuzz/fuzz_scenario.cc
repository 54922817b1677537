// libFuzzer target: YAML text -> a bound scenario (every key checked, the topology built). Bad
// input must end as sim::UserError (exit 2 in the CLI); anything else (an assertion, a signal, a
// sanitizer report, a timeout, a leak) is a bug. Build and run with scripts/fuzz.sh.
// Clusters whose network would need more than 16 MB (about 2,000 GPUs) are refused by the memory
// estimate before they are built, as `--max-memory` does: building the example scenarios' 16k-GPU
// fabrics held the target to 40 inputs/s; with the cap it runs about 700/s and reaches more
// code (libFuzzer's coverage 3,253 against 3,161 in the same minute). Big clusters are the
// battery's and the set-up limits' business.
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
                                        /*max_memory_bytes=*/16ull << 20);
    sc.doc.check_all_used();
  } catch (const sim::UserError&) {
  }
  return 0;
}
