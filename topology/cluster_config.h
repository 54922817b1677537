// topology/cluster_config.h: binds the `cluster:` section of a scenario to a ClusterSpec, the
// accelerator spec (catalog entry plus overrides) and the resource options.
//
//   cluster:
//     gpu: h100-sxm                 # or {preset: h100-sxm, hbm_bandwidth: 4TB/s, ...}
//     nodes: 16
//     gpus_per_node: 8
//     spare_nodes: 0                # hot spares: the last nodes, idle until a failed node's ranks move there
//     scale_up: {kind: nvswitch, bandwidth: 450GB/s}
//     scale_out:
//       kind: fat-tree              # none | fat-tree | torus
//       nic_bandwidth: 400Gbps
//       rails: 8
//       tiers:
//         - {name: leaf, nodes: 16}
//         - {name: spine, leafs: 8, oversubscription: 1, uplinks: 1}   # or groups: 8
//     profile: {file: calibration.yaml, gemm_efficiency: 0.7}   # topology/hardware_profile.h
// A tier k >= 1 names its size either `groups: N` or `<previous tier name>s: N` (racks: 192).
// A torus: scale_out: {kind: torus, dims: [8, 8, 8], link_bandwidth: ..., link_latency: ...};
// link bandwidth defaults to the accelerator's ICI per-link rate. Link latencies and efficiencies
// are the hardware profile's.
#pragma once

#include "sim/config.h"
#include "topology/catalog.h"
#include "topology/cluster_resources.h"
#include "topology/hardware_profile.h"
#include "topology/topology.h"

namespace topo {

struct ClusterConfig {
  GpuSpec gpu;
  ClusterSpec spec;
  HardwareProfile profile;
  // Hot spare nodes: the cluster's last `spare_nodes` nodes, idle until a failed node's ranks
  // move there (the job uses the others).
  uint32_t spare_nodes = 0;
  uint32_t job_gpus() const { return (spec.nodes - spare_nodes) * spec.gpus_per_node; }
};

// Throws sim::ConfigError naming file, line, column and key for anything wrong or impossible.
ClusterConfig bind_cluster(const sim::ConfigNode& cluster);

// Builds the topology; a sim::TopologyError from the builders is re-thrown as a ConfigError
// located at the cluster section. Before building, the memory the network model will take is
// estimated (kTopologyBytesPerGpu per accelerator) and a cluster whose estimate exceeds
// `max_memory_bytes` (0: the memory the system has available, /proc/meminfo MemAvailable, when
// it can be read) is refused at once with the estimate and what drives it.
Topology build_cluster_checked(const ClusterConfig& cfg, const sim::ConfigNode& cluster,
                               uint64_t max_memory_bytes = 0);

// Bytes of network model per accelerator: 0.75 KiB measured (max RSS of `clustersim topology` on
// the 131,072-GPU example, 106 MB, over its GPUs), rounded up to 1 KiB; a run needs more on top
// (per-rank programs, link state), so the estimate is a floor.
inline constexpr uint64_t kTopologyBytesPerGpu = 1024;

// The memory the system has available (MemAvailable in /proc/meminfo), 0 when unknown.
uint64_t available_memory_bytes();

}  // namespace topo
