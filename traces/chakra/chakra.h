// traces/chakra/chakra.h: Chakra execution traces (MLCommons Chakra, the format ASTRA-sim runs),
// one `.et` file per rank (plain or gzip), read into the program IR.
//
// A file is one GlobalMetadata message, then one Node per message, each preceded by its length as
// a varint32 (et_def.proto). A node runs once every node in its data_deps has finished (as
// ASTRA-sim runs them; ctrl_deps are caller/callee links and are not waited on). Per rank:
//   COMP_NODE       a timed op of its duration_micros (loads nothing), on stream "gpu" (or "cpu"
//                   when is_cpu_op)
//   COMM_COLL_NODE  a collective (comm_type, comm_size bytes) on stream "comm", the k-th of every
//                   rank being the k-th of one communicator of all ranks (pg_name empty or "0";
//                   other process groups are refused); host-side ones (is_cpu_op true, no
//                   comm_type: older converters' c10d wrappers) only pass their dependencies on
//   COMM_SEND_NODE, COMM_RECV_NODE  a message to comm_dst / from comm_src with comm_tag
//   METADATA_NODE, MEM_LOAD_NODE, MEM_STORE_NODE  dependency-only (they take no time)
// Nodes are ordered topologically (ties by id), since dependencies may point forward in a file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
};

struct ChakraRank {
  std::string file;
  std::string version;
  std::vector<ChakraNode> nodes;
};

// Throws sim::UserError naming the file (and node) for anything it cannot read.
ChakraRank read_chakra(const std::string& path);

// Per-rank traces, rank i = ranks[i], as one JobProgram. Throws sim::UserError (a dependency on a
// node the file does not hold, a cycle, an unsupported collective or process group, ranks whose
// collectives cannot be matched).
wl::JobProgram chakra_program(const std::vector<ChakraRank>& ranks);

// True when the file looks like a Chakra trace (a .et or .et.gz name).
bool is_chakra_path(const std::string& path);

}  // namespace traces
