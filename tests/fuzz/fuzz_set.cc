// libFuzzer target: a `--set KEY=VALUE` override (any text) applied to the built-in default
// scenario, then the binding, as `clustersim run --set ... --check` does.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/config.h"
#include "sim/error.h"
#include "workloads/job/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    sim::ConfigDoc doc = sim::ConfigDoc::load_string(wl::default_scenario_yaml(), "<default scenario>");
    doc.apply_override(text);
    wl::Scenario sc = wl::bind_scenario(std::move(doc), "default", true, /*max_memory_bytes=*/256ull << 20);
    sc.doc.check_all_used();
  } catch (const sim::UserError&) {
  }
  return 0;
}
