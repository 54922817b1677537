#include "workloads/job/job.h"
#include "workloads/job/kinds.h"

namespace wl {

std::span<const WorkloadKind> workload_kinds() {
  static constexpr WorkloadKind kKinds[] = {
      {"collectives", "nccl-tests style benchmark of collectives (workloads/collectives/benchmark.h)",
       &bind_collectives_job},
      {"training", "one training step of a transformer (workloads/training/)", &bind_training_job},
      {"diloco", "DiLoCo: an island's inner step, then outer rounds across islands (workloads/diloco/)",
       &bind_diloco_job},
      {"campaign", "days to months of a training job under random failures: checkpoints, restarts, spares (workloads/campaign/)",
       &bind_campaign_job},
  };
  return kKinds;
}

}  // namespace wl
