#include "traces/kineto/kineto.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "sim/error.h"
#include "traces/gz_file.h"

namespace traces {

namespace {

// Microseconds (integer or fractional) to integer nanoseconds.
int64_t us_to_ns(const nlohmann::json& v) {
  if (v.is_number_integer()) return v.get<int64_t>() * 1000;
  return std::llround(v.get<double>() * 1000.0);
}

// The collective an NCCL kernel runs, from its name ("ncclKernel_AllReduce_RING_LL_Sum_float",
// "ncclDevKernel_AllGather_RING_LL"); false when the name is not an NCCL collective kernel.
bool nccl_collective(const std::string& name, wl::CollectiveOp& op) {
  if (name.rfind("ncclKernel_", 0) != 0 && name.rfind("ncclDevKernel_", 0) != 0) return false;
  const std::pair<const char*, wl::CollectiveOp> kinds[] = {
      {"_AllReduce", wl::CollectiveOp::kAllReduce},   {"_AllGather", wl::CollectiveOp::kAllGather},
      {"_ReduceScatter", wl::CollectiveOp::kReduceScatter}, {"_Broadcast", wl::CollectiveOp::kBroadcast},
      {"_Reduce", wl::CollectiveOp::kReduce},         {"_SendRecv", wl::CollectiveOp::kAllToAll},
  };
  for (const auto& [key, value] : kinds)
    if (name.find(key) != std::string::npos) {
      op = value;
      return true;
    }
  op = wl::CollectiveOp::kAllReduce;  // an NCCL kernel of another kind: still a collective
  return true;
}

}  // namespace

int64_t KinetoRank::last_end_ns() const {
  int64_t end = 0;
  for (const auto& a : activity) end = std::max(end, a.start_ns + a.dur_ns);
  return end;
}

KinetoRank read_kineto(const std::string& path) {
  KinetoRank out;
  out.file = path;
  const std::string text = read_maybe_gzip(path);
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    const bool binary = std::any_of(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(text.size(), 256)),
                                    [](char c) { return c != '\n' && c != '\r' && c != '\t' && static_cast<unsigned char>(c) < 32; });
    throw sim::UserError(path + (binary ? ": binary, not JSON (a Chakra protobuf trace? replay reads PyTorch profiler JSON only, so far)"
                                        : ": not valid JSON (a PyTorch profiler trace is a JSON object)"));
  }
  if (doc.is_object() && doc.contains("nodes") && doc.contains("schema"))
    throw sim::UserError(path + ": a PyTorch execution trace (schema " + doc["schema"].dump() +
                         "), not a profiler trace: give it with --et, beside the profiler traces");
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    throw sim::UserError(path + ": no traceEvents array: not a PyTorch profiler (Kineto) trace");
  if (doc.contains("distributedInfo") && doc["distributedInfo"].is_object()) {
    const auto& d = doc["distributedInfo"];
    if (d.contains("rank") && d["rank"].is_number_integer()) out.rank = d["rank"].get<int64_t>();
    if (d.contains("world_size") && d["world_size"].is_number_integer()) out.world = d["world_size"].get<int64_t>();
  }
  const auto& events = doc["traceEvents"];
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    if (!e.is_object() || !e.contains("cat") || !e["cat"].is_string()) continue;
    const std::string& cat = e["cat"].get_ref<const std::string&>();
    GpuActivity a;
    if (cat == "kernel" || cat == "Kernel") {
      a.kind = GpuActivity::Kind::kKernel;
    } else if (cat == "gpu_memcpy" || cat == "Memcpy") {
      a.kind = GpuActivity::Kind::kMemcpy;
    } else if (cat == "gpu_memset" || cat == "Memset") {
      a.kind = GpuActivity::Kind::kMemset;
    } else {
      continue;
    }
    auto where = [&] { return path + ": traceEvents[" + std::to_string(i) + "] (" + cat + ")"; };
    if (!e.contains("ts") || !e["ts"].is_number() || !e.contains("dur") || !e["dur"].is_number())
      throw sim::UserError(where() + ": a GPU activity without numeric ts and dur");
    a.start_ns = us_to_ns(e["ts"]);
    a.dur_ns = us_to_ns(e["dur"]);
    if (a.dur_ns < 0) throw sim::UserError(where() + ": negative duration");
    a.name = e.contains("name") && e["name"].is_string() ? e["name"].get<std::string>() : std::string("?");
    const nlohmann::json* stream = nullptr;
    if (e.contains("args") && e["args"].is_object() && e["args"].contains("stream")) stream = &e["args"]["stream"];
    if (stream && stream->is_number_integer()) {
      a.stream = static_cast<uint32_t>(stream->get<int64_t>());
    } else if (e.contains("tid") && e["tid"].is_number_integer()) {
      a.stream = static_cast<uint32_t>(e["tid"].get<int64_t>());
    }
    if (a.kind == GpuActivity::Kind::kKernel && nccl_collective(a.name, a.coll)) a.kind = GpuActivity::Kind::kCollective;
    out.activity.push_back(std::move(a));
  }
  if (out.activity.empty()) throw sim::UserError(path + ": no GPU activity (kernel, gpu_memcpy, gpu_memset) to replay");
  std::stable_sort(out.activity.begin(), out.activity.end(),
                   [](const GpuActivity& x, const GpuActivity& y) { return x.start_ns < y.start_ns; });
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
  // Collectives by order: every rank must have run the same number.
  std::vector<std::vector<const GpuActivity*>> colls(world);
  for (size_t r = 0; r < world; ++r)
    for (const auto& a : ranks[r].activity)
      if (a.kind == GpuActivity::Kind::kCollective) colls[r].push_back(&a);
  out.collectives = colls[0].size();
  for (size_t r = 1; r < world; ++r)
    if (colls[r].size() != out.collectives)
      throw sim::UserError(ranks[r].file + ": " + std::to_string(colls[r].size()) + " NCCL kernels, but " + ranks[0].file +
                           " has " + std::to_string(out.collectives) +
                           ": the collectives cannot be matched (the trace records no process groups)");
  const bool simulate = !opt.collective_sizes.empty();
  if (simulate) {
    if (opt.collective_sizes.size() != world)
      throw sim::UserError("replay: " + std::to_string(opt.collective_sizes.size()) +
                           " execution traces for " + std::to_string(world) + " ranks");
    for (size_t r = 0; r < world; ++r)
      if (opt.collective_sizes[r].size() != out.collectives)
        throw sim::UserError(ranks[r].file + ": " + std::to_string(out.collectives) +
                             " NCCL kernels, but its execution trace holds " +
                             std::to_string(opt.collective_sizes[r].size()) + " collectives");
  }
  // Collective k lasts what it lasted on the member that got there last.
  std::vector<double> coll_s(out.collectives, 0);
  for (size_t k = 0; k < out.collectives; ++k) {
    const GpuActivity* last = colls[0][k];
    for (size_t r = 1; r < world; ++r)
      if (colls[r][k]->start_ns > last->start_ns) last = colls[r][k];
    coll_s[k] = static_cast<double>(last->dur_ns) * 1e-9;
  }
  out.t0_ns = ranks[0].first_ns();
  for (const auto& r : ranks) out.t0_ns = std::min(out.t0_ns, r.first_ns());

  wl::JobProgram& jp = out.job;
  jp.categories = {"compute", "idle", "collective"};
  jp.idle_category = 1;
  if (world > 1) {
    wl::Communicator c;
    c.name = "world";
    for (uint32_t r = 0; r < world; ++r) c.members.push_back(r);
    jp.add_comm(c);
  }
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
        op.kind = wl::OpKind::kCollective;
        op.coll = a.coll;
        op.comm = 0;
        op.category = 2;
        if (simulate) {
          op.bytes = opt.collective_sizes[r][k].bytes;
          op.coll = opt.collective_sizes[r][k].op;
          op.seconds = 0;  // simulated on the cluster
          ++k;
        } else {
          op.seconds = coll_s[k++];
        }
      } else {
        op.kind = wl::OpKind::kTimed;  // measured: loads nothing, keeps its duration when streams overlap
        op.seconds = static_cast<double>(a.dur_ns) * 1e-9;
      }
      const uint32_t idx = p.add(op);
      stream_end[s] = std::max(stream_end[s], a.start_ns + a.dur_ns);
      done.push_back(Done{a.start_ns + a.dur_ns, idx, s});
    }
    p.finalize();
    jp.templates.push_back(std::move(p));
    jp.template_of_rank.push_back(static_cast<uint32_t>(r));
    out.measured_s.push_back(static_cast<double>(kr.last_end_ns() - kr.first_ns()) * 1e-9);
    out.offset_s.push_back(static_cast<double>(kr.first_ns() - out.t0_ns) * 1e-9);
  }
  return out;
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
