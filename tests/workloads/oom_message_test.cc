// The out-of-memory message (wl::describe_oom): the worst stage in full, the others in one clause,
// and what shrinks the largest part.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "workloads/training/step.h"

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

wl::StageMemory stage(int64_t s, double params_gib, double activations_gib, int32_t in_flight) {
  wl::StageMemory m;
  m.stage = s;
  m.bytes.params = params_gib * kGiB;
  m.bytes.activations = activations_gib * kGiB;
  m.in_flight_chunks = in_flight;
  return m;
}

TEST(OomMessage, TheWorstStageInFullTheOthersInOneClauseAndARemedy) {
  // Capacity 10 GiB. Stage 2 needs 1 + 30 = 31 GiB (over by 21), the most; stages 0, 1 and 4 are
  // over too (11 to 21 GiB), stage 3 fits (9 GiB).
  const std::vector<wl::StageMemory> m = {stage(0, 1, 10, 4), stage(1, 1, 20, 3), stage(2, 1, 30, 2),
                                          stage(3, 1, 8, 1), stage(4, 1, 15, 1)};
  EXPECT_EQ(wl::describe_oom(m, 10 * kGiB),
            "pipeline stage 2 ranks need 31 GiB of 10 GiB HBM (over by 21 GiB); largest part: activations 30 GiB "
            "(2 chunk-forwards in flight); stages 0-1, 4 over too (needing 11 GiB to 21 GiB); to fit, keep fewer "
            "activations: training.recompute selective or full, a smaller training.micro_batch, or more tp or cp");
  // One stage over, by its parameters: no clause for others, and the remedy is sharding; one
  // chunk-forward is singular where activations are the largest part.
  EXPECT_EQ(wl::describe_oom({stage(0, 12, 1, 1), stage(1, 2, 1, 1)}, 10 * kGiB),
            "pipeline stage 0 ranks need 13 GiB of 10 GiB HBM (over by 3 GiB); largest part: parameters 12 GiB; to fit, "
            "shard the model states: parallelism.data_parallel zero1, zero2 or fsdp, or more tp or pp");
  EXPECT_NE(wl::describe_oom({stage(0, 1, 12, 1)}, 10 * kGiB).find("(1 chunk-forward in flight)"), std::string::npos);
  EXPECT_EQ(wl::describe_oom({stage(0, 1, 1, 1)}, 10 * kGiB), "");
}

}  // namespace
