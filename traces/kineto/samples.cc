#include "traces/kineto/samples.h"

#include <algorithm>
#include <map>
#include <string>

#include "sim/error.h"

namespace traces {

namespace {

// Bytes per element of a profiler "Input type" ("float", "c10::BFloat16", ...); 0 unknown.
double type_bytes(const std::string& t) {
  if (t == "float" || t == "int" || t == "unsigned int") return 4;
  if (t == "double" || t == "long int" || t == "long" || t == "c10::complex<float>") return 8;
  if (t == "c10::Half" || t == "c10::BFloat16" || t == "short int" || t == "short") return 2;
  if (t == "bool" || t == "unsigned char" || t == "signed char" || t.rfind("c10::Float8", 0) == 0) return 1;
  return 0;
}

bool precision_of(const std::string& type, const std::string& kernel, wl::MatmulPrecision& p) {
  if (type == "float") {
    const bool tf32 = kernel.find("tf32") != std::string::npos || kernel.find("s1688") != std::string::npos ||
                      kernel.find("s16816") != std::string::npos;
    p = tf32 ? wl::MatmulPrecision::kTf32 : wl::MatmulPrecision::kFp32;
  } else if (type == "c10::BFloat16") {
    p = wl::MatmulPrecision::kBf16;
  } else if (type == "c10::Half") {
    p = wl::MatmulPrecision::kFp16;
  } else if (type.rfind("c10::Float8", 0) == 0) {
    p = wl::MatmulPrecision::kFp8;
  } else {
    return false;
  }
  return true;
}

double numel(const std::vector<int64_t>& d) {
  double n = 1;
  for (int64_t x : d) n *= static_cast<double>(x);
  return n;
}

std::string dims_text(double b, double m, double n, double k) {
  std::string s = std::to_string(static_cast<long long>(m)) + "x" + std::to_string(static_cast<long long>(n)) + "x" +
                  std::to_string(static_cast<long long>(k));
  if (b > 1) s.insert(0, std::to_string(static_cast<long long>(b)).append("*"));
  return s;
}

// A GEMM op's B, M, N, K from its input shapes; false when the op is not one or the shapes are odd.
bool gemm_shape(const CpuOp& op, double& b, double& m, double& n, double& k) {
  const auto& d = op.dims;
  auto two = [&](size_t i, size_t j) {  // [M,K] x [K,N]
    if (d.size() <= std::max(i, j) || d[i].size() != 2 || d[j].size() != 2 || d[i][1] != d[j][0]) return false;
    b = 1, m = static_cast<double>(d[i][0]), k = static_cast<double>(d[i][1]), n = static_cast<double>(d[j][1]);
    return true;
  };
  auto three = [&](size_t i, size_t j) {  // [B,M,K] x [B,K,N]
    if (d.size() <= std::max(i, j) || d[i].size() != 3 || d[j].size() != 3 || d[i][2] != d[j][1]) return false;
    b = static_cast<double>(d[i][0]), m = static_cast<double>(d[i][1]), k = static_cast<double>(d[i][2]);
    n = static_cast<double>(d[j][2]);
    return true;
  };
  // torch._scaled_mm(a [M,K], b [K,N], scale_a, scale_b, ...): FP8 GEMMs (torchao's Float8Linear).
  if (op.name == "aten::mm" || op.name == "aten::matmul" || op.name == "aten::_scaled_mm") return two(0, 1);
  if (op.name == "aten::addmm") return two(1, 2);
  if (op.name == "aten::bmm") return three(0, 1);
  if (op.name == "aten::baddbmm") return three(1, 2);
  if (op.name == "aten::linear") {  // input [.., K], weight [N, K]
    if (d.size() < 2 || d[0].empty() || d[1].size() != 2 || d[0].back() != d[1][1]) return false;
    b = 1, k = static_cast<double>(d[1][1]), n = static_cast<double>(d[1][0]);
    m = numel(d[0]) / k;
    return true;
  }
  return false;
}

// An attention op's causal FLOPs, direction and keys per sequence (flops 0: not an attention op
// this reader knows). The SDPA entry points (aten::_scaled_dot_product_*_attention[_backward])
// and cuDNN's kernels (which PyTorch 2.5+ picks on Hopper: aten::_cudnn_attention_forward /
// _backward under the SDPA op) take [B,H,S,D] tensors; the flash and memory-efficient kernels
// (aten::_flash_attention_*, aten::_efficient_attention_*) [B,S,H,D]. Backward ops take
// (grad_out, query, key, value, ...).
struct AttentionShape {
  double flops = 0, keys = 0;
  bool backward = false;
};
AttentionShape attention_shape(const CpuOp& op) {
  const std::string& s = op.name;
  const bool sdpa = s.rfind("aten::_scaled_dot_product_", 0) == 0 && s.find("attention") != std::string::npos;
  const bool cudnn = s == "aten::_cudnn_attention_forward" || s == "aten::_cudnn_attention_backward";
  const bool inner = s == "aten::_flash_attention_forward" || s == "aten::_efficient_attention_forward" ||
                     s == "aten::_flash_attention_backward" || s == "aten::_efficient_attention_backward";
  AttentionShape a;
  if (!sdpa && !cudnn && !inner) return a;
  a.backward = s.size() > 9 && s.compare(s.size() - 9, 9, "_backward") == 0;
  const size_t q = a.backward ? 1 : 0;
  if (op.dims.size() <= q + 1 || op.dims[q].size() != 4 || op.dims[q + 1].size() != 4) return a;
  a.keys = static_cast<double>(inner ? op.dims[q + 1][1] : op.dims[q + 1][2]);
  const double fwd = 4.0 * numel(op.dims[q]) * a.keys / 2.0;
  a.flops = a.backward ? 2.5 * fwd : fwd;
  return a;
}

// HBM bytes of an elementwise op (see samples.h), 0 when the types are unknown.
double elementwise_bytes(const CpuOp& op) {
  if (op.dims.empty() || op.types.empty()) return 0;
  const double e0 = type_bytes(op.types[0]);
  if (e0 == 0) return 0;
  const double first = numel(op.dims[0]) * e0;
  if (op.name == "aten::fill_" || op.name == "aten::zero_") return first;
  double read = 0;
  for (size_t i = 0; i < op.dims.size() && i < op.types.size(); ++i)
    if (!op.dims[i].empty()) read += numel(op.dims[i]) * type_bytes(op.types[i]);
  if (op.name == "aten::copy_") return read;  // destination written, source read
  return read + first;
}

}  // namespace

std::vector<double> launch_intervals(const KinetoRank& rank) {
  std::map<int64_t, std::vector<int64_t>> by_thread;
  for (const GpuActivity& a : rank.activity)
    if ((a.kind == GpuActivity::Kind::kKernel || a.kind == GpuActivity::Kind::kCollective) && a.launch_ns >= 0)
      by_thread[a.launch_tid].push_back(a.launch_ns);
  std::vector<double> out;
  for (auto& [tid, starts] : by_thread) {
    std::sort(starts.begin(), starts.end());
    for (size_t i = 1; i < starts.size(); ++i) out.push_back(static_cast<double>(starts[i] - starts[i - 1]) * 1e-9);
  }
  return out;
}

std::vector<double> queued_kernel_gaps(const KinetoRank& rank) {
  std::map<uint32_t, std::vector<const GpuActivity*>> by_stream;
  for (const GpuActivity& a : rank.activity)
    if (a.kind == GpuActivity::Kind::kKernel || a.kind == GpuActivity::Kind::kCollective) by_stream[a.stream].push_back(&a);
  std::vector<double> out;
  for (auto& [stream, list] : by_stream) {
    std::stable_sort(list.begin(), list.end(),
                     [](const GpuActivity* x, const GpuActivity* y) { return x->start_ns < y->start_ns; });
    for (size_t i = 1; i < list.size(); ++i) {
      const int64_t prev_end = list[i - 1]->start_ns + list[i - 1]->dur_ns;
      if (list[i]->launch_ns < 0 || list[i]->launch_ns > prev_end - 20000 || list[i]->start_ns < prev_end) continue;
      out.push_back(static_cast<double>(list[i]->start_ns - prev_end) * 1e-9);
    }
  }
  return out;
}

std::vector<wl::KernelSample> kernel_samples(const KinetoRank& rank, uint32_t source) {
  std::vector<wl::KernelSample> out;
  std::map<int32_t, std::vector<const GpuActivity*>> by_op;
  for (const auto& a : rank.activity) {
    if (a.kind == GpuActivity::Kind::kMemset) {
      if (a.bytes <= 0) continue;
      wl::KernelSample s;
      s.cls = wl::KernelClass::kMemory;
      s.bytes = a.bytes;
      s.seconds = static_cast<double>(a.dur_ns) * 1e-9;
      s.shape = std::string("memset ").append(std::to_string(static_cast<long long>(a.bytes))).append(" B");
      s.source = source;
      out.push_back(std::move(s));
    } else if (a.kind == GpuActivity::Kind::kKernel && a.launched_by >= 0) {
      by_op[a.launched_by].push_back(&a);
    }
  }
  for (const auto& [index, kernels] : by_op) {
    const CpuOp& op = rank.ops[static_cast<size_t>(index)];
    wl::KernelSample s;
    s.source = source;
    for (const GpuActivity* a : kernels) s.seconds += static_cast<double>(a->dur_ns) * 1e-9;
    double b = 0, m = 0, n = 0, k = 0;
    const std::string& type = op.types.empty() ? std::string() : op.types[0];
    if (gemm_shape(op, b, m, n, k)) {
      if (!precision_of(type, kernels.front()->name, s.precision)) continue;
      s.cls = wl::KernelClass::kGemm;
      s.flops = 2 * b * m * n * k;
      s.rows = b * m;
      s.cols = n;
      s.shape = "gemm " + std::string(wl::precision_name(s.precision)) + " " + dims_text(b, m, n, k);
    } else if (const AttentionShape at = attention_shape(op); at.flops > 0) {
      if (!precision_of(type, kernels.front()->name, s.precision)) continue;
      s.cls = wl::KernelClass::kAttention;
      s.flops = at.flops;
      s.backward = at.backward;
      s.keys = at.keys;
      std::string d;
      for (int64_t x : op.dims[at.backward ? 1 : 0]) d.append(d.empty() ? "" : "x").append(std::to_string(x));
      s.shape = "attention " + std::string(wl::precision_name(s.precision)) + " " + d + (at.backward ? " bwd" : " fwd");
    } else if (kernels.size() == 1 && kernels.front()->name.find("elementwise_kernel") != std::string::npos) {
      s.cls = wl::KernelClass::kMemory;
      s.bytes = elementwise_bytes(op);
      if (s.bytes <= 0) continue;
      // Unvectorized (generic or casting) kernels: their elements, the largest operand's.
      if (is_unvectorized_elementwise(kernels.front()->name))
        for (const auto& d : op.dims) s.elements = std::max(s.elements, d.empty() ? 0.0 : numel(d));
      s.shape = std::string(s.elements > 0 ? "unvectorized elementwise " : "elementwise ")
                    .append(std::to_string(static_cast<long long>(s.bytes)))
                    .append(" B");
      if (s.elements > 0) s.shape.append(" ").append(std::to_string(static_cast<long long>(s.elements))).append(" el");
    } else {
      continue;
    }
    if (s.seconds > 0) out.push_back(std::move(s));
  }
  return out;
}

std::vector<wl::CollectiveSample> collective_samples(const std::vector<KinetoRank>& ranks,
                                                     const std::vector<std::vector<EtCollective>>& sizes) {
  std::vector<wl::CollectiveSample> out;
  if (ranks.size() < 2) return out;  // one trace: its collectives include waiting for the others
  const MatchedCollectives mc = match_collectives(ranks);
  if (!sizes.empty() && sizes.size() != ranks.size())
    throw sim::UserError("calibrate: " + std::to_string(sizes.size()) + " execution traces for " +
                         std::to_string(ranks.size()) + " profiler traces");
  for (size_t r = 0; r < sizes.size(); ++r)
    if (sizes[r].size() != mc.of_rank[r].size())
      throw sim::UserError(ranks[r].file + ": " + std::to_string(mc.of_rank[r].size()) +
                           " NCCL kernels, but its execution trace holds " + std::to_string(sizes[r].size()) +
                           " collectives");
  // Sizes by instance: from the first member's execution trace, else recorded.
  std::vector<const EtCollective*> et_of(mc.instances.size(), nullptr);
  for (size_t r = 0; r < sizes.size(); ++r)
    for (size_t i = 0; i < sizes[r].size(); ++i)
      if (!et_of[mc.of_rank[r][i].first]) et_of[mc.of_rank[r][i].first] = &sizes[r][i];
  for (size_t k = 0; k < mc.instances.size(); ++k) {
    const CollectiveInstance& inst = mc.instances[k];
    wl::CollectiveSample s;
    s.ranks = static_cast<uint32_t>(inst.members.size());
    s.members = mc.groups[inst.group].ranks;
    s.op = et_of[k] ? et_of[k]->op : inst.members[0]->coll;
    s.bytes = et_of[k] ? et_of[k]->bytes : inst.members[0]->bytes;
    int64_t shortest = inst.members[0]->dur_ns;
    for (const GpuActivity* a : inst.members) shortest = std::min(shortest, a->dur_ns);
    s.seconds = static_cast<double>(shortest) * 1e-9;
    if (s.bytes > 0) out.push_back(s);
  }
  return out;
}

}  // namespace traces
