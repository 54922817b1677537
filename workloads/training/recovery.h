// workloads/training/recovery.h: failures during a training step, and what the job does after
// one hung it and the watchdog aborted it. The scenario's `failures:` section:
//
//   failures:
//     watchdog: 10min          # PyTorch's NCCL process-group timeout (default 10 min)
//     recovery: elastic        # none | spare | elastic
//     events: [{at: 40ms, kill: {node: 7}}]   # topology/failure_events.h
//
// Recovery, each simulated as the next step on the degraded cluster:
//  - spare: the job restarts with the ranks of every failed node (a dead GPU or NIC) on a hot
//    spare node (the cluster's last `cluster.spare_nodes` nodes); same batch, new placement.
//  - elastic: the data-parallel replicas holding a failed node are dropped and the job goes on
//    with the others at a proportionally smaller global batch. This changes the training
//    (fewer sequences per step, another effective learning-rate schedule), as the replica-dropping
//    strategy does; it needs whole replicas (DDP, or HSDP's dp_outer groups).
// The restart itself (teardown, re-initialisation, checkpoint load) is the campaign level's
// business (workloads/campaign/); here the cost shown is the step time of the degraded job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/config.h"
#include "topology/failure_events.h"
#include "topology/topology.h"
#include "workloads/training/step.h"
#include "workloads/training/training_config.h"

namespace wl {

enum class Recovery : uint8_t { kNone, kSpare, kElastic };

// The axis whose groups are whole replicas of the model state, which elastic data parallelism can
// drop: HSDP's replicate groups (dp_outer), or DDP's data-parallel groups; Dim::kCount when the
// state is sharded over every data-parallel rank (ZeRO, FSDP without dp_outer).
Dim replica_axis(const TrainingJob& j);

// The replicas (coordinates along replica_axis) with ranks on each node of `gpus_per_node` GPUs,
// rank r on GPU r (the job's placement without a spare): one increasing list per node, for the
// job's world / gpus_per_node nodes. It follows parallelism.order: with data parallelism outermost
// (the default) replica k holds a contiguous block of nodes; Megatron-LM's order tp-cp-ep-dp-pp
// ([tp, cp, dp, pp] here) puts it on every dp-th node; an order with dp inside tp puts ranks of
// several replicas on every node. Every node holds replica 0 when the job has no whole replicas
// (replica_axis is Dim::kCount).
std::vector<std::vector<int32_t>> replicas_by_node(const TrainingJob& j, uint32_t gpus_per_node);

// The job with `down` of its replicas dropped (along replica_axis): the others go on at a
// proportionally smaller global batch. The settings only; where they run is the caller's business.
TrainingSettings without_replicas(const TrainingSettings& ts, int64_t down);

struct FailureSettings {
  std::vector<topo::FailureEvent> events;
  sim::Time watchdog = sim::Time::sec(600);
  Recovery recovery = Recovery::kNone;
};

// Binds `failures:` for a training job; throws sim::ConfigError naming the key (a recovery the
// job cannot do: elastic without whole replicas, spare without spare nodes).
FailureSettings bind_failures(const sim::ConfigNode& failures, const topo::Topology& topo, const TrainingSettings& ts,
                              uint32_t spare_nodes);

// The job after the failure: its settings, where it runs (the dead GPUs and links stay dead),
// and what changed. `impossible` says why it cannot go on (no spare left, no replica left).
struct RecoveredJob {
  TrainingSettings ts;
  StepOptions options;
  std::string change;
  std::string impossible;
};

// dead_gpus / dead_links: what failed (a node counts as failed when one of its GPUs or NIC links
// did); placement: the failed step's (empty: identity).
RecoveredJob recover(Recovery how, const TrainingSettings& ts, const std::vector<uint32_t>& placement,
                     const std::vector<uint32_t>& dead_gpus, const std::vector<uint32_t>& dead_links,
                     const topo::Topology& topo, uint32_t spare_nodes);

}  // namespace wl
