// workloads/campaign/campaign_config.h: binds a scenario's `campaign:` section (see campaign.h for
// the model). Every key, with its default:
//
//   campaign:
//     trials: 1000
//     duration: 54d                  # a fixed wall time, or
//     work_steps: 100000             # a fixed amount of work (per island for islands); one of the two
//     policy: hot_spares             # restart | hot_spares | elastic | islands (islands: DiLoCo jobs)
//     spares: 0                      # hot spare nodes (per island); not with restart; default:
//                                    # cluster.spare_nodes (the cluster's idle last nodes)
//     failures:
//       profile: llama3-405b         # or kokolis-rsc1, kokolis-rsc2; optional when processes are given
//       planned: false               # add the profile's planned interruptions
//       processes:                   # extra processes; a profile entry's name overrides its fields
//         - name: Faulty GPU
//           category: gpu            # gpu | hbm | network | host | software | dependency |
//                                    # maintenance | planned | unknown
//           rate_per_1000_node_days: 1.34   # or mtbf_per_node: 2000d (one of the two)
//           distribution: exponential        # or weibull, with shape: 0.8 (> 0)
//           nodes: 1                 # nodes one event takes (a switch, a rack); at most the job's
//           replace: true            # hardware (to repair) or a restart only
//           manifests: crash         # crash | hang | planned
//     detection: {crash: 30s, watchdog: 10min}   # watchdog > 0, as the step's failures.watchdog
//     restart: {teardown: 1min, init: 5min}
//     repair: {mean: 24h, distribution: exponential}   # or fixed
//     checkpoint:
//       interval: 30min              # converted to steps of the full job, or every_steps: N
//       size: <from the job>         # CampaignDefaults::checkpoint_bytes
//       write_bandwidth_per_node: 976.5625MB/s    # 2 TB/s / 2,048 nodes (Llama 3 §3.3.1)
//       read_bandwidth_per_node: 3.41796875GB/s   # 7 TB/s / 2,048 nodes
//       mode: sync                   # or async (stall for the snapshot only)
//       snapshot_bandwidth: 63.0GB/s # per GPU, device to host (PCIe Gen5 x16)
//       in_memory: false             # peer copies in host memory
//       peer_bandwidth: 50GB/s       # per node
//       sweep: [10min, 20min, 40min] # or auto: run the campaign at each interval
//     elastic: {reconfigure: 30s, rejoin: immediately, min_replicas: 1}   # rejoin: or at_checkpoint
//     islands: {outer: wait, outer_sync: <from the job>}                   # outer: or proceed
//
// Sections of other policies are still read (and checked) when present. Errors are
// sim::ConfigErrors naming file:line:col and the dotted key.
#pragma once

#include "sim/config.h"
#include "workloads/campaign/campaign.h"

namespace wl {

CampaignSpec bind_campaign(const sim::ConfigNode& campaign, const CampaignDefaults& d);

}  // namespace wl
