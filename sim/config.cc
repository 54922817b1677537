// sim/config.cc: the yaml-cpp side of the strict scenario binding (the only file that sees it).
//
// yaml-cpp pitfall that shapes this file: `node_a = node_b` between two handles rebinds the data
// that node_a refers to, i.e. it rewrites the tree. Handles are therefore only copy-constructed or
// reset(), and assignment is used only where a tree write is meant (overrides, defaults).
#include "sim/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <span>
#include <cstdio>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "sim/error.h"
#include "sim/units.h"

namespace sim {
namespace config_detail {

struct DocState {
  std::string name;  // file name (or the stand-in given to load_string)
  YAML::Node root;
  std::vector<std::string> overrides;  // dotted paths given to --set, in order
  std::vector<std::string> labels;     // for each, what errors about it point at ("--set a.b")
  // Keys binding code asked for, per map (by dotted path), in the order first asked.
  std::unordered_map<std::string, std::vector<std::string>> asked;
  bool bound = false;  // root() was called: overrides would now come too late
  std::vector<std::string> warnings;  // ConfigNode::warn, each once

  void note_asked(const std::string& map_path, std::string_view key) {
    std::vector<std::string>& keys = asked[map_path];
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.emplace_back(key);
  }

  bool was_asked(const std::string& map_path, const std::string& key) const {
    auto it = asked.find(map_path);
    return it != asked.end() && std::find(it->second.begin(), it->second.end(), key) != it->second.end();
  }

  // Where the node at `path` came from. Values from --set carry marks relative to the --set
  // text, so the override wins over the mark; nodes made up by binding code (defaults) have no
  // mark and borrow the location of their parent.
  std::string location_of(const std::string& path, const YAML::Mark& mark,
                          const std::string& fallback) const {
    const std::string* best = nullptr;
    size_t best_i = 0;
    for (size_t i = 0; i < overrides.size(); ++i) {
      const std::string& o = overrides[i];
      bool covers = path == o || (path.size() > o.size() && path.starts_with(o) &&
                                  (path[o.size()] == '.' || path[o.size()] == '['));
      if (covers && (best == nullptr || o.size() >= best->size())) best = &o, best_i = i;
    }
    if (best != nullptr) return labels[best_i];
    if (!mark.is_null()) {
      return name + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
    }
    if (!path.empty()) {
      for (size_t i = 0; i < overrides.size(); ++i) {  // a map created on the way to an override
        const std::string& o = overrides[i];
        if (o.size() > path.size() && o.starts_with(path) && o[path.size()] == '.') return labels[i];
      }
    }
    return fallback;
  }
};

struct NodeRecord {
  std::shared_ptr<DocState> doc;
  YAML::Node node;
  std::string path;
  std::string location;
};

// Private access for the helpers below, which need yaml-cpp types in their signatures.
struct Access {
  static const NodeRecord& rec(const ConfigNode& n) { return *n.rec_; }
  static ConfigNode make(std::shared_ptr<const NodeRecord> r) { return ConfigNode(std::move(r)); }
};

}  // namespace config_detail

namespace {

using config_detail::Access;
using config_detail::DocState;
using config_detail::NodeRecord;

std::string join_path(const std::string& parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return parent + "." + std::string(key);
}

std::string shown_path(const std::string& path) { return path.empty() ? "(top level)" : path; }

// "location: path", or the location alone when it is the --set of that very path.
std::string where_of(const std::string& location, const std::string& path) {
  if (location == "--set " + path) return location;
  return location + ": " + shown_path(path);
}

// "got ..." part of type errors.
std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar: return "\"" + n.Scalar() + "\"";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    default: return "nothing (null)";
  }
}

struct Entry {
  YAML::Node key;
  YAML::Node value;
};

// Linear lookup by scalar key; never uses yaml-cpp's non-const operator[], which would insert.
std::optional<Entry> lookup(const YAML::Node& map, std::string_view key) {
  if (!map.IsMap()) return std::nullopt;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) return Entry{it->first, it->second};
  }
  return std::nullopt;
}

std::string shortest(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

// Text for a default quantity that parses back to exactly `value`, in the shortest of the
// candidate units, so that the resolved scenario reads like a hand-written one ("100Gbps").
std::string quantity_text(double value, std::initializer_list<std::pair<std::string_view, double>> units,
                          const std::function<double(std::string_view)>& parse) {
  std::string best;
  for (const auto& [unit, factor] : units) {
    std::string s = shortest(value / factor) + std::string(unit);
    try {
      if (parse(s) != value) continue;
    } catch (const ConfigError&) {
      continue;
    }
    if (best.empty() || s.size() < best.size()) best = s;
  }
  return best;
}

std::string duration_text(Time t) {
  static constexpr std::pair<std::string_view, int64_t> kUnits[] = {
      {"d", 86400000000000}, {"h", 3600000000000}, {"min", 60000000000}, {"s", 1000000000},
      {"ms", 1000000},       {"us", 1000}};
  int64_t ns = t.count_ns();
  for (const auto& [unit, size] : kUnits) {
    if (ns != 0 && ns % size == 0) return std::to_string(ns / size) + std::string(unit);
  }
  // Non-whole microseconds read better as a decimal ("1.5us") when that is exact.
  if (ns % 100 == 0 && ns != 0) {
    std::string s = shortest(static_cast<double>(ns) / 1000.0) + "us";
    if (parse_duration(s) == t) return s;
  }
  return std::to_string(ns) + "ns";
}

bool parse_int(std::string_view s, int64_t& out, bool& overflow) {
  overflow = false;
  if (s.starts_with('+')) s.remove_prefix(1);
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec == std::errc::result_out_of_range) overflow = true;
  return ec == std::errc() && end == s.data() + s.size();
}

bool parse_double(std::string_view s, double& out) {
  if (s.starts_with('+')) s.remove_prefix(1);
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(out);
}

std::string join_list(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& k : items) s += (s.empty() ? "" : ", ") + k;
  return s;
}

// Aliases let a small text stand for a huge or endless tree (a self-referencing `&a [*a]`, an
// alias bomb doubling at each level): walked without recursion, a document nested deeper than
// kMaxDepth or expanding to more than kMaxValues values is refused before anything else walks it.
constexpr size_t kMaxDepth = 64;
constexpr size_t kMaxValues = 1'000'000;
void check_size(const YAML::Node& root, const std::string& origin, bool from_file) {
  auto where = [&](const YAML::Node& n) {
    if (!from_file) return origin;
    YAML::Mark m = n.Mark();
    return origin + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
  };
  std::vector<std::pair<YAML::Node, size_t>> stack{{root, 0}};
  size_t values = 0;
  while (!stack.empty()) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    if (++values > kMaxValues)
      throw ConfigError(where(root) + ": the document expands to more than " + std::to_string(kMaxValues) +
                        " values (YAML aliases repeated over and over?)");
    if (depth > kMaxDepth)
      throw ConfigError(where(node) + ": nested more than " + std::to_string(kMaxDepth) +
                        " levels deep (a YAML alias that refers to itself?)");
    if (node.IsMap()) {
      for (auto it = node.begin(); it != node.end(); ++it) stack.emplace_back(it->second, depth + 1);
    } else if (node.IsSequence()) {
      for (auto it = node.begin(); it != node.end(); ++it) stack.emplace_back(*it, depth + 1);
    }
  }
}

// Keys must be unique plain scalars: yaml-cpp keeps duplicates and lookups would silently see
// only the first one. `origin` is the file name, or "--set a.b" for an override value (whose
// marks count from the start of the --set text and so are not shown).
void check_keys(const YAML::Node& node, const std::string& path, const std::string& origin,
                bool from_file) {
  auto where = [&](const YAML::Node& n) {
    if (!from_file) return origin;
    YAML::Mark m = n.Mark();
    return origin + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
  };
  if (node.IsMap()) {
    std::unordered_map<std::string, int> first_line;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar()) {
        throw ConfigError(where(it->first) + ": " + shown_path(path) +
                          ": keys must be plain names, got " + describe(it->first));
      }
      const std::string& key = it->first.Scalar();
      auto [pos, fresh] = first_line.emplace(key, it->first.Mark().line + 1);
      if (!fresh) {
        std::string first = from_file ? " (first given on line " + std::to_string(pos->second) + ")" : "";
        throw ConfigError(where(it->first) + ": " + join_path(path, key) + ": duplicate key" + first);
      }
      check_keys(it->second, join_path(path, key), origin, from_file);
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      check_keys(node[i], path + "[" + std::to_string(i) + "]", origin, from_file);
    }
  }
}

void require_map(const ConfigNode& n) {
  const NodeRecord& r = Access::rec(n);
  if (!r.node.IsMap() && !r.node.IsNull()) n.fail("expected a map, got " + describe(r.node));
}

// Writes `value` under `key` of the map `n` (which is known not to have it).
void put_default(const ConfigNode& n, std::string_view key, const YAML::Node& value) {
  require_map(n);
  YAML::Node target(Access::rec(n).node);  // shares the tree node
  target[std::string(key)] = value;
}

YAML::Node flow_sequence() {
  YAML::Node seq(YAML::NodeType::Sequence);
  seq.SetStyle(YAML::EmitterStyle::Flow);
  return seq;
}

template <class T, class Read, class ToYaml>
T get_or_default(const ConfigNode& n, std::string_view key, const T& def, Read read, ToYaml to_yaml) {
  if (std::optional<ConfigNode> c = n.find(key)) return read(*c);
  put_default(n, key, to_yaml(def));
  return def;
}

// Re-throws a units error with this node's location and path in front.
template <class F>
auto with_location(const ConfigNode& n, F parse) {
  std::string text = n.scalar();
  try {
    return parse(text);
  } catch (const ConfigError& e) {
    n.fail(e.what());
  }
}

std::string check_enum(const ConfigNode& c, std::string value, const std::vector<std::string>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
    c.fail("expected one of " + join_list(allowed) + ", got \"" + value + "\"");
  }
  return value;
}

std::vector<std::string> to_strings(std::initializer_list<std::string_view> list) {
  return std::vector<std::string>(list.begin(), list.end());
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ConfigNode

ConfigNode::ConfigNode(std::shared_ptr<const config_detail::NodeRecord> rec) : rec_(std::move(rec)) {}

const std::string& ConfigNode::path() const { return rec_->path; }
const std::string& ConfigNode::location() const { return rec_->location; }

bool ConfigNode::is_map() const { return rec_->node.IsMap(); }
bool ConfigNode::is_sequence() const { return rec_->node.IsSequence(); }
bool ConfigNode::is_scalar() const { return rec_->node.IsScalar(); }
bool ConfigNode::is_null() const { return rec_->node.IsNull(); }

size_t ConfigNode::size() const {
  return (rec_->node.IsMap() || rec_->node.IsSequence()) ? rec_->node.size() : 0;
}

std::string ConfigNode::where() const { return where_of(rec_->location, rec_->path); }

void ConfigNode::fail(std::string_view msg) const { throw ConfigError(where() + ": " + std::string(msg)); }

void ConfigNode::warn(std::string_view msg) const {
  std::string w = where() + ": " + std::string(msg);
  std::vector<std::string>& all = rec_->doc->warnings;
  if (std::find(all.begin(), all.end(), w) == all.end()) all.push_back(std::move(w));
}

ConfigNode ConfigNode::make_child(std::string_view key) const {
  std::optional<Entry> e = lookup(rec_->node, key);
  auto rec = std::make_shared<NodeRecord>();
  rec->doc = rec_->doc;
  rec->node.reset(e->value);
  rec->path = join_path(rec_->path, key);
  rec->location = rec_->doc->location_of(rec->path, e->value.Mark(), rec_->location);
  return ConfigNode(std::move(rec));
}

void ConfigNode::refuse_moved(std::string_view key, std::string_view where_now) const {
  if (!rec_->node.IsMap() || !lookup(rec_->node, key).has_value()) return;
  child(key).fail("moved: " + std::string(where_now));
}

bool ConfigNode::has(std::string_view key) const {
  require_map(*this);
  rec_->doc->note_asked(rec_->path, key);
  return lookup(rec_->node, key).has_value();
}

std::optional<ConfigNode> ConfigNode::find(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return make_child(key);
}

ConfigNode ConfigNode::child(std::string_view key) const {
  if (!has(key)) fail("missing required key '" + std::string(key) + "'" + misspelt_as(key));
  return make_child(key);
}

// A key of this map that looks like a misspelling of the missing `key` (one edit away, two for
// keys of 8 letters or more; none for keys under 4 letters, where tp and pp are both real), as
// "; is 'clustr' (line 2) a misspelling of it?"; empty when none does.
std::string ConfigNode::misspelt_as(std::string_view key) const {
  if (key.size() < 4 || !rec_->node.IsMap()) return {};
  const size_t most = key.size() >= 8 ? 2 : 1;
  for (auto it = rec_->node.begin(); it != rec_->node.end(); ++it) {
    if (!it->first.IsScalar()) continue;
    const std::string& k = it->first.Scalar();
    if (edit_distance(k, key) > most) continue;
    const YAML::Mark m = it->first.Mark();
    const std::string line = m.is_null() ? "" : " (line " + std::to_string(m.line + 1) + ")";
    return "; is '" + k + "'" + line + " a misspelling of it?";
  }
  return {};
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);  // one row of the table at a time
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

ConfigNode ConfigNode::child_map(std::string_view key) const {
  if (!has(key)) put_default(*this, key, YAML::Node(YAML::NodeType::Map));
  ConfigNode c = make_child(key);
  require_map(c);
  return c;
}

const std::string& ConfigNode::document_name() const { return rec_->doc->name; }

std::vector<std::string> ConfigNode::keys() const {
  require_map(*this);
  std::vector<std::string> out;
  if (!rec_->node.IsMap()) return out;
  for (auto it = rec_->node.begin(); it != rec_->node.end(); ++it) out.push_back(it->first.Scalar());
  return out;
}

ConfigNode ConfigNode::at(size_t i) const {
  if (!rec_->node.IsSequence()) fail("expected a list, got " + describe(rec_->node));
  if (i >= rec_->node.size()) {
    fail("index " + std::to_string(i) + " is out of range (the list has " +
         std::to_string(rec_->node.size()) + " entries)");
  }
  auto rec = std::make_shared<NodeRecord>();
  rec->doc = rec_->doc;
  rec->node.reset(rec_->node[i]);
  rec->path = rec_->path + "[" + std::to_string(i) + "]";
  rec->location = rec_->doc->location_of(rec->path, rec->node.Mark(), rec_->location);
  return ConfigNode(std::move(rec));
}

std::string ConfigNode::scalar() const {
  if (!rec_->node.IsScalar()) fail("expected a value, got " + describe(rec_->node));
  return rec_->node.Scalar();
}

std::string ConfigNode::as_string() const {
  if (!rec_->node.IsScalar()) fail("expected a string, got " + describe(rec_->node));
  const std::string& s = rec_->node.Scalar();
  // A control character (a raw NUL, an escape) in a name or path is a damaged file, not a value.
  for (unsigned char c : s)
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%02x", c);
      fail(std::string("the string holds a control character (byte ") + buf + ")");
    }
  return s;
}

namespace {
constexpr std::string_view kTrue[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
constexpr std::string_view kFalse[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
bool spelled(std::span<const std::string_view> words, const std::string& s) {
  return std::find(words.begin(), words.end(), s) != words.end();
}
}  // namespace

bool ConfigNode::is_bool() const {
  return rec_->node.IsScalar() && (spelled(kTrue, rec_->node.Scalar()) || spelled(kFalse, rec_->node.Scalar()));
}

bool ConfigNode::as_bool() const {
  if (rec_->node.IsScalar()) {
    const std::string& s = rec_->node.Scalar();
    if (spelled(kTrue, s)) return true;
    if (spelled(kFalse, s)) return false;
  }
  fail("expected true or false, got " + describe(rec_->node));
}

int64_t ConfigNode::as_int() const {
  int64_t v = 0;
  bool overflow = false;
  if (rec_->node.IsScalar() && parse_int(rec_->node.Scalar(), v, overflow)) return v;
  if (overflow) fail("integer out of range, got " + describe(rec_->node));
  fail("expected an integer, got " + describe(rec_->node));
}

double ConfigNode::as_double() const {
  double v = 0;
  if (rec_->node.IsScalar() && parse_double(rec_->node.Scalar(), v)) return v;
  fail("expected a number, got " + describe(rec_->node));
}

double ConfigNode::as_bandwidth() const {
  return with_location(*this, [](const std::string& s) { return parse_bandwidth(s); });
}
double ConfigNode::as_bytes() const {
  return with_location(*this, [](const std::string& s) { return parse_bytes(s); });
}
double ConfigNode::as_flop_rate() const {
  return with_location(*this, [](const std::string& s) { return parse_flop_rate(s); });
}
double ConfigNode::as_flops() const {
  return with_location(*this, [](const std::string& s) { return parse_flops(s); });
}
Time ConfigNode::as_duration() const {
  return with_location(*this, [](const std::string& s) { return parse_duration(s); });
}

std::string ConfigNode::get_string(std::string_view key) const { return child(key).as_string(); }
std::string ConfigNode::get_string(std::string_view key, std::string_view def) const {
  return get_or_default(
      *this, key, std::string(def), [](const ConfigNode& c) { return c.as_string(); },
      [](const std::string& d) { return YAML::Node(d); });
}

bool ConfigNode::get_bool(std::string_view key) const { return child(key).as_bool(); }
bool ConfigNode::get_bool(std::string_view key, bool def) const {
  return get_or_default(
      *this, key, def, [](const ConfigNode& c) { return c.as_bool(); },
      [](bool d) { return YAML::Node(d ? "true" : "false"); });
}

int64_t ConfigNode::get_int(std::string_view key) const { return child(key).as_int(); }
int64_t ConfigNode::get_int(std::string_view key, int64_t def) const {
  return get_or_default(
      *this, key, def, [](const ConfigNode& c) { return c.as_int(); },
      [](int64_t d) { return YAML::Node(std::to_string(d)); });
}

namespace {
int64_t int_in_range(const ConfigNode& c, int64_t min, int64_t max) {
  int64_t v = c.as_int();
  if (v < min) c.fail("must be >= " + std::to_string(min) + ", got " + std::to_string(v));
  if (v > max) c.fail("must be <= " + std::to_string(max) + ", got " + std::to_string(v));
  return v;
}
double double_in_range(const ConfigNode& c, double min, double max) {
  double v = c.as_double();
  if (v < min) c.fail("must be >= " + shortest(min) + ", got " + shortest(v));
  if (v > max) c.fail("must be <= " + shortest(max) + ", got " + shortest(v));
  return v;
}
}  // namespace

int64_t ConfigNode::get_int_in(std::string_view key, int64_t min, int64_t max) const {
  return int_in_range(child(key), min, max);
}
int64_t ConfigNode::get_int_in(std::string_view key, int64_t min, int64_t max, int64_t def) const {
  return get_or_default(
      *this, key, def, [&](const ConfigNode& c) { return int_in_range(c, min, max); },
      [](int64_t d) { return YAML::Node(std::to_string(d)); });
}

double ConfigNode::get_double(std::string_view key) const { return child(key).as_double(); }
double ConfigNode::get_double(std::string_view key, double def) const {
  return get_or_default(
      *this, key, def, [](const ConfigNode& c) { return c.as_double(); },
      [](double d) { return YAML::Node(shortest(d)); });
}
double ConfigNode::get_double_in(std::string_view key, double min, double max) const {
  return double_in_range(child(key), min, max);
}
double ConfigNode::get_double_in(std::string_view key, double min, double max, double def) const {
  return get_or_default(
      *this, key, def, [&](const ConfigNode& c) { return double_in_range(c, min, max); },
      [](double d) { return YAML::Node(shortest(d)); });
}

double ConfigNode::get_bandwidth(std::string_view key) const { return child(key).as_bandwidth(); }
double ConfigNode::get_bandwidth(std::string_view key, double def) const {
  return get_or_default(
      *this, key, def, [](const ConfigNode& c) { return c.as_bandwidth(); },
      [](double d) {
        return YAML::Node(quantity_text(d,
                                        {{"B/s", 1.0}, {"kB/s", 1e3}, {"MB/s", 1e6}, {"GB/s", 1e9},
                                         {"TB/s", 1e12}, {"Mbps", 1e6 / 8}, {"Gbps", 1e9 / 8},
                                         {"Tbps", 1e12 / 8}, {"GiB/s", 1073741824.0}},
                                        parse_bandwidth));
      });
}

double ConfigNode::get_bytes(std::string_view key) const { return child(key).as_bytes(); }
double ConfigNode::get_bytes(std::string_view key, double def) const {
  return get_or_default(
      *this, key, def, [](const ConfigNode& c) { return c.as_bytes(); },
      [](double d) {
        return YAML::Node(quantity_text(
            d,
            {{"B", 1.0}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
             {"TiB", 1099511627776.0}, {"kB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}},
            parse_bytes));
      });
}

double ConfigNode::get_flop_rate(std::string_view key) const { return child(key).as_flop_rate(); }
double ConfigNode::get_flop_rate(std::string_view key, double def) const {
  return get_or_default(
      *this, key, def, [](const ConfigNode& c) { return c.as_flop_rate(); },
      [](double d) {
        return YAML::Node(quantity_text(d,
                                        {{"FLOPS", 1.0}, {"GFLOPS", 1e9}, {"TFLOPS", 1e12},
                                         {"PFLOPS", 1e15}, {"EFLOPS", 1e18}},
                                        parse_flop_rate));
      });
}

double ConfigNode::get_flops(std::string_view key) const { return child(key).as_flops(); }
double ConfigNode::get_flops(std::string_view key, double def) const {
  return get_or_default(
      *this, key, def, [](const ConfigNode& c) { return c.as_flops(); },
      [](double d) {
        return YAML::Node(quantity_text(d,
                                        {{"FLOP", 1.0}, {"GFLOP", 1e9}, {"TFLOP", 1e12},
                                         {"PFLOP", 1e15}, {"EFLOP", 1e18}},
                                        parse_flops));
      });
}

Time ConfigNode::get_duration(std::string_view key) const { return child(key).as_duration(); }
Time ConfigNode::get_duration(std::string_view key, Time def) const {
  return get_or_default(
      *this, key, def, [](const ConfigNode& c) { return c.as_duration(); },
      [](Time d) { return YAML::Node(duration_text(d)); });
}

namespace {
std::vector<int64_t> read_int_list(const ConfigNode& c) {
  if (!c.is_sequence()) c.fail("expected a list of integers, got " + describe(Access::rec(c).node));
  std::vector<int64_t> out;
  for (size_t i = 0; i < c.size(); ++i) out.push_back(c.at(i).as_int());
  return out;
}
std::vector<std::string> read_string_list(const ConfigNode& c) {
  if (!c.is_sequence()) c.fail("expected a list of strings, got " + describe(Access::rec(c).node));
  std::vector<std::string> out;
  for (size_t i = 0; i < c.size(); ++i) out.push_back(c.at(i).as_string());
  return out;
}
}  // namespace

std::vector<int64_t> ConfigNode::get_int_list(std::string_view key) const {
  return read_int_list(child(key));
}
std::vector<int64_t> ConfigNode::get_int_list(std::string_view key,
                                              const std::vector<int64_t>& def) const {
  return get_or_default(*this, key, def, read_int_list, [](const std::vector<int64_t>& d) {
    YAML::Node seq = flow_sequence();
    for (int64_t v : d) seq.push_back(std::to_string(v));
    return seq;
  });
}

std::vector<std::string> ConfigNode::get_string_list(std::string_view key) const {
  return read_string_list(child(key));
}
std::vector<std::string> ConfigNode::get_string_list(std::string_view key,
                                                     const std::vector<std::string>& def) const {
  return get_or_default(*this, key, def, read_string_list, [](const std::vector<std::string>& d) {
    YAML::Node seq = flow_sequence();
    for (const std::string& v : d) seq.push_back(v);
    return seq;
  });
}

std::string ConfigNode::get_enum(std::string_view key,
                                 std::initializer_list<std::string_view> allowed) const {
  return get_enum(key, to_strings(allowed));
}
std::string ConfigNode::get_enum(std::string_view key, std::initializer_list<std::string_view> allowed,
                                 std::string_view def) const {
  return get_enum(key, to_strings(allowed), def);
}
std::string ConfigNode::get_enum(std::string_view key, const std::vector<std::string>& allowed) const {
  ConfigNode c = child(key);
  return check_enum(c, c.as_string(), allowed);
}
std::string ConfigNode::get_enum(std::string_view key, const std::vector<std::string>& allowed,
                                 std::string_view def) const {
  return get_or_default(
      *this, key, std::string(def),
      [&](const ConfigNode& c) { return check_enum(c, c.as_string(), allowed); },
      [](const std::string& d) { return YAML::Node(d); });
}

// ---------------------------------------------------------------------------------------------
// ConfigDoc

ConfigDoc::ConfigDoc(std::shared_ptr<config_detail::DocState> state) : state_(std::move(state)) {}

ConfigDoc ConfigDoc::load_string(std::string_view text, std::string name) {
  auto state = std::make_shared<DocState>();
  state->name = std::move(name);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    std::string where = state->name;
    if (!e.mark.is_null()) {
      where += ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
    }
    throw ConfigError(where + ": YAML syntax error: " + e.msg);
  }
  if (!root.IsDefined() || root.IsNull()) {
    root = YAML::Node(YAML::NodeType::Map);  // an empty file is an empty scenario
  } else if (!root.IsMap()) {
    YAML::Mark m = root.Mark();
    throw ConfigError(state->name + ":" + std::to_string(m.line + 1) + ":" +
                      std::to_string(m.column + 1) + ": (top level): expected a map, got " +
                      describe(root));
  }
  check_size(root, state->name, true);
  check_keys(root, "", state->name, true);
  state->root.reset(root);
  return ConfigDoc(std::move(state));
}

ConfigDoc ConfigDoc::load_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw ConfigError("cannot read scenario file \"" + path + "\": it is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError("cannot open scenario file \"" + path + "\": " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return load_string(text.str(), path);
}

void ConfigDoc::apply_override(std::string_view assignment, std::string_view label) {
  SIM_ASSERT(!state_->bound, "--set overrides must be applied before binding starts");
  std::string what = label.empty() ? "--set " + std::string(assignment) : std::string(label);
  size_t eq = assignment.find('=');
  if (eq == std::string_view::npos) throw ConfigError(what + ": expected key.path=value");
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  std::string_view path = trim(assignment.substr(0, eq));
  std::string_view value_text = trim(assignment.substr(eq + 1));
  if (path.empty()) throw ConfigError(what + ": missing key path before '='");
  if (value_text.empty()) throw ConfigError(what + ": missing value after '='");

  std::vector<std::string> segments;
  for (size_t start = 0;;) {
    size_t dot = path.find('.', start);
    std::string_view seg = path.substr(start, dot == std::string_view::npos ? path.npos : dot - start);
    if (seg.empty()) throw ConfigError(what + ": empty key in path '" + std::string(path) + "'");
    segments.emplace_back(seg);
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }

  YAML::Node value;
  try {
    value = YAML::Load(std::string(value_text));
  } catch (const YAML::Exception& e) {
    throw ConfigError(what + ": bad value: " + e.msg);
  }
  std::string where = label.empty() ? "--set " + std::string(path) : std::string(label);
  check_size(value, where, false);
  check_keys(value, std::string(path), where, false);

  // A segment may index a list: tiers[0] is element 0 of the list `tiers` (which must exist and
  // be long enough: --set edits a list, it does not grow one).
  auto split_index = [&](const std::string& seg, std::string& key) -> int64_t {
    const size_t open = seg.find('[');
    if (open == std::string::npos) {
      key = seg;
      return -1;
    }
    key = seg.substr(0, open);
    const std::string digits = seg.substr(open + 1, seg.size() - open - 2);
    if (key.empty() || seg.back() != ']' || digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      throw ConfigError(what + ": bad list index in '" + seg + "' (expected key[N])");
    return std::stoll(digits);
  };
  YAML::Node cur(state_->root);
  std::string walked;
  for (size_t i = 0; i < segments.size(); ++i) {
    const bool last = i + 1 == segments.size();
    std::string key;
    const int64_t index = split_index(segments[i], key);
    walked = join_path(walked, segments[i]);
    if (index < 0 && last) {
      cur[key] = value;  // tree write: replaces an existing value in place
      break;
    }
    std::optional<Entry> e = lookup(cur, key);
    if (index >= 0) {
      if (!e || !e->value.IsSequence())
        throw ConfigError(what + ": '" + join_path(walked.substr(0, walked.size() - segments[i].size()), key) +
                          "' is not a list");
      if (static_cast<size_t>(index) >= e->value.size())
        throw ConfigError(what + ": '" + walked + "': the list has " + std::to_string(e->value.size()) +
                          (e->value.size() == 1 ? " element" : " elements"));
      YAML::Node seq(e->value);
      if (last) {
        seq[static_cast<size_t>(index)] = value;  // tree write: replaces the element in place
        break;
      }
      YAML::Node elem = seq[static_cast<size_t>(index)];
      if (!elem.IsMap()) throw ConfigError(what + ": '" + walked + "' is not a map");
      cur.reset(elem);
      continue;
    }
    if (!e || e->value.IsNull()) {
      cur[key] = YAML::Node(YAML::NodeType::Map);  // tree write: create the map
      e.reset();  // re-emplace rather than assign: assigning a YAML::Node rewrites the tree
      e.emplace(*lookup(cur, key));
    } else if (!e->value.IsMap()) {
      throw ConfigError(what + ": '" + walked + "' is not a map");
    }
    cur.reset(e->value);
  }
  state_->overrides.emplace_back(path);
  state_->labels.push_back(std::move(where));
}

ConfigNode ConfigDoc::root() const {
  state_->bound = true;
  auto rec = std::make_shared<NodeRecord>();
  rec->doc = state_;
  rec->node.reset(state_->root);
  rec->location = state_->location_of("", state_->root.Mark(), state_->name);
  return Access::make(std::move(rec));
}

namespace {
void check_used(const DocState& st, const YAML::Node& node, const std::string& path,
                const std::string& location) {
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string& key = it->first.Scalar();
      std::string key_path = join_path(path, key);
      if (!st.was_asked(path, key)) {
        std::string where = st.location_of(key_path, it->first.Mark(), location);
        auto known = st.asked.find(path);
        std::string msg;
        if (known == st.asked.end() || known->second.empty()) {
          msg = "unknown key (no keys are read here)";
        } else {
          std::vector<std::string> names = known->second;
          std::sort(names.begin(), names.end());
          msg = "unknown key (known here: " + join_list(names) + ")";
        }
        throw ConfigError(where_of(where, key_path) + ": " + msg);
      }
      check_used(st, it->second, key_path, st.location_of(key_path, it->second.Mark(), location));
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      std::string elem_path = path + "[" + std::to_string(i) + "]";
      check_used(st, node[i], elem_path, st.location_of(elem_path, node[i].Mark(), location));
    }
  }
}
}  // namespace

void ConfigDoc::check_all_used() const {
  check_used(*state_, state_->root, "", state_->location_of("", state_->root.Mark(), state_->name));
}

void ConfigDoc::check_all_used_under(const std::string& top_key) const {
  const YAML::Node& root = state_->root;  // const: a lookup must not add the key
  if (!root.IsMap()) return;
  const YAML::Node node = root[top_key];
  if (!node || !node.IsMap()) return;
  check_used(*state_, node, top_key, state_->location_of(top_key, node.Mark(), state_->name));
}

std::string ConfigNode::resolved_yaml() const {
  YAML::Emitter out;
  out << rec_->node;
  SIM_ASSERT(out.good(), "yaml-cpp could not emit " + rec_->path + ": " + out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

std::string ConfigDoc::resolved_yaml() const {
  YAML::Emitter out;
  out << state_->root;
  SIM_ASSERT(out.good(), "yaml-cpp could not emit the resolved scenario: " + out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

const std::string& ConfigDoc::name() const { return state_->name; }

const std::vector<std::string>& ConfigDoc::warnings() const { return state_->warnings; }

}  // namespace sim
