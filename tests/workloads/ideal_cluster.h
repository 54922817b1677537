// tests/workloads/ideal_cluster.h: the idealised clusters the workload tests work their times out
// on by hand: n single-GPU nodes under one switch, every link at 100% efficiency, no
// communication SM or HBM hold.
#pragma once

#include <cstdint>

#include "sim/time.h"
#include "topology/hardware_profile.h"
#include "topology/topology.h"

namespace wl::test {

// NIC bandwidth B per direction; with `no_latency`, hops and NICs add no latency (a message of S
// bytes then takes the runtime's step overhead plus S / B).
inline topo::Topology ideal_switch(uint32_t n, double B, bool no_latency = false) {
  topo::FatTreeSpec ft;
  ft.nic_bandwidth_Bps = B;
  if (no_latency) {
    ft.hop_latency = sim::Time::zero();
    ft.nic_latency = sim::Time::zero();
  }
  ft.tiers = {topo::FatTreeTier{"leaf", n, 1.0, 1}};
  return topo::build_fat_tree(n, 1, ft);
}

inline topo::HardwareProfile ideal_profile() {
  topo::HardwareProfile o;
  o.scale_up_efficiency = o.nic_efficiency = o.fabric_efficiency = o.torus_efficiency = 1.0;
  o.comm_sms = 0;
  o.comm_hbm_fraction = 0.0;
  o.kernel_gap = sim::Time::zero();  // kernels back to back, as the hand calculations assume
  return o;
}

}  // namespace wl::test
