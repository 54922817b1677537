// traces/chakra/chakra.h: Chakra execution traces (MLCommons Chakra, the format ASTRA-sim runs),
// one `.et` file per rank (plain or gzip), read into the program IR.
//
// A file is one GlobalMetadata message, then one Node per message, each preceded by its length as
// a varint32 (et_def.proto). A node runs once every node in its data_deps has finished (as
// ASTRA-sim runs them; ctrl_deps are caller/callee links and are not waited on). Per rank:
//   COMP_NODE       a timed op of its duration_micros (loads nothing), on stream "gpu" (or "cpu"
//                   when is_cpu_op)
//   COMM_COLL_NODE  a collective (comm_type, comm_size bytes; an all-gather's comm_size is each
//                   rank's input, as ASTRA-sim counts it) on stream "comm" of the process group
//                   pg_name ("" or "0": all ranks; others as listed by a "## process_group:init ##"
//                   METADATA_NODE, as PyTorch's execution trace and Chakra's converter write it,
//                   or by our GlobalMetadata attribute clustersim.process_groups); host-side ones
//                   (is_cpu_op true, no comm_type: older converters' c10d wrappers) only pass
//                   their dependencies on
//   COMM_SEND_NODE, COMM_RECV_NODE  a message to comm_dst / from comm_src with comm_tag
//   METADATA_NODE, MEM_LOAD_NODE, MEM_STORE_NODE  dependency-only (they take no time)
// Nodes are ordered topologically (ties by id), since dependencies may point forward in a file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workloads/program/executor.h"
#include "workloads/program/program.h"

namespace traces {

struct ChakraNode {
  uint64_t id = 0;
  std::string name;
  int type = 0;  // NodeType
  std::vector<uint64_t> data_deps;
  double duration_s = 0;
  bool cpu = false;
  int64_t comm_type = -1;  // CollectiveCommType; -1: none
  double comm_size = 0;
  int64_t comm_src = -1, comm_dst = -1, comm_tag = 0;
  std::string pg_name;
  std::string inputs;  // inputs.values (the process-group list of "## process_group:init ##")
  double bytes = -1;    // clustersim.bytes: the op's own size (collectives, messages), exact
  // Written by clustersim (write_chakra) so that its own programs read back exactly; other
  // producers leave them unset.
  int64_t stream = -1;      // `stream`
  std::string stream_name;  // clustersim.stream_name
  std::string op_kind;      // clustersim.op: timed, delay, kernel, memory, marker
  double seconds = -1;      // clustersim.seconds (exact; duration_micros is whole microseconds)
  double sm_load = 0, hbm_load = 0, memory_bytes = 0;
};

struct ChakraRank {
  std::string file;
  std::string version;
  std::string process_groups;  // GlobalMetadata attr clustersim.process_groups (JSON list), or empty
  std::vector<ChakraNode> nodes;
};

// Writes rank r of `job` to `prefix`.r.et for every rank (ASTRA-sim's naming), and the process
// groups to comm_group.json in the prefix's folder, in the contract ASTRA-sim (commit 518bd51,
// 2026-03) runs: GlobalMetadata (version 0.0.4; attribute clustersim.process_groups lists the
// groups for our own reader), then one node per op in op order (ids 1..; data_deps: the op's
// dependencies and the previous op of its stream). No METADATA_NODE (ASTRA-sim's
// Statistics::get_operator_type asserts on one): markers and memory ops are left out and their
// users depend on their dependencies instead (so a round trip loses memory accounting; training
// steps have none). Kernels are costed by `coster` into COMP_NODEs (duration_micros, num_ops,
// tensor_size); delays are COMP_NODEs on the host (is_cpu_op); collectives COMM_COLL_NODEs
// (comm_type, comm_size, pg_name a decimal group id >= 1, as comm_group.json {"1": [ranks], ...}
// numbers the groups a collective runs on; an all-gather's comm_size is each rank's input, as
// ASTRA-sim's Ring.cc takes it); messages COMM_SEND/RECV_NODEs (comm_src, comm_dst, comm_tag,
// comm_size, a recv's its send's: ASTRA-sim matches them by size). clustersim.* attributes and
// `stream` keep what Chakra cannot say (exact ns and bytes, SM and HBM loads, streams), so the
// files read back to the same program. Throws sim::UserError for what Chakra cannot hold
// (all-to-all-v), a recv without its send, or a file it cannot write.
void write_chakra(const wl::JobProgram& job, const std::string& prefix, const wl::KernelCoster& coster);

// Throws sim::UserError naming the file (and node) for anything it cannot read.
ChakraRank read_chakra(const std::string& path);

// Per-rank traces, rank i = ranks[i], as one JobProgram. Throws sim::UserError (a dependency on a
// node the file does not hold, a cycle, an unsupported collective or process group, ranks whose
// collectives cannot be matched).
wl::JobProgram chakra_program(const std::vector<ChakraRank>& ranks);

// True when the file looks like a Chakra trace (a .et or .et.gz name).
bool is_chakra_path(const std::string& path);

}  // namespace traces
