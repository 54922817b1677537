#include "traces/chakra/chakra.h"

#include <algorithm>
#include <map>
#include <queue>
#include <unordered_map>

#include <google/protobuf/io/coded_stream.h>

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
      }
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
    const uint16_t s_gpu = p.add_stream("gpu"), s_cpu = p.add_stream("cpu"), s_comm = p.add_stream("comm"),
                   s_send = p.add_stream("send"), s_recv = p.add_stream("recv");
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
          op.kind = wl::OpKind::kTimed;
          op.stream = n.cpu ? s_cpu : s_gpu;
          op.seconds = n.duration_s;
          break;
        case ChakraProtoMsg::COMM_COLL_NODE: {
          if (n.cpu || n.comm_type < 0) {  // a host-side wrapper: only its dependencies matter
            op.kind = wl::OpKind::kMarker;
            op.stream = wl::kNoStream;
            break;
          }
          if (!n.pg_name.empty() && n.pg_name != "0")
            throw sim::UserError(where(n) + ": process group '" + n.pg_name +
                                 "': only the default group of all ranks is supported so far");
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
          op.stream = s_comm;
          op.comm = 0;
          op.category = 2;
          op.bytes = n.comm_size;
          ++collectives;
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
          op.stream = send ? s_send : s_recv;
          op.peer = static_cast<int32_t>(peer);
          op.tag = static_cast<uint32_t>(n.comm_tag);
          op.bytes = n.comm_size;
          op.category = 2;
          break;
        }
        default:  // metadata, memory load/store: dependency-only
          op.kind = wl::OpKind::kMarker;
          op.stream = wl::kNoStream;
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

}  // namespace traces
