// libFuzzer target: YAML text -> a bound scenario and, for clusters of at most 64 GPUs, the job's
// set-up (resources, programs; nothing simulated). Slower than fuzz_scenario (binding alone). Bad input must end as sim::UserError (exit 2
// in the CLI); anything else (an assertion, a signal, a sanitizer report, a timeout, a leak) is a
// bug. Build and run with scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/config.h"
#include "sim/error.h"
#include "sim/simulation.h"
#include "topology/cluster_resources.h"
#include "workloads/job/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    wl::Scenario sc = wl::bind_scenario(sim::ConfigDoc::load_string(text, "<fuzz>"), "fuzz", true,
                                        /*max_memory_bytes=*/256ull << 20);
    sc.doc.check_all_used();
    if (sc.topology->num_gpus() <= 64) {
      sim::Simulation sim(sc.seed);
      wl::JobContext ctx;
      // As run_scenario does: the job prepared first, its resources for the GPUs it models.
      std::vector<uint8_t> modelled = sc.job->prepare(sim, *sc.topology, sc.cluster.gpu, sc.cluster.profile, ctx);
      topo::ClusterResources res(sim, *sc.topology, sc.cluster.gpu, sc.cluster.profile, std::move(modelled));
      sc.job->start(res, ctx);
      sc.job.reset();  // a started job refers to `res`: it goes first
    }
  } catch (const sim::UserError&) {
  }
  return 0;
}
