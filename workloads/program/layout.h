// workloads/program/layout.h: a grid of ranks along named parallel axes, and the groups along each.
//
// A rank has one coordinate per parallel dimension (tp, cp, pp, dp, dp_outer). The dimensions are
// laid out in a configurable order, innermost first (default tp, cp, pp, dp, dp_outer, as in
// Llama 3 §3.3.2 and Megatron-LM): rank = sum over dims of coord[d] * stride[d], the innermost
// dimension having stride 1 (where rank r runs is the job's placement map, JobProgram::gpu_of_rank). So with tp = 8 innermost, a TP group is one
// 8-GPU node and DP groups stride across nodes. The group of a rank along dimension d is every
// rank that differs from it only in coord[d], listed by coord[d]; groups along d are numbered
// densely 0..world/size(d)-1.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <string_view>

namespace wl {

// Parallel axes of a generated job. kDpOuter is the replicate group of HSDP (or the cross-island
// group of DiLoCo).
enum class Dim : uint8_t { kTp, kCp, kPp, kDp, kDpOuter, kCount };
inline constexpr size_t kNumDims = static_cast<size_t>(Dim::kCount);
std::string_view dim_name(Dim d);

class Layout {
 public:
  // sizes[d] for each Dim (kPp included); order: innermost first, a permutation of all five dims.
  Layout(std::array<int64_t, kNumDims> sizes, std::array<Dim, kNumDims> order);
  static std::array<Dim, kNumDims> default_order() { return {Dim::kTp, Dim::kCp, Dim::kPp, Dim::kDp, Dim::kDpOuter}; }

  int64_t size(Dim d) const { return sizes_[static_cast<size_t>(d)]; }
  // Groups over two axes at once (`also` = Dim::kCount: only `d`), e.g. Megatron's data-parallel
  // group with context parallelism, DP x CP: its size, the dense id of rank's group, and its
  // members in increasing rank order.
  int64_t size(Dim d, Dim also) const { return also == Dim::kCount ? size(d) : size(d) * size(also); }
  uint32_t group_id(uint32_t rank, Dim d, Dim also) const;
  void members(uint32_t rank, Dim d, Dim also, std::vector<uint32_t>& out) const;
  uint32_t world() const { return world_; }
  const std::array<Dim, kNumDims>& order() const { return order_; }

  uint32_t coord(uint32_t rank, Dim d) const {
    auto i = static_cast<size_t>(d);
    return static_cast<uint32_t>((rank / strides_[i]) % static_cast<uint64_t>(sizes_[i]));
  }
  uint32_t stride(Dim d) const { return static_cast<uint32_t>(strides_[static_cast<size_t>(d)]); }
  // The rank with the same coordinates as `rank` but dp = dp_outer = 0: its place in data-parallel
  // replica 0 (symmetric mode's representative).
  uint32_t in_replica0(uint32_t rank) const {
    return rank - coord(rank, Dim::kDp) * stride(Dim::kDp) - coord(rank, Dim::kDpOuter) * stride(Dim::kDpOuter);
  }
  // Dense id of rank's group along d.
  uint32_t group_id(uint32_t rank, Dim d) const;
  // Members of rank's group along d, by coordinate (out is cleared).
  void members(uint32_t rank, Dim d, std::vector<uint32_t>& out) const;
  // The rank `offset` positions ahead along d (negative: behind), wrapping around.
  uint32_t neighbor(uint32_t rank, Dim d, int64_t offset) const;
  uint32_t pp_neighbor(uint32_t rank, int peer) const { return neighbor(rank, Dim::kPp, peer); }

 private:
  std::array<int64_t, kNumDims> sizes_;
  std::array<Dim, kNumDims> order_;
  std::array<uint64_t, kNumDims> strides_{};
  uint32_t world_ = 1;
};

}  // namespace wl
