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

// The same with NVLS allowed where the cluster offers it: NVSwitch nodes (scale-up links, not a
// torus or an edge list) and a profile with nvls_efficiency > 0.
ClusterShape cluster_shape_of(const topo::Topology& topo, const topo::HardwareProfile& profile);
ClusterShape cluster_shape_of(const topo::ClusterResources& res);

// The runtime's options from the cluster's hardware profile: Simple's step latency, every
// protocol's costs, NVLS (topology/hardware_profile.h).
RuntimeOptions runtime_options_for(const topo::GpuSpec& gpu, const topo::HardwareProfile& profile);
RuntimeOptions runtime_options_for(const topo::ClusterResources& res);

// Link hints for auto's alpha-beta estimate, taken from the cluster (its links' nominal
// capacities) and the runtime's options (whose costs it copies).
CostHints cost_hints_for(const topo::Topology& topo, const topo::GpuSpec& gpu, const topo::HardwareProfile& profile,
                         const RuntimeOptions& opt);
CostHints cost_hints_for(const topo::ClusterResources& res, const RuntimeOptions& opt);

}  // namespace wl
