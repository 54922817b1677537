// tests/traces/node_run.h: replayed programs run on one NVSwitch node of H100s (the trace tests'
// common cluster).
#pragma once

#include <cstdint>

#include "sim/simulation.h"
#include "topology/catalog.h"
#include "topology/topology.h"
#include "workloads/program/executor.h"

namespace traces::test_util {

// Runs `job` on one NVSwitch node of `gpus` H100s with the default profile.
inline wl::ProgramRun run_on_h100_node(const wl::JobProgram& job, uint32_t gpus, const wl::ExecutorOptions& eo = {}) {
  sim::Simulation sim(1);
  topo::ScaleUpSpec su;
  su.kind = topo::ScaleUpKind::kNvSwitch;
  const topo::Topology t = topo::build_scale_up(gpus, su);
  const topo::GpuSpec gpu = topo::find_gpu("h100-sxm");
  return wl::run_program(sim, t, gpu, topo::default_profile(gpu), job, eo);
}

}  // namespace traces::test_util
