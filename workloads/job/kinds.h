// workloads/job/kinds.h: the bind functions of the workload kinds (registry.cc lists them).
#pragma once

#include <memory>

#include "workloads/job/job.h"

namespace wl {

std::unique_ptr<Job> bind_collectives_job(const sim::ConfigNode& workload, const topo::ClusterConfig& cluster,
                                          const topo::Topology& topology);
std::unique_ptr<Job> bind_training_job(const sim::ConfigNode& workload, const topo::ClusterConfig& cluster,
                                       const topo::Topology& topology);
std::unique_ptr<Job> bind_diloco_job(const sim::ConfigNode& workload, const topo::ClusterConfig& cluster,
                                     const topo::Topology& topology);

}  // namespace wl
