#include "workloads/program/layout.h"

#include <algorithm>

#include "sim/error.h"

namespace wl {

Layout::Layout(std::array<int64_t, kNumDims> sizes, std::array<Dim, kNumDims> order) : sizes_(sizes), order_(order) {
  std::array<bool, kNumDims> seen{};
  uint64_t stride = 1;
  for (Dim d : order_) {
    auto i = static_cast<size_t>(d);
    SIM_ASSERT(!seen[i], "layout order repeats a dimension");
    SIM_ASSERT(sizes_[i] >= 1, "layout sizes must be >= 1");
    seen[i] = true;
    strides_[i] = stride;
    stride *= static_cast<uint64_t>(sizes_[i]);
  }
  SIM_ASSERT(stride <= 0xFFFFFFFFull, "world size exceeds 32 bits");
  world_ = static_cast<uint32_t>(stride);
}

uint32_t Layout::group_id(uint32_t rank, Dim d) const {
  // Drop coordinate d and re-pack the others in the same order: the dimensions inside d give
  // rank mod stride(d), those outside it rank / (stride(d) x size(d)), which then counts in units
  // of stride(d).
  auto i = static_cast<size_t>(d);
  uint64_t inner = rank % strides_[i];
  uint64_t outer = rank / (strides_[i] * static_cast<uint64_t>(sizes_[i]));
  return static_cast<uint32_t>(inner + outer * strides_[i]);
}

void Layout::members(uint32_t rank, Dim d, std::vector<uint32_t>& out) const {
  out.clear();
  auto i = static_cast<size_t>(d);
  uint32_t base = rank - coord(rank, d) * static_cast<uint32_t>(strides_[i]);
  for (int64_t k = 0; k < sizes_[i]; ++k) out.push_back(base + static_cast<uint32_t>(k * strides_[i]));
}

uint32_t Layout::group_id(uint32_t rank, Dim d, Dim also) const {
  if (also == Dim::kCount || also == d) return group_id(rank, d);
  // Drop both coordinates and pack the others in layout order.
  uint64_t id = 0, mult = 1;
  for (Dim x : order_) {
    if (x == d || x == also) continue;
    id += coord(rank, x) * mult;
    mult *= static_cast<uint64_t>(size(x));
  }
  return static_cast<uint32_t>(id);
}

void Layout::members(uint32_t rank, Dim d, Dim also, std::vector<uint32_t>& out) const {
  if (also == Dim::kCount || also == d) return members(rank, d, out);
  out.clear();
  const uint64_t base = rank - coord(rank, d) * strides_[static_cast<size_t>(d)] -
                        coord(rank, also) * strides_[static_cast<size_t>(also)];
  for (int64_t i = 0; i < size(d); ++i)
    for (int64_t j = 0; j < size(also); ++j)
      out.push_back(static_cast<uint32_t>(base + static_cast<uint64_t>(i) * strides_[static_cast<size_t>(d)] +
                                          static_cast<uint64_t>(j) * strides_[static_cast<size_t>(also)]));
  std::sort(out.begin(), out.end());
}

std::string_view dim_name(Dim d) {
  switch (d) {
    case Dim::kTp: return "tp";
    case Dim::kCp: return "cp";
    case Dim::kPp: return "pp";
    case Dim::kDp: return "dp";
    case Dim::kDpOuter: return "dp_outer";
    case Dim::kCount: break;
  }
  return "?";
}

uint32_t Layout::neighbor(uint32_t rank, Dim d, int64_t peer) const {
  auto i = static_cast<size_t>(d);
  int64_t p = sizes_[i];
  int64_t c = coord(rank, d);
  int64_t n = ((c + peer) % p + p) % p;
  return static_cast<uint32_t>(static_cast<int64_t>(rank) + (n - c) * static_cast<int64_t>(strides_[i]));
}

}  // namespace wl
