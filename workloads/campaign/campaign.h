// workloads/campaign/campaign.h: the campaign level of fault-tolerance simulation. A fast Monte
// Carlo simulation of a training job's life over weeks under random failures (checkpoints,
// detection, restarts, spares, repairs, elastic data parallelism, DiLoCo islands), for planning
// checkpoint intervals, spare pools and recovery policies. It does not run the network or step
// simulator: the cost of one step in each state of the job comes from a StepCostSource (the step
// simulator, memoised by the caller).
//
// Model, per trial (trials are independent; trial t draws from sim::RandomStreams(trial_seed(seed,
// t)), so results do not depend on the thread count):
//   * Time is wall-clock seconds (double) from the job's start. Either the trial runs a fixed wall
//     `duration_s`, or until `work_steps` steps are done (the wall time is then the result).
//   * Nodes. The job occupies `job_nodes` positions; each holds a working node or is empty (its
//     node is in repair). Failure clocks run on every occupied position all the time: while the
//     job computes, checkpoints, restarts or waits (so a failure during a restart starts the
//     recovery over). Exponential processes are superposed: one Poisson process of rate
//     sum(rate) x occupied positions, run on its cumulative hazard (one Exp(1) threshold per
//     event, so a change in the occupied count changes the rate, not the draws) - O(events).
//     Weibull processes keep one renewal clock per (position, process); a node put in a position
//     (a spare, a repaired node) starts fresh clocks, and so does every node at time 0 (so a
//     shape k < 1 shows its infant mortality at the start; starting the clocks costs O(nodes x
//     Weibull processes) per trial, a heap of them O(log) per event). Spares
//     waiting in the pool do not fail. An event strikes a uniformly chosen occupied position and
//     takes the aligned group of `nodes` positions around it. Hardware events send the nodes to
//     repair (`repair`: exponential or fixed time); repaired nodes join the spare pool.
//   * Running. Steps of StepCost.seconds each (StepCost.tokens tokens). Every `every_steps` steps
//     a checkpoint of `size` bytes: `sync` stalls for the write, size / (nodes x
//     write_bandwidth_per_node); `async` stalls for a device-to-host snapshot, size per GPU /
//     snapshot_bandwidth, and writes in the background; the checkpoint is durable when the write
//     ends, and the next snapshot waits for the previous write (so at most one is in flight).
//     With `in_memory`, each checkpoint is also copied to a peer node's memory (positions 2i and
//     2i+1 hold each other's copies, as in Gemini's groups of two, Wang et al., SOSP 2023; done
//     size / nodes / peer_bandwidth after the snapshot; re-replicated at every restart): a
//     failure restores from the peer copy over the network, unless it also took the peer (a
//     correlated failure) or the peer's position is empty; then from storage. Progress
//     between events is arithmetic (cycles of steps and checkpoint stalls): no per-step loop.
//   * Recovery (policies restart, hot_spares; also the elastic fallback): detection (crash:
//     `detection.crash`; hang: `detection.watchdog`, 10 min by default, PyTorch's
//     kProcessGroupNCCLDefaultTimeout in torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp), then
//     `restart.teardown`, then every empty position is filled from the spare pool (hot_spares)
//     or by the repaired node (restart: no spares), waiting for repairs when needed, then
//     `restart.init` (scheduling and initialisation) plus the checkpoint load (size / (nodes x
//     read_bandwidth_per_node), or from the peer copy). The work since the restored checkpoint is
//     recomputed (lost progress), and so is the interrupted step. A planned interruption takes
//     a synchronous checkpoint first and loses nothing.
//   * elastic: the data-parallel replicas with ranks on the failed nodes drop out (which ones
//     follows the job's layout, CampaignDefaults::replicas_by_node: a node may hold ranks of several
//     replicas, and a replica's nodes need not be contiguous) and the others go on
//     after detection and `elastic.reconfigure`, with StepCost = source.step(replicas_down)
//     (fewer tokens per step: this changes training semantics, a smaller global batch). Nothing
//     is recomputed but the interrupted step. A dropped replica is ready once its positions are
//     filled (a spare at once when one is free, else its repaired node) plus `restart.init`, and
//     rejoins then (`rejoin: immediately`, after a reconfiguration pause) or at the next
//     checkpoint (`at_checkpoint`). Below `elastic.min_replicas` the job falls back to a full
//     restart from the last checkpoint. A node none of whose replicas runs sits idle and does not
//     fail (a node that also holds ranks of a running replica works, and its failure takes that
//     replica down too; replicas on the same nodes drop and rejoin together). A
//     planned stop restarts the replicas that run (it does not wait for a dropped one's repair);
//     dropped replicas rejoin as above.
//   * islands (DiLoCo, arXiv 2311.08105): I islands of `job_nodes` nodes each (their own spare
//     pools of `spares`), each its own lifecycle as above (hot_spares); every H inner steps an
//     outer synchronisation of `outer_sync_s`. The synced outer parameters are a recovery point
//     held by every island: a failed island reloads them at no recomputation past the round's
//     start. `outer: wait`: the sync waits for every island (healthy islands idle meanwhile; a
//     failure while idle loses the island's work since its recovery point); `proceed`: islands
//     that failed during the round are dropped from its sync (their round's work is lost, a
//     smaller effective batch) and rejoin from the synced parameters at the first round that
//     starts after they recovered. A failure during the sync itself is handled after it. An
//     island's own checkpoints restart with every round (every k steps from its start: none when
//     k >= H).
//     Rounds in which nothing happens to any island are skipped in one go, so the cost is
//     O(islands x (failures + the rounds they touch)).
// Outputs per campaign: mean and the 2.5th / 97.5th percentiles over trials (linear
// interpolation between order statistics) of the effective training time ratio (ETTR: step time
// of steps not lost / wall time), goodput (tokens of steps not lost / wall time), interruptions
// (all failure events on the job's nodes; by category; unexpected = not planned), and the hours
// lost to detection, teardown and restart (incl. checkpoint load and elastic reconfiguration),
// recomputation (lost steps and interrupted steps), checkpointing (stalls), waiting for repairs or
// spares, degraded running (elastic: wall time x the fraction of full-job throughput missing), and
// for islands idle waiting and outer syncs. Per trial the buckets add up to the wall time (per
// island for islands): productive + detection + restart + recompute + checkpoint + waiting +
// island_wait + outer_sync = wall. Also the checkpoint cost delta (the stall per checkpoint), the
// job MTBF M (unexpected failures of the whole job) and Young's and Daly's intervals for them.
//
// Checkpoint-interval selection: delta is the job's stall per checkpoint at the configured
// interval (sync: the write; async: the snapshot, plus any wait for the previous write), so for
// async checkpoints Young and Daly ignore that a checkpoint is durable only after its write: use
// the sweep there. Young (1974, CACM 17(9)) tau = sqrt(2 delta M); Daly (2006, FGCS
// 22(3), "A higher order estimate of the optimum checkpoint interval for restart dumps") tau =
// sqrt(2 delta M) [1 + (1/3) sqrt(delta / (2M)) + (1/9) (delta / (2M))] - delta for delta < 2M,
// else tau = M. sweep_checkpoint_interval runs the campaign at several intervals with common random
// numbers (the same trial seeds at every interval).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "workloads/campaign/failure_model.h"

namespace wl {

struct StepCost {
  double seconds = 0;  // one training step of the job in a given state
  double tokens = 0;   // tokens it trains on
};

// Step costs by state, memoised by the caller; may be called from several threads (the
// implementation locks).
class StepCostSource {
 public:
  virtual ~StepCostSource() = default;
  // One step of the job with `replicas_down` data-parallel replicas dropped (elastic DP); 0 = the
  // full job. For a DiLoCo job: one island's inner step. {0 s, 0 tokens} for replicas_down > 0
  // says the job cannot run in that state (elastic then restarts the job in full); otherwise the
  // time must be finite and > 0. A state with fewer replicas down than a runnable one must run.
  virtual StepCost step(int64_t replicas_down) = 0;
};

// What the job kind derives from the training job and cluster. For a DiLoCo job, job_nodes is the
// nodes of ONE island (every island has as many) and StepCost one island's inner step.
struct CampaignDefaults {
  int64_t job_nodes = 0, gpus_per_node = 8, dp_replicas = 1, nodes_per_replica = 1;
  // Elastic: the data-parallel replicas (0 .. dp_replicas - 1) with ranks on each of the job's
  // nodes, from the job's layout (the ranks on the node's GPUs and their replica coordinates;
  // replicas_by_node in workloads/training/recovery.h). Empty: data parallelism outermost, each
  // replica on job_nodes / dp_replicas contiguous nodes (or dp_replicas / job_nodes replicas on
  // each node), which needs one of the two counts to divide the other.
  std::vector<std::vector<int32_t>> replicas_by_node;
  // The cluster's hot spare nodes (`cluster.spare_nodes`: its last nodes, which the job does not
  // use): the campaign's spare pool unless `spares` says otherwise (per island for a DiLoCo job).
  int64_t spare_nodes = 0;
  double checkpoint_bytes = 0;  // from the model and parallelism
  bool diloco = false;
  int64_t islands = 0;
  int64_t inner_steps_per_round = 0;
  double outer_sync_s = 0;  // DiLoCo job
};

enum class CampaignPolicy : uint8_t { kRestart, kHotSpares, kElastic, kIslands };
enum class CheckpointMode : uint8_t { kSync, kAsync };
enum class RepairDistribution : uint8_t { kExponential, kFixed };
enum class RejoinRule : uint8_t { kAtCheckpoint, kImmediately };
enum class OuterRule : uint8_t { kWait, kProceed };
const char* policy_name(CampaignPolicy p);

// Defaults, each with its source or marked as an assumption.
// Llama 3 §3.3.1 (arXiv 2407.21783): Tectonic serves the 16,384-GPU job 2 TB/s sustained and
// 7 TB/s peak; over its 2,048 nodes that is about 1 GB/s (write) and 3.4 GB/s (read) per node.
inline constexpr double kDefaultWriteBandwidthPerNode = 2e12 / 2048;
inline constexpr double kDefaultReadBandwidthPerNode = 7e12 / 2048;
// PCIe Gen5 x16 per direction: 32 GT/s x 16 lanes x 128/130 (encoding) / 8 = 63 GB/s (PCI-SIG
// PCIe 5.0 base specification; NVIDIA's H100 datasheet lists "PCIe Gen5: 128 GB/s", both ways).
inline constexpr double kDefaultSnapshotBandwidth = 32e9 * 16 * 128.0 / 130.0 / 8.0;
// One 400 Gb/s NIC per node (NVIDIA ConnectX-7) for the in-memory peer copy: 50 GB/s.
inline constexpr double kDefaultPeerBandwidth = 400e9 / 8;
// PyTorch's kProcessGroupNCCLDefaultTimeout (torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp):
// 10 * 60 * 1000 ms.
inline constexpr double kDefaultWatchdogS = 600;
inline constexpr double kDefaultCrashDetectionS = 30;  // assumption: launcher sees the exit, scheduler reacts
inline constexpr double kDefaultTeardownS = 60;        // assumption
inline constexpr double kDefaultInitS = 300;           // assumption: scheduling + process/NCCL init
inline constexpr double kDefaultRepairS = 86400;       // assumption: a day to repair or swap a node
inline constexpr double kDefaultReconfigureS = 30;     // assumption: elastic re-form of the DP groups

struct CheckpointSpec {
  int64_t every_steps = 0;  // > 0: fixed; 0: from interval_s and the full job's step time
  double interval_s = 1800;
  double size_bytes = 0;
  double write_bandwidth_per_node_Bps = kDefaultWriteBandwidthPerNode;
  double read_bandwidth_per_node_Bps = kDefaultReadBandwidthPerNode;
  CheckpointMode mode = CheckpointMode::kSync;
  double snapshot_bandwidth_Bps = kDefaultSnapshotBandwidth;  // per GPU, device to host
  bool in_memory = false;
  double peer_bandwidth_Bps = kDefaultPeerBandwidth;  // per node
  std::vector<double> sweep_intervals_s;              // `sweep: [10min, ...]`
  bool sweep_auto = false;                            // `sweep: auto`
  bool sweep_requested() const { return sweep_auto || !sweep_intervals_s.empty(); }
};

struct CampaignSpec {
  CampaignDefaults job;
  FailureModel failures;
  CampaignPolicy policy = CampaignPolicy::kHotSpares;
  double duration_s = 0;   // > 0: fixed wall time
  int64_t work_steps = 0;  // > 0: fixed work (steps; per island for islands)
  int64_t trials = 1000;
  CheckpointSpec checkpoint;
  double detect_crash_s = kDefaultCrashDetectionS;
  double detect_hang_s = kDefaultWatchdogS;
  double teardown_s = kDefaultTeardownS;
  double init_s = kDefaultInitS;
  int64_t spares = 0;  // hot spare nodes (per island for islands)
  double repair_mean_s = kDefaultRepairS;
  RepairDistribution repair = RepairDistribution::kExponential;
  double reconfigure_s = kDefaultReconfigureS;
  RejoinRule rejoin = RejoinRule::kImmediately;
  int64_t min_replicas = 1;
  OuterRule outer = OuterRule::kWait;
};

// Throws SIM_ASSERT-style errors for impossible specs built in code (bind_campaign reports them
// as ConfigErrors first).
void validate_campaign(const CampaignSpec& spec);

struct Estimate {
  double mean = 0, lo = 0, hi = 0;  // lo / hi: 2.5th / 97.5th percentile over trials
};

// One trial. Hours buckets are per island for islands (the mean over islands).
struct TrialResult {
  double wall_s = 0;
  double productive_s = 0;  // step time of steps not lost
  double useful_tokens = 0;
  double steps = 0;  // steps not lost (all islands)
  int64_t interruptions = 0;
  int64_t unexpected = 0;
  std::array<int64_t, kNumFailureCategories> by_category{};
  double detection_s = 0, restart_s = 0, recompute_s = 0, checkpoint_s = 0, waiting_s = 0;
  double degraded_loss_s = 0, degraded_wall_s = 0, island_wait_s = 0, outer_sync_s = 0;
  int64_t dropped_rounds = 0;  // islands, proceed
  double ettr() const { return wall_s > 0 ? productive_s / wall_s : 0; }
  double goodput() const { return wall_s > 0 ? useful_tokens / wall_s : 0; }
  bool operator==(const TrialResult&) const = default;
};

struct CampaignSummary {
  int64_t trials = 0;
  uint64_t seed = 0;
  // The job as run.
  double step_s = 0, tokens_per_step = 0;  // full job (one island for islands)
  int64_t every_steps = 0;
  double checkpoint_interval_s = 0;  // every_steps x step_s
  double checkpoint_stall_s = 0;     // delta: the job's stall per checkpoint in steady state
  double checkpoint_write_s = 0;     // size / (nodes x write bandwidth)
  double checkpoint_load_s = 0;      // from storage
  double job_mtbf_s = 0;             // M: 1 / (unexpected failure rate of the whole job)
  double young_s = 0, daly_s = 0;    // for delta and M
  double ideal_tokens_per_s = 0;     // failure-free, checkpoint-free (all islands)
  // Over trials.
  Estimate ettr, goodput_tokens_per_s, wall_h, interruptions, unexpected_interruptions;
  std::array<Estimate, kNumFailureCategories> by_category;
  Estimate lost_detection_h, lost_restart_h, lost_recompute_h, checkpoint_h, lost_waiting_h;
  Estimate lost_degraded_h, degraded_h, island_wait_h, outer_sync_h, dropped_rounds;
  std::vector<TrialResult> per_trial;
};

// Islands whose checkpoint interval is not within a round (every_steps >= the inner steps per
// round) take no checkpoint: the round's outer parameters are the only recovery point.
bool no_checkpoints(const CampaignSpec& spec, const CampaignSummary& s);

// The seed of trial t: splitmix64(splitmix64(seed) ^ t).
uint64_t trial_seed(uint64_t seed, uint64_t trial);

// Young (1974): sqrt(2 delta M).
double young_interval(double delta_s, double mtbf_s);
// Daly (2006): sqrt(2 delta M) [1 + (1/3) sqrt(delta / 2M) + (1/9) delta / 2M] - delta for
// delta < 2M, else M.
double daly_interval(double delta_s, double mtbf_s);

// Spreads n trials over processes (`mpirun`): every trial's result text on every process, in order.
using TrialDistributor =
    std::function<std::vector<std::string>(size_t n, const std::function<std::string(size_t)>& trial)>;
// A trial's result as text and back, exactly (hexadecimal floating point): what a distributor carries.
std::string encode_trial(const TrialResult& r);
TrialResult decode_trial(const std::string& text);

// With `distribute`, the trials run where it sends them (the results are the same: a trial is a
// function of its seed); otherwise on `threads` threads.
CampaignSummary run_campaign(const CampaignSpec& spec, StepCostSource& source, int64_t trials, uint64_t seed,
                             int threads, const std::function<void(int64_t trials_done)>& progress = {},
                             const TrialDistributor& distribute = {});

// Checkpoint-interval sweep.
struct SweepPoint {
  double interval_s = 0;  // as asked
  CampaignSummary summary;
};
struct IntervalSweep {
  std::vector<SweepPoint> points;
  // The best point: the lowest mean wall time for fixed work, else the highest mean goodput.
  size_t best = 0;
  double best_interval_s = 0;     // summary.checkpoint_interval_s of the best point
  double refined_best_s = 0;      // vertex of the parabola (in log interval) through the best and its neighbours
  double checkpoint_stall_s = 0;  // delta
  double job_mtbf_s = 0;          // M
  double young_s = 0, daly_s = 0;
  bool fixed_work = false;
};
// A log grid around Daly's interval for the spec (`sweep: auto`): 13 points from Daly / 8 to
// Daly x 8 (ratio sqrt(2)), at least one step each.
std::vector<double> auto_sweep_intervals(const CampaignSpec& spec, StepCostSource& source);
// The intervals of spec.checkpoint's sweep (the listed ones or the automatic grid), less those that
// round to the step count of an earlier one (checkpoints come every whole number of steps).
std::vector<double> sweep_intervals(const CampaignSpec& spec, StepCostSource& source);
// Runs the campaign at each interval (checkpoint.every_steps = round(interval / step time), at
// least 1) with the same trial seeds; an interval that rounds to the step count of an earlier one
// is skipped. `progress` gets the trials done over all points.
IntervalSweep sweep_checkpoint_interval(const CampaignSpec& spec, StepCostSource& source,
                                        const std::vector<double>& intervals_s, int64_t trials, uint64_t seed,
                                        int threads, const std::function<void(int64_t trials_done)>& progress = {},
                                        const TrialDistributor& distribute = {});

// Human report.
std::string campaign_summary_text(const CampaignSpec& spec, const CampaignSummary& summary);
std::string campaign_sweep_text(const CampaignSpec& spec, const IntervalSweep& sweep);
// JSON (snake_case keys with units). campaign_to_json writes the inputs under "campaign" and the
// results under "results"; campaign_sweep_to_json writes "sweep": {young_interval_s,
// daly_interval_s, checkpoint_stall_s, job_mtbf_h, best_interval_s, refined_best_interval_s,
// metric, job: {nodes, gpus, islands}, points: [{interval_s, every_steps, ettr: {mean, p2_5,
// p97_5}, goodput_tokens_per_s: {...}, wall_h: {...}}]} (read by scripts/plot_campaign.py).
void campaign_to_json(const CampaignSpec& spec, const CampaignSummary& summary, nlohmann::ordered_json& out);
void campaign_sweep_to_json(const CampaignSpec& spec, const IntervalSweep& sweep, nlohmann::ordered_json& out);

}  // namespace wl
