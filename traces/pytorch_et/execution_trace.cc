#include "traces/pytorch_et/execution_trace.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "sim/error.h"
#include "traces/gz_file.h"

namespace traces {

EtCollectives read_et_collectives(const std::string& path) {
  nlohmann::json doc = nlohmann::json::parse(read_maybe_gzip(path), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) throw sim::UserError(path + ": not valid JSON (a PyTorch execution trace is a JSON object)");
  if (!doc.is_object() || !doc.contains("nodes") || !doc["nodes"].is_array())
    throw sim::UserError(path + ": no nodes array: not a PyTorch execution trace");
  struct Found {
    int64_t id;
    EtCollective c;
  };
  std::vector<Found> found;
  const std::pair<const char*, wl::CollectiveOp> kinds[] = {
      {"nccl:all_reduce", wl::CollectiveOp::kAllReduce},         {"nccl:all_to_all", wl::CollectiveOp::kAllToAll},
      {"nccl:all_gather", wl::CollectiveOp::kAllGather},         {"nccl:_allgather_base", wl::CollectiveOp::kAllGather},
      {"nccl:reduce_scatter", wl::CollectiveOp::kReduceScatter}, {"nccl:_reduce_scatter_base", wl::CollectiveOp::kReduceScatter},
      {"nccl:broadcast", wl::CollectiveOp::kBroadcast},          {"nccl:reduce", wl::CollectiveOp::kReduce},
  };
  const auto& nodes = doc["nodes"];
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    if (!n.is_object() || !n.contains("name") || !n["name"].is_string()) continue;
    const std::string& name = n["name"].get_ref<const std::string&>();
    if (name.rfind("nccl:", 0) != 0) continue;
    auto where = [&] { return path + ": nodes[" + std::to_string(i) + "] (" + name + ")"; };
    Found f;
    f.c.name = name;
    bool known = false;
    for (const auto& [key, op] : kinds)
      if (name == key) {
        f.c.op = op;
        known = true;
      }
    if (!known) throw sim::UserError(where() + ": a collective this reader does not know");
    f.id = n.contains("id") && n["id"].is_number_integer() ? n["id"].get<int64_t>() : static_cast<int64_t>(i);
    if (!n.contains("inputs") || !n["inputs"].is_array() || n["inputs"].empty() || !n["inputs"][0].is_array() ||
        n["inputs"][0].size() < 5 || !n["inputs"][0][3].is_number() || !n["inputs"][0][4].is_number())
      throw sim::UserError(where() + ": its first input is not a tensor [id, storage, offset, numel, element bytes, device]");
    f.c.bytes = n["inputs"][0][3].get<double>() * n["inputs"][0][4].get<double>();
    found.push_back(std::move(f));
  }
  std::stable_sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.id < b.id; });
  EtCollectives out;
  if (doc.contains("pid") && doc["pid"].is_number_integer()) out.pid = doc["pid"].get<int64_t>();
  for (auto& f : found) out.collectives.push_back(std::move(f.c));
  return out;
}

}  // namespace traces
