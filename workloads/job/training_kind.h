// workloads/job/training_kind.h: `workload: {kind: training}` as a Job, and its result (the step
// summary, its JSON and fingerprint); DiLoCo reuses the step's summary and JSON for its island.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "workloads/job/job.h"
#include "workloads/job/kinds.h"
#include "workloads/training/step.h"
#include "workloads/training/training_config.h"

namespace wl {

// The human-readable step report and its JSON fields.
std::string training_summary(const TrainingSettings& ts, const StepResult& r);
void training_json(nlohmann::ordered_json& out, const TrainingSettings& ts, const StepResult& r);

class TrainingResult : public JobResult {
 public:
  TrainingResult(const TrainingSettings& ts, StepResult step) : ts_(ts), step_(std::move(step)) {}
  bool completed() const override { return step_.outcome == StepOutcome::kCompleted; }
  std::string problem() const override;
  std::string summary() const override { return training_summary(ts_, step_); }
  void to_json(nlohmann::ordered_json& out) const override { training_json(out, ts_, step_); }
  std::string fingerprint() const override { return step_fingerprint(step_); }
  const StepResult& step() const { return step_; }

 private:
  const TrainingSettings& ts_;
  StepResult step_;
};

}  // namespace wl
