// workloads/program/executor.h: runs a JobProgram on the cluster's resources.
//
// Every rank runs the Program of its template on GPU gpu_of(rank). The executor keeps, per rank,
// a cursor, a start and a last-finish time per stream, the arrival times of its receive slots and
// a few accumulators; op state is never copied per rank. Timed and kernel ops become kernels on
// the rank's GPU; delays are events; collectives start when the last member of their
// communicator's group arrives (one plan per distinct collective, lowered once and reused by every
// group of a generated communicator while placement is the identity); a send is a one-hop transfer
// whose arrival completes the matching recv.
//
// Failure is a state, not an exception: a rank whose GPU fails (its kernel activity fails, or its
// SM pool is down when a kernel is issued) or that kill_rank() names is dead: it issues nothing
// more, and whatever waits on it waits for ever. The first failure arms the watchdog (PyTorch's
// ProcessGroupNCCL watchdog): a communication op (collective, send, recv) of a live rank still
// not done `watchdog` after that rank issued it aborts the job at that instant. The abort records
// what waited on whom, closes the hung ops' trace spans, and withdraws every kernel, delay and
// transfer of the job. (PyTorch's watchdog thread polls every 100 ms; the abort here is at the
// exact deadline.) Without a watchdog the run drains and the caller reports the pending work
// (describe_pending names dead ranks as dead and the members a collective misses).
// A malformed program (members disagreeing on a collective, a message nobody receives, a rank
// outside a communicator) stops the executor with error() set, naming both ranks and ops.
//
// Breakdown: JobProgram's categories (see there); per rank the parts add up to the step time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "sim/huge_pages.h"
#include "sim/event_handler.h"
#include "sim/fluid.h"
#include "sim/simulation.h"
#include "topology/cluster_resources.h"
#include "workloads/collectives/runtime.h"
#include "workloads/program/program.h"

namespace wl {

// Costs kernel ops when they are issued (the hardware profile's job).
class KernelCoster {
 public:
  virtual ~KernelCoster() = default;
  struct Cost {
    double seconds = 0, sm_load = 0, hbm_load = 0;  // as a timed op's
  };
  virtual Cost cost(const Program& p, const Op& op) const = 0;
  // The time alone of each GPU kernel the op launches, in launch order: one per cost term of a
  // fused op, else the op's own (for the host dispatch model, JobProgram::host_overhead).
  virtual void kernel_seconds(const Program& p, const Op& op, std::vector<double>& out) const {
    out.assign(1, cost(p, op).seconds);
  }
};

// The hardware profile's kernel cost (topology/hardware_profile.h): a kernel of F FLOPs of class
// c and B HBM bytes takes t = max(F / (peak x efficiency(c)), B / (HBM bandwidth x memory
// efficiency)) alone, loading the SM pool with its FLOP time / t and HBM with its byte time / t
// (the roofline, as topology::ClusterResources::start_kernel). kMemory kernels have no FLOPs
// cost. The peak is the dense tensor rate of the precision the producer runs at. The profile's
// per-kernel latency of the class (0 unless calibrated) and the gap between kernels (kernel_gap)
// add to t and load nothing.
class ProfileKernelCoster : public KernelCoster {
 public:
  // `gemm_peak_flops` (0: the same as peak_flops) is the peak GEMMs run at: FP8 training runs the
  // linear layers in FP8 and the rest (attention, norms, elementwise) in BF16 (Transformer Engine).
  ProfileKernelCoster(const topo::HardwareProfile& profile, double peak_flops, double hbm_Bps,
                      double gemm_peak_flops = 0)
      : profile_(profile), peak_(peak_flops), hbm_(hbm_Bps), gemm_peak_(gemm_peak_flops > 0 ? gemm_peak_flops : peak_flops) {}
  Cost cost(const Program& p, const Op& op) const override;
  void kernel_seconds(const Program& p, const Op& op, std::vector<double>& out) const override;
  // Summed over `terms` in order: each term's roofline time max(FLOP time, HBM time), its FLOP
  // time and its HBM time (a fused kernel's time alone, and the SM and HBM seconds it loads).
  struct Sums {
    double seconds = 0, sm_s = 0, hbm_s = 0;
  };
  Sums sum(const std::vector<CostTerm>& terms) const;
  // The profile's fixed time per kernel of class c: its latency plus the gap before it (kernel_gap).
  double latency_s(KernelClass c) const;

 private:
  Sums term(const CostTerm& t) const;  // one term's time alone, SM seconds and HBM seconds
  topo::HardwareProfile profile_;
  double peak_, hbm_, gemm_peak_;
};

struct ExecutorOptions {
  std::vector<uint32_t> trace_ranks;  // ranks whose ops (not unnamed delays) become trace spans (empty: none)
  // Costs kernel ops when issued; null: a ProfileKernelCoster of the cluster's profile at the
  // accelerator's BF16 peak.
  const KernelCoster* coster = nullptr;
  // PyTorch's NCCL process-group timeout: 10 minutes by default (kProcessGroupNCCLDefaultTimeout in
  // torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp; init_process_group's `timeout`). Infinite:
  // no watchdog (a hang drains the simulation).
  sim::Time watchdog = sim::Time::sec(600);
  // Keep every op's start (issue) and end time per rank, for critical_path(); off: nothing kept.
  bool record_op_times = false;
  // Symmetric data parallelism (an explicit fidelity option; the producer checks that it holds:
  // generated communicators, identity placement, the same template in every replica, no
  // failures). Only the ranks of data-parallel replica 0 (dp = dp_outer = 0) run; every other
  // rank mirrors the rank of replica 0 with its other coordinates (its times, breakdown and
  // memory are that rank's). A collective whose group spans replicas starts when its simulated
  // members have arrived (the others arrive with them, by symmetry) and moves every member's
  // bytes; every other transfer stands for its copies in the other replicas (ReplicaCopies).
  bool symmetric_dp = false;
};

// An op's start (when its rank issued it; a collective's member arrived) and end.
struct OpTimes {
  sim::Time start = sim::Time::infinite(), end = sim::Time::infinite();
};

class ProgramExecutor : public sim::ActivityOwner,
                        public sim::EventHandler,
                        public CollectiveListener,
                        public sim::PendingWork {
 public:
  // Throws sim::ConfigError when a communicator's chosen algorithm cannot run one of its
  // collectives (naming where the scenario chose it), before anything is simulated.
  ProgramExecutor(topo::ClusterResources& res, CollectiveRuntime& runtime, const JobProgram& job,
                  const ClusterShape& shape, const CostHints& hints, const ExecutorOptions& opt);

  // Issues every rank's first ops at the current time (plus its start offset); then run the simulation.
  void start();
  bool finished() const { return ranks_done_ == ranks_to_run_; }
  // The rank whose run stands for `rank`: itself, or in symmetric mode the rank of replica 0 with
  // the same other coordinates.
  uint32_t representative(uint32_t rank) const {
    return opt_symmetric_ ? job_.layout.in_replica0(rank) : rank;
  }
  uint32_t ranks_simulated() const { return ranks_to_run_; }
  // Symmetric mode: fabric links of the other replicas left out as duplicates of replica 0's.
  uint32_t fabric_links_folded() const {
    return static_cast<uint32_t>(std::count(duplicate_link_.begin(), duplicate_link_.end(), uint8_t{1}));
  }
  const std::string& error() const { return error_; }
  sim::Time step_start() const { return step_start_; }
  sim::Time step_end() const { return step_end_; }
  sim::Time rank_end(uint32_t rank) const { return ranks_[representative(rank)].end; }  // when its last op finished
  // Seconds of rank's time charged to category c (the tail idle time after its last op counts
  // as idle); valid after the run.
  double category_seconds(uint32_t rank, uint16_t c) const;
  // With ExecutorOptions::record_op_times: per op of the rank's program (infinite: not run).
  const std::vector<OpTimes>& op_times(uint32_t rank) const { return op_times_[representative(rank)]; }
  int64_t peak_memory(uint32_t rank) const { return memory_.empty() ? 0 : memory_[representative(rank)].peak; }
  uint64_t ops_executed() const { return ops_executed_; }
  size_t plans_lowered() const { return plans_.size() + send_plans_.size(); }

  // The rank stops now: its running kernels and delays are cancelled, it issues nothing more.
  void kill_rank(uint32_t rank);
  // The GPU dies (topo::ClusterResources::fail_gpu) and every rank placed on it with it.
  void fail_gpu(uint32_t gpu);
  bool dead(uint32_t rank) const { return ranks_[representative(rank)].dead; }
  uint32_t dead_ranks() const { return dead_count_; }
  // Something failed (`what`, e.g. "node 2 (GPUs 16-23)"): the first failure is remembered for
  // the report and shown as an instant in the trace, and the watchdog starts watching. kill_rank
  // and fail_gpu call it; call it too when links go down under the job.
  void note_failure(const std::string& what);
  // An instant named `what` on every traced rank (a slowdown starting or ending, a failure).
  void mark(const std::string& what);
  // The watchdog aborted the job: when, and its report (the op that timed out, the first failure,
  // what waited on whom at that moment).
  bool aborted() const { return aborted_; }
  sim::Time failed_at() const { return failed_at_; }  // the first failure; infinite if none
  sim::Time aborted_at() const { return aborted_at_; }
  const std::string& failure() const { return failure_what_; }
  const std::string& abort_report() const { return abort_report_; }
  size_t ops_total() const { return ops_total_; }

  void on_activity_done(sim::ActivityId, uint64_t tag) override;
  void on_activity_failed(sim::ActivityId, uint64_t tag) override;
  void on_event(uint32_t delay_slot) override;
  void on_collective_done(uint64_t tag) override;
  void prefetch_done(uint64_t tag) const override;
  std::string describe_activity(uint64_t tag) const override;
  void prefetch_rank(uint32_t rank) const;  // a hint: the state complete(), pump() and its next kernel touch
  void prefetch_slot(uint32_t slot) const;  // the same, for the rank at `slot`
  size_t pending_count() const override;
  void describe_pending(std::string& out, size_t max_lines) const override;

 private:
  struct StreamState {  // 24 bytes
    uint32_t next = 0;     // position of the head op
    uint32_t seq : 31 = 0;  // collective sequence number the head op waits on
    uint32_t busy : 1 = 0;  // the head op has been issued
    sim::Time started;
    sim::Time last_done;
  };
  static_assert(sizeof(StreamState) == 24);
  struct RankState {  // 48 bytes
    sim::Time free_since;  // stream 0 idle since
    sim::Time end;
    sim::Time last_recv_send_start;  // when the sender started the most recently received message
    uint32_t ops_left = 0;
    // Copies of where_[rank], template_of_rank[rank] and traced_[rank] for the event path
    // (complete, pump, issue), which then reads one record per rank instead of four arrays.
    uint32_t stream_base = 0;
    uint32_t slot = 0;  // the rank's place in state order: its category times and call counters
    uint32_t tmpl = 0;
    // Its streams' kernels run in fluid activity slots of their own (sim::FluidModel::
    // reserve_slots), in state order like the streams: stream s's is kernel_base +
    // kernel_index_[tmpl][s]. The next kernel's record is then the next line of the walk, not a
    // random free slot; and a stream's running kernel is that slot while it is active.
    uint32_t kernel_base = sim::FluidModel::kAnySlot;
    bool dead = false;
    bool traced = false;
  };
  static_assert(sizeof(RankState) == 48);
  struct Gather {  // one per communicator group of 2 or more: the collective gathering its members
    double bytes = 0;
    uint32_t seq = 0;
    uint32_t arrived = 0;
    uint32_t first_rank = 0;
    uint32_t first_op = 0;
    uint16_t stream = 0;
    CollectiveOp op = CollectiveOp::kAllReduce;
    bool mixed = false;  // members wait on different streams
    bool v = false;      // an all-to-all-v (members' sizes differ by design)
  };
  struct CollFlight {
    uint32_t comm = 0, instance = 0, seq = 0, any_member = 0;
    uint32_t first_slot = 0;  // its first member's slot, where slot_step_[comm] says where the others are
    uint16_t stream = 0;
    bool mixed = false;
    std::unique_ptr<CollectivePlan> own_plan;  // all-to-all-v: its plan, alive until it is done
    sim::Time started;  // the last member arrived: the collective began moving bytes
  };
  struct SendFlight {
    uint32_t src = 0, dst = 0, tag = 0;
    uint16_t stream = 0;
    sim::Time start;
    uint64_t flow = 0;  // the trace arrow's id when both ends are traced; 0: none
  };
  struct Delay {
    uint32_t rank = 0;
    uint16_t stream = 0;
    sim::EventId event{};
    uint32_t flight = 0xFFFFFFFFu;  // a measured collective's flight: its fixed time elapsed;
                                    // kHostWait: the host launched the stream's head op
  };
  static constexpr uint32_t kHostWait = 0xFFFFFFFEu;

  const Program& program_of(uint32_t rank) const { return job_.templates[job_.template_of_rank[rank]]; }
  StreamState& ss(uint32_t rank, uint16_t s) { return streams_[ranks_[rank].stream_base + s]; }
  const StreamState& ss(uint32_t rank, uint16_t s) const { return streams_[ranks_[rank].stream_base + s]; }
  // A rank with state's program, through its RankState (the event path's).
  const Program& state_program(uint32_t rank) const { return job_.templates[ranks_[rank].tmpl]; }
  // The activity slot stream s of a rank with state runs its kernels in.
  uint32_t kernel_slot(const RankState& rs, uint16_t s) const { return rs.kernel_base + kernel_index_[rs.tmpl][s]; }
  bool deps_done(uint32_t rank, const Program& p, const Op& op) const;
  // JobProgram::host_overhead: when the host launches op `idx` of the rank's program after now,
  // the stream waits for it (a delay) and true is returned; false: issue it now.
  bool wait_for_host(uint32_t rank, const Program& p, uint16_t s, uint32_t idx);
  void compute_host_ready();
  std::vector<uint32_t> state_order(uint32_t world) const;
  void order_gpus_like(const std::vector<uint32_t>& order);
  void reserve_kernel_slots(const std::vector<uint32_t>& order);
  sim::Time rank_start(uint32_t rank) const {
    return step_start_ + (job_.start_offset.empty() ? sim::Time::zero() : job_.start_offset[rank]);
  }
  static constexpr uint32_t kSlotsAhead = 6;
  void prefetch_slots_after(const RankState& rs, uint16_t streams) const;
  // Issues every op of the rank that is ready, stream by stream in stream order. `streams` (bit s:
  // stream s) are the streams that may have become ready since the rank's last pump (an op's
  // Op::wakes); the others are known not to be: each was busy, finished, or found blocked on a
  // dependency that has not completed since. Programs of more than 64 streams look at all of them.
  static constexpr uint64_t kAllStreams = ~uint64_t{0};
  void pump(uint32_t rank, uint64_t streams = kAllStreams);
  void issue(uint32_t rank, const Program& p, uint32_t op_index);
  void complete(uint32_t rank, uint16_t s);
  void finish_op(uint32_t rank, const Program& p, const Op& op);
  void charge_gap(uint32_t rank, const Program& p, const Op& op);
  void issue_collective(uint32_t rank, const Program& p, uint16_t s, const Op& op, uint32_t op_index);
  void arrive(uint32_t instance, uint32_t size, uint32_t rank, uint16_t s, const Op& op, uint32_t op_index);
  void release_parked(uint32_t instance, uint32_t size);
  bool halted(uint32_t rank) const { return stopped_ || ranks_[rank].dead; }
  void issue_send(uint32_t rank, uint16_t s, const Op& op);
  void deliver(uint32_t dst, uint32_t src, uint32_t tag, sim::Time send_start, uint64_t flow);
  // The trace arrow of a message into recv slot `slot` of `rank` ends at the recv's stream now.
  void end_flow(uint32_t rank, uint16_t stream, uint64_t flow, bool inside_span);
  bool resolve_peer(uint32_t rank, const Op& op, uint32_t& peer) const;
  void fail(std::string message);
  // Group of `rank` in communicator c: instance index, size; false when rank is not a member.
  bool group_of(uint32_t rank, uint32_t c, uint32_t& instance, uint32_t& size) const;
  void members_of(uint32_t c, uint32_t any_member, std::vector<uint32_t>& out) const;
  uint32_t& seq_of(uint32_t rank, uint32_t c);
  const CollectivePlan* plan_for(uint32_t c, uint32_t instance, CollectiveOp op, double bytes, uint32_t any_member);
  const CollectivePlan& send_plan(double bytes);
  void check_algorithms() const;
  void mark_simulated();   // symmetric mode: simulated_, ranks_to_run_, state_ranks_
  void setup_symmetric();  // symmetric mode: the communicators' gathers and copies
  // Symmetric mode: per link, 1 for a fabric link that duplicates one of replica 0's (see
  // ReplicaCopies::duplicate_link); empty where the conditions do not hold for the job.
  std::vector<uint8_t> find_duplicate_links() const;
  void emit_span(uint32_t rank, const Op& op, sim::Time start, sim::Time end);
  void emit_wait(uint32_t rank, const Op& op, sim::Time start, sim::Time end);
  void link_members(const Op& op, uint32_t last, uint16_t stream, bool mixed, uint32_t seq);
  std::string describe_op(uint32_t rank, const Op& op) const;
  // Watchdog: the live rank's communication op issued earliest and not done (false if none).
  bool oldest_comm_op(uint32_t& rank, uint16_t& stream) const;
  void schedule_watchdog();
  void on_watchdog();
  void abort_job(uint32_t rank, uint16_t stream);
  void describe_hang(std::string& out) const;
  void withdraw(uint32_t rank);
  void trace_instant(uint32_t rank, uint16_t stream, const std::string& name);
  uint16_t waiting_stream(uint32_t rank, uint32_t comm, uint32_t seq) const;

  topo::ClusterResources& res_;
  sim::Simulation& sim_;
  CollectiveRuntime& runtime_;
  const JobProgram& job_;
  ClusterShape shape_;
  CostHints hints_;
  const KernelCoster* coster_;
  std::unique_ptr<ProfileKernelCoster> default_coster_;
  std::vector<std::vector<KernelCoster::Cost>> kernel_costs_;  // per template, per cost-term list
  // With JobProgram::host_overhead: per template, per op, the earliest start after the rank's start
  // that the host's dispatch allows (empty: no host model).
  std::vector<std::vector<sim::Time>> host_ready_;
  sim::HandlerId handler_;
  std::vector<uint8_t> uniform_comm_;  // per comm: its groups share plans (generated, members alike)
  sim::BigVector<RankState> ranks_;
  sim::BigVector<StreamState> streams_;
  struct Memory {
    int64_t now = 0, peak = 0;
  };
  std::vector<Memory> memory_;  // per rank, when some template has memory ops
  // Per slot (state order), the rank there and where its hot state lies, for the hints, without
  // reading its RankState: streams_ [stream_base, + streams), cat_s_ and seq_ at the slot. A
  // kernel's tag names its slot, so the completion hint reads this table in the order the
  // timestamp's events walk the slots (sequentially); by rank it was a miss per tensor-parallel
  // group at 131k GPUs.
  struct Where {
    uint32_t stream_base = 0, rank = 0;
    // The fluid activity slot of its first stream with kernel ops (kAnySlot: none): after a
    // collective, the kernel that follows starts in it, and at 131k GPUs its record, last
    // touched before the collective, had left the caches.
    uint32_t kernel_slot = sim::FluidModel::kAnySlot;
    uint16_t streams = 0;
  };
  std::vector<Where> where_;
  std::vector<uint32_t> slot_of_;  // per rank with state: its slot (RankState::slot, for prefetch_rank)
  // Per communicator: the slots of each of its groups' members, in member order, are
  // first + i x this (kNone: not so, or not known). Every generated single-axis group is, when each
  // rank has state: its members differ in one coordinate, and the state order keeps the layout's
  // order within a pipeline stage. A collective's completion then finds its members' state
  // without reading slot_of_, rank-ordered and so, in a stage's walk, a miss per group at 131k GPUs.
  std::vector<uint32_t> slot_step_;
  void compute_slot_steps();
  std::vector<std::vector<uint16_t>> kernel_index_;  // per template, per stream: among its streams with kernel ops
  std::vector<sim::Time> dead_at_;  // per rank: when it died
  std::vector<uint32_t> recv_base_;    // per rank, into arrival_
  sim::BigVector<sim::Time> arrival_;  // per receive slot: its sender's send start; infinite until arrived
  std::vector<uint32_t> free_base_;    // per rank, into free_done_
  sim::BigVector<uint8_t> free_done_;
  std::vector<std::vector<OpTimes>> op_times_;  // per rank, with record_op_times
  uint16_t ncat_ = 0;
  sim::BigVector<double> cat_s_;  // per slot (state order) x category
  // Communicators: groups (instances) and sequence counters.
  std::vector<uint32_t> inst_base_;  // per comm, into gather_
  sim::BigVector<Gather> gather_;
  std::vector<uint32_t> gen_index_;  // per comm: index among generated comms, or ~0
  uint32_t num_generated_ = 0;
  sim::BigVector<uint32_t> seq_;  // generated: slot x num_generated_; then per explicit comm, per member
  std::vector<uint64_t> explicit_seq_base_;
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> member_pos_;  // explicit: sorted (rank, position)
  struct Parked {
    uint32_t instance, rank;
    uint16_t stream;
    uint32_t op_index;
  };
  std::vector<Parked> parked_;  // members that arrived for a later collective than their group is gathering
  sim::BigVector<CollFlight> coll_flights_;
  std::vector<uint32_t> free_coll_flights_;
  sim::BigVector<SendFlight> send_flights_;
  std::vector<uint32_t> free_send_flights_;
  sim::BigVector<Delay> delays_;
  std::vector<uint32_t> free_delays_;
  std::map<std::tuple<uint32_t, uint32_t, uint8_t, double>, std::unique_ptr<CollectivePlan>> plans_;
  std::map<double, std::unique_ptr<CollectivePlan>> send_plans_;
  uint64_t plan_ids_ = 0;  // the last keep_id given to a plan of plans_ or send_plans_
  std::vector<uint32_t> scratch_members_, scratch_gpus_;
  std::deque<std::vector<uint32_t>> member_buffers_;
  size_t completion_depth_ = 0;
  struct PumpRequest {
    uint32_t rank;
    uint64_t streams;
  };
  std::vector<PumpRequest> pump_queue_;
  bool pumping_ = false;
  uint32_t pass_rank_ = 0xFFFFFFFFu;  // the rank pump() is passing over, whether one of its ops
  bool completed_in_pass_ = false;    // completed during that pass, and the streams those
  uint64_t pass_wakes_ = 0;           // completions may have made ready
  uint32_t ranks_done_ = 0, dead_count_ = 0;
  uint32_t ranks_to_run_ = 0;  // the world, or in symmetric mode the ranks of replica 0
  uint32_t state_ranks_ = 0;   // ranks with state (ranks_, streams_, ...): ranks [0, state_ranks_)
  // Symmetric mode: which ranks run (per rank), how many members of a group of each communicator
  // run (per comm), and the copies transfers stand for: a message's in every other replica
  // (copies_); a collective's along the replica axes its group does not span (per comm: a DP
  // group with dp_outer > 1 stands for the DP groups of the other outer replicas).
  bool opt_symmetric_ = false;
  std::vector<uint8_t> simulated_;
  std::vector<uint32_t> gather_need_;
  ReplicaCopies copies_;
  std::vector<ReplicaCopies> comm_copies_;
  std::vector<uint8_t> duplicate_link_;
  uint64_t ops_executed_ = 0;
  sim::Time step_start_, step_end_;
  std::string error_;
  // Failure and watchdog
  sim::Time watchdog_;
  bool watching_ = false;          // a failure happened: communication ops are watched
  bool watchdog_armed_ = false;    // an event is scheduled at watchdog_at_
  sim::EventId watchdog_event_{};
  bool aborted_ = false;
  sim::Time failed_at_ = sim::Time::infinite(), aborted_at_ = sim::Time::infinite();
  std::string failure_what_, abort_report_;
  size_t ops_total_ = 0;
  bool stopped_ = false;  // error_ is set: nothing more is issued
  // trace
  std::vector<uint8_t> traced_;
  uint64_t flows_ = 0;                 // trace arrows drawn so far (their ids)
  std::vector<uint64_t> flow_of_slot_;  // per receive slot: its arrow, until the recv runs (traced jobs only)
  std::vector<std::vector<uint32_t>> bus_names_;  // per template: program name id -> bus name id
  uint32_t key_mb_ = sim::kNoName, key_layer_ = sim::kNoName, key_bytes_ = sim::kNoName, key_ext_ = sim::kNoName;
  std::vector<uint32_t> cat_names_;        // per breakdown category: its bus name (the spans' `cat`)
  uint32_t wait_name_ = sim::kNoName;      // "wait": a communication op waiting for its peers
  // While completing a collective's members or a message's recv: when its bytes began to move
  // (the last member arrived; the sender started). The op's span starts there, and a "wait" span
  // covers the time before it.
  sim::Time moving_since_ = sim::Time::infinite();
};

// A JobProgram run alone on a cluster (a replayed or imported trace): resources on `sim`, a
// collective runtime with the profile's step overhead, the executor; then the run. The caller
// owns the simulation (to attach observers first) and finishes it.
struct ProgramRun {
  bool finished = false;
  std::string problem;  // the executor's error or the deadlock report, when not finished
  sim::Time end;        // the last op's end
  std::vector<sim::Time> rank_end;
  std::vector<std::vector<OpTimes>> op_times;  // with ExecutorOptions::record_op_times
};
ProgramRun run_program(sim::Simulation& sim, const topo::Topology& topo, const topo::GpuSpec& gpu,
                       const topo::HardwareProfile& profile, const JobProgram& job, const ExecutorOptions& opt = {});

}  // namespace wl
