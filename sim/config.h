// sim/config.h: strict binding of YAML scenarios to C++ settings.
// ConfigDoc owns one parsed document (from a file or a string) plus --set overrides; ConfigNode is
// a cheap handle (one shared pointer) to a node in it that knows its dotted path
// ("cluster.scale_out.tiers[1].oversubscription") and its source location ("file:line:col",
// 1-based, or "--set cluster.nodes" for values given on the command line).
// Strictness: every typed getter checks type, units (via sim/units.h) and range and throws
// ConfigError("<location>: <path>: <what is wrong>"); every key that binding code asks for is
// recorded (child/find/has/get_* alike), so check_all_used() can report the first key nobody
// read, listing the keys that are known in that map. Getters with a default write the default
// into the document when the key is absent, so resolved_yaml() is the fully resolved scenario.
// Invariants: overrides are applied before the first root() call; keys within a map are unique
// plain scalars (checked at load); yaml-cpp stays inside config.cc.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/time.h"

namespace sim {

namespace config_detail {
struct DocState;
struct NodeRecord;
struct Access;
}  // namespace config_detail

class ConfigNode {
 public:
  // Dotted path from the document root; "" for the root itself.
  const std::string& path() const;
  // "file:line:col" of the node (1-based), or "--set a.b" when the value came from an override.
  const std::string& location() const;
  // Where an error about this node points: "file:line:col: path", or "--set path" alone when the
  // value is the override itself (the path would only repeat it).
  std::string where() const;

  bool is_map() const;
  bool is_sequence() const;
  bool is_scalar() const;
  bool is_null() const;  // "key:" with no value; reads as an empty map
  // Number of entries of a map or sequence; 0 for scalars and null.
  size_t size() const;

  // Map access. Each call records `key` as known in this map, present or not.
  bool has(std::string_view key) const;
  // A key that is no longer read: when the map has it, fails with "moved: <where_now>". It is not
  // counted as a key read here, so unknown-key errors do not offer it.
  void refuse_moved(std::string_view key, std::string_view where_now) const;
  ConfigNode child(std::string_view key) const;  // required: throws if missing
  std::optional<ConfigNode> find(std::string_view key) const;
  // The map under `key`; when absent, an empty map is written into the document there (so the
  // defaults its getters fill in appear in the resolved scenario) and returned.
  ConfigNode child_map(std::string_view key) const;
  // The name of the document this node belongs to (its file name as loaded).
  const std::string& document_name() const;
  // This node's subtree as YAML, with the defaults binding code has filled in so far.
  std::string resolved_yaml() const;
  // Keys in document order (overrides and applied defaults come last).
  std::vector<std::string> keys() const;

  // Sequence access; path of the element is "<path>[i]".
  ConfigNode at(size_t i) const;

  // The scalar text; throws for maps, sequences and null.
  std::string scalar() const;

  // Conversions of this node's own value (e.g. elements of a sequence).
  std::string as_string() const;
  bool as_bool() const;  // true/false, yes/no, on/off
  bool is_bool() const;  // a scalar as_bool accepts
  int64_t as_int() const;
  double as_double() const;
  double as_bandwidth() const;  // bytes/s
  double as_bytes() const;      // bytes
  double as_flop_rate() const;  // FLOP/s
  double as_flops() const;      // FLOPs
  Time as_duration() const;

  // Typed getters of the map entry `key`: the one-argument form requires the key, the form with
  // a default writes the default into the document when the key is absent and returns it.
  std::string get_string(std::string_view key) const;
  std::string get_string(std::string_view key, std::string_view def) const;
  bool get_bool(std::string_view key) const;
  bool get_bool(std::string_view key, bool def) const;
  int64_t get_int(std::string_view key) const;
  int64_t get_int(std::string_view key, int64_t def) const;
  int64_t get_int_in(std::string_view key, int64_t min, int64_t max) const;
  int64_t get_int_in(std::string_view key, int64_t min, int64_t max, int64_t def) const;
  double get_double(std::string_view key) const;
  double get_double(std::string_view key, double def) const;
  double get_double_in(std::string_view key, double min, double max) const;
  double get_double_in(std::string_view key, double min, double max, double def) const;
  double get_bandwidth(std::string_view key) const;
  double get_bandwidth(std::string_view key, double def_bytes_per_second) const;
  double get_bytes(std::string_view key) const;
  double get_bytes(std::string_view key, double def_bytes) const;
  double get_flop_rate(std::string_view key) const;
  double get_flop_rate(std::string_view key, double def_flop_per_second) const;
  double get_flops(std::string_view key) const;
  double get_flops(std::string_view key, double def_flops) const;
  Time get_duration(std::string_view key) const;
  Time get_duration(std::string_view key, Time def) const;
  std::vector<int64_t> get_int_list(std::string_view key) const;
  std::vector<int64_t> get_int_list(std::string_view key, const std::vector<int64_t>& def) const;
  std::vector<std::string> get_string_list(std::string_view key) const;
  std::vector<std::string> get_string_list(std::string_view key,
                                           const std::vector<std::string>& def) const;
  // One of `allowed`; the error lists them.
  std::string get_enum(std::string_view key, std::initializer_list<std::string_view> allowed) const;
  std::string get_enum(std::string_view key, std::initializer_list<std::string_view> allowed,
                       std::string_view def) const;
  std::string get_enum(std::string_view key, const std::vector<std::string>& allowed) const;
  std::string get_enum(std::string_view key, const std::vector<std::string>& allowed,
                       std::string_view def) const;

  // Throws ConfigError("<location>: <path>: <msg>"), for combinations only binding code can judge.
  [[noreturn]] void fail(std::string_view msg) const;
  // For a missing key's error: a key of this map that looks like a misspelling of it (or nothing).
  std::string misspelt_as(std::string_view key) const;
  // Records "<location>: <path>: <msg>" as a warning of the document (ConfigDoc::warnings): a value
  // that is allowed (a what-if) but implausible enough to be a slip, such as a NIC of 400 Mb/s.
  void warn(std::string_view msg) const;

 private:
  friend class ConfigDoc;
  friend struct config_detail::Access;
  explicit ConfigNode(std::shared_ptr<const config_detail::NodeRecord> rec);
  ConfigNode make_child(std::string_view key) const;  // assumes the key is present

  std::shared_ptr<const config_detail::NodeRecord> rec_;
};

// One scenario document. Copies share the same document (and the same record of used keys).
class ConfigDoc {
 public:
  // Missing file -> ConfigError naming it; syntax error -> "file:line:col: YAML syntax error: ...".
  static ConfigDoc load_file(const std::string& path);
  // `name` stands in for the file name in locations.
  static ConfigDoc load_string(std::string_view text, std::string name);

  // "a.b.c=value", as given to --set. The value is parsed as YAML ("4", "[1MiB,1GiB]",
  // "{kind: ring}"), missing maps on the way are created, and a path through a scalar or a
  // sequence is an error. Must come before root(). Errors about the value point at `label`, by
  // default "--set a.b.c"; an option that sets a key for the user gives its own ("--step-cache").
  void apply_override(std::string_view assignment, std::string_view label = {});

  ConfigNode root() const;

  // Throws for the first key (in document order) that binding code never asked about:
  // "file:12:5: cluster.scale_out.nic_bw: unknown key (known here: nic_bandwidth, rails, tiers)".
  void check_all_used() const;
  // The same for one top-level section only (`topology` binds the cluster and nothing else).
  void check_all_used_under(const std::string& top_key) const;

  // The whole document as YAML, with applied defaults and overrides, in insertion order.
  std::string resolved_yaml() const;

  const std::string& name() const;
  // What binding found implausible (ConfigNode::warn), in the order found, each once.
  const std::vector<std::string>& warnings() const;

 private:
  explicit ConfigDoc(std::shared_ptr<config_detail::DocState> state);
  std::shared_ptr<config_detail::DocState> state_;
};

// The Levenshtein distance between two words (insertions, deletions and substitutions), for
// "did you mean" hints in error messages.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace sim
