// workloads/job/kinds.h: the bind functions of the workload kinds (registry.cc lists them).
#pragma once

#include <memory>

#include "workloads/job/job.h"

namespace wl {

std::unique_ptr<Job> bind_collectives_job(const sim::ConfigNode& workload, const BindContext& ctx);
std::unique_ptr<Job> bind_training_job(const sim::ConfigNode& workload, const BindContext& ctx);
std::unique_ptr<Job> bind_diloco_job(const sim::ConfigNode& workload, const BindContext& ctx);

std::unique_ptr<Job> bind_campaign_job(const sim::ConfigNode& workload, const BindContext& ctx);

}  // namespace wl
