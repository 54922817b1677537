// workloads/collectives/cluster_shape.h: what collective lowering needs to know of a built cluster.
#pragma once

#include "topology/cluster_resources.h"
#include "topology/topology.h"
#include "workloads/collectives/collective.h"
#include "workloads/collectives/runtime.h"

namespace wl {

// The shape lowering needs (GPUs and NICs per node, torus dimensions) of a built topology. Every
// catalog node has one NIC per GPU (rail-optimized DGX/HGX designs), so nics_per_node is the GPU count.
ClusterShape cluster_shape_of(const topo::Topology& topo);

// Link hints for auto's alpha-beta estimate, taken from the cluster's resources and profile.
CostHints cost_hints_for(const topo::ClusterResources& res, const RuntimeOptions& opt);

}  // namespace wl
