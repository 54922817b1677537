// sim/enum_names.h: one {value, name} table per enum, used both to parse a scenario's spelling and
// to print it, so the two can never disagree.
//   inline constexpr sim::EnumNames<Color, 2> kColorNames{{{Color::kRed, "red"}, {Color::kBlue, "blue"}}};
//   node.get_enum("color", kColorNames.names(), "red")  ->  kColorNames.value("red")
//   kColorNames.name(Color::kBlue) == "blue"
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sim {

template <class E, size_t N>
struct EnumNames {
  struct Entry {
    E value;
    std::string_view name;
  };
  std::array<Entry, N> entries;

  constexpr std::string_view name(E v) const {
    for (const Entry& e : entries)
      if (e.value == v) return e.name;
    return "?";
  }
  // The value named `n`; the first entry when none is (callers parse with names() first).
  constexpr E value(std::string_view n) const {
    for (const Entry& e : entries)
      if (e.name == n) return e.value;
    return entries[0].value;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const Entry& e : entries) out.emplace_back(e.name);
    return out;
  }
};

}  // namespace sim
