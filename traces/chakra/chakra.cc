#include "traces/chakra/chakra.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <queue>
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
    auto limit = in.PushLimit(static_cast<int>(size));
    if (first) {
      ChakraProtoMsg::GlobalMetadata meta;
      if (!meta.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
        throw sim::UserError(path + ": the first message is not a Chakra GlobalMetadata (is this a Chakra .et file?)");
      out.version = meta.version();
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
  for (const auto& cr : ranks)
    for (const auto& n : cr.nodes) {
      if (n.type != ChakraProtoMsg::METADATA_NODE || n.name != "## process_group:init ##") continue;
      nlohmann::json pgs = nlohmann::json::parse(n.inputs, nullptr, false);
      if (pgs.is_string()) pgs = nlohmann::json::parse(pgs.get<std::string>(), nullptr, false);
      if (!pgs.is_array()) throw sim::UserError(cr.file + ": node " + std::to_string(n.id) + ": its process-group list is not a JSON list");
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
          op.bytes = n.comm_size;
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
          op.bytes = n.comm_size;
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
  // Process groups: every group of every communicator, named "<communicator>.<group>".
  nlohmann::json pgs = nlohmann::json::array();
  std::vector<std::vector<std::string>> pg_of(job.comms.size(), std::vector<std::string>(world));
  std::vector<uint32_t> members;
  for (size_t c = 0; c < job.comms.size(); ++c) {
    const wl::Communicator& cm = job.comms[c];
    std::map<uint32_t, std::string> seen;
    for (uint32_t r = 0; r < world; ++r) {
      uint32_t group = 0;
      if (cm.generated) {
        group = job.layout.group_id(r, cm.axis);
      } else if (std::find(cm.members.begin(), cm.members.end(), r) == cm.members.end()) {
        continue;
      }
      const std::string name = cm.name + "." + std::to_string(c) + "." + std::to_string(group);
      pg_of[c][r] = name;
      if (seen.count(group)) continue;
      seen[group] = name;
      if (cm.generated) {
        job.layout.members(r, cm.axis, members);
      } else {
        members = cm.members;
      }
      pgs.push_back({{"pg_name", name}, {"pg_desc", cm.name}, {"backend_config", "cuda:nccl"},
                     {"pg_size", members.size()}, {"ranks", members}});
    }
  }
  const std::string pg_list = pgs.dump();
  for (uint32_t r = 0; r < world; ++r) {
    const wl::Program& p = job.templates[job.template_of_rank[r]];
    std::string out;
    ChakraProtoMsg::GlobalMetadata meta;
    meta.set_version("0.0.4");
    auto* a = meta.add_attr();
    a->set_name("schema");
    a->set_string_val("1.0.2-chakra.0.0.4");
    put_delimited(out, meta);
    ChakraProtoMsg::Node init;
    init.set_id(0);
    init.set_name("## process_group:init ##");
    init.set_type(ChakraProtoMsg::METADATA_NODE);
    init.mutable_inputs()->set_values(pg_list);
    set_bool(init, "is_cpu_op", true);
    put_delimited(out, init);
    for (uint32_t i = 0; i < p.ops().size(); ++i) {
      const wl::Op& op = p.op(i);
      ChakraProtoMsg::Node n;
      n.set_id(i + 1);
      n.set_name(p.name(op.name));
      const wl::DepRef* d = p.dep_refs(op);
      for (uint32_t k = 0; k < op.deps_count; ++k) n.add_data_deps(d[k].op + 1);
      if (op.stream != wl::kNoStream) {
        if (op.pos > 0) n.add_data_deps(p.stream_ops(op.stream)[op.pos - 1] + 1);
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
          set_int(n, "comm_size", static_cast<int64_t>(op.bytes));
          set_string(n, "pg_name", pg_of[op.comm][r]);
          if (op.seconds > 0) set_double(n, "clustersim.seconds", op.seconds);
          break;
        }
        case wl::OpKind::kSend:
        case wl::OpKind::kRecv: {
          const bool send = op.kind == wl::OpKind::kSend;
          uint32_t peer = 0;
          if (op.peer_axis == wl::kAbsolutePeer) {
            peer = static_cast<uint32_t>(op.peer);
          } else {
            peer = job.layout.neighbor(r, static_cast<wl::Dim>(op.peer_axis), op.peer);
          }
          n.set_type(send ? ChakraProtoMsg::COMM_SEND_NODE : ChakraProtoMsg::COMM_RECV_NODE);
          set_bool(n, "is_cpu_op", false);
          set_int(n, "comm_src", send ? r : peer);
          set_int(n, "comm_dst", send ? peer : r);
          set_int(n, "comm_tag", op.tag);
          set_int(n, "comm_size", static_cast<int64_t>(op.bytes));
          break;
        }
        case wl::OpKind::kMemory:
          n.set_type(ChakraProtoMsg::MEM_STORE_NODE);
          set_bool(n, "is_cpu_op", false);
          set_string(n, "clustersim.op", "memory");
          set_double(n, "clustersim.memory_bytes", op.bytes);
          break;
        case wl::OpKind::kMarker:
          n.set_type(ChakraProtoMsg::METADATA_NODE);
          set_bool(n, "is_cpu_op", true);
          set_string(n, "clustersim.op", "marker");
          break;
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
