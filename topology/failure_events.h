// topology/failure_events.h: hardware failures at given times, resolved against a topology: the
// `failures.events` list of a scenario. A death is final (nothing comes back up in one step); a
// slowdown (a straggler) lasts its window.
//
//   failures:
//     events:
//       - {at: 40ms, kill: {gpu: 3}}                  # the accelerator dies (its kernels fail)
//       - {at: 40ms, kill: {node: 2}}                 # every GPU of node 2 dies
//       - {at: 40ms, kill: {nic: 17}}                 # GPU 17's NIC: its scale-out links go down
//       - {at: 40ms, kill: {link: [gpu17, leaf2.rail1]}}   # both directions of one cable
//       - {at: 40ms, kill: {switch: leaf2.rail1}}     # every link of the switch: the nodes below lose it
//       - {at: 10ms, slow: {gpu: 3, factor: 2, for: 20ms}}  # runs at 1/2 speed for 20 ms
//       - {at: 10ms, slow: {link: [gpu17, leaf2.rail1], factor: 4}}   # for the rest of the run
// Vertex names are those `clustersim topology --dot` prints (gpuN, nodeN.nvswitch, leafN.railR,
// spineN, ...). A dead link or switch stalls what crosses it (NCCL hangs rather than erroring);
// a dead GPU fails its kernels and stalls its links.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/config.h"
#include "sim/time.h"
#include "topology/topology.h"

namespace topo {

struct FailureEvent {
  enum class Action : uint8_t { kKillGpus, kKillLinks, kSlowGpus, kSlowLinks };
  sim::Time at;
  Action action = Action::kKillGpus;
  std::vector<uint32_t> gpus;   // kKillGpus, kSlowGpus
  std::vector<uint32_t> links;  // kKillLinks, kSlowLinks (link indices, both directions of each cable)
  double factor = 1;            // slowdowns: rate divided by this (> 1 slows)
  sim::Time duration = sim::Time::infinite();  // slowdowns: how long; infinite: to the end
  std::string what;             // "node 2 (GPUs 16-23)", for reports and the trace
  std::string where;            // "file:line:col: failures.events[0].at", for errors found after the run
};

// Binds a `failures.events` list; throws sim::ConfigError naming the entry and key for an unknown
// target (a GPU, node or vertex the cluster does not have), a time that is negative, a factor
// that is not above 1, a kill with a window.
std::vector<FailureEvent> bind_failure_events(const sim::ConfigNode& events, const Topology& topo);

}  // namespace topo
