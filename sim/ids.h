// sim/ids.h: dense 32-bit strong ids. Objects live in vectors indexed by id, so iterating in id
// order is deterministic. An id of kInvalid (all ones) means "none".
#pragma once

#include <compare>
#include <cstdint>
#include <functional>

namespace sim {

template <class Tag>
struct Id {
  static constexpr uint32_t kInvalid = 0xFFFFFFFFu;
  uint32_t value = kInvalid;

  constexpr Id() = default;
  constexpr explicit Id(uint32_t v) : value(v) {}
  constexpr bool valid() const { return value != kInvalid; }
  constexpr auto operator<=>(const Id&) const = default;
};

using ConstraintId = Id<struct ConstraintTag>;
using ActivityId = Id<struct ActivityTag>;
using EventId = Id<struct EventTag>;
using HandlerId = Id<struct HandlerTag>;

}  // namespace sim

template <class Tag>
struct std::hash<sim::Id<Tag>> {
  size_t operator()(const sim::Id<Tag>& id) const noexcept { return std::hash<uint32_t>()(id.value); }
};
