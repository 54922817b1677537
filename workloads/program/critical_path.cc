#include "workloads/program/critical_path.h"

#include <algorithm>

#include "sim/error.h"

namespace wl {

namespace {

constexpr uint32_t kNoOp = 0xFFFFFFFFu;

// Per rank and explicit communicator: its collective ops in the order the rank issued them (the
// order the executor numbers a communicator's collectives in), and each op's place in that list.
struct CollectiveOrder {
  std::vector<std::vector<std::vector<uint32_t>>> ops;  // [rank][comm] -> op indices by issue
  std::vector<std::vector<uint32_t>> ordinal;           // [rank][op] -> place, kNoOp if none
};

CollectiveOrder collective_order(const JobProgram& job, const std::vector<std::vector<OpTimes>>& times) {
  CollectiveOrder co;
  const uint32_t n = job.world();
  co.ops.resize(n);
  co.ordinal.resize(n);
  for (uint32_t r = 0; r < n; ++r) {
    const Program& p = job.templates[job.template_of_rank[r]];
    co.ops[r].resize(job.comms.size());
    co.ordinal[r].assign(p.ops().size(), kNoOp);
    for (uint32_t i = 0; i < p.ops().size(); ++i) {
      const Op& op = p.op(i);
      if (op.kind == OpKind::kCollective && op.comm < job.comms.size() && !job.comms[op.comm].members.empty() &&
          !times[r][i].start.is_infinite())
        co.ops[r][op.comm].push_back(i);
    }
    for (auto& list : co.ops[r]) {
      std::stable_sort(list.begin(), list.end(),
                       [&](uint32_t a, uint32_t b) { return times[r][a].start < times[r][b].start; });
      for (uint32_t k = 0; k < list.size(); ++k) co.ordinal[r][list[k]] = k;
    }
  }
  return co;
}

}  // namespace

CriticalPath critical_path(const JobProgram& job, const std::vector<std::vector<OpTimes>>& times, uint32_t rank) {
  CriticalPath cp;
  const uint32_t n = job.world();
  if (times.size() != n || rank >= n) throw sim::UserError("critical_path: no op times for rank " + std::to_string(rank));
  cp.category_s.assign(job.categories.size(), 0.0);
  cp.rank_s.assign(n, 0.0);
  const CollectiveOrder order = collective_order(job, times);
  auto program = [&](uint32_t r) -> const Program& { return job.templates[job.template_of_rank[r]]; };
  // The dependency of (r, o) that ended last: its stream predecessor or an explicit dependency.
  auto predecessor = [&](uint32_t r, uint32_t o) {
    const Program& p = program(r);
    const Op& op = p.op(o);
    uint32_t best = kNoOp;
    auto consider = [&](uint32_t d) {
      if (times[r][d].end.is_infinite()) return;
      if (best == kNoOp || times[r][d].end > times[r][best].end) best = d;
    };
    if (op.stream != kNoStream && op.pos > 0) consider(p.stream_ops(op.stream)[op.pos - 1]);
    const DepRef* d = p.dep_refs(op);
    for (uint32_t i = 0; i < op.deps_count; ++i) consider(d[i].op);
    return best;
  };
  // The rank's last op to end.
  uint32_t o = kNoOp;
  for (uint32_t i = 0; i < times[rank].size(); ++i)
    if (!times[rank][i].end.is_infinite() && (o == kNoOp || times[rank][i].end >= times[rank][o].end)) o = i;
  if (o == kNoOp) return cp;
  uint32_t r = rank;
  sim::Time t = times[r][o].end;
  cp.length_s = t.seconds();
  for (;;) {
    const Op& op = program(r).op(o);
    const OpTimes ot = times[r][o];
    cp.waiting_s += (t - ot.end).seconds();
    sim::Time begin = ot.start;
    uint32_t nr = r, no = o;
    if (op.kind == OpKind::kCollective && order.ordinal[r][o] != kNoOp) {
      // Cross to the member that arrived last.
      const uint32_t k = order.ordinal[r][o];
      for (uint32_t m : job.comms[op.comm].members) {
        const auto& list = order.ops[m][op.comm];
        if (k >= list.size()) continue;
        const sim::Time a = times[m][list[k]].start;
        if (a > begin) {
          begin = a;
          nr = m;
          no = list[k];
        }
      }
    }
    const double own = (ot.end - begin).seconds();
    cp.category_s[op.category < cp.category_s.size() ? op.category : 0] += own;
    cp.rank_s[r] += own;
    ++cp.ops;
    t = begin;
    const uint32_t p = predecessor(nr, no);
    if (p == kNoOp) break;
    r = nr;
    o = p;
  }
  cp.waiting_s += t.seconds();  // before the path's first op
  return cp;
}

}  // namespace wl
