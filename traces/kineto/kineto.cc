#include "traces/kineto/kineto.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <string_view>

#include <nlohmann/json.hpp>

#include "sim/log.h"
#include "sim/error.h"
#include "traces/gz_file.h"
#include "workloads/program/executor.h"

namespace traces {

namespace {

// The collective an NCCL kernel runs, from its name ("ncclKernel_AllReduce_RING_LL_Sum_float",
// "ncclDevKernel_AllGather_RING_LL"); false when the name is not an NCCL collective kernel. The
// all-reduces that bypass NCCL count too: PyTorch's symmetric-memory kernels
// (torch/csrc/distributed/c10d/symm_mem: multimem_all_reduce_kernel, one_shot_all_reduce_kernel,
// two_shot_all_reduce_kernel; "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16,
// 16>(...)" in TraceLens's B200 sample) and vLLM's custom all-reduce (cross_device_reduce_1stage,
// _2stage).
bool nccl_collective(const std::string& name, wl::CollectiveOp& op, bool& known) {
  for (const char* ar : {"multimem_all_reduce_kernel", "one_shot_all_reduce_kernel", "two_shot_all_reduce_kernel",
                         "cross_device_reduce_"})
    if (name.find(ar) != std::string::npos) {
      op = wl::CollectiveOp::kAllReduce;
      known = true;
      return true;
    }
  if (name.rfind("ncclKernel_", 0) != 0 && name.rfind("ncclDevKernel_", 0) != 0) return false;
  const std::pair<const char*, wl::CollectiveOp> kinds[] = {
      {"_AllReduce", wl::CollectiveOp::kAllReduce},   {"_AllGather", wl::CollectiveOp::kAllGather},
      {"_ReduceScatter", wl::CollectiveOp::kReduceScatter}, {"_Broadcast", wl::CollectiveOp::kBroadcast},
      {"_Reduce", wl::CollectiveOp::kReduce},         {"_SendRecv", wl::CollectiveOp::kAllToAll},
  };
  for (const auto& [key, value] : kinds)
    if (name.find(key) != std::string::npos) {
      op = value;
      known = true;
      return true;
    }
  op = wl::CollectiveOp::kAllReduce;  // an NCCL kernel of another kind: still a collective
  known = false;
  return true;
}

// Measured exposed communication: the time some collective kernel ran while no other GPU activity
// of the rank did (a sweep over the activities' start and end points).
double exposed_communication_s(const KinetoRank& kr) {
  std::vector<std::pair<int64_t, int>> points;  // (time, +-1 collective | +-2 other)
  for (const auto& a : kr.activity) {
    const int w = a.kind == GpuActivity::Kind::kCollective ? 1 : 2;
    points.emplace_back(a.start_ns, w);
    points.emplace_back(a.start_ns + a.dur_ns, -w);
  }
  std::sort(points.begin(), points.end());
  int64_t exposed = 0, last = 0;
  int comm = 0, other = 0;
  for (const auto& [t, w] : points) {
    if (comm > 0 && other == 0) exposed += t - last;
    last = t;
    if (w == 1 || w == -1) comm += w;
    else other += w / 2;
  }
  return static_cast<double>(exposed) * 1e-9;
}

}  // namespace

const char* measured_class_name(MeasuredClass c) {
  switch (c) {
    case MeasuredClass::kTensorGemm: return "GEMM (tensor cores)";
    case MeasuredClass::kFp32Gemm: return "GEMM (FP32)";
    case MeasuredClass::kAttention: return "attention";
    case MeasuredClass::kAttentionBackward: return "attention backward";
    case MeasuredClass::kMemoryBound: return "memory-bound and other";
    case MeasuredClass::kUnvectorized: return "unvectorized elementwise";
    case MeasuredClass::kForeach: return "foreach (optimizer)";
  }
  return "?";
}

bool is_unvectorized_elementwise(const std::string& name) {
  if (name.find("unrolled_elementwise_kernel") != std::string::npos) return true;
  return name.find("elementwise_kernel") != std::string::npos &&
         name.find("vectorized_elementwise_kernel") == std::string::npos;
}

MeasuredClass kernel_class_by_name(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  // Fused attention: FlashAttention's flash_fwd/flash_bwd, cuDNN's *_sdpa_*_flash_fprop/_bprop.
  if (has("flash") || has("fmha") || has("attention"))
    return has("bwd") || has("bprop") || has("backward") ? MeasuredClass::kAttentionBackward
                                                          : MeasuredClass::kAttention;
  // FBGEMM's GPU kernels (fbgemm_gpu::permute_2D_*, the embedding ops' bounds_check_indices, whose
  // arguments name fbgemm_gpu::FixedDivisor) move indices and rows: "fbgemm" names the library,
  // not a GEMM. Its CUTLASS GEMMs still say "cutlass".
  for (size_t at = n.find("fbgemm"); at != std::string::npos; at = n.find("fbgemm", at)) n.replace(at, 6, "fb");
  // cuBLAS's Hopper GEMMs are named nvjet_* (cuBLAS 12.x), its older ones *gemm* / *xmma*;
  // TensorRT-LLM's generated batched GEMMs bmm_<types>_... (bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256...,
  // FP4/FP8 MoE GEMMs in TraceLens's B200 sample).
  const bool trtllm_bmm = n.rfind("bmm_", 0) == 0 || has(" bmm_");
  if (has("gemm") || has("xmma") || has("cutlass") || has("cublas") || has("nvjet") || trtllm_bmm)
    return has("sgemm") || has("<float") ? MeasuredClass::kFp32Gemm : MeasuredClass::kTensorGemm;
  if (is_unvectorized_elementwise(name)) return MeasuredClass::kUnvectorized;
  if (has("multi_tensor_apply")) return MeasuredClass::kForeach;
  return MeasuredClass::kMemoryBound;
}

int64_t KinetoRank::last_end_ns() const {
  int64_t end = 0;
  for (const auto& a : activity) end = std::max(end, a.start_ns + a.dur_ns);
  return end;
}

namespace {

// A SAX reader of a profiler trace: it keeps the GPU activities and distributedInfo as the parser
// passes them, never the document (a trace of hundreds of MB stays a stream of events).
class KinetoSax : public nlohmann::json_sax<nlohmann::json> {
 public:
  KinetoSax(KinetoRank& out, const std::string& path, bool ops) : out_(out), path_(path), keep_ops_(ops) {}

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t v) override { return number(static_cast<double>(v), v, true); }
  bool number_unsigned(number_unsigned_t v) override {
    return number(static_cast<double>(v), static_cast<int64_t>(v), true);
  }
  bool number_float(number_float_t v, const string_t&) override { return number(v, 0, false); }
  bool string(string_t& v) override {
    if (in_event() && key_ == "cat") ev_.cat = v;
    if (in_event() && key_ == "name") ev_.name = v;
    if (in_args() && key_ == "dtype") ev_.dtype = v;
    if (in_args() && key_ == "Process Group Name") ev_.pg_name = v;
    if (in_args() && key_ == "Process Group Ranks") ev_.pg_ranks = v;
    if (depth_ == 5 && list_ == 2) ev_.types.push_back(v);
    // deviceProperties: [{"id": 0, "name": "...", ...}, ...]: the first device's name.
    if (depth_ == 3 && top_key_ == "deviceProperties" && key_ == "name" && out_.device.empty()) {
      out_.device = v;  // printed in messages and in a profile's comment: one printable line
      for (char& c : out_.device)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    }
    if (depth_ == 1 && key_ == "schema") {
      saw_schema_ = true;
      schema_ = v;
    }
    return true;
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    push(true);
    if (in_event()) ev_ = Event{};
    return true;
  }
  bool key(string_t& k) override {
    key_ = k;
    if (depth_ == 1) {
      if (k == "traceEvents") saw_events_ = true;
      if (k == "nodes") saw_nodes_ = true;
    }
    return true;
  }
  bool end_object() override {
    if (in_event()) finish_event();
    pop();
    return true;
  }
  bool start_array(std::size_t) override {
    // args."Input Dims": [[d0, d1], [], ...] and args."Input type": ["float", ...] (kept for ops).
    if (keep_ops_ && in_args()) list_ = key_ == "Input Dims" ? 1 : key_ == "Input type" ? 2 : 0;
    if (depth_ == 5 && list_ == 1) ev_.dims.emplace_back();
    push(false);
    return true;
  }
  bool end_array() override {
    pop();
    if (depth_ == 4) list_ = 0;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    failed_ = true;
    return false;
  }

  bool failed() const { return failed_; }
  bool saw_events() const { return saw_events_; }
  bool execution_trace() const { return saw_nodes_ && saw_schema_; }
  const std::string& schema() const { return schema_; }
  // Links each activity to the runtime call that launched it (its time and thread), the profiler
  // step around that call and, with ops kept, the innermost shaped CPU op around it.
  void link_launches() {
    std::stable_sort(out_.steps.begin(), out_.steps.end(),
                     [](const ProfilerStep& a, const ProfilerStep& b) { return a.start_ns < b.start_ns; });
    // By correlation id; of two calls with one id, the later in the file (as a map would keep).
    std::stable_sort(launches_.begin(), launches_.end(),
                     [](const Launch& a, const Launch& b) { return a.correlation < b.correlation; });
    std::vector<uint32_t> by_start(out_.ops.size());
    for (uint32_t i = 0; i < by_start.size(); ++i) by_start[i] = i;
    std::stable_sort(by_start.begin(), by_start.end(),
                     [&](uint32_t a, uint32_t b) { return out_.ops[a].start_ns < out_.ops[b].start_ns; });
    for (size_t i = 0; i < out_.activity.size(); ++i) {
      if (correlation_[i] < 0) continue;
      auto call = std::upper_bound(launches_.begin(), launches_.end(), correlation_[i],
                                   [](int64_t c, const Launch& l) { return c < l.correlation; });
      if (call == launches_.begin() || (call - 1)->correlation != correlation_[i]) continue;
      const int64_t t = (call - 1)->ts_ns, tid = (call - 1)->tid;
      out_.activity[i].launch_ns = t;
      out_.activity[i].launch_tid = tid;
      auto step = std::upper_bound(out_.steps.begin(), out_.steps.end(), t,
                                   [](int64_t x, const ProfilerStep& st) { return x < st.start_ns; });
      if (step != out_.steps.begin() && t <= (step - 1)->end_ns)
        out_.activity[i].step = static_cast<int32_t>(step - 1 - out_.steps.begin());
      if (!keep_ops_) continue;
      // The latest-starting op on the call's thread that encloses it (nested ops start later).
      auto it = std::upper_bound(by_start.begin(), by_start.end(), t,
                                 [&](int64_t x, uint32_t o) { return x < out_.ops[o].start_ns; });
      for (int steps = 0; it != by_start.begin() && steps < 4096; ++steps) {
        const CpuOp& op = out_.ops[*--it];
        if (op.tid == tid && op.end_ns >= t) {
          out_.activity[i].launched_by = static_cast<int32_t>(*it);
          break;
        }
      }
    }
  }

 private:
  bool in_args() const { return depth_ == 4 && top_key_ == "traceEvents" && parent_key_ == "args"; }
  struct Event {
    std::string cat, name, dtype, pg_name, pg_ranks;
    std::vector<std::vector<int64_t>> dims;
    std::vector<std::string> types;
    int64_t in_nelems = -1, out_nelems = -1, correlation = -1, bytes = -1;
    bool has_ts = false, has_dur = false, has_stream = false, has_tid = false, has_pid = false;
    int64_t ts_ns = 0, dur_ns = 0, stream = 0, tid = 0, pid = 0;
  };
  // Containers from the root: an object per level, or an array; and which top-level key holds us.
  void push(bool object) {
    if (depth_ == 1) top_key_ = key_;
    if (depth_ == 3) parent_key_ = key_;  // inside an event: "args", ...
    object_.push_back(object);
    ++depth_;
    key_.clear();
  }
  void pop() {
    object_.pop_back();
    --depth_;
  }
  // An event: an object at depth 3 (root object, traceEvents array, the event).
  bool in_event() const { return depth_ == 3 && top_key_ == "traceEvents" && object_.size() == 3 && object_[2]; }
  bool number(double d, int64_t i, bool integer) {
    // Microseconds to nanoseconds. A time beyond 2^62 ns (146 years) is no time a profiler wrote,
    // and a start plus a duration of such values would overflow: refused, naming the event.
    auto ns = [&]() -> int64_t {
      constexpr int64_t kMaxUs = (int64_t{1} << 62) / 1000;
      if (integer ? (i > kMaxUs || i < -kMaxUs) : !(std::fabs(d) < static_cast<double>(kMaxUs)))
        throw sim::UserError(path_ + ": traceEvents[" + std::to_string(events_) + "]: \"" + key_ + "\" of " +
                             (integer ? std::to_string(i) : std::to_string(d)) + " us is out of range");
      return integer ? i * 1000 : std::llround(d * 1000.0);
    };
    if (in_event()) {
      if (key_ == "ts") {
        ev_.has_ts = true;
        ev_.ts_ns = ns();
      } else if (key_ == "dur") {
        ev_.has_dur = true;
        ev_.dur_ns = ns();
      } else if (key_ == "tid" && integer) {
        ev_.has_tid = true;
        ev_.tid = i;
      } else if (key_ == "pid" && integer) {
        ev_.has_pid = true;
        ev_.pid = i;
      }
    } else if (in_args() && key_ == "stream" && integer) {
      ev_.has_stream = true;
      ev_.stream = i;
    } else if (depth_ == 6 && list_ == 1 && integer) {
      ev_.dims.back().push_back(i);
    } else if (in_args() && key_ == "correlation" && integer) {
      ev_.correlation = i;
    } else if (in_args() && key_ == "bytes" && integer) {
      ev_.bytes = i;
    } else if (in_args() && key_ == "In msg nelems" && integer) {
      ev_.in_nelems = i;
    } else if (in_args() && key_ == "Out msg nelems" && integer) {
      ev_.out_nelems = i;
    } else if (depth_ == 2 && top_key_ == "distributedInfo" && integer) {
      if (key_ == "rank") out_.rank = i;
      if (key_ == "world_size") out_.world = i;
    }
    return true;
  }
  void finish_event() {
    const size_t index = events_++;
    GpuActivity a;
    const std::string& cat = ev_.cat;
    if (cat == "kernel" || cat == "Kernel") {
      a.kind = GpuActivity::Kind::kKernel;
    } else if (cat == "gpu_memcpy" || cat == "Memcpy") {
      a.kind = GpuActivity::Kind::kMemcpy;
    } else if (cat == "gpu_memset" || cat == "Memset") {
      a.kind = GpuActivity::Kind::kMemset;
    } else {
      // The training process's pid, from its first CPU op or runtime call (GPU events carry the
      // device's number as their pid).
      if (out_.host_pid < 0 && ev_.has_pid &&
          (cat == "cpu_op" || cat == "Operator" || cat == "cuda_runtime" || cat == "Runtime"))
        out_.host_pid = ev_.pid;
      keep_cpu_side();
      return;
    }
    auto where = [&] { return path_ + ": traceEvents[" + std::to_string(index) + "] (" + cat + ")"; };
    if (!ev_.has_ts || !ev_.has_dur) throw sim::UserError(where() + ": a GPU activity without numeric ts and dur");
    if (ev_.dur_ns < 0) throw sim::UserError(where() + ": negative duration");
    a.start_ns = ev_.ts_ns;
    a.dur_ns = ev_.dur_ns;
    a.name = ev_.name.empty() ? std::string("?") : ev_.name;
    a.stream = static_cast<uint32_t>(ev_.has_stream ? ev_.stream : ev_.has_tid ? ev_.tid : 0);
    if (a.kind == GpuActivity::Kind::kKernel && nccl_collective(a.name, a.coll, a.kind_known))
      a.kind = GpuActivity::Kind::kCollective;
    if (a.kind == GpuActivity::Kind::kCollective) {
      const int64_t n = a.coll == wl::CollectiveOp::kAllGather ? ev_.out_nelems : ev_.in_nelems;
      const double e = element_bytes(ev_.dtype);
      if (n >= 0 && e > 0) a.bytes = static_cast<double>(n) * e;
      if (!ev_.pg_name.empty()) a.group = group_index(where);
    } else if (a.kind != GpuActivity::Kind::kKernel && ev_.bytes >= 0) {
      a.bytes = static_cast<double>(ev_.bytes);
    }
    out_.activity.push_back(std::move(a));
    correlation_.push_back(ev_.correlation);
  }
  // The index of the event's process group in out_.groups (added on first sight).
  template <class Where>
  int32_t group_index(const Where& where) {
    for (size_t g = 0; g < out_.groups.size(); ++g)
      if (out_.groups[g].name == ev_.pg_name) return static_cast<int32_t>(g);
    ProcessGroup pg;
    pg.name = ev_.pg_name;
    // "[0, 1, 2]": decimal ranks between brackets, separated by commas.
    const std::string& t = ev_.pg_ranks;
    size_t i = t.find('[');
    if (i == std::string::npos || t.find(']') == std::string::npos)
      throw sim::UserError(where() + ": \"Process Group Ranks\" is not a list of ranks: \"" + t + "\"");
    for (++i; i < t.size() && t[i] != ']';) {
      if (t[i] == ' ' || t[i] == ',') {
        ++i;
        continue;
      }
      size_t used = 0;
      long long v = -1;
      try {
        v = std::stoll(t.substr(i), &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || v < 0 || v > 0xFFFFFFF)
        throw sim::UserError(where() + ": \"Process Group Ranks\" is not a list of ranks: \"" + t + "\"");
      pg.ranks.push_back(static_cast<uint32_t>(v));
      i += used;
    }
    out_.groups.push_back(std::move(pg));
    return static_cast<int32_t>(out_.groups.size() - 1);
  }
  // Profiler steps, runtime calls that launch GPU work (by correlation id) and, with ops kept,
  // CPU ops that record shapes.
  void keep_cpu_side() {
    if (!ev_.has_ts) return;
    const std::string& cat = ev_.cat;
    static constexpr std::string_view kStep = "ProfilerStep#";
    // (PyTorch before 2.0 wrote the annotation as a CPU op.)
    if ((cat == "user_annotation" || cat == "cpu_op" || cat == "Operator") && ev_.has_dur &&
        ev_.name.starts_with(kStep)) {
      ProfilerStep st;
      const std::string digits = ev_.name.substr(kStep.size());
      size_t used = 0;
      try {
        st.number = std::stoll(digits, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != digits.size()) return;  // not a step's annotation after all
      st.start_ns = ev_.ts_ns;
      st.end_ns = ev_.ts_ns + ev_.dur_ns;
      out_.steps.push_back(st);
      return;
    }
    if (!ev_.has_tid) return;
    if (keep_ops_ && (cat == "cpu_op" || cat == "Operator") && ev_.has_dur && !ev_.dims.empty()) {
      CpuOp op;
      op.name = ev_.name;
      op.start_ns = ev_.ts_ns;
      op.end_ns = ev_.ts_ns + ev_.dur_ns;
      op.tid = ev_.tid;
      op.dims = std::move(ev_.dims);
      op.types = std::move(ev_.types);
      out_.ops.push_back(std::move(op));
    } else if ((cat == "cuda_runtime" || cat == "Runtime" || cat == "cuda_driver") && ev_.correlation >= 0) {
      launches_.push_back(Launch{ev_.correlation, ev_.ts_ns, ev_.tid});
    }
  }
  // Bytes per element of a PyTorch dtype as the profiler names it ("Float", "BFloat16", ...).
  static double element_bytes(const std::string& d) {
    if (d == "Float" || d == "Int" || d == "float" || d == "int") return 4;
    if (d == "Half" || d == "BFloat16" || d == "Short") return 2;
    if (d == "Double" || d == "Long" || d == "ComplexFloat") return 8;
    if (d == "Byte" || d == "Char" || d == "Bool" || d == "Float8_e4m3fn" || d == "Float8_e5m2") return 1;
    return 0;
  }

  KinetoRank& out_;
  const std::string& path_;
  std::vector<bool> object_;
  size_t depth_ = 0;
  std::string key_, top_key_, parent_key_, schema_;
  Event ev_;
  size_t events_ = 0;
  const bool keep_ops_;
  int list_ = 0;                       // inside args."Input Dims" (1) or args."Input type" (2)
  std::vector<int64_t> correlation_;  // per activity
  struct Launch {
    int64_t correlation, ts_ns, tid;
  };
  std::vector<Launch> launches_;  // the runtime calls that launch GPU work
  bool failed_ = false, saw_events_ = false, saw_nodes_ = false, saw_schema_ = false;
};

}  // namespace

KinetoRank read_kineto(const std::string& path, const KinetoReadOptions& opt) {
  KinetoRank out;
  out.file = path;
  const std::string text = read_maybe_gzip(path);
  KinetoSax sax(out, path, opt.ops);
  nlohmann::json::sax_parse(text, &sax);
  if (sax.failed()) {
    const bool binary = std::any_of(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(text.size(), 256)),
                                    [](char c) { return c != '\n' && c != '\r' && c != '\t' && static_cast<unsigned char>(c) < 32; });
    throw sim::UserError(path + (binary ? ": binary, not JSON (a Chakra protobuf trace? give Chakra traces as .et files)"
                                        : ": not valid JSON (a PyTorch profiler trace is a JSON object)"));
  }
  if (sax.execution_trace())
    throw sim::UserError(path + ": a PyTorch execution trace (schema \"" + sax.schema() +
                         "\"), not a profiler trace: give it with --et, beside the profiler traces");
  if (!sax.saw_events()) throw sim::UserError(path + ": no traceEvents array: not a PyTorch profiler (Kineto) trace");
  if (out.activity.empty()) throw sim::UserError(path + ": no GPU activity (kernel, gpu_memcpy, gpu_memset) to replay");
  sax.link_launches();
  std::stable_sort(out.activity.begin(), out.activity.end(),
                   [](const GpuActivity& x, const GpuActivity& y) { return x.start_ns < y.start_ns; });
  if (opt.log) {
    size_t nccl = 0;
    for (const GpuActivity& a : out.activity) nccl += a.kind == GpuActivity::Kind::kCollective;
    opt.log->at(sim::Layer::kTraces)
        .info("{}: rank {} of {}, {} GPU activities ({} NCCL kernels), {} CPU ops kept, {} process groups", path,
              out.rank, out.world, out.activity.size(), nccl, out.ops.size(), out.groups.size());
  }
  return out;
}

MatchedCollectives match_collectives(const std::vector<KinetoRank>& ranks) {
  MatchedCollectives m;
  const uint32_t world = static_cast<uint32_t>(ranks.size());
  ProcessGroup all;
  all.name = "world";
  for (uint32_t r = 0; r < world; ++r) all.ranks.push_back(r);
  m.groups.push_back(all);
  std::map<std::string, uint32_t> by_name;
  // Per rank, its collectives' groups in the order it ran them; per (group, rank), its kernels.
  std::vector<std::vector<uint32_t>> group_seq(world);
  std::map<std::pair<uint32_t, uint32_t>, std::vector<const GpuActivity*>> lists;
  for (uint32_t r = 0; r < world; ++r)
    for (const auto& a : ranks[r].activity) {
      if (a.kind != GpuActivity::Kind::kCollective) continue;
      uint32_t g = 0;
      if (a.group >= 0) {
        const ProcessGroup& pg = ranks[r].groups[static_cast<size_t>(a.group)];
        if (!pg.ranks.empty() && pg.ranks != all.ranks) {
          auto it = by_name.find(pg.name);
          if (it == by_name.end()) {
            for (uint32_t x : pg.ranks)
              if (x >= world)
                throw sim::UserError(ranks[r].file + ": process group '" + pg.name + "' holds rank " +
                                     std::to_string(x) + " but " + std::to_string(world) + " traces were given");
            it = by_name.emplace(pg.name, static_cast<uint32_t>(m.groups.size())).first;
            m.groups.push_back(pg);
          } else if (m.groups[it->second].ranks != pg.ranks) {
            throw sim::UserError(ranks[r].file + ": process group '" + pg.name +
                                 "' lists other ranks than in another trace");
          }
          g = it->second;
          if (std::find(pg.ranks.begin(), pg.ranks.end(), r) == pg.ranks.end())
            throw sim::UserError(ranks[r].file + ": an NCCL kernel of process group '" + pg.name +
                                 "', which does not hold rank " + std::to_string(r));
        }
      }
      group_seq[r].push_back(g);
      lists[{g, r}].push_back(&a);
    }
  // The k-th kernel of every member of a group is the group's k-th collective.
  std::map<std::pair<uint32_t, size_t>, uint32_t> instance_of;  // (group, k) -> instance
  for (uint32_t g = 0; g < m.groups.size(); ++g) {
    const ProcessGroup& pg = m.groups[g];
    const size_t n = lists[{g, pg.ranks[0]}].size();
    for (uint32_t x : pg.ranks)
      if (lists[{g, x}].size() != n)
        throw sim::UserError(ranks[x].file + ": " + std::to_string(lists[{g, x}].size()) + " NCCL kernels of group '" +
                             pg.name + "', but " + ranks[pg.ranks[0]].file + " has " + std::to_string(n) +
                             ": the collectives cannot be matched");
    for (size_t k = 0; k < n; ++k) {
      CollectiveInstance inst;
      inst.group = g;
      for (uint32_t x : pg.ranks) inst.members.push_back(lists[{g, x}][k]);
      instance_of[{g, k}] = static_cast<uint32_t>(m.instances.size());
      m.instances.push_back(std::move(inst));
    }
  }
  m.of_rank.resize(world);
  for (uint32_t r = 0; r < world; ++r) {
    std::map<uint32_t, size_t> next;  // per group: its next ordinal on this rank
    for (uint32_t g : group_seq[r]) {
      const size_t k = next[g]++;
      const auto& ranks_of = m.groups[g].ranks;
      const uint32_t member = static_cast<uint32_t>(std::find(ranks_of.begin(), ranks_of.end(), r) - ranks_of.begin());
      m.of_rank[r].emplace_back(instance_of.at({g, k}), member);
    }
  }
  return m;
}

std::vector<std::vector<EtCollective>> read_paired_execution_traces(const std::vector<KinetoRank>& ranks,
                                                                    const std::vector<std::string>& et_files) {
  std::vector<EtCollectives> et;
  for (const auto& f : et_files) et.push_back(read_et_collectives(f));
  std::vector<std::vector<EtCollective>> out;
  for (size_t r = 0; r < et.size() && r < ranks.size(); ++r) {
    const KinetoRank& kr = ranks[r];
    auto recorded_by = [&](int64_t pid) {
      std::string s = "process " + std::to_string(pid);
      for (size_t o = 0; o < et.size(); ++o)
        if (o != r && et[o].pid == pid) s += " (as " + et_files[o] + " was)";
      return s;
    };
    if (et[r].pid >= 0 && kr.host_pid >= 0 && et[r].pid != kr.host_pid)
      throw sim::UserError("--et " + et_files[r] + " was recorded by process " + std::to_string(et[r].pid) + ", but " +
                           kr.file + " (trace " + std::to_string(r) + ") by " + recorded_by(kr.host_pid) +
                           ": give the execution traces in the order of the profiler traces");
    std::vector<const GpuActivity*> colls;
    for (const auto& a : kr.activity)
      if (a.kind == GpuActivity::Kind::kCollective) colls.push_back(&a);
    if (colls.size() == et[r].collectives.size())
      for (size_t k = 0; k < colls.size(); ++k)
        if (colls[k]->kind_known && colls[k]->coll != et[r].collectives[k].op)
          throw sim::UserError("--et " + et_files[r] + ": collective " + std::to_string(k) + " is " +
                               et[r].collectives[k].name + ", but " + kr.file + "'s NCCL kernel " +
                               std::to_string(k) + " is '" + colls[k]->name.substr(0, 40) +
                               "': give the execution traces in the order of the profiler traces");
    out.push_back(std::move(et[r].collectives));
  }
  for (size_t r = ranks.size(); r < et.size(); ++r) out.push_back(std::move(et[r].collectives));
  return out;
}

ReplayProgram replay_program(const std::vector<KinetoRank>& ranks, const ReplayOptions& opt) {
  ReplayProgram out;
  if (ranks.empty()) throw sim::UserError("replay: no traces");
  const size_t world = ranks.size();
  for (size_t r = 0; r < world; ++r) {
    if (world > 1 && ranks[r].rank >= 0 && ranks[r].rank != static_cast<int64_t>(r))
      throw sim::UserError(ranks[r].file + ": records rank " + std::to_string(ranks[r].rank) + " but is trace " +
                           std::to_string(r) + " of " + std::to_string(world) + " (give one trace per rank, in rank order)");
    if (world > 1 && ranks[r].world > 0 && ranks[r].world != static_cast<int64_t>(world))
      throw sim::UserError(ranks[r].file + ": records a world of " + std::to_string(ranks[r].world) + " ranks but " +
                           std::to_string(world) + " traces were given");
  }
  // Collectives matched per process group; every rank's in the order it ran them.
  MatchedCollectives mc;
  if (world > 1) mc = match_collectives(ranks);
  std::vector<std::vector<const GpuActivity*>> colls(world);
  for (size_t r = 0; r < world; ++r)
    for (const auto& a : ranks[r].activity)
      if (a.kind == GpuActivity::Kind::kCollective) colls[r].push_back(&a);
  out.collectives = colls[0].size();
  const bool simulate = !opt.collective_sizes.empty() || opt.simulate_recorded;
  if (opt.simulate_recorded && opt.collective_sizes.empty()) {
    // (One trace alone keeps its collectives as measured: no size needed.)
    for (size_t r = 0; r < world && world > 1; ++r)
      for (const GpuActivity* c : colls[r])
        if (c->bytes < 0)
          throw sim::UserError(ranks[r].file + ": NCCL kernel '" + c->name.substr(0, 60) +
                               "' records no message size: give the execution traces (--et) to simulate collectives");
  } else if (simulate) {
    if (opt.collective_sizes.size() != world)
      throw sim::UserError("replay: " + std::to_string(opt.collective_sizes.size()) +
                           " execution traces for " + std::to_string(world) + " ranks");
    for (size_t r = 0; r < world; ++r)
      if (opt.collective_sizes[r].size() != colls[r].size())
        throw sim::UserError(ranks[r].file + ": " + std::to_string(colls[r].size()) +
                             " NCCL kernels, but its execution trace holds " +
                             std::to_string(opt.collective_sizes[r].size()) + " collectives");
  }
  // A collective lasts what it lasted on the member that got there last.
  std::vector<double> coll_s(mc.instances.size(), 0);
  for (size_t k = 0; k < mc.instances.size(); ++k) {
    const GpuActivity* last = mc.instances[k].members[0];
    for (const GpuActivity* a : mc.instances[k].members)
      if (a->start_ns > last->start_ns) last = a;
    coll_s[k] = static_cast<double>(last->dur_ns) * 1e-9;
  }
  out.t0_ns = ranks[0].first_ns();
  for (const auto& r : ranks) out.t0_ns = std::min(out.t0_ns, r.first_ns());

  wl::JobProgram& jp = out.job;
  jp.categories = {"compute", "gaps", "collective"};  // gaps: the measured idle time before an activity
  jp.idle_category = 1;
  for (const ProcessGroup& g : mc.groups) {  // communicator i is group i
    wl::Communicator c;
    c.name = g.name;
    c.members = g.ranks;
    jp.add_comm(c);
  }
  out.op_of_activity.resize(world);
  for (size_t r = 0; r < world; ++r) {
    const KinetoRank& kr = ranks[r];
    wl::Program p;
    std::map<uint32_t, uint16_t> stream_of;  // GPU stream id -> program stream
    std::vector<int64_t> stream_end;         // per program stream: the end of its last activity
    struct Done {
      int64_t end;
      uint32_t op;
      uint16_t stream;
    };
    std::vector<Done> done;  // every activity so far: its end and its op
    size_t k = 0;
    for (const auto& a : kr.activity) {
      auto it = stream_of.find(a.stream);
      if (it == stream_of.end()) {
        it = stream_of.emplace(a.stream, p.add_stream("stream " + std::to_string(a.stream))).first;
        stream_end.push_back(out.t0_ns);
      }
      const uint16_t s = it->second;
      const int64_t gap = a.start_ns - stream_end[s];
      // Cross-stream synchronisation, inferred (the samples record cudaStreamWaitEvent but not the
      // matching cudaEventRecord): an activity that started shortly after an activity of another
      // stream ended, having idled before, waited for it. It then follows that activity after the
      // measured lag, and its own stream's gap no longer counts.
      const Done* after = nullptr;
      if (gap > opt.sync_idle_ns)
        for (const Done& d : done)
          if (d.stream != s && d.end >= stream_end[s] && d.end <= a.start_ns && a.start_ns - d.end <= opt.sync_lag_ns &&
              (!after || d.end > after->end))
            after = &d;
      const int64_t wait = after ? a.start_ns - after->end : gap;
      if (wait > 0 || after) {
        wl::Op d;
        d.kind = wl::OpKind::kDelay;
        d.stream = s;
        d.category = 1;
        d.seconds = static_cast<double>(std::max<int64_t>(wait, 0)) * 1e-9;
        if (after) {
          p.add(d, {after->op});
        } else {
          p.add(d);
        }
      }
      wl::Op op;
      op.stream = s;
      op.name = p.intern(a.name);
      if (a.kind == GpuActivity::Kind::kCollective && world > 1) {
        const uint32_t inst = mc.of_rank[r][k].first;
        op.kind = wl::OpKind::kCollective;
        op.coll = a.coll;
        op.comm = mc.instances[inst].group;
        op.category = 2;
        if (simulate && opt.collective_sizes.empty()) {
          op.bytes = a.bytes;  // recorded in the trace
          op.seconds = 0;
        } else if (simulate) {
          op.bytes = opt.collective_sizes[r][k].bytes;
          op.coll = opt.collective_sizes[r][k].op;
          op.seconds = 0;  // simulated on the cluster
        } else {
          op.seconds = coll_s[inst];
        }
        ++k;
      } else if (a.kind == GpuActivity::Kind::kCollective) {
        // One trace alone: its collectives keep their measured time, whatever the cluster or the
        // what-if (its peers are not there to be simulated with, and an NCCL kernel is not a
        // kernel of any class that scales).
        op.kind = wl::OpKind::kTimed;
        op.category = 2;
        op.seconds = static_cast<double>(a.dur_ns) * 1e-9;
        ++k;
      } else {
        op.kind = wl::OpKind::kTimed;  // measured: loads nothing, keeps its duration when streams overlap
        const double measured = static_cast<double>(a.dur_ns) * 1e-9;
        const MeasuredClass c =
            a.kind == GpuActivity::Kind::kKernel ? kernel_class_by_name(a.name) : MeasuredClass::kMemoryBound;
        op.seconds = opt.scaling.on ? opt.scaling.apply(c, measured) : measured;
        const auto ci = static_cast<size_t>(c);
        ++out.class_count[ci];
        out.class_measured_s[ci] += measured;
        out.class_replayed_s[ci] += op.seconds;
      }
      const uint32_t idx = p.add(op);
      out.op_of_activity[r].push_back(idx);
      stream_end[s] = std::max(stream_end[s], a.start_ns + a.dur_ns);
      done.push_back(Done{a.start_ns + a.dur_ns, idx, s});
    }
    p.finalize();
    jp.templates.push_back(std::move(p));
    jp.template_of_rank.push_back(static_cast<uint32_t>(r));
    out.measured_s.push_back(static_cast<double>(kr.last_end_ns() - kr.first_ns()) * 1e-9);
    out.exposed_comm_s.push_back(exposed_communication_s(kr));
    out.offset_s.push_back(static_cast<double>(kr.first_ns() - out.t0_ns) * 1e-9);
  }
  return out;
}

std::vector<StepTime> step_times(const KinetoRank& rank, const std::vector<uint32_t>& op_of_activity,
                                 const std::vector<wl::OpTimes>& op_times) {
  struct Span {
    int64_t first = INT64_MAX, last = INT64_MIN;  // measured: first start, last end
    sim::Time rfirst = sim::Time::infinite(), rlast = sim::Time::zero();  // replayed
    size_t n = 0;
  };
  std::vector<Span> spans(rank.steps.size());
  for (size_t i = 0; i < rank.activity.size() && i < op_of_activity.size(); ++i) {
    const GpuActivity& a = rank.activity[i];
    if (a.step < 0 || static_cast<size_t>(a.step) >= spans.size() || op_of_activity[i] >= op_times.size()) continue;
    const wl::OpTimes& t = op_times[op_of_activity[i]];
    if (t.end == sim::Time::infinite()) continue;  // not run (an incomplete replay)
    Span& sp = spans[static_cast<size_t>(a.step)];
    sp.first = std::min(sp.first, a.start_ns);
    sp.last = std::max(sp.last, a.start_ns + a.dur_ns);
    sp.rfirst = std::min(sp.rfirst, t.start);
    sp.rlast = std::max(sp.rlast, t.end);
    ++sp.n;
  }
  std::vector<StepTime> out;
  std::vector<size_t> with;  // steps that launched activities
  for (size_t k = 0; k < spans.size(); ++k)
    if (spans[k].n > 0) with.push_back(k);
  for (size_t j = 0; j < with.size(); ++j) {
    const Span& sp = spans[with[j]];
    StepTime st;
    st.number = rank.steps[with[j]].number;
    st.activities = sp.n;
    st.measured_start_ns = sp.first;
    st.replayed_start = sp.rfirst;
    const bool last = j + 1 == with.size();
    st.measured_end_ns = last ? sp.last : spans[with[j + 1]].first;
    st.replayed_end = last ? sp.rlast : spans[with[j + 1]].rfirst;
    st.measured_s = static_cast<double>(st.measured_end_ns - st.measured_start_ns) * 1e-9;
    st.replayed_s = (st.replayed_end - st.replayed_start).seconds();
    out.push_back(st);
  }
  return out;
}

StepSummary summarize_steps(const std::vector<StepTime>& steps) {
  StepSummary s;
  s.steps = steps.size();
  if (steps.empty()) return s;
  s.measured_least_s = s.measured_most_s = steps.front().measured_s;
  s.replayed_least_s = s.replayed_most_s = steps.front().replayed_s;
  double worst = -1;
  for (const StepTime& st : steps) {
    s.measured_mean_s += st.measured_s;
    s.replayed_mean_s += st.replayed_s;
    s.measured_least_s = std::min(s.measured_least_s, st.measured_s);
    s.measured_most_s = std::max(s.measured_most_s, st.measured_s);
    s.replayed_least_s = std::min(s.replayed_least_s, st.replayed_s);
    s.replayed_most_s = std::max(s.replayed_most_s, st.replayed_s);
    const double err = st.measured_s > 0 ? st.replayed_s / st.measured_s - 1 : 0.0;
    if (std::abs(err) > worst) worst = std::abs(err), s.worst_step = st.number, s.worst_error = err;
  }
  s.measured_mean_s /= static_cast<double>(steps.size());
  s.replayed_mean_s /= static_cast<double>(steps.size());
  return s;
}

void emit_steps(const std::vector<StepTime>& steps, int64_t t0_ns, uint32_t replayed_process,
                int64_t measured_process, sim::ObserverBus& bus) {
  if (!bus.active() || steps.empty()) return;
  bus.declare_thread(replayed_process, kStepsThread, "profiler steps");
  if (measured_process >= 0) bus.declare_thread(static_cast<uint32_t>(measured_process), kStepsThread, "profiler steps");
  for (const StepTime& st : steps) {
    sim::SpanRecord s;
    s.thread = kStepsThread;
    s.name = bus.names().intern("ProfilerStep#" + std::to_string(st.number));
    s.process = replayed_process;
    s.start = st.replayed_start;
    s.end = st.replayed_end;
    bus.span(s);
    if (measured_process < 0) continue;
    s.process = static_cast<uint32_t>(measured_process);
    s.start = sim::Time::ns(st.measured_start_ns - t0_ns);
    s.end = sim::Time::ns(st.measured_end_ns - t0_ns);
    bus.span(s);
  }
}

void emit_measured(const std::vector<KinetoRank>& ranks, int64_t t0_ns, uint32_t first_process, sim::ObserverBus& bus) {
  if (!bus.active()) return;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const uint32_t pid = first_process + static_cast<uint32_t>(r);
    bus.declare_process(pid, "rank " + std::to_string(r) + " measured", static_cast<int64_t>(r));
    std::map<uint32_t, uint32_t> thread_of;  // GPU stream -> thread, in first-use order (as replay_program)
    for (const auto& a : ranks[r].activity) {
      auto it = thread_of.find(a.stream);
      if (it == thread_of.end()) {
        it = thread_of.emplace(a.stream, static_cast<uint32_t>(thread_of.size())).first;
        bus.declare_thread(pid, it->second, "stream " + std::to_string(a.stream));
      }
      sim::SpanRecord s;
      s.process = pid;
      s.thread = it->second;
      s.name = bus.names().intern(a.name);
      s.start = sim::Time::ns(a.start_ns - t0_ns);
      s.end = sim::Time::ns(a.start_ns - t0_ns + a.dur_ns);
      bus.span(s);
    }
  }
}

}  // namespace traces
