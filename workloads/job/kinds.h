// workloads/job/kinds.h: the bind functions of the workload kinds (registry.cc lists them).
#pragma once

#include <memory>

#include "topology/cluster_config.h"
#include "workloads/job/job.h"
#include "workloads/training/training_config.h"

namespace wl {

// The cluster's hot spare nodes, which the job's GPUs (ClusterConfig::job_gpus) leave out.
inline SpareNodes spare_nodes(const topo::ClusterConfig& c) { return {c.spare_nodes, c.spec.gpus_per_node}; }

std::unique_ptr<Job> bind_collectives_job(const sim::ConfigNode& workload, const BindContext& ctx);
std::unique_ptr<Job> bind_training_job(const sim::ConfigNode& workload, const BindContext& ctx);
std::unique_ptr<Job> bind_diloco_job(const sim::ConfigNode& workload, const BindContext& ctx);

std::unique_ptr<Job> bind_campaign_job(const sim::ConfigNode& workload, const BindContext& ctx);

}  // namespace wl
