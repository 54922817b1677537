#include "workloads/training/step.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/error.h"
#include "sim/units.h"
#include <set>
#include <tuple>
#include <unordered_map>

#include "workloads/collectives/cluster_shape.h"

namespace wl {

std::string describe_oom(const std::vector<StageMemory>& memory, double capacity) {
  // The stage over by the most, in full; the others over too, in one clause (a deep pipeline's
  // message was a line per stage, over 1,000 characters); then what would make it fit.
  const StageMemory* worst = nullptr;
  std::vector<int64_t> others;
  double least = 0, most = 0;
  for (const auto& m : memory) {
    if (m.bytes.total() <= capacity) continue;
    if (!worst || m.bytes.total() > worst->bytes.total()) worst = &m;
  }
  if (!worst) return "";
  for (const auto& m : memory) {
    if (m.bytes.total() <= capacity || &m == worst) continue;
    least = others.empty() ? m.bytes.total() : std::min(least, m.bytes.total());
    most = others.empty() ? m.bytes.total() : std::max(most, m.bytes.total());
    others.push_back(m.stage);
  }
  const std::pair<const char*, double> parts[] = {{"parameters", worst->bytes.params},
                                                   {"gradients", worst->bytes.grads},
                                                   {"optimizer states", worst->bytes.optimizer},
                                                   {"activations", worst->bytes.activations},
                                                   {"communication buffers", worst->bytes.comm_buffers}};
  auto biggest = *std::max_element(std::begin(parts), std::end(parts),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
  const double total = worst->bytes.total();
  std::string out = "pipeline stage " + std::to_string(worst->stage) + " ranks need " + sim::format_bytes(total) +
                    " of " + sim::format_bytes(capacity) + " HBM (over by " + sim::format_bytes(total - capacity) +
                    "); largest part: " + biggest.first + " " + sim::format_bytes(biggest.second);
  const bool activations = biggest.first == std::string("activations");
  if (activations)
    out += " (" + sim::count_noun(static_cast<uint64_t>(worst->in_flight_chunks), "chunk-forward", "chunk-forwards") +
           " in flight)";
  if (!others.empty()) {
    // Stages as ranges: "1-4, 6".
    std::string list;
    for (size_t i = 0; i < others.size();) {
      size_t j = i;
      while (j + 1 < others.size() && others[j + 1] == others[j] + 1) ++j;
      if (!list.empty()) list += ", ";
      list += std::to_string(others[i]) + (j > i ? "-" + std::to_string(others[j]) : "");
      i = j + 1;
    }
    out += "; " + std::string(others.size() == 1 ? "stage " : "stages ") + list + " over too (" +
           (others.size() == 1 ? "needing " + sim::format_bytes(least)
                               : "needing " + sim::format_bytes(least) + " to " + sim::format_bytes(most)) +
           ")";
  }
  // What shrinks the largest part (Korthikanti et al. 2022 for activations: recompute, and tp with
  // sequence parallelism or cp, divide them; more pipeline stages do not, as 1F1B's first stage
  // keeps p micro-batches of L/p layers in flight; ZeRO / FSDP shard the model states over dp).
  if (activations)
    out += "; to fit, keep fewer activations: training.recompute selective or full, a smaller "
           "training.micro_batch, or more tp or cp";
  else if (biggest.first != std::string("communication buffers"))
    out += "; to fit, shard the model states: parallelism.data_parallel zero1, zero2 or fsdp, or more tp or pp";
  return out;
}

std::string step_fingerprint(const StepResult& r) {
  auto ns = [](double seconds) { return std::to_string(std::llround(seconds * 1e9)); };
  const Breakdown& b = r.mean;
  std::string out = "step_ns=" + ns(r.step_time_s) + " compute_ns=" + ns(b.compute) +
                    " tp_ns=" + ns(b.exposed[static_cast<size_t>(Dim::kTp)]) +
                    " cp_ns=" + ns(b.exposed[static_cast<size_t>(Dim::kCp)]) +
                    " pp_ns=" + ns(b.exposed[static_cast<size_t>(Dim::kPp)]) +
                    " dp_ns=" + ns(b.exposed[static_cast<size_t>(Dim::kDp)]) +
                    " dp_outer_ns=" + ns(b.exposed[static_cast<size_t>(Dim::kDpOuter)]) + " bubble_ns=" + ns(b.bubble) +
                    " optimizer_ns=" + ns(b.optimizer) + " host_ns=" + ns(b.host) + " mem=";
  for (size_t i = 0; i < r.memory.size(); ++i) {
    if (i) out += '/';
    out += std::to_string(std::llround(r.memory[i].bytes.total()));
  }
  out += r.fits ? " fits" : " oom";
  return out;
}

std::vector<BreakdownPart> breakdown_parts(const Breakdown& b) {
  return {{"compute", "compute_s", b.compute},
          {"exposed tp comm", "exposed_tp_s", b.exposed[static_cast<size_t>(Dim::kTp)]},
          {"exposed cp comm", "exposed_cp_s", b.exposed[static_cast<size_t>(Dim::kCp)]},
          {"exposed pp comm", "exposed_pp_s", b.exposed[static_cast<size_t>(Dim::kPp)]},
          {"exposed dp comm", "exposed_dp_s",
           b.exposed[static_cast<size_t>(Dim::kDp)] + b.exposed[static_cast<size_t>(Dim::kDpOuter)]},
          {"pipeline bubble", "bubble_s", b.bubble},
          {"optimizer", "optimizer_s", b.optimizer},
          {"host launch wait", "host_wait_s", b.host}};
}

double Breakdown::total() const {
  double t = compute + optimizer + bubble + host;
  for (double e : exposed) t += e;
  return t;
}

TrainingStep::TrainingStep(topo::ClusterResources& res, const TrainingSettings& ts,
                           const std::vector<uint32_t>& trace_ranks, StepOptions options)
    : TrainingStep(res.topology(), res.gpu_spec(), res.profile(), ts, trace_ranks, std::move(options)) {
  attach(res);
}

TrainingStep::TrainingStep(const topo::Topology& topo, const topo::GpuSpec& gpu, const topo::HardwareProfile& profile,
                           const TrainingSettings& ts, const std::vector<uint32_t>& trace_ranks, StepOptions options)
    : topo_(topo), gpu_(gpu), ts_(ts), job_(ts.job), options_(std::move(options)) {
  job_.profile = profile;  // the cluster's hardware profile is the one that counts (host_overhead too)
  plan_ = build_training(job_);
  result_.memory = plan_.memory;
  // The framework gets the device's memory less the CUDA context and one set of NCCL buffers per
  // communicator the rank uses (one per parallel dimension larger than 1; pipeline send/recv too).
  for (int64_t d : {job_.tp, job_.cp, job_.pp, job_.dp, job_.dp_outer}) result_.communicators += d > 1 ? 1 : 0;
  result_.device_bytes = static_cast<double>(job_.gpu.hbm_capacity_bytes);
  result_.reserved_bytes = static_cast<double>(job_.profile.context_memory) +
                           static_cast<double>(job_.profile.nccl_memory) * result_.communicators;
  result_.capacity_bytes = std::max(0.0, result_.device_bytes - result_.reserved_bytes);
  for (const auto& m : plan_.memory)
    if (m.bytes.total() > result_.capacity_bytes) result_.fits = false;
  if (!result_.fits && !ts.allow_oom)
    throw sim::UserError(
        "out of memory: " + describe_oom(plan_.memory, result_.capacity_bytes) + " (the " +
        sim::format_bytes(result_.capacity_bytes) + " left of the " + job_.gpu.name + "'s " +
        sim::format_bytes(result_.device_bytes) + " after cluster.profile.context_memory " +
        sim::format_bytes(static_cast<double>(job_.profile.context_memory)) + " and nccl_memory " +
        sim::format_bytes(static_cast<double>(job_.profile.nccl_memory)) + " for each of " +
        sim::count_noun(static_cast<uint64_t>(result_.communicators), "communicator", "communicators") +
        "); set workload.memory.allow_oom: true to simulate anyway");
  result_.tokens_per_step = plan_.tokens_per_step;
  model_flops_per_step_ = plan_.model_flops_per_step;
  jp_ = training_job_program(job_, plan_, ts.algorithm_at);
  if (!options_.gpu_of_rank.empty()) {
    SIM_ASSERT(options_.gpu_of_rank.size() == jp_.world(), "StepOptions: one GPU per rank");
    jp_.gpu_of_rank = options_.gpu_of_rank;
  }
  const Layout& layout = jp_.layout;
  const JobProgram& jp = jp_;
  // tp, pp and dp always; cp and dp_outer where the layout has them.
  jp_.rank_label = [&layout, &topo = topo_, &jp](uint32_t rank) {
    std::string label = "rank " + std::to_string(rank) + " (node " + std::to_string(topo.node_of(jp.gpu_of(rank))) +
                        ", tp " + std::to_string(layout.coord(rank, Dim::kTp));
    if (layout.size(Dim::kCp) > 1) label += " cp " + std::to_string(layout.coord(rank, Dim::kCp));
    label += " pp " + std::to_string(layout.coord(rank, Dim::kPp)) + " dp " + std::to_string(layout.coord(rank, Dim::kDp));
    if (layout.size(Dim::kDpOuter) > 1) label += " dp_outer " + std::to_string(layout.coord(rank, Dim::kDpOuter));
    return label + ")";
  };
  // Tensor parallelism outside one scale-up domain: its collectives, on the critical path of every
  // layer, cross the NICs. Narayanan et al., SC'21, takeaway 1: tensor parallelism up to the GPUs
  // of a server (Megatron-LM and torchtitan keep it within a node). Allowed (a what-if), but said.
  if (job_.tp > 1 && topo_.has_scale_up() && topo_.gpus_per_node() > 0) {
    std::vector<uint32_t> members;
    layout.members(0, Dim::kTp, members);
    std::vector<uint32_t> nodes;
    for (uint32_t r : members) nodes.push_back(topo_.node_of(jp_.gpu_of(r)));
    std::sort(nodes.begin(), nodes.end());
    const auto spanned = static_cast<size_t>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
    if (spanned > 1)
      result_.notes.push_back("tp " + std::to_string(job_.tp) + " spans " + std::to_string(spanned) + " nodes of " +
                              std::to_string(topo_.gpus_per_node()) +
                              " GPUs: every layer's tp collectives cross the scale-out network");
  }
  if (ts.fidelity != Fidelity::kExpanded) {
    const std::string problem = symmetric_problem(trace_ranks);
    if (problem.empty()) {
      symmetric_ = true;
    } else if (ts.fidelity == Fidelity::kSymmetric && job_.dp * job_.dp_outer > 1) {
      throw sim::ConfigError((ts.fidelity_at.empty() ? std::string("workload.fidelity") : ts.fidelity_at) +
                             ": symmetric mode does not hold for this step: " + problem +
                             " (fidelity: auto runs it expanded instead)");
    } else {
      result_.fidelity_note = "symmetric mode does not hold: " + problem + "; ran expanded";
    }
  }
  if (symmetric_) result_.fidelity = "symmetric";
  trace_ranks_ = trace_ranks;
}

std::vector<uint8_t> TrainingStep::modelled_gpus() const {
  if (!symmetric_) return {};
  // Symmetric mode runs on the identity placement (symmetric_problem): replica 0's ranks' GPUs.
  const Layout& lay = jp_.layout;
  std::vector<uint8_t> out(topo_.num_gpus(), 0);
  for (uint32_t r = 0; r < lay.world(); ++r)
    if (lay.coord(r, Dim::kDp) == 0 && lay.coord(r, Dim::kDpOuter) == 0) out[jp_.gpu_of(r)] = 1;
  return out;
}

void TrainingStep::attach(topo::ClusterResources& res) {
  SIM_ASSERT(res_ == nullptr, "TrainingStep::attach: once");
  SIM_ASSERT(&res.topology() == &topo_, "TrainingStep::attach: the resources of the cluster it was prepared for");
  if (!res.models_every_gpu()) {
    SIM_ASSERT(symmetric_, "TrainingStep::attach: an expanded step needs every GPU modelled");
    const std::vector<uint8_t> need = modelled_gpus();
    for (uint32_t g = 0; g < need.size(); ++g)
      SIM_ASSERT(!need[g] || res.modelled(g), "TrainingStep::attach: a GPU the step models has no resources");
  }
  res_ = &res;
  RuntimeOptions ro = runtime_options_for(res);
  runtime_ = std::make_unique<CollectiveRuntime>(res, ro);
  // Compute kernels are costed by the executor from the cluster's profile at the job's precision.
  coster_ = std::make_unique<ProfileKernelCoster>(res.profile(), job_.non_gemm_peak_flops(), job_.gpu.hbm_bandwidth_Bps,
                                                  job_.peak_flops());
  ExecutorOptions eo;
  eo.trace_ranks = trace_ranks_;
  eo.coster = coster_.get();
  eo.watchdog = options_.watchdog;
  eo.symmetric_dp = symmetric_;
  exec_ = std::make_unique<ProgramExecutor>(res, *runtime_, jp_, cluster_shape_of(res), cost_hints_for(res, ro), eo);
  result_.ranks_simulated = exec_->ranks_simulated();
  result_.fabric_links_folded = exec_->fabric_links_folded();
  res.simulation().add_pending_work(exec_.get());
}

std::string TrainingStep::symmetric_problem(const std::vector<uint32_t>& trace_ranks) const {
  const Layout& lay = jp_.layout;
  if (job_.dp * job_.dp_outer <= 1) return "the job has one data-parallel replica (nothing to fold)";
  if (!options_.failures.empty()) return "failures or slowdowns during the step (failures:) break the symmetry";
  if (!options_.failed_gpus.empty() || !options_.failed_links.empty())
    return "the cluster is degraded (failed GPUs or links) under some replicas";
  if (!jp_.gpu_of_rank.empty()) return "ranks are placed on other GPUs than their own (spares in failed nodes' places)";
  if (!jp_.start_offset.empty()) return "ranks start at different times";
  const auto kind = topo_.kind();
  if (kind != topo::TopologyKind::kCluster)
    return std::string("the network is a ") + (kind == topo::TopologyKind::kTorus ? "torus" : "custom edge list") +
           " (symmetry between replicas is established for NVSwitch nodes and fat-trees only)";
  for (uint32_t r : trace_ranks)
    if (r < lay.world() && (lay.coord(r, Dim::kDp) != 0 || lay.coord(r, Dim::kDpOuter) != 0))
      return "output.trace_ranks names rank " + std::to_string(r) + ", which is in data-parallel replica " +
             std::to_string(lay.coord(r, Dim::kDp)) + " (symmetric mode simulates replica 0 only)";
  // Replicas hold whole nodes: a node's GPUs are all in one replica (so the scale-up links of a
  // node carry one replica's traffic only).
  const uint32_t gpn = std::max<uint32_t>(1, topo_.gpus_per_node());
  for (uint32_t r = 0; r < lay.world(); ++r) {
    const uint32_t first = r / gpn * gpn;
    auto replica = [&](uint32_t x) { return std::make_pair(lay.coord(x, Dim::kDp), lay.coord(x, Dim::kDpOuter)); };
    if (r != first && replica(r) != replica(first))
      return "data-parallel replicas share nodes (ranks " + std::to_string(first) + " and " + std::to_string(r) +
             " of node " + std::to_string(r / gpn) + " are in different replicas); symmetric mode needs whole nodes per "
             "replica";
  }
  if (std::string fabric = fabric_asymmetry(); !fabric.empty()) return fabric;
  auto spans = [](Dim d) { return d == Dim::kDp || d == Dim::kDpOuter; };
  for (const Communicator& cm : jp_.comms)
    if (!cm.generated) return "communicator '" + cm.name + "' lists its members explicitly";
  for (const Program& p : jp_.templates) {
    if (p.has_absolute_recvs()) return "a program receives from an absolute rank";
    for (const auto& [axis, offset] : p.relative_recv_peers())
      if (axis < kNumDims && spans(static_cast<Dim>(axis)))
        return "a program exchanges messages between data-parallel replicas";
  }
  // Every collective spanning replicas must load its members alike: in each transfer of its plan
  // every member sends and receives the same number of hops (a ring does; a tree's inner ranks
  // carry more than its leaves, so replicas in different tree positions would see different
  // contention). Lowered here on replica 0's groups as the executor will.
  {
    const ClusterShape shape = cluster_shape_of(topo_, job_.profile);
    const RuntimeOptions ro = runtime_options_for(gpu_, job_.profile);
    const CostHints hints = cost_hints_for(topo_, gpu_, job_.profile, ro);
    std::set<std::tuple<uint32_t, CollectiveOp, double>> checked;
    std::vector<uint8_t> seen(jp_.templates.size(), 0);
    std::vector<uint32_t> members;
    for (uint32_t r = 0; r < lay.world(); ++r) {
      if (lay.coord(r, Dim::kDp) != 0 || lay.coord(r, Dim::kDpOuter) != 0 || seen[jp_.template_of_rank[r]]++) continue;
      for (const Op& op : jp_.templates[jp_.template_of_rank[r]].ops()) {
        if (op.kind != OpKind::kCollective || op.comm >= jp_.comms.size()) continue;
        const Communicator& cm = jp_.comms[op.comm];
        if (!spans(cm.axis) && !(cm.also != Dim::kCount && spans(cm.also))) continue;
        if (lay.size(cm.axis, cm.also) <= 1 || !checked.emplace(op.comm, op.coll, op.bytes).second) continue;
        if (op.coll == CollectiveOp::kAllToAll && op.index != 0)
          return "an all-to-all-v across replicas on communicator '" + cm.name + "' (members' sizes differ)";
        CollectiveRequest req;
        req.op = op.coll;
        req.algorithm = cm.algorithm;
        req.bytes = op.bytes;
        lay.members(r, cm.axis, cm.also, members);
        for (uint32_t m : members) req.group.push_back(jp_.gpu_of(m));
        if (!collective_problem(req, shape).empty()) continue;  // the executor reports it
        const CollectivePlan plan = lower_collective(req, shape, hints);
        // Per GPU (= rank: the placement is the identity): hops out and in. Members that mirror
        // one rank of replica 0 must carry the same.
        std::unordered_map<uint32_t, std::pair<uint32_t, uint32_t>> load, of_rep;
        for (const Phase& ph : plan.phases)
          for (const Transfer& tr : ph.transfers) {
            load.clear();
            of_rep.clear();
            for (auto [a, b] : tr.hops) {
              ++load[a].first;
              ++load[b].second;
            }
            for (uint32_t g : req.group) {
              const uint32_t rep = lay.in_replica0(g);
              auto [it, first] = of_rep.emplace(rep, load[g]);
              if (!first && it->second != load[g])
                return "the " + std::string(op_name(op.coll)) + " on communicator '" + cm.name + "' runs " +
                       std::string(algorithm_name(plan.algorithm)) +
                       ", which loads the replicas unevenly (GPUs " + std::to_string(rep) + " and " +
                       std::to_string(g) + " hold the same place in different replicas but send or receive "
                       "different numbers of hops; a ring loads every replica alike: set workload.collectives." +
                       std::string(dim_name(cm.axis)) + ": ring)";
            }
          }
      }
    }
  }
  for (uint32_t r = 0; r < lay.world(); ++r) {
    const uint32_t rep = lay.in_replica0(r);
    if (jp_.template_of_rank[r] != jp_.template_of_rank[rep])
      return "rank " + std::to_string(r) + " runs another program than rank " + std::to_string(rep) + " of replica 0";
  }
  return "";
}

// A transfer of replica 0 stands for its copies shifted by the replicas' offsets, whose routes load
// the fabric with the copies' weight but whose own contention is taken to be the representative's.
// That holds where the shift maps the fabric onto itself for the routes involved: at every tier,
// each offset either moves whole, equally sized groups (o a multiple of the tier's group, in
// nodes) or keeps every node involved in its group; and parallel uplinks a copy may cross are
// chosen alike (D-mod-K: the offset moves the key by a multiple of the uplinks; a flow hash
// differs per flow). Leaf groups of 3 nodes under replicas of 4 nodes, for one, put a pipeline
// send of one replica inside a leaf and its copy across two leaves (step and breakdown then
// differed from the expanded run). The nodes involved: for an offset along dp, those with dp
// coordinate 0 (a dp_outer collective's copies), along dp_outer those with dp_outer 0, along both
// replica 0's.
std::string TrainingStep::fabric_asymmetry() const {
  const auto& tiers = topo_.fat_tree_tiers();
  if (tiers.empty()) return "";
  const Layout& lay = jp_.layout;
  const uint32_t gpn = std::max<uint32_t>(1, topo_.gpus_per_node());
  const uint32_t nodes = topo_.num_nodes();
  const uint32_t dp = static_cast<uint32_t>(lay.size(Dim::kDp)), outer = static_cast<uint32_t>(lay.size(Dim::kDpOuter));
  // Group size in nodes per tier.
  std::vector<uint64_t> group(tiers.size());
  uint64_t g = 1;
  for (size_t k = 0; k < tiers.size(); ++k) group[k] = g *= std::max<uint32_t>(1, tiers[k].group_size);
  const uint32_t per_rail = (gpn + topo_.rails() - 1) / topo_.rails();
  auto group_nodes = [&](size_t k, uint64_t n) {
    return std::min<uint64_t>(group[k], nodes - n / group[k] * group[k]);
  };
  // Nodes whose transfers have copies at an offset (rank r on GPU r): along dp only, those with
  // dp 0; along dp_outer only, those with dp_outer 0; along both, replica 0's.
  std::vector<uint32_t> src_by[3];
  for (uint32_t r = 0; r < lay.world(); r += gpn) {
    const bool d0 = lay.coord(r, Dim::kDp) == 0, o0 = lay.coord(r, Dim::kDpOuter) == 0;
    if (d0) src_by[0].push_back(r / gpn);
    if (o0) src_by[1].push_back(r / gpn);
    if (d0 && o0) src_by[2].push_back(r / gpn);
  }
  for (uint32_t j = 0; j < outer; ++j)
    for (uint32_t i = 0; i < dp; ++i) {
      if (i + j == 0) continue;
      const uint64_t off_gpus = uint64_t{i} * lay.stride(Dim::kDp) + uint64_t{j} * lay.stride(Dim::kDpOuter);
      if (off_gpus % gpn != 0) return "";  // replicas share nodes: reported by the caller
      const uint64_t off = off_gpus / gpn;
      const std::vector<uint32_t>& src = src_by[j == 0 ? 0 : i == 0 ? 1 : 2];
      for (size_t k = 0; k < tiers.size(); ++k) {
        // Do routes between the nodes involved leave tier-k groups (at tier 0 with several rails
        // also between rails), so that a group's size (its uplinks' capacity) matters?
        bool used = k == 0 && topo_.rails() > 1 && (!topo_.has_scale_up() || src.size() > 1);
        for (uint32_t a : src) used = used || a / group[k] != src.front() / group[k];
        // The shift must map groups to groups one to one: nodes sharing a group keep sharing one,
        // nodes in different groups stay apart, and (where routes leave them) the image group
        // is as large as the original.
        std::unordered_map<uint64_t, uint64_t> fwd, back;
        for (uint32_t a : src) {
          if (a + off >= nodes) continue;
          const uint64_t ga = a / group[k], gb = (a + off) / group[k];
          const bool consistent = fwd.emplace(ga, gb).first->second == gb && back.emplace(gb, ga).first->second == ga;
          const bool sized = !used || group_nodes(k, a) == group_nodes(k, a + off);
          if (!consistent || !sized)
            return "the data-parallel replicas sit differently in the fabric (node " + std::to_string(a) +
                   " and its image " + std::to_string(a + off) + " in another replica lie in " +
                   (consistent ? "groups of different sizes" : "groups that do not correspond") + " of tier '" +
                   tiers[k].name + "', " + std::to_string(group[k]) + " nodes each); symmetric mode needs each "
                   "replica to hold whole groups of every tier or lie inside one";
        }
        // Tier k + 1's parallel uplinks, crossed where the nodes involved span tier-k groups (at
        // tier 1 also between rails).
        if (k + 1 < tiers.size() && tiers[k + 1].uplinks > 1 && used) {
          if (topo_.uplink_policy() == topo::UplinkPolicy::kFlowHash)
            return "tier '" + tiers[k + 1].name + "' picks among " + std::to_string(tiers[k + 1].uplinks) +
                   " uplinks by flow hash (uplink_policy: flow-hash), so a replica's copies take other uplinks "
                   "than replica 0's (d-mod-k with uplinks dividing a replica's GPUs per rail keeps them alike)";
          if (off * per_rail % tiers[k + 1].uplinks != 0)
            return "tier '" + tiers[k + 1].name + "' picks among " + std::to_string(tiers[k + 1].uplinks) +
                   " uplinks by D-mod-K and replicas " + std::to_string(off) + " nodes apart map to different ones "
                   "(symmetric mode needs the uplinks to divide the offset between replicas in GPUs per rail, " +
                   std::to_string(off * per_rail) + ")";
        }
      }
    }
  return "";
}

TrainingStep::~TrainingStep() {
  if (exec_) res_->simulation().remove_pending_work(exec_.get());  // the simulation may outlive the step
}

void TrainingStep::start() {
  SIM_ASSERT(res_ != nullptr, "TrainingStep::start before attach");
  for (uint32_t g : options_.failed_gpus) res_->fail_gpu(g);
  for (uint32_t l : options_.failed_links) res_->fail_link(l);
  if (!options_.failures.empty()) injector_ = std::make_unique<FailureInjector>(*res_, *exec_, options_.failures);
  exec_->start();
}

StepResult TrainingStep::finish(const sim::RunResult& run) {
  StepResult r = result_;
  const ProgramExecutor& exec = *exec_;
  if (!exec.error().empty()) {
    r.outcome = StepOutcome::kError;
    r.report = exec.error();
  } else if (exec.aborted()) {
    r.outcome = StepOutcome::kAborted;
    r.report = exec.abort_report();
  } else if (run.deadlocked || !exec.finished()) {
    r.outcome = StepOutcome::kStuck;
    r.report = run.deadlock_report;
  }
  r.watchdog_s = options_.watchdog.is_infinite() ? 0 : options_.watchdog.seconds();
  if (!exec.failed_at().is_infinite()) {
    r.failure = exec.failure();
    r.failed_at_s = (exec.failed_at() - exec.step_start()).seconds();
  }
  if (exec.aborted()) r.aborted_at_s = (exec.aborted_at() - exec.step_start()).seconds();
  const Layout& layout = jp_.layout;
  r.step_time_s = (exec.step_end() - exec.step_start()).seconds();
  r.tokens_per_s = r.step_time_s > 0 ? r.tokens_per_step / r.step_time_s : 0;
  r.peak_flops = job_.peak_flops();
  double gpus = static_cast<double>(layout.world());
  r.tflops_per_gpu = r.step_time_s > 0 ? model_flops_per_step_ / r.step_time_s / gpus / 1e12 : 0;
  r.mfu = r.tflops_per_gpu * 1e12 / r.peak_flops;
  r.micro_batches = job_.micro_batches();
  r.per_stage.assign(static_cast<size_t>(job_.pp), Breakdown{});
  std::vector<double> count(static_cast<size_t>(job_.pp), 0);
  for (uint32_t rank = 0; rank < layout.world(); ++rank) {
    Breakdown b;
    b.compute = exec.category_seconds(rank, TrainingCategory::kCompute);
    b.optimizer = exec.category_seconds(rank, TrainingCategory::kOptimizer);
    b.bubble = exec.category_seconds(rank, TrainingCategory::kBubble);
    b.host = exec.category_seconds(rank, TrainingCategory::kHost);
    for (size_t d = 0; d < kNumDims; ++d) b.exposed[d] = exec.category_seconds(rank, category_of(static_cast<Dim>(d)));
    auto st = layout.coord(rank, Dim::kPp);
    auto add = [](Breakdown& into, const Breakdown& x) {
      into.compute += x.compute;
      into.optimizer += x.optimizer;
      into.bubble += x.bubble;
      into.host += x.host;
      for (size_t d = 0; d < kNumDims; ++d) into.exposed[d] += x.exposed[d];
    };
    add(r.mean, b);
    add(r.per_stage[st], b);
    count[st] += 1;
  }
  auto scale = [](Breakdown& b, double k) {
    b.compute *= k;
    b.optimizer *= k;
    b.bubble *= k;
    b.host *= k;
    for (double& e : b.exposed) e *= k;
  };
  scale(r.mean, 1.0 / gpus);
  for (size_t s = 0; s < r.per_stage.size(); ++s) scale(r.per_stage[s], 1.0 / count[s]);
  r.events = res_->simulation().events_processed();
  r.ops = exec.ops_executed();
  r.ops_total = exec.ops_total();
  r.rank_classes = jp_.templates.size();
  r.plans = exec.plans_lowered();
  return r;
}

StepResult run_training_step(topo::ClusterResources& res, const TrainingSettings& ts,
                             const std::vector<uint32_t>& trace_ranks, StepHook* hook, StepOptions options) {
  TrainingStep step(res, ts, trace_ranks, std::move(options));
  step.start();
  if (hook) hook->before_run(step.executor());
  auto run = res.simulation().run();
  return step.finish(run);
}

}  // namespace wl
