#include "workloads/calibration/calibrate.h"

#include <algorithm>
#include <optional>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "sim/error.h"
#include "sim/simulation.h"
#include "topology/cluster_resources.h"
#include "workloads/collectives/benchmark.h"

namespace wl {

std::string_view precision_name(MatmulPrecision p) {
  switch (p) {
    case MatmulPrecision::kFp32: return "fp32";
    case MatmulPrecision::kTf32: return "tf32";
    case MatmulPrecision::kBf16: return "bf16";
    case MatmulPrecision::kFp16: return "fp16";
    case MatmulPrecision::kFp8: return "fp8";
  }
  return "?";
}

double peak_flops(const topo::GpuSpec& gpu, MatmulPrecision p) {
  switch (p) {
    case MatmulPrecision::kFp32: return gpu.peak_fp32_flops;
    case MatmulPrecision::kTf32: return gpu.peak_tf32_flops;
    case MatmulPrecision::kBf16: return gpu.peak_bf16_flops;
    case MatmulPrecision::kFp16: return gpu.peak_fp16_flops > 0 ? gpu.peak_fp16_flops : gpu.peak_bf16_flops;
    case MatmulPrecision::kFp8: return gpu.peak_fp8_flops;
  }
  return 0;
}

namespace {

const char* class_name(KernelClass c) {
  switch (c) {
    case KernelClass::kGemm: return "gemm";
    case KernelClass::kAttention: return "attention";
    case KernelClass::kVector: return "vector";
    case KernelClass::kMemory: return "memory";
  }
  return "?";
}

// A sample's time at the full peak (the x of t = latency + x / efficiency); 0 when unknown.
double ideal_seconds(const KernelSample& s, const topo::GpuSpec& gpu, bool waves) {
  if (s.cls == KernelClass::kMemory) return gpu.hbm_bandwidth_Bps > 0 ? s.bytes / gpu.hbm_bandwidth_Bps : 0;
  const double peak = peak_flops(gpu, s.precision);
  if (peak <= 0) return 0;
  double wave = 1;
  if (s.cls == KernelClass::kGemm && waves) wave = gemm_wave_factor(s.rows, s.cols, gpu.sm_count);
  return s.flops / (peak * wave);
}

double& efficiency_of(topo::HardwareProfile& p, KernelClass c) {
  if (c == KernelClass::kGemm) return p.gemm_efficiency;
  if (c == KernelClass::kAttention) return p.attention_efficiency;
  return p.memory_efficiency;
}

sim::Time& latency_of(topo::HardwareProfile& p, KernelClass c) {
  if (c == KernelClass::kGemm) return p.gemm_latency;
  if (c == KernelClass::kAttention) return p.attention_latency;
  return p.kernel_latency;
}

ErrorStats error_stats(std::vector<double> errors) {
  ErrorStats e;
  e.n = errors.size();
  if (errors.empty()) return e;
  std::sort(errors.begin(), errors.end());
  auto at = [&](double q) {  // nearest rank
    size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(errors.size()))) - 1;
    return errors[std::min(i, errors.size() - 1)];
  };
  e.median = errors.size() % 2 ? errors[errors.size() / 2]
                               : 0.5 * (errors[errors.size() / 2 - 1] + errors[errors.size() / 2]);
  e.p90 = at(0.9);
  return e;
}

// Weighted least squares for t = a u + b x with weights 1 / t^2 (u = 1: a latency; u = x / keys:
// attention's sequence overhead times b); a >= 0 (refitted without it when negative). Returns
// false when b cannot be positive.
bool fit_line(const std::vector<double>& u, const std::vector<double>& x, const std::vector<double>& t, double& a,
              double& b, bool& clamped) {
  double s0 = 0, s1 = 0, s2 = 0, r0 = 0, r1 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double w = 1.0 / (t[i] * t[i]);
    s0 += w * u[i] * u[i];
    s1 += w * u[i] * x[i];
    s2 += w * x[i] * x[i];
    r0 += w * u[i] * t[i];
    r1 += w * x[i] * t[i];
  }
  const double det = s0 * s2 - s1 * s1;
  clamped = false;
  a = 0;
  b = 0;
  if (x.size() >= 2 && det > 1e-12 * s0 * s2) {
    a = (r0 * s2 - r1 * s1) / det;
    b = (s0 * r1 - s1 * r0) / det;
  }
  if (!(a >= 0) || !(b > 0)) {
    clamped = a < 0;
    a = 0;
    b = s2 > 0 ? r1 / s2 : 0;
  }
  return b > 0;
}

const char* fit_name(const ClassFit& f) {
  return f.backward ? "attention backward" : f.unvectorized ? "unvectorized elementwise" : f.fp8 ? "GEMM FP8" : class_name(f.cls);
}

// The x of a sample's fit: its time at the full peak, or an unvectorized kernel's elements.
double fit_x(const KernelSample& s, const topo::GpuSpec& gpu, bool waves, bool unvectorized) {
  return unvectorized ? s.elements : ideal_seconds(s, gpu, waves);
}

double& attention_efficiency_of(topo::HardwareProfile& p, bool backward) {
  return backward ? p.attention_backward_efficiency : p.attention_efficiency;
}
double& attention_overhead_of(topo::HardwareProfile& p, bool backward) {
  return backward ? p.attention_backward_seq_overhead : p.attention_seq_overhead;
}

}  // namespace

double predict_seconds(const KernelSample& s, const topo::GpuSpec& gpu, const topo::HardwareProfile& p) {
  topo::HardwareProfile q = p;
  const double x = ideal_seconds(s, gpu, p.gemm_wave_quantization);
  if (s.cls == KernelClass::kMemory && s.elements > 0 && p.unvectorized_elementwise_rate > 0)
    return p.kernel_latency.seconds() +
           std::max(x / p.memory_efficiency, s.elements / p.unvectorized_elementwise_rate);
  const double factor = s.cls == KernelClass::kAttention ? topo::attention_rate_factor(p, s.backward, s.keys) : 1.0;
  const double eff = s.cls == KernelClass::kGemm && s.precision == MatmulPrecision::kFp8 && p.fp8_gemm_efficiency > 0
                         ? p.fp8_gemm_efficiency
                         : efficiency_of(q, s.cls);
  return latency_of(q, s.cls).seconds() + x / (eff * factor);
}

// One class fitted with `base`'s other settings; the held-out error "before" is `before`'s.
// `unvectorized` (kMemory only): the unvectorized elementwise kernels, t = latency + elements /
// rate with the memory class's latency kept; otherwise the memory class leaves them out.
static ClassFit fit_class(const std::vector<KernelSample>& samples, const topo::GpuSpec& gpu,
                   const topo::HardwareProfile& base, const topo::HardwareProfile& before,
                   const CalibrationOptions& opt, KernelClass cls, bool backward = false, bool unvectorized = false,
                   bool fp8 = false) {
  topo::HardwareProfile fitted = base;
  const bool attention = cls == KernelClass::kAttention;
  ClassFit f;
  f.cls = cls;
  f.backward = backward;
  f.unvectorized = unvectorized;
  f.fp8 = fp8;
  f.efficiency = attention       ? topo::attention_efficiency(base, backward)
                 : unvectorized ? base.unvectorized_elementwise_rate
                 : fp8 && base.fp8_gemm_efficiency > 0 ? base.fp8_gemm_efficiency
                                : efficiency_of(fitted, cls);
  f.latency = latency_of(fitted, cls);
  if (attention) f.seq_overhead = attention_overhead_of(fitted, backward);
  // Distinct shapes by size; every holdout_every-th is held out. Memory-bound kernels whose traffic
  // fits in the L2 cache run from it, faster than the HBM allows (eager PyTorch's small elementwise
  // kernels reach 1.1-1.3x the H100's HBM bandwidth): the HBM efficiency is fitted on larger ones
  // where at least two sizes are larger, else on all where at least two sizes move 1 MiB or more,
  // else not at all: below that a kernel's time is its launch and tail, not its bytes (1 MiB takes
  // 0.3 us at 3.35 TB/s, a kernel about 1 us), and a fitted rate would be noise (a compiled step's
  // 4-byte memsets gave 1.6% of the HBM's).
  auto collect = [&](double min_bytes) {
    std::vector<const KernelSample*> v;
    std::map<std::string, bool> distinct;
    for (const auto& s : samples)
      if (s.cls == cls && (!attention || (s.backward == backward && s.keys > 0)) &&
          (cls != KernelClass::kMemory || (s.elements > 0) == unvectorized) &&
          (cls != KernelClass::kGemm || (s.precision == MatmulPrecision::kFp8) == fp8) && s.seconds > 0 &&
          (cls != KernelClass::kMemory || unvectorized || s.bytes > min_bytes) &&
          fit_x(s, gpu, base.gemm_wave_quantization, unvectorized) > 0) {
        v.push_back(&s);
        distinct[s.shape] = true;
      }
    return std::make_pair(v, distinct.size());
  };
  const bool hbm_fit = cls == KernelClass::kMemory && !unvectorized && gpu.l2_bytes > 0;
  // (No structured binding: lambdas below capture `mine`, which clang refuses for a binding.)
  const auto collected = collect(hbm_fit ? static_cast<double>(gpu.l2_bytes) : 0.0);
  std::vector<const KernelSample*> mine = collected.first;
  const size_t large_shapes = collected.second;
  std::string l2_note;
  if (hbm_fit) {
    const std::string l2 = "the L2 cache (" + std::to_string(static_cast<long long>(gpu.l2_bytes >> 20)) + " MiB)";
    if (large_shapes >= 2) {
      l2_note = "kernels moving at most " + l2 + " left out: they run from it, not from HBM";
    } else if (collect(double{1 << 20} - 1).second >= 2) {  // 1 MiB or more
      mine = collect(0.0).first;
      l2_note = "fewer than 2 sizes move more than " + l2 + ": fitted on all (the smaller run from the L2)";
    } else {
      const size_t n = collect(0.0).first.size();
      mine.clear();
      l2_note = "fewer than 2 sizes move 1 MiB or more (" + std::to_string(n) +
                " kernels): their times are launch and tail, not bytes: kept";
    }
  }
  std::map<std::string, double> size_of;  // shape -> its ideal time (elements)
  for (const KernelSample* s : mine) size_of[s->shape] = fit_x(*s, gpu, base.gemm_wave_quantization, unvectorized);
  std::vector<std::pair<double, std::string>> shapes;
  for (const auto& [k, v] : size_of) shapes.emplace_back(v, k);
  std::sort(shapes.begin(), shapes.end());
  f.shapes = shapes.size();
  std::map<std::string, bool> held;
  for (size_t i = 0; i < shapes.size(); ++i)
    held[shapes[i].second] = opt.holdout_every > 1 && i % opt.holdout_every == opt.holdout_every - 1;
  auto is_held = [&](const KernelSample& s) {
    return held[s.shape] ||
           std::find(opt.test_sources.begin(), opt.test_sources.end(), s.source) != opt.test_sources.end();
  };
  // Attention: the latency is kept (subtracted) and the sequence overhead fitted in its place.
  // Unvectorized kernels and FP8 GEMMs: the latency is kept and the line goes through the origin.
  const double kept = attention || unvectorized || fp8 ? f.latency.seconds() : 0;
  std::vector<double> u, x, t;
  for (const KernelSample* s : mine)
    if (!is_held(*s) && s->seconds > kept) {
      x.push_back(fit_x(*s, gpu, base.gemm_wave_quantization, unvectorized));
      u.push_back(attention ? x.back() / s->keys : unvectorized || fp8 ? 0.0 : 1.0);
      t.push_back(s->seconds - kept);
    }
  auto errors = [&](bool held_out, const topo::HardwareProfile& p) {
    std::vector<double> e;
    for (const KernelSample* s : mine)
      if (is_held(*s) == held_out) e.push_back(std::abs(predict_seconds(*s, gpu, p) / s->seconds - 1));
    return error_stats(e);
  };
  f.held_out_before = errors(true, before);
  double a = 0, b = 0;
  bool clamped = false;
  if (mine.empty()) {
    f.note = std::string("no measured ") + (backward ? std::string("backward attention") : std::string(fit_name(f))) +
             " kernels with known sizes: kept";
  } else if (x.empty()) {
    f.note = "every sample is held out: nothing to fit";
  } else if (!fit_line(u, x, t, a, b, clamped)) {
    f.note = "the measured times do not grow with size: kept";
  } else if (unvectorized) {
    f.fitted = true;
    f.efficiency = 1.0 / b;  // elements per second
    fitted.unvectorized_elementwise_rate = f.efficiency;
  } else if (fp8) {
    f.fitted = true;
    f.efficiency = std::clamp(1.0 / b, 0.01, 1.0);
    if (1.0 / b > 1) f.note = "fitted efficiency " + std::to_string(1.0 / b) + " > 1: clamped to 1";
    fitted.fp8_gemm_efficiency = f.efficiency;
  } else {
    f.fitted = true;
    f.efficiency = 1.0 / b;
    if (attention) f.seq_overhead = a / b;  // t = x / eff + (x / keys) * overhead / eff
    else f.latency = sim::Time::ns(std::llround(a * 1e9));
    if (clamped) f.note = attention ? "the fitted sequence overhead was negative: refitted as 0"
                                    : "the fitted latency was negative: refitted as 0";
    if (attention) {
      bool one_length = true;
      for (const KernelSample* s : mine) one_length = one_length && s->keys == mine.front()->keys;
      if (one_length)
        f.note = "every sample has " + std::to_string(static_cast<long long>(mine.front()->keys)) +
                 " keys: the sequence overhead cannot be told from the efficiency (give traces of two or more "
                 "sequence lengths); fitted without it";
      if (f.seq_overhead > 1e6) {
        f.note = "the fitted sequence overhead " + std::to_string(f.seq_overhead) + " keys is over 1e6: clamped";
        f.seq_overhead = 1e6;
      }
    }
    if (f.efficiency > 1) {
      f.note = "fitted efficiency " + std::to_string(f.efficiency) +
               " > 1 (is the GPU in --cluster the one measured?): clamped to 1, " +
               (attention ? "sequence overhead" : "latency") + " refitted";
      f.efficiency = 1;
      // The latency (attention: the sequence overhead) that went with the efficiency above 1 does
      // not go with 1: refitted with the efficiency held at 1, the weighted least-squares a of
      // t - x = a u (weights 1 / t^2, as fit_line), at least 0.
      double num = 0, den = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double w = 1.0 / (t[i] * t[i]);
        num += w * u[i] * (t[i] - x[i]);
        den += w * u[i] * u[i];
      }
      const double a1 = den > 0 ? std::max(0.0, num / den) : 0.0;
      if (attention) f.seq_overhead = std::min(a1, 1e6);
      else f.latency = sim::Time::ns(std::llround(a1 * 1e9));
    }
    f.efficiency = std::max(f.efficiency, 0.01);  // the profile's lower bound
    if (attention) {
      attention_efficiency_of(fitted, backward) = f.efficiency;
      attention_overhead_of(fitted, backward) = f.seq_overhead;
    } else {
      efficiency_of(fitted, cls) = f.efficiency;
      latency_of(fitted, cls) = f.latency;
    }
  }
  if (!l2_note.empty()) f.note = f.note.empty() || mine.empty() ? l2_note : f.note + "; " + l2_note;
  f.fit = errors(false, fitted);
  f.held_out = errors(true, fitted);
  return f;
}

Calibration calibrate_kernels(const std::vector<KernelSample>& samples, const topo::GpuSpec& gpu,
                              const topo::HardwareProfile& base, const CalibrationOptions& opt) {
  Calibration c;
  c.profile = base;
  std::optional<ClassFit> fp8_fit;
  for (KernelClass cls : {KernelClass::kGemm, KernelClass::kAttention, KernelClass::kMemory}) {
    if (cls == KernelClass::kGemm) {
      // GEMMs twice, with and without wave quantization (its 128 x 256 tiles do not fit GEMMs
      // smaller than one wave, for which cuBLAS picks smaller tiles): the better fit is kept.
      topo::HardwareProfile with = base, without = base;
      with.gemm_wave_quantization = true;
      without.gemm_wave_quantization = false;
      ClassFit a = fit_class(samples, gpu, with, base, opt, cls), b = fit_class(samples, gpu, without, base, opt, cls);
      // The profile's own setting unless the other fits strictly better.
      bool waves = base.gemm_wave_quantization;
      if (a.fitted && b.fitted && std::abs(a.fit.median - b.fit.median) > 1e-9) waves = a.fit.median < b.fit.median;
      else if (a.fitted != b.fitted) waves = a.fitted;
      ClassFit& f = waves ? a : b;
      if (f.fitted && waves != base.gemm_wave_quantization)
        f.note += std::string(f.note.empty() ? "" : "; ") + "fits better " +
                  (waves ? "with" : "without") + " wave quantization (gemm_wave_quantization: " +
                  (waves ? "true" : "false") + ")";
      if (f.fitted) {
        c.profile.gemm_wave_quantization = waves;
        c.profile.gemm_efficiency = f.efficiency;
        c.profile.gemm_latency = f.latency;
      }
      c.kernels.push_back(f);
      // FP8 GEMMs (torch._scaled_mm) after it, through its latency: fp8_gemm_efficiency. Only where
      // the traces have any, so that BF16 captures' tables and profiles are as they were.
      const bool any_fp8 = std::any_of(samples.begin(), samples.end(), [](const KernelSample& s) {
        return s.cls == KernelClass::kGemm && s.precision == MatmulPrecision::kFp8;
      });
      if (any_fp8) {
        ClassFit f8 = fit_class(samples, gpu, c.profile, base, opt, cls, false, false, true);
        if (f8.fitted) c.profile.fp8_gemm_efficiency = f8.efficiency;
        fp8_fit = f8;
      }
      continue;
    }
    if (cls == KernelClass::kAttention) {
      // Forward first: the backward's fit and its errors see the fitted forward (its efficiency
      // is the backward's default). The backward's efficiency is always written out.
      ClassFit fwd = fit_class(samples, gpu, base, base, opt, cls, false);
      if (fwd.fitted) {
        c.profile.attention_efficiency = fwd.efficiency;
        c.profile.attention_seq_overhead = fwd.seq_overhead;
      }
      ClassFit bwd = fit_class(samples, gpu, c.profile, base, opt, cls, true);
      if (bwd.fitted) {
        c.profile.attention_backward_efficiency = bwd.efficiency;
        c.profile.attention_backward_seq_overhead = bwd.seq_overhead;
      }
      c.kernels.push_back(fwd);
      c.kernels.push_back(bwd);
      continue;
    }
    ClassFit f = fit_class(samples, gpu, base, base, opt, cls);
    if (f.fitted) {
      efficiency_of(c.profile, cls) = f.efficiency;
      latency_of(c.profile, cls) = f.latency;
    }
    c.kernels.push_back(f);
    // The unvectorized elementwise kernels after the memory class, whose latency they keep.
    ClassFit u = fit_class(samples, gpu, c.profile, base, opt, cls, false, true);
    if (u.fitted) c.profile.unvectorized_elementwise_rate = u.efficiency;
    c.kernels.push_back(u);
  }
  if (fp8_fit) c.kernels.push_back(*fp8_fit);  // last: the other classes keep their places
  return c;
}


std::vector<double> simulate_collectives(const std::vector<CollectiveSample>& samples, const topo::Topology& topo,
                                         const topo::GpuSpec& gpu, const topo::HardwareProfile& profile) {
  CollectiveBenchConfig cfg;
  cfg.iterations = 1;
  cfg.warmup = 0;
  for (const auto& s : samples) {
    if (s.ranks < 2 || s.ranks > topo.num_gpus())
      throw sim::UserError("calibrate: a collective of " + std::to_string(s.ranks) + " ranks on a cluster of " +
                           std::to_string(topo.num_gpus()) + " GPUs");
    CollectiveTest t;
    t.op = s.op;
    t.group = s.members;
    if (t.group.empty())
      for (uint32_t r = 0; r < s.ranks; ++r) t.group.push_back(r);
    for (uint32_t g : t.group)
      if (g >= topo.num_gpus())
        throw sim::UserError("calibrate: a collective on GPU " + std::to_string(g) + " of a cluster of " +
                             std::to_string(topo.num_gpus()) + " GPUs");
    t.sizes = {s.bytes};
    cfg.tests.push_back(std::move(t));
  }
  sim::Simulation sim(1);
  topo::ClusterResources res(sim, topo, gpu, profile);
  std::vector<double> out;
  for (const auto& r : run_collective_benchmark(res, cfg)) out.push_back(r.time_s);
  return out;
}

void calibrate_collectives(const std::vector<CollectiveSample>& samples, const topo::Topology& topo,
                           const topo::GpuSpec& gpu, Calibration& c) {
  CollectiveFit& f = c.collectives;
  // One sample per distinct (op, size, group): the median of its measured times.
  std::map<std::tuple<int, double, std::vector<uint32_t>>, std::vector<double>> groups;
  for (const auto& s : samples)
    if (s.seconds > 0 && s.bytes > 0 && s.ranks >= 2) {
      std::vector<uint32_t> m = s.members;
      if (m.empty())
        for (uint32_t r = 0; r < s.ranks; ++r) m.push_back(r);
      groups[{static_cast<int>(s.op), s.bytes, m}].push_back(s.seconds);
    }
  std::vector<CollectiveSample> uniq;
  for (auto& [k, v] : groups) {
    std::sort(v.begin(), v.end());
    CollectiveSample s;
    s.op = static_cast<CollectiveOp>(std::get<0>(k));
    s.bytes = std::get<1>(k);
    s.members = std::get<2>(k);
    s.ranks = static_cast<uint32_t>(s.members.size());
    s.seconds = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    uniq.push_back(s);
  }
  f.samples = uniq.size();
  f.efficiency_key = "scale_up_efficiency";
  for (const auto& s : uniq)  // a group spanning nodes crosses NICs
    for (uint32_t g : s.members)
      if (g / topo.gpus_per_node() != s.members[0] / topo.gpus_per_node()) f.efficiency_key = "nic_efficiency";
  double& eff = f.efficiency_key == "nic_efficiency" ? c.profile.nic_efficiency : c.profile.scale_up_efficiency;
  f.efficiency = eff;
  f.step_overhead = c.profile.step_overhead;
  if (uniq.empty()) {
    f.note = "no collectives with known sizes (give --et, or traces that record message sizes): kept";
    return;
  }
  auto rel_errors = [&](const std::vector<double>& sim_s) {
    std::vector<double> e;
    for (size_t i = 0; i < uniq.size(); ++i) e.push_back(std::abs(sim_s[i] / uniq[i].seconds - 1));
    return error_stats(e);
  };
  // The fit moves Simple's step latency (the profile's step_overhead) and the link efficiency,
  // so its simulations run Simple only: with auto's protocol choice the model would switch
  // protocols as the parameters move and stop being linear in them. LL and LL128 keep the
  // profile's latencies. NVLS is off in the fit too (its rate is its own key, nvls_efficiency,
  // not the link efficiency). `before` and `after` use the profile's own protocols and NVLS.
  f.before = rel_errors(simulate_collectives(uniq, topo, gpu, c.profile));
  topo::HardwareProfile p0 = c.profile;
  p0.nccl_protocols = "Simple";
  p0.nvls_efficiency = 0.0;
  const std::vector<double> t0 = simulate_collectives(uniq, topo, gpu, p0);
  // Sensitivities: +1 us of step overhead, and half the efficiency (twice 1 / efficiency).
  const double d_overhead = 1e-6;
  topo::HardwareProfile p1 = p0, p2 = p0;
  p1.step_overhead = p0.step_overhead + sim::Time::ns(1000);
  (f.efficiency_key == "nic_efficiency" ? p2.nic_efficiency : p2.scale_up_efficiency) = eff / 2;
  const std::vector<double> t1 = simulate_collectives(uniq, topo, gpu, p1);
  const std::vector<double> t2 = simulate_collectives(uniq, topo, gpu, p2);
  const double o0 = p0.step_overhead.seconds(), u0 = 1.0 / eff;
  // T_i(o, u) = C_i + s_i o + X_i u, with s_i = dT/do and X_i = dT/du (u = 1 / efficiency).
  std::vector<double> s(uniq.size()), X(uniq.size()), y(uniq.size());
  for (size_t i = 0; i < uniq.size(); ++i) {
    s[i] = (t1[i] - t0[i]) / d_overhead;
    X[i] = (t2[i] - t0[i]) / u0;  // u doubled: du = u0
    y[i] = uniq[i].seconds - (t0[i] - s[i] * o0 - X[i] * u0);  // measured minus the fixed part C_i
  }
  double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0;
  for (size_t i = 0; i < uniq.size(); ++i) {
    const double w = 1.0 / (uniq[i].seconds * uniq[i].seconds);
    a11 += w * s[i] * s[i];
    a12 += w * s[i] * X[i];
    a22 += w * X[i] * X[i];
    b1 += w * s[i] * y[i];
    b2 += w * X[i] * y[i];
  }
  double o = o0, u = u0;
  const double det = a11 * a22 - a12 * a12;
  if (a11 > 0 && a22 > 0 && det > 1e-12 * a11 * a22) {
    o = (b1 * a22 - b2 * a12) / det;
    u = (a11 * b2 - a12 * b1) / det;
  } else if (a22 > 0) {  // the overhead cannot be told apart: keep it, fit the efficiency
    u = (b2 - a12 * o) / a22;
  }
  // Bounds: overhead >= 0, efficiency in [0.01, 1]; clamp one and refit the other alone.
  if (o < 0) {
    o = 0;
    u = a22 > 0 ? b2 / a22 : u0;
    f.note = "the fitted step overhead was negative: refitted as 0";
  }
  if (u < 1 || u > 100) {
    f.note += std::string(f.note.empty() ? "" : "; ") + "the fitted efficiency " + std::to_string(1 / u) +
              " is outside [0.01, 1]: clamped";
    u = std::clamp(u, 1.0, 100.0);
    if (a11 > 0) o = std::max(0.0, (b1 - a12 * u) / a11);
  }
  eff = 1.0 / u;
  c.profile.step_overhead = sim::Time::ns(std::llround(o * 1e9));
  f.fitted = true;
  f.efficiency = eff;
  f.step_overhead = c.profile.step_overhead;
  f.after = rel_errors(simulate_collectives(uniq, topo, gpu, c.profile));
}

void calibrate_host(std::vector<double> intervals, std::vector<double> gaps, Calibration& c) {
  HostFit& h = c.host;
  h.gaps = gaps.size();
  h.kernel_gap = c.profile.kernel_gap;
  if (gaps.size() < 20) {
    h.gap_note = std::to_string(gaps.size()) + " queued kernel gap(s), fewer than 20";
  } else {
    std::sort(gaps.begin(), gaps.end());
    h.gap_fitted = true;
    h.kernel_gap = sim::Time::from_seconds(gaps[gaps.size() / 2]);
    c.profile.kernel_gap = h.kernel_gap;
  }
  h.intervals = intervals.size();
  h.host_overhead = c.profile.host_overhead;
  if (intervals.size() < 20) {
    h.note = std::to_string(intervals.size()) + " launch interval(s), fewer than 20";
    return;
  }
  std::sort(intervals.begin(), intervals.end());
  const double p10 = intervals[intervals.size() / 10];
  h.median_s = intervals[intervals.size() / 2];
  h.fitted = true;
  h.host_overhead = sim::Time::from_seconds(p10);
  c.profile.host_overhead = h.host_overhead;
}

std::string profile_yaml(const Calibration& c, const std::string& header) {
  std::string o;
  auto line = [&](const char* fmt, auto... args) {
    char buf[512];
    std::snprintf(buf, sizeof buf, fmt, args...);
    o += buf;
  };
  o += header;
  auto errs = [](const ErrorStats& e) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "median %.1f%%, p90 %.1f%% (%zu)", e.median * 100, e.p90 * 100, e.n);
    return std::string(buf);
  };
  for (const ClassFit& f : c.kernels) {
    if (!f.fitted) {
      line("# %s: not fitted (%s)\n", fit_name(f), f.note.c_str());
      continue;
    }
    line("# %s: %zu shapes; error on fitted samples %s, held out %s (before: %s)%s%s\n", fit_name(f), f.shapes,
         errs(f.fit).c_str(), errs(f.held_out).c_str(), errs(f.held_out_before).c_str(), f.note.empty() ? "" : "; ",
         f.note.c_str());
    if (f.unvectorized) {
      line("unvectorized_elementwise_rate: %.4g\n", f.efficiency);
      continue;
    }
    if (f.fp8) {
      line("fp8_gemm_efficiency: %.4f\n", f.efficiency);
      continue;
    }
    if (f.cls == KernelClass::kAttention) {
      // The latency the fit kept (subtracted from every sample) goes with its efficiencies.
      if (!f.backward) line("attention_latency: %lldns\n", static_cast<long long>(f.latency.count_ns()));
      line("%s: %.4f\n%s: %.1f\n", f.backward ? "attention_backward_efficiency" : "attention_efficiency",
           f.efficiency, f.backward ? "attention_backward_seq_overhead" : "attention_seq_overhead", f.seq_overhead);
      continue;
    }
    const char* eff = f.cls == KernelClass::kGemm ? "gemm_efficiency" : "memory_efficiency";
    const char* lat = f.cls == KernelClass::kGemm ? "gemm_latency" : "kernel_latency";
    line("%s: %.4f\n%s: %lldns\n", eff, f.efficiency, lat, static_cast<long long>(f.latency.count_ns()));
    if (f.cls == KernelClass::kGemm)
      line("gemm_wave_quantization: %s\n", c.profile.gemm_wave_quantization ? "true" : "false");
  }
  const CollectiveFit& k = c.collectives;
  if (!k.fitted) {
    line("# collectives: not fitted (%s)\n", k.note.c_str());
  } else {
    line("# collectives: %zu distinct sizes; error %s (before: %s)%s%s\n", k.samples, errs(k.after).c_str(),
         errs(k.before).c_str(), k.note.empty() ? "" : "; ", k.note.c_str());
    line("%s: %.4f\nstep_overhead: %lldns\n", k.efficiency_key.c_str(), k.efficiency,
         static_cast<long long>(k.step_overhead.count_ns()));
  }
  const HostFit& h = c.host;
  if (!h.fitted) {
    line("# host: not fitted (%s)\n", h.note.c_str());
  } else {
    line("# host: 10th percentile of %zu launch intervals (median %.1f us)\nhost_overhead: %lldns\n", h.intervals,
         h.median_s * 1e6, static_cast<long long>(h.host_overhead.count_ns()));
  }
  if (!h.gap_fitted)
    line("# kernel gap: not fitted (%s)\n", h.gap_note.c_str());
  else
    line("# kernel gap: median of %zu gaps between queued kernels\nkernel_gap: %lldns\n", h.gaps,
         static_cast<long long>(h.kernel_gap.count_ns()));
  return o;
}

}  // namespace wl
