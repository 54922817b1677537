// topology/topology_internal.h: pieces shared by topology.cc and builders.cc only (not a public
// header): the edge-list router state and the hash mixer used for ECMP choices.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "topology/topology.h"

namespace topo {
namespace detail {

constexpr uint32_t kUnreached = 0xFFFFFFFFu;

// splitmix64 finalizer: spreads nearby flow hashes over all bits before a modulo.
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace detail

// Compressed adjacency (links grouped by source and by destination, in link order) plus the lazy
// cache of hop distances to each destination GPU. dist_to is sized num_gpus at build and an entry
// is filled at most once, so a pointer to it stays valid after the lock is released.
struct Topology::EdgeListState {
  std::vector<uint32_t> out_offset, out_links;
  std::vector<uint32_t> in_offset, in_links;
  std::mutex mutex;
  std::vector<std::vector<uint32_t>> dist_to;
};

}  // namespace topo
