// workloads/job/training_kind.h: `workload: {kind: training}` as a Job, and its result (the step
// summary, its JSON and fingerprint); DiLoCo reuses the step's summary and JSON for its island.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "workloads/job/job.h"
#include "workloads/job/kinds.h"
#include <optional>

#include "workloads/training/recovery.h"
#include "workloads/training/step.h"
#include "workloads/training/training_config.h"

namespace wl {

// The human-readable step report and its JSON fields.
std::string training_summary(const TrainingSettings& ts, const StepResult& r);
void training_json(nlohmann::ordered_json& out, const TrainingSettings& ts, const StepResult& r);

// After a failure aborted the step: what the job did next (workloads/training/recovery.h).
struct RecoveryOutcome {
  Recovery how = Recovery::kNone;
  std::string change;      // what changed (a spare's placement, the replicas dropped)
  std::string impossible;  // why it could not go on; empty when the recovered step ran
  TrainingSettings ts;     // the recovered job
  StepResult step;         // its step on the degraded cluster
};

class TrainingResult : public JobResult {
 public:
  TrainingResult(const TrainingSettings& ts, StepResult step, std::optional<RecoveryOutcome> recovery = {})
      : ts_(ts), step_(std::move(step)), recovery_(std::move(recovery)) {}
  // A step aborted by the watchdog counts as completed when a recovery ran its next step to the end.
  bool completed() const override;
  bool aborted() const override { return step_.outcome == StepOutcome::kAborted && !completed(); }
  std::string problem() const override;
  std::string summary() const override;
  void to_json(nlohmann::ordered_json& out) const override;
  std::string fingerprint() const override;
  const StepResult& step() const { return step_; }
  const std::optional<RecoveryOutcome>& recovery() const { return recovery_; }

 private:
  const TrainingSettings& ts_;
  StepResult step_;
  std::optional<RecoveryOutcome> recovery_;
};

}  // namespace wl
