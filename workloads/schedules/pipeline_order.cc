// workloads/schedules/pipeline_order.cc: per-rank pipeline orders and the reference list
// scheduler. See pipeline_order.h for the contract.
#include "workloads/schedules/pipeline_order.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <sstream>
#include <string>

#include "sim/error.h"

namespace wl {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw sim::ConfigError(msg); }

std::string schedule_name(PipelineSchedule s) { return std::string(kPipelineScheduleNames.name(s)); }

const char* pass_name(PassKind k) {
  switch (k) {
    case PassKind::kForward: return "F";
    case PassKind::kBackward: return "Bfull";
    case PassKind::kBackwardInput: return "B";
    case PassKind::kBackwardWeight: return "W";
  }
  return "?";
}

std::string describe(const PipelineWork& w) {
  std::ostringstream os;
  os << pass_name(w.pass) << "(micro_batch " << w.micro_batch << ", chunk " << w.chunk << ")";
  return os.str();
}

PipelineWork fwd(int32_t mb, int32_t chunk = 0) { return {PassKind::kForward, mb, chunk}; }
PipelineWork bwd(int32_t mb, int32_t chunk = 0) { return {PassKind::kBackward, mb, chunk}; }

std::vector<PipelineWork> gpipe_order(int32_t m) {
  std::vector<PipelineWork> out;
  out.reserve(2 * static_cast<size_t>(m));
  for (int32_t i = 0; i < m; ++i) out.push_back(fwd(i));
  // Backwards last-in first-out, as in the GPipe paper's Figure 2c. Every rank uses the same
  // order, so the backward wave is a mirror image of the forward one: same bubble.
  for (int32_t i = m - 1; i >= 0; --i) out.push_back(bwd(i));
  return out;
}

// PipeDream-Flush (Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN Training", ICML'21)
// as Megatron runs it: rank s runs p-s-1 forwards ahead so that the last rank can start its
// first backward at once; afterwards one forward is admitted per finished backward, bounding the
// stashes at p-s.
std::vector<PipelineWork> one_f_one_b_order(int32_t p, int32_t m, int32_t s) {
  std::vector<PipelineWork> out;
  out.reserve(2 * static_cast<size_t>(m));
  const int32_t warm = std::min(p - s - 1, m);
  for (int32_t i = 0; i < warm; ++i) out.push_back(fwd(i));
  for (int32_t i = 0; i < m - warm; ++i) {
    out.push_back(fwd(warm + i));
    out.push_back(bwd(i));
  }
  for (int32_t i = m - warm; i < m; ++i) out.push_back(bwd(i));
  return out;
}

// Megatron interleaved 1F1B (Narayanan et al. SC'21 §2.2.2, Fig. 4). The rank walks m*v
// "virtual micro-batches" k. Forward k runs chunk (k / p) % v on micro-batch
// (k / (p*v)) * p + k % p: micro-batches go through chunk 0 in a group of p, then the same
// group through chunk 1, ..., then the next group. Backward k walks the chunks in reverse
// (v-1 - that chunk), since gradients enter at the last chunk.
// Warm-up: (v-1)*p forwards fill every chunk but the last with one group, and 2*(p-s-1) more
// cover the round trip to the last rank and back (a chunk-forward and a chunk-backward per
// rank on the way), so the first backward is ready when warm-up ends. Capped at m*v.
// Note: Megatron-LM's code additionally runs everything as warm-up when m == p; we keep the
// paper's formula in all cases (the order stays valid; in-flight stays lower).
std::vector<PipelineWork> interleaved_order(int32_t p, int32_t m, int32_t v, int32_t s) {
  const int64_t total = static_cast<int64_t>(m) * v;
  const int64_t group = static_cast<int64_t>(p) * v;
  auto item = [&](int64_t k, bool forward) {
    const int32_t chunk_fwd = static_cast<int32_t>((k / p) % v);
    const int32_t mb = static_cast<int32_t>((k / group) * p + k % p);
    return forward ? fwd(mb, chunk_fwd) : bwd(mb, v - 1 - chunk_fwd);
  };
  const int64_t warm =
      std::min<int64_t>(static_cast<int64_t>(p - s - 1) * 2 + static_cast<int64_t>(v - 1) * p,
                        total);
  std::vector<PipelineWork> out;
  out.reserve(2 * static_cast<size_t>(total));
  for (int64_t k = 0; k < warm; ++k) out.push_back(item(k, true));
  for (int64_t k = 0; k < total - warm; ++k) {
    out.push_back(item(k + warm, true));
    out.push_back(item(k, false));
  }
  for (int64_t k = total - warm; k < total; ++k) out.push_back(item(k, false));
  return out;
}

// ZB-H1 (Qi et al., ICLR 2024, §2.1 and Fig. 3 top). Construction: take 1F1B's order with the
// backward replaced by B (input gradient), and delay W. Rank s keeps up to s W's pending: after
// each B its W joins a FIFO, and whenever more than s are pending the oldest W runs right after
// that B. The remaining s W's run after the last B. Why s: the paper's activation count for
// worker i (1-based) is (p-i+1) M_B + (i-1) M_W, i.e. rank s holds p-s B-stashes plus s
// W-stashes, so F - W never exceeds p on any rank (1F1B's peak, on rank 0). Effect with
// T_F = T_B = T_W = T: B's start earlier on every rank (they no longer wait behind W), the
// last rank runs back-to-back from its first forward, and each rank's pending W's fill its
// cool-down gaps, so the bubble is (p-1)(T_F + T_B - T_W) = (p-1)T, a third of 1F1B's
// (p-1)(T_F + T_B + T_W) (paper §2.1).
std::vector<PipelineWork> zero_bubble_h1_order(int32_t p, int32_t m, int32_t s) {
  std::vector<PipelineWork> out;
  out.reserve(3 * static_cast<size_t>(m));
  std::deque<int32_t> pending_w;
  auto backward = [&](int32_t mb) {
    out.push_back({PassKind::kBackwardInput, mb, 0});
    pending_w.push_back(mb);
    if (static_cast<int32_t>(pending_w.size()) > s) {
      out.push_back({PassKind::kBackwardWeight, pending_w.front(), 0});
      pending_w.pop_front();
    }
  };
  const int32_t warm = std::min(p - s - 1, m);
  for (int32_t i = 0; i < warm; ++i) out.push_back(fwd(i));
  for (int32_t i = 0; i < m - warm; ++i) {
    out.push_back(fwd(warm + i));
    backward(i);
  }
  for (int32_t i = m - warm; i < m; ++i) backward(i);
  for (int32_t mb : pending_w) out.push_back({PassKind::kBackwardWeight, mb, 0});
  return out;
}

void check_times(double t_f, double t_b, double t_w_fraction) {
  if (!(t_f >= 0) || !(t_b >= 0) || !std::isfinite(t_f) || !std::isfinite(t_b)) {
    std::ostringstream os;
    os << "pipeline timing: t_f and t_b must be finite and >= 0 (got t_f=" << t_f
       << ", t_b=" << t_b << ")";
    fail(os.str());
  }
  if (!(t_w_fraction >= 0 && t_w_fraction <= 1)) {
    std::ostringstream os;
    os << "pipeline timing: t_w_fraction must be in [0, 1] (got " << t_w_fraction << ")";
    fail(os.str());
  }
}

}  // namespace

void validate_pipeline(const PipelineParams& params) {
  const int32_t p = params.stages, m = params.micro_batches, v = params.virtual_stages;
  std::ostringstream os;
  os << "pipeline (" << schedule_name(params.schedule) << "): ";
  if (p < 1) {
    os << "stages (p) must be >= 1, got " << p;
    fail(os.str());
  }
  if (m < 1) {
    os << "micro_batches (m) must be >= 1, got " << m;
    fail(os.str());
  }
  if (v < 1) {
    os << "virtual_stages (v) must be >= 1, got " << v;
    fail(os.str());
  }
  if (v > 1 && params.schedule != PipelineSchedule::kInterleaved1F1B) {
    os << "virtual_stages (v) = " << v << " needs the interleaved-1f1b schedule";
    fail(os.str());
  }
  if (params.schedule == PipelineSchedule::kInterleaved1F1B && m % p != 0) {
    // Megatron-LM asserts this too: micro-batches pass each chunk in groups of p.
    os << "micro_batches (m) = " << m << " must be a multiple of stages (p) = " << p
       << " for interleaved 1F1B";
    fail(os.str());
  }
}

std::vector<PipelineWork> pipeline_order(const PipelineParams& params, int32_t stage) {
  validate_pipeline(params);
  if (stage < 0 || stage >= params.stages) {
    std::ostringstream os;
    os << "pipeline: stage " << stage << " outside 0.." << params.stages - 1;
    fail(os.str());
  }
  switch (params.schedule) {
    case PipelineSchedule::kGPipe: return gpipe_order(params.micro_batches);
    case PipelineSchedule::kOneFOneB:
      return one_f_one_b_order(params.stages, params.micro_batches, stage);
    case PipelineSchedule::kInterleaved1F1B:
      return interleaved_order(params.stages, params.micro_batches, params.virtual_stages, stage);
    case PipelineSchedule::kZeroBubbleH1:
      return zero_bubble_h1_order(params.stages, params.micro_batches, stage);
  }
  fail("pipeline: unknown schedule");
}

int32_t global_chunk(const PipelineParams& params, int32_t stage, int32_t chunk) {
  return chunk * params.stages + stage;
}

int32_t peak_in_flight(const std::vector<PipelineWork>& order, int32_t chunk) {
  int32_t live = 0, peak = 0;
  for (const PipelineWork& w : order) {
    if (chunk != kEveryChunk && w.chunk != chunk) continue;
    live += in_flight_change(w.pass);
    peak = std::max(peak, live);
  }
  return peak;
}

double simulate_pipeline_makespan(const PipelineParams& params, double t_f, double t_b,
                                  double t_w_fraction, std::vector<double>* per_stage_busy) {
  validate_pipeline(params);
  std::vector<std::vector<PipelineWork>> orders;
  orders.reserve(params.stages);
  for (int32_t s = 0; s < params.stages; ++s) orders.push_back(pipeline_order(params, s));
  return simulate_pipeline_orders(params, orders, t_f, t_b, t_w_fraction, per_stage_busy);
}

double simulate_pipeline_orders(const PipelineParams& params,
                                const std::vector<std::vector<PipelineWork>>& orders, double t_f,
                                double t_b, double t_w_fraction,
                                std::vector<double>* per_stage_busy) {
  validate_pipeline(params);
  check_times(t_f, t_b, t_w_fraction);
  const int32_t p = params.stages, m = params.micro_batches, v = params.virtual_stages;
  if (static_cast<int32_t>(orders.size()) != p) {
    std::ostringstream os;
    os << "pipeline timing: " << orders.size() << " orders given for " << p << " stages";
    fail(os.str());
  }
  const int32_t chunks = p * v;  // global chunks
  const size_t cells = static_cast<size_t>(m) * chunks;
  auto cell = [&](int32_t mb, int32_t g) { return static_cast<size_t>(mb) * chunks + g; };
  constexpr double kUnset = -1.0;  // every real completion time is >= 0
  std::vector<double> f_end(cells, kUnset), grad_end(cells, kUnset), w_end(cells, kUnset);
  std::vector<uint8_t> split(cells, 0);  // 1: the backward of this cell was a B (needs a W)

  const double cost_f = t_f / v, cost_b = t_b / v;
  const double cost_bi = (1.0 - t_w_fraction) * t_b / v, cost_w = t_w_fraction * t_b / v;

  // Range check first, so the loop below only meets dependency problems.
  for (int32_t s = 0; s < p; ++s) {
    for (const PipelineWork& w : orders[s]) {
      if (w.micro_batch < 0 || w.micro_batch >= m || w.chunk < 0 || w.chunk >= v) {
        std::ostringstream os;
        os << "pipeline order: stage " << s << " has " << describe(w) << " out of range (m=" << m
           << ", v=" << v << ")";
        fail(os.str());
      }
    }
  }

  std::vector<size_t> pos(p, 0);
  std::vector<double> free_at(p, 0.0), busy(p, 0.0);
  size_t remaining = 0;
  for (const auto& o : orders) remaining += o.size();
  double makespan = 0;
  auto duplicate = [&](int32_t s, const PipelineWork& w) {
    std::ostringstream os;
    os << "pipeline order: stage " << s << " runs " << describe(w) << " twice";
    fail(os.str());
  };

  // Sweep the ranks, advancing each as far as its dependencies allow; a sweep without progress
  // while work remains is a deadlock. Start times only depend on completion times already
  // fixed, so the sweep order does not change the result.
  while (remaining > 0) {
    bool progress = false;
    for (int32_t s = 0; s < p; ++s) {
      while (pos[s] < orders[s].size()) {
        const PipelineWork& w = orders[s][pos[s]];
        const int32_t g = global_chunk(params, s, w.chunk);
        const size_t c = cell(w.micro_batch, g);
        double ready = free_at[s], cost = 0;
        bool ok = true;
        switch (w.pass) {
          case PassKind::kForward:
            if (f_end[c] != kUnset) duplicate(s, w);
            if (g > 0) {
              const double dep = f_end[cell(w.micro_batch, g - 1)];
              ok = dep != kUnset;
              ready = std::max(ready, dep);
            }
            cost = cost_f;
            break;
          case PassKind::kBackward:
          case PassKind::kBackwardInput: {
            if (grad_end[c] != kUnset) duplicate(s, w);
            ok = f_end[c] != kUnset;
            ready = std::max(ready, f_end[c]);
            if (g + 1 < chunks) {
              const double dep = grad_end[cell(w.micro_batch, g + 1)];
              ok = ok && dep != kUnset;
              ready = std::max(ready, dep);
            }
            cost = w.pass == PassKind::kBackward ? cost_b : cost_bi;
            break;
          }
          case PassKind::kBackwardWeight:
            if (w_end[c] != kUnset) duplicate(s, w);
            if (grad_end[c] != kUnset && !split[c]) {
              std::ostringstream os;
              os << "pipeline order: stage " << s << " runs " << describe(w)
                 << " after a full backward (which already computed the weight gradient)";
              fail(os.str());
            }
            ok = grad_end[c] != kUnset;
            ready = std::max(ready, grad_end[c]);
            cost = cost_w;
            break;
        }
        if (!ok) break;
        const double end = ready + cost;
        switch (w.pass) {
          case PassKind::kForward: f_end[c] = end; break;
          case PassKind::kBackward: grad_end[c] = end; break;
          case PassKind::kBackwardInput:
            grad_end[c] = end;
            split[c] = 1;
            break;
          case PassKind::kBackwardWeight: w_end[c] = end; break;
        }
        free_at[s] = end;
        busy[s] += cost;
        makespan = std::max(makespan, end);
        ++pos[s];
        --remaining;
        progress = true;
      }
    }
    if (!progress) {
      for (int32_t s = 0; s < p; ++s) {
        if (pos[s] < orders[s].size()) {
          std::ostringstream os;
          os << "pipeline order deadlock (" << schedule_name(params.schedule) << ", p=" << p
             << ", m=" << m << ", v=" << v << "): stage " << s << " waits forever at item "
             << pos[s] << ", " << describe(orders[s][pos[s]]);
          fail(os.str());
        }
      }
    }
  }

  // Every forward and backward must have run, and every B needs its W.
  for (int32_t mb = 0; mb < m; ++mb) {
    for (int32_t g = 0; g < chunks; ++g) {
      const size_t c = cell(mb, g);
      const char* missing = nullptr;
      if (f_end[c] == kUnset) missing = "forward";
      else if (grad_end[c] == kUnset) missing = "backward";
      else if (split[c] && w_end[c] == kUnset) missing = "weight-gradient (W)";
      if (missing != nullptr) {
        std::ostringstream os;
        os << "pipeline order: the " << missing << " of micro_batch " << mb
           << " on global chunk " << g << " (stage " << g % p << ", chunk " << g / p
           << ") never runs";
        fail(os.str());
      }
    }
  }
  if (per_stage_busy != nullptr) *per_stage_busy = busy;
  return makespan;
}

}  // namespace wl
