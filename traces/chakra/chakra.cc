#include "traces/chakra/chakra.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <queue>
#include <tuple>
#include <unordered_map>

#include <google/protobuf/io/coded_stream.h>

#include <nlohmann/json.hpp>

#include "sim/error.h"
#include "traces/chakra/et_def.pb.h"
#include "traces/gz_file.h"

namespace traces {

namespace {

// Any integer member of the attribute's value (producers disagree on int32, int64, uint64).
bool attr_int(const ChakraProtoMsg::AttributeProto& a, int64_t& out) {
  using A = ChakraProtoMsg::AttributeProto;
  switch (a.value_case()) {
    case A::kInt32Val: out = a.int32_val(); return true;
    case A::kInt64Val: out = a.int64_val(); return true;
    case A::kUint32Val: out = a.uint32_val(); return true;
    case A::kUint64Val: out = static_cast<int64_t>(a.uint64_val()); return true;
    case A::kSint32Val: out = a.sint32_val(); return true;
    case A::kSint64Val: out = a.sint64_val(); return true;
    case A::kFixed32Val: out = a.fixed32_val(); return true;
    case A::kFixed64Val: out = static_cast<int64_t>(a.fixed64_val()); return true;
    case A::kSfixed32Val: out = a.sfixed32_val(); return true;
    case A::kSfixed64Val: out = a.sfixed64_val(); return true;
    case A::kBoolVal: out = a.bool_val() ? 1 : 0; return true;
    default: return false;
  }
}

}  // namespace

bool is_chakra_path(const std::string& path) {
  auto ends = [&](const std::string& suffix) {
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends(".et") || ends(".et.gz");
}

ChakraRank read_chakra(const std::string& path) {
  ChakraRank out;
  out.file = path;
  const std::string bytes = read_maybe_gzip(path);
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  bool first = true;
  size_t index = 0;
  while (in.CurrentPosition() < static_cast<int>(bytes.size())) {
    uint32_t size = 0;
    if (!in.ReadVarint32(&size)) throw sim::UserError(path + ": message " + std::to_string(index) + ": bad length prefix");
    const size_t left = bytes.size() - static_cast<size_t>(in.CurrentPosition());
    if (size > left && first)
      throw sim::UserError(path + ": not a Chakra trace (its first message would be " + std::to_string(size) +
                           " bytes long, more than the file holds; is this a Chakra .et file?)");
    if (size > left)
      throw sim::UserError(path + ": message " + std::to_string(index) + " is cut short (" + std::to_string(size) +
                           " bytes announced, " + std::to_string(left) + " left): the file is truncated");
    auto limit = in.PushLimit(static_cast<int>(size));
    if (first) {
      ChakraProtoMsg::GlobalMetadata meta;
      if (!meta.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
        throw sim::UserError(path + ": the first message is not a Chakra GlobalMetadata (is this a Chakra .et file?)");
      out.version = meta.version();
      for (const auto& a : meta.attr())
        if (a.name() == "clustersim.process_groups") out.process_groups = a.string_val();
      first = false;
    } else {
      ChakraProtoMsg::Node n;
      if (!n.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
        throw sim::UserError(path + ": message " + std::to_string(index) + " is not a Chakra Node");
      ChakraNode c;
      c.id = n.id();
      c.name = n.name();
      c.type = n.type();
      c.data_deps.assign(n.data_deps().begin(), n.data_deps().end());
      c.duration_s = static_cast<double>(n.duration_micros()) * 1e-6;
      for (const auto& a : n.attr()) {
        int64_t v = 0;
        if (a.name() == "is_cpu_op") c.cpu = a.value_case() == ChakraProtoMsg::AttributeProto::kBoolVal && a.bool_val();
        if (a.name() == "comm_type" && attr_int(a, v)) c.comm_type = v;
        if (a.name() == "comm_size" && attr_int(a, v)) c.comm_size = static_cast<double>(v);
        if (a.name() == "comm_src" && attr_int(a, v)) c.comm_src = v;
        if (a.name() == "comm_dst" && attr_int(a, v)) c.comm_dst = v;
        if (a.name() == "comm_tag" && attr_int(a, v)) c.comm_tag = v;
        if (a.name() == "pg_name" && a.value_case() == ChakraProtoMsg::AttributeProto::kStringVal) c.pg_name = a.string_val();
        if (a.name() == "stream" && attr_int(a, v)) c.stream = v;
        if (a.name() == "clustersim.stream_name") c.stream_name = a.string_val();
        if (a.name() == "clustersim.op") c.op_kind = a.string_val();
        if (a.name() == "clustersim.seconds") c.seconds = a.double_val();
        if (a.name() == "clustersim.sm_load") c.sm_load = a.double_val();
        if (a.name() == "clustersim.hbm_load") c.hbm_load = a.double_val();
        if (a.name() == "clustersim.memory_bytes") c.memory_bytes = a.double_val();
        if (a.name() == "clustersim.bytes") c.bytes = a.double_val();
      }
      c.inputs = n.inputs().values();
      out.nodes.push_back(std::move(c));
    }
    in.PopLimit(limit);
    ++index;
  }
  if (first) throw sim::UserError(path + ": empty: not a Chakra trace");
  return out;
}

wl::JobProgram chakra_program(const std::vector<ChakraRank>& ranks) {
  if (ranks.empty()) throw sim::UserError("replay: no Chakra traces");
  const size_t world = ranks.size();
  wl::JobProgram jp;
  jp.categories = {"compute", "idle", "communication"};
  jp.idle_category = 1;
  wl::Communicator all;
  all.name = "world";
  for (uint32_t r = 0; r < world; ++r) all.members.push_back(r);
  jp.add_comm(all);
  // Process groups: "## process_group:init ##" metadata nodes list them (as PyTorch's execution
  // trace does): [{"pg_name": "...", "ranks": [...]}, ...]. One communicator per name.
  std::map<std::string, uint32_t> comm_of{{"", 0}, {"0", 0}};
  // The same list may also come in the GlobalMetadata attribute clustersim.process_groups (what
  // write_chakra writes: ASTRA-sim stops at any METADATA_NODE).
  std::vector<std::pair<const ChakraRank*, std::string>> lists;
  for (const auto& cr : ranks) {
    if (!cr.process_groups.empty()) lists.emplace_back(&cr, cr.process_groups);
    for (const auto& n : cr.nodes)
      if (n.type == ChakraProtoMsg::METADATA_NODE && n.name == "## process_group:init ##") {
        std::string v = n.inputs;
        // Chakra's PyTorch converter writes str() of a one-string Python list: ['[{"pg_name": ...}]']
        if (v.size() >= 4 && v.compare(0, 2, "['") == 0 && v.compare(v.size() - 2, 2, "']") == 0) v = v.substr(2, v.size() - 4);
        lists.emplace_back(&cr, v);
      }
  }
  for (const auto& [crp, text] : lists) {
    if (world == 1) break;  // one trace alone: its collectives keep their measured times (below)
    const ChakraRank& cr = *crp;
    nlohmann::json pgs = nlohmann::json::parse(text, nullptr, false);
    if (pgs.is_string()) pgs = nlohmann::json::parse(pgs.get<std::string>(), nullptr, false);
    if (!pgs.is_array()) throw sim::UserError(cr.file + ": its process-group list is not a JSON list");
    for (const auto& g : pgs) {
      if (!g.is_object() || !g.contains("pg_name") || !g.contains("ranks") || !g["ranks"].is_array()) continue;
      const std::string name = g["pg_name"].is_string() ? g["pg_name"].get<std::string>() : g["pg_name"].dump();
      if (comm_of.count(name)) continue;
      wl::Communicator c;
      c.name = name;
      for (const auto& m : g["ranks"]) {
        const int64_t rank = m.get<int64_t>();
        if (rank < 0 || rank >= static_cast<int64_t>(world))
          throw sim::UserError(cr.file + ": process group '" + name + "' holds rank " + std::to_string(rank) + " of " +
                               std::to_string(world) + " ranks given");
        c.members.push_back(static_cast<uint32_t>(rank));
      }
      if (c.members.empty()) continue;  // an empty list means every rank
      comm_of[name] = jp.add_comm(c);
    }
  }
  size_t collectives0 = 0;
  for (size_t r = 0; r < world; ++r) {
    const ChakraRank& cr = ranks[r];
    auto where = [&](const ChakraNode& n) { return cr.file + ": node " + std::to_string(n.id) + " ('" + n.name + "')"; };
    std::unordered_map<uint64_t, size_t> at;  // node id -> index in cr.nodes
    for (size_t i = 0; i < cr.nodes.size(); ++i)
      if (!at.emplace(cr.nodes[i].id, i).second) throw sim::UserError(where(cr.nodes[i]) + ": a second node with this id");
    // Kahn's algorithm, ready nodes by id.
    std::vector<uint32_t> missing(cr.nodes.size(), 0);
    std::vector<std::vector<size_t>> users(cr.nodes.size());
    for (size_t i = 0; i < cr.nodes.size(); ++i)
      for (uint64_t d : cr.nodes[i].data_deps) {
        auto it = at.find(d);
        if (it == at.end())
          throw sim::UserError(where(cr.nodes[i]) + ": depends on node " + std::to_string(d) + ", which the file does not hold");
        users[it->second].push_back(i);
        ++missing[i];
      }
    std::priority_queue<std::pair<uint64_t, size_t>, std::vector<std::pair<uint64_t, size_t>>, std::greater<>> ready;
    for (size_t i = 0; i < cr.nodes.size(); ++i)
      if (missing[i] == 0) ready.emplace(cr.nodes[i].id, i);
    wl::Program p;
    // Streams: as recorded (`stream`, clustersim.stream_name), else by node kind.
    std::map<int64_t, uint16_t> recorded;
    for (const ChakraNode& n : cr.nodes)
      if (n.stream >= 0 && !recorded.count(n.stream)) recorded[n.stream] = 0;
    for (auto& [id, s] : recorded) {
      std::string name = "stream " + std::to_string(id);
      for (const ChakraNode& n : cr.nodes)
        if (n.stream == id && !n.stream_name.empty()) name = n.stream_name;
      s = p.add_stream(name);
    }
    const uint16_t s_gpu = p.add_stream("gpu"), s_cpu = p.add_stream("cpu"), s_comm = p.add_stream("comm"),
                   s_send = p.add_stream("send"), s_recv = p.add_stream("recv");
    auto stream_or = [&](const ChakraNode& n, uint16_t s) { return n.stream >= 0 ? recorded[n.stream] : s; };
    std::vector<uint32_t> op_of(cr.nodes.size(), 0);
    size_t placed = 0, collectives = 0;
    std::vector<uint32_t> deps;
    while (!ready.empty()) {
      const size_t i = ready.top().second;
      ready.pop();
      const ChakraNode& n = cr.nodes[i];
      deps.clear();
      for (uint64_t d : n.data_deps) deps.push_back(op_of[at[d]]);
      wl::Op op;
      op.name = p.intern(n.name);
      op.external_id = n.id;
      switch (n.type) {
        case ChakraProtoMsg::COMP_NODE:
          op.kind = n.op_kind == "delay" ? wl::OpKind::kDelay : wl::OpKind::kTimed;
          op.stream = stream_or(n, n.cpu ? s_cpu : s_gpu);
          op.seconds = n.seconds >= 0 ? n.seconds : n.duration_s;
          op.sm_load = n.sm_load;
          op.hbm_load = n.hbm_load;
          if (n.op_kind == "delay") op.category = 1;
          break;
        case ChakraProtoMsg::COMM_COLL_NODE: {
          if (n.cpu || n.comm_type < 0) {  // a host-side wrapper: only its dependencies matter
            op.kind = wl::OpKind::kMarker;
            op.stream = wl::kNoStream;
            break;
          }
          if (world == 1) {
            // One trace alone (one rank of a larger job): its peers are not there to simulate the
            // collective with, so it keeps the time it took (duration_micros; ours: the exact
            // seconds), as a profiler trace alone does (traces/kineto/kineto.h).
            op.kind = wl::OpKind::kTimed;
            op.stream = stream_or(n, s_comm);
            op.category = 2;
            op.seconds = n.seconds > 0 ? n.seconds : n.duration_s;
            ++collectives;
            break;
          }
          auto pg = comm_of.find(n.pg_name);
          if (pg == comm_of.end())
            throw sim::UserError(where(n) + ": process group '" + n.pg_name +
                                 "' is not in any \"## process_group:init ##\" node");
          const std::pair<int64_t, wl::CollectiveOp> kinds[] = {
              {ChakraProtoMsg::ALL_REDUCE, wl::CollectiveOp::kAllReduce},
              {ChakraProtoMsg::REDUCE, wl::CollectiveOp::kReduce},
              {ChakraProtoMsg::ALL_GATHER, wl::CollectiveOp::kAllGather},
              {ChakraProtoMsg::BROADCAST, wl::CollectiveOp::kBroadcast},
              {ChakraProtoMsg::ALL_TO_ALL, wl::CollectiveOp::kAllToAll},
              {ChakraProtoMsg::REDUCE_SCATTER, wl::CollectiveOp::kReduceScatter}};
          bool known = false;
          for (const auto& [t, c] : kinds)
            if (t == n.comm_type) {
              op.coll = c;
              known = true;
            }
          if (!known) throw sim::UserError(where(n) + ": comm_type " + std::to_string(n.comm_type) + " is not supported");
          op.kind = wl::OpKind::kCollective;
          op.stream = stream_or(n, s_comm);
          op.comm = pg->second;
          op.category = 2;
          // comm_size is ASTRA-sim's: an all-gather's is the per-rank input (Ring.cc: final size =
          // comm_size x ranks); ours is the total output, as nccl-tests.
          op.bytes = n.bytes >= 0 ? n.bytes
                                  : n.comm_size * (n.comm_type == ChakraProtoMsg::ALL_GATHER
                                                       ? static_cast<double>(jp.comms[pg->second].members.size())
                                                       : 1.0);
          if (n.seconds > 0) op.seconds = n.seconds;  // a measured collective
          if (pg->second == 0) ++collectives;
          break;
        }
        case ChakraProtoMsg::COMM_SEND_NODE:
        case ChakraProtoMsg::COMM_RECV_NODE: {
          const bool send = n.type == ChakraProtoMsg::COMM_SEND_NODE;
          const int64_t peer = send ? n.comm_dst : n.comm_src;
          if (peer < 0 || peer >= static_cast<int64_t>(world) || peer == static_cast<int64_t>(r))
            throw sim::UserError(where(n) + ": " + (send ? "comm_dst " : "comm_src ") + std::to_string(peer) +
                                 " is not another of the " + std::to_string(world) + " ranks given");
          op.kind = send ? wl::OpKind::kSend : wl::OpKind::kRecv;
          op.stream = stream_or(n, send ? s_send : s_recv);
          op.peer = static_cast<int32_t>(peer);
          op.tag = static_cast<uint32_t>(n.comm_tag);
          op.bytes = n.bytes >= 0 ? n.bytes : n.comm_size;
          op.category = 2;
          break;
        }
        default:  // metadata, memory load/store: dependency-only
          op.kind = n.op_kind == "memory" ? wl::OpKind::kMemory : wl::OpKind::kMarker;
          op.bytes = n.memory_bytes;
          op.stream = n.stream >= 0 ? recorded[n.stream] : wl::kNoStream;
          break;
      }
      op_of[i] = p.add(op, deps);
      ++placed;
      for (size_t u : users[i])
        if (--missing[u] == 0) ready.emplace(cr.nodes[u].id, u);
    }
    if (placed != cr.nodes.size())
      throw sim::UserError(cr.file + ": " + std::to_string(cr.nodes.size() - placed) +
                           " nodes wait on each other in a cycle and can never run");
    if (r == 0) collectives0 = collectives;
    if (world > 1 && collectives != collectives0)
      throw sim::UserError(cr.file + ": " + std::to_string(collectives) + " collectives, but " + ranks[0].file + " has " +
                           std::to_string(collectives0) + ": they cannot be matched");
    p.finalize();
    jp.templates.push_back(std::move(p));
    jp.template_of_rank.push_back(static_cast<uint32_t>(r));
  }
  return jp;
}

namespace {

void set_int(ChakraProtoMsg::Node& n, const char* name, int64_t v) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_int64_val(v);
}
void set_double(ChakraProtoMsg::Node& n, const char* name, double v) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_double_val(v);
}
void set_string(ChakraProtoMsg::Node& n, const char* name, const std::string& v) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_string_val(v);
}
void set_bool(ChakraProtoMsg::Node& n, const char* name, bool v) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_bool_val(v);
}

// One length-prefixed message (varint32 size, then the bytes), as Chakra's writer frames them.
void put_delimited(std::string& out, const google::protobuf::MessageLite& m) {
  std::string bytes = m.SerializeAsString();
  uint32_t size = static_cast<uint32_t>(bytes.size());
  while (size >= 0x80) {
    out.push_back(static_cast<char>((size & 0x7F) | 0x80));
    size >>= 7;
  }
  out.push_back(static_cast<char>(size));
  out += bytes;
}

int64_t comm_type_of(wl::CollectiveOp op) {
  switch (op) {
    case wl::CollectiveOp::kAllReduce: return ChakraProtoMsg::ALL_REDUCE;
    case wl::CollectiveOp::kReduce: return ChakraProtoMsg::REDUCE;
    case wl::CollectiveOp::kAllGather: return ChakraProtoMsg::ALL_GATHER;
    case wl::CollectiveOp::kBroadcast: return ChakraProtoMsg::BROADCAST;
    case wl::CollectiveOp::kAllToAll: return ChakraProtoMsg::ALL_TO_ALL;
    case wl::CollectiveOp::kReduceScatter: return ChakraProtoMsg::REDUCE_SCATTER;
    case wl::CollectiveOp::kSendRecv: return -1;
  }
  return -1;
}

}  // namespace

void write_chakra(const wl::JobProgram& job, const std::string& prefix, const wl::KernelCoster& coster) {
  const uint32_t world = job.world();
  // Absolute peer of a send/recv on rank r.
  auto peer_of = [&](uint32_t r, const wl::Op& op) -> uint32_t {
    if (op.peer_axis == wl::kAbsolutePeer) return static_cast<uint32_t>(op.peer);
    return job.layout.neighbor(r, static_cast<wl::Dim>(op.peer_axis), op.peer);
  };
  // Process groups, as ASTRA-sim takes them (Workload.cc initialize_comm_groups): a decimal id >= 1
  // per group (CommunicatorGroup::set_id asserts id > 0; "" and "0" mean all ranks), written in
  // pg_name and listed in comm_group.json next to the files: {"1": [ranks], ...}. Only groups
  // some collective runs on are numbered, in order of first use.
  std::vector<std::vector<std::string>> pg_of(job.comms.size(), std::vector<std::string>(world));
  nlohmann::json pgs = nlohmann::json::array();     // for our reader (GlobalMetadata attribute)
  nlohmann::json groups = nlohmann::json::object();  // comm_group.json
  std::map<std::pair<uint32_t, uint32_t>, std::string> id_of;  // (communicator, group) -> id
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, double> sent;  // (src, dst, tag) -> bytes
  std::vector<uint32_t> members;
  for (uint32_t r = 0; r < world; ++r) {
    const wl::Program& p = job.templates[job.template_of_rank[r]];
    for (uint32_t i = 0; i < p.ops().size(); ++i) {
      const wl::Op& op = p.op(i);
      if (op.kind == wl::OpKind::kSend) sent[{r, peer_of(r, op), op.tag}] = op.bytes;
      if (op.kind != wl::OpKind::kCollective || !pg_of[op.comm][r].empty()) continue;
      const wl::Communicator& cm = job.comms[op.comm];
      uint32_t group = 0;
      if (cm.generated) {
        group = job.layout.group_id(r, cm.axis, cm.also);
        job.layout.members(r, cm.axis, cm.also, members);
      } else {
        members = cm.members;
      }
      auto [it, fresh] = id_of.try_emplace({op.comm, group}, std::to_string(id_of.size() + 1));
      if (fresh) {
        groups[it->second] = members;
        pgs.push_back({{"pg_name", it->second}, {"pg_desc", cm.name}, {"backend_config", "cuda:nccl"},
                       {"pg_size", members.size()}, {"ranks", members}});
      }
      pg_of[op.comm][r] = it->second;
    }
  }
  const std::string pg_list = pgs.dump();
  {
    const size_t slash = prefix.find_last_of('/');
    const std::string path = (slash == std::string::npos ? std::string() : prefix.substr(0, slash + 1)) + "comm_group.json";
    std::ofstream f(path);
    if (!f) throw sim::UserError("cannot write " + path);
    f << groups.dump() << "\n";
    if (!f) throw sim::UserError("error while writing " + path);
  }
  for (uint32_t r = 0; r < world; ++r) {
    const wl::Program& p = job.templates[job.template_of_rank[r]];
    std::string out;
    ChakraProtoMsg::GlobalMetadata meta;
    meta.set_version("0.0.4");
    auto* a = meta.add_attr();
    a->set_name("schema");
    a->set_string_val("1.0.2-chakra.0.0.4");
    a = meta.add_attr();
    a->set_name("clustersim.process_groups");
    a->set_string_val(pg_list);
    put_delimited(out, meta);
    // No METADATA_NODE: ASTRA-sim's Statistics::get_operator_type asserts on one. Markers and
    // memory ops (dependency-only, no time) are left out and their users depend on their
    // dependencies instead.
    auto skipped = [&](const wl::Op& op) { return op.kind == wl::OpKind::kMarker || op.kind == wl::OpKind::kMemory; };
    std::vector<std::vector<uint32_t>> through(p.ops().size());  // a skipped op's nearest kept deps
    std::vector<uint32_t> deps;
    auto direct = [&](uint32_t i, std::vector<uint32_t>& into) {
      const wl::Op& op = p.op(i);
      const wl::DepRef* d = p.dep_refs(op);
      for (uint32_t k = 0; k < op.deps_count; ++k) into.push_back(d[k].op);
      if (op.stream != wl::kNoStream && op.pos > 0) into.push_back(p.stream_ops(op.stream)[op.pos - 1]);
    };
    auto kept_deps = [&](uint32_t i, std::vector<uint32_t>& into) {
      std::vector<uint32_t> raw;
      direct(i, raw);
      for (uint32_t d : raw) {
        if (skipped(p.op(d))) into.insert(into.end(), through[d].begin(), through[d].end());
        else into.push_back(d);
      }
      std::sort(into.begin(), into.end());
      into.erase(std::unique(into.begin(), into.end()), into.end());
    };
    for (uint32_t i = 0; i < p.ops().size(); ++i) {  // dependencies point to earlier ops
      const wl::Op& op = p.op(i);
      if (skipped(op)) {
        kept_deps(i, through[i]);
        continue;
      }
      ChakraProtoMsg::Node n;
      n.set_id(i + 1);
      n.set_name(p.name(op.name));
      deps.clear();
      kept_deps(i, deps);
      for (uint32_t d : deps) n.add_data_deps(d + 1);
      if (op.stream != wl::kNoStream) {
        set_int(n, "stream", op.stream);
        set_string(n, "clustersim.stream_name", p.stream_name(op.stream));
      }
      switch (op.kind) {
        case wl::OpKind::kKernel:
        case wl::OpKind::kTimed: {
          double s = op.seconds, sm = op.sm_load, hbm = op.hbm_load;
          if (op.kind == wl::OpKind::kKernel) {
            const auto c = coster.cost(p, op);
            s = c.seconds;
            sm = c.sm_load;
            hbm = c.hbm_load;
          }
          n.set_type(ChakraProtoMsg::COMP_NODE);
          n.set_duration_micros(static_cast<uint64_t>(std::llround(s * 1e6)));
          set_bool(n, "is_cpu_op", false);
          set_int(n, "num_ops", static_cast<int64_t>(op.flops));
          auto* t = n.add_attr();
          t->set_name("tensor_size");
          t->set_uint64_val(static_cast<uint64_t>(std::max(0.0, op.bytes)));
          set_string(n, "clustersim.op", "timed");
          set_double(n, "clustersim.seconds", s);
          set_double(n, "clustersim.sm_load", sm);
          set_double(n, "clustersim.hbm_load", hbm);
          break;
        }
        case wl::OpKind::kDelay:
          n.set_type(ChakraProtoMsg::COMP_NODE);
          n.set_duration_micros(static_cast<uint64_t>(std::llround(op.seconds * 1e6)));
          set_bool(n, "is_cpu_op", true);
          set_string(n, "clustersim.op", "delay");
          set_double(n, "clustersim.seconds", op.seconds);
          break;
        case wl::OpKind::kCollective: {
          if (op.index != 0 && op.coll == wl::CollectiveOp::kAllToAll)
            throw sim::UserError("rank " + std::to_string(r) + " op '" + p.name(op.name) +
                                 "': an all-to-all-v (per-peer sizes) has no Chakra form");
          const int64_t type = comm_type_of(op.coll);
          if (type < 0) throw sim::UserError("rank " + std::to_string(r) + " op '" + p.name(op.name) + "': no Chakra comm_type");
          n.set_type(ChakraProtoMsg::COMM_COLL_NODE);
          set_bool(n, "is_cpu_op", false);
          set_int(n, "comm_type", type);
          // ASTRA-sim's comm_size of an all-gather is each rank's input (Ring.cc: msg_size =
          // comm_size, final size = comm_size x ranks); ours is the total output (nccl-tests).
          double size = op.bytes;
          if (op.coll == wl::CollectiveOp::kAllGather) size /= static_cast<double>(groups[pg_of[op.comm][r]].size());
          set_int(n, "comm_size", static_cast<int64_t>(size));
          set_string(n, "pg_name", pg_of[op.comm][r]);
          set_double(n, "clustersim.bytes", op.bytes);
          if (op.seconds > 0) set_double(n, "clustersim.seconds", op.seconds);
          break;
        }
        case wl::OpKind::kSend:
        case wl::OpKind::kRecv: {
          const bool send = op.kind == wl::OpKind::kSend;
          const uint32_t peer = peer_of(r, op);
          // ASTRA-sim matches a recv to its send by (tag, src, dst, size), and a size must be > 0
          // (analytical ChunkIdGenerator asserts): a recv carries its send's size.
          double size = op.bytes;
          if (!send) {
            auto it = sent.find({peer, r, op.tag});
            if (it == sent.end())
              throw sim::UserError("rank " + std::to_string(r) + " op '" + p.name(op.name) + "': no send from rank " +
                                   std::to_string(peer) + " with tag " + std::to_string(op.tag));
            size = it->second;
          }
          n.set_type(send ? ChakraProtoMsg::COMM_SEND_NODE : ChakraProtoMsg::COMM_RECV_NODE);
          set_bool(n, "is_cpu_op", false);
          set_int(n, "comm_src", send ? r : peer);
          set_int(n, "comm_dst", send ? peer : r);
          set_int(n, "comm_tag", op.tag);
          set_int(n, "comm_size", std::max<int64_t>(1, static_cast<int64_t>(size)));
          set_double(n, "clustersim.bytes", op.bytes);
          break;
        }
        case wl::OpKind::kMemory:
        case wl::OpKind::kMarker:
          break;  // skipped above
      }
      put_delimited(out, n);
    }
    const std::string path = prefix + "." + std::to_string(r) + ".et";
    std::ofstream f(path, std::ios::binary);
    if (!f) throw sim::UserError("cannot write " + path);
    f << out;
    if (!f) throw sim::UserError("error while writing " + path);
  }
}

}  // namespace traces
