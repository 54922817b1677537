// traces/chrome/chrome_trace.cc: the streaming Chrome trace writer (see the header).
#include "traces/chrome/chrome_trace.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "sim/error.h"

namespace traces {

namespace {

// Output is handed to zlib in chunks of about this size: large enough that gzwrite's per-call
// cost vanishes, small enough that memory stays flat for any trace length.
constexpr size_t kFlushBytes = 256 * 1024;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void append_hex4(std::string& out, unsigned v) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(v >> shift) & 0xF];
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not valid
// (overlongs, surrogates and code points past U+10FFFF count as invalid, as in RFC 3629).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return len;
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20) {
            append_hex4(out, c);
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    size_t len = utf8_sequence_length(s, i);
    if (len == 0) {
      // A broken name must not make the whole file unparsable.
      append_hex4(out, 0xFFFD);
      ++i;
    } else {
      out.append(s.data() + i, len);
      i += len;
    }
  }
  out += '"';
}

void append_json_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "\"NaN\"";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
    return;
  }
  char buf[32];
  std::to_chars_result res;
  // Below 2^53 every integral double is an exact int64; printing it as one avoids the
  // exponent form to_chars picks for e.g. 1e15, which readers would take for a float.
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {
    res = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(v));
  } else {
    res = std::to_chars(buf, buf + sizeof buf, v);
  }
  out.append(buf, res.ptr);
}

void append_dur_us(std::string& out, int64_t start_ns, int64_t end_ns) {
  // Viewers add ts + dur in binary floating point. A slice that ends exactly where the next one on
  // its lane starts can then seem to end one ulp later, and DevTools drops the "overlapping"
  // neighbour. When the sum of the parsed values would overshoot the parsed end, write the
  // duration 0.1 ns shorter (a fourth decimal): invisible, and still exact to the nanosecond.
  int64_t dur_ns = end_ns - start_ns;
  double ts = static_cast<double>(start_ns) / 1000.0;
  double dur = static_cast<double>(dur_ns) / 1000.0;
  double end = static_cast<double>(end_ns) / 1000.0;
  if (dur_ns > 0 && ts + dur > end) {
    // (dur_ns - 0.1) ns in microseconds with four decimals: dur_ns * 10 - 1 tenths of a ns.
    int64_t tenths = dur_ns * 10 - 1;
    std::string digits = std::to_string(tenths);
    if (digits.size() < 5) digits.insert(0, 5 - digits.size(), '0');
    out += digits.substr(0, digits.size() - 4);
    out += '.';
    out += digits.substr(digits.size() - 4);
    return;
  }
  append_us_from_ns(out, dur_ns);
}

void append_us_from_ns(std::string& out, int64_t ns) {
  // Unsigned magnitude so that INT64_MIN does not overflow on negation.
  uint64_t mag = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  if (ns < 0) out += '-';
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof buf, mag / 1000);
  out.append(buf, res.ptr);
  unsigned frac = static_cast<unsigned>(mag % 1000);
  if (frac != 0) {
    char digits[4] = {static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                      static_cast<char>('0' + frac % 10), 0};
    int n = 3;
    while (digits[n - 1] == '0') --n;
    out += '.';
    out.append(digits, n);
  }
}

// The output file. gzip and plain share zlib's gz* API ("T" = transparent, no compression), so
// there is one write path. zlib's gzip header carries no timestamp or file name, which keeps
// compressed output byte-identical between runs.
class ChromeTraceWriter::Sink {
 public:
  // Writes `path`.partial and renames it to `path` on close(): a run that fails (or a writer
  // dropped before its run finished) leaves an earlier trace at `path` as it was.
  Sink(const std::string& path, bool gzip) : path_(path), partial_(path + ".partial") {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
      throw sim::UserError("chrome trace: cannot write '" + path + "': it is a directory");
    // open(2) ourselves: gzopen does not reliably report why it failed.
    int fd = ::open(partial_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      throw sim::UserError("chrome trace: cannot open '" + partial_ + "' for writing: " + std::strerror(errno));
    }
    file_ = gzdopen(fd, gzip ? "wb6" : "wbT");
    if (file_ == nullptr) {
      ::close(fd);
      throw sim::UserError("chrome trace: cannot open '" + path + "' for writing: out of memory in zlib");
    }
  }
  ~Sink() {
    if (file_ != nullptr) {  // never closed: the run did not finish; keep what was at path_
      gzclose(file_);
      ::unlink(partial_.c_str());
    }
  }

  void write(std::string_view data) {
    while (!data.empty()) {
      // gzwrite takes an unsigned length; chunk it so huge buffers cannot overflow it.
      unsigned n = static_cast<unsigned>(std::min<size_t>(data.size(), 1u << 30));
      errno = 0;
      if (gzwrite(file_, data.data(), n) != static_cast<int>(n)) fail("write");
      data.remove_prefix(n);
    }
  }

  void close() {
    errno = 0;
    int rc = gzclose(file_);
    file_ = nullptr;
    if (rc != Z_OK) {
      ::unlink(partial_.c_str());
      throw sim::UserError("chrome trace: cannot close '" + path_ + "': " +
                           (errno != 0 ? std::strerror(errno) : "zlib error " + std::to_string(rc)));
    }
    if (std::rename(partial_.c_str(), path_.c_str()) != 0)
      throw sim::UserError("chrome trace: cannot rename '" + partial_ + "' to '" + path_ + "': " + std::strerror(errno));
  }

 private:
  [[noreturn]] void fail(const char* what) {
    int zerr = Z_OK;
    const char* zmsg = gzerror(file_, &zerr);
    std::string why = zerr == Z_ERRNO ? std::strerror(errno) : std::string(zmsg);
    throw sim::UserError("chrome trace: cannot " + std::string(what) + " '" + path_ + "': " + why);
  }

  std::string path_, partial_;
  gzFile file_ = nullptr;
};

ChromeTraceWriter::ChromeTraceWriter(ChromeTraceOptions options) : options_(std::move(options)) {
  if (options_.display_time_unit != "ns" && options_.display_time_unit != "ms") {
    throw sim::UserError("chrome trace: display_time_unit must be \"ns\" or \"ms\", not \"" +
                         options_.display_time_unit + "\"");
  }
  if (!(options_.window_from < options_.window_to)) {
    throw sim::UserError("chrome trace: the time window [from, to) is empty");
  }
  bool gzip = options_.gzip.value_or(ends_with(options_.path, ".gz"));
  sink_ = std::make_unique<Sink>(options_.path, gzip);
  buf_.reserve(kFlushBytes + 4096);
}

// A writer destroyed before its run finished (the run failed) writes nothing: its partial file
// is removed and an earlier trace at the path stays (Sink).
ChromeTraceWriter::~ChromeTraceWriter() = default;

void ChromeTraceWriter::set_metadata(std::string_view key, std::string_view value) {
  std::string json;
  append_json_string(json, value);
  set_metadata_json(key, std::move(json));
}

void ChromeTraceWriter::set_metadata(std::string_view key, double value) {
  std::string json;
  append_json_number(json, value);
  set_metadata_json(key, std::move(json));
}

void ChromeTraceWriter::set_metadata_json(std::string_view key, std::string json_value) {
  SIM_ASSERT(!finished_, "ChromeTraceWriter::set_metadata after the run finished");
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(json_value);
      return;
    }
  }
  metadata_.emplace_back(std::string(key), std::move(json_value));
}

void ChromeTraceWriter::begin_event() {
  if (!header_written_) {
    buf_ += "{\"displayTimeUnit\":";
    append_json_string(buf_, options_.display_time_unit);
    buf_ += ",\"traceEvents\":[";
    header_written_ = true;
  }
  buf_ += events_written_ == 0 ? "\n" : ",\n";
}

void ChromeTraceWriter::end_event() {
  ++events_written_;
  if (buf_.size() >= kFlushBytes) {
    sink_->write(buf_);
    buf_.clear();
  }
}

void ChromeTraceWriter::on_process(uint32_t process, std::string_view name, int64_t sort_index) {
  if (finished_ || !keep_process(process)) return;
  begin_event();
  buf_ += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":";
  buf_ += std::to_string(process);
  buf_ += ",\"tid\":0,\"args\":{\"name\":";
  append_json_string(buf_, name);
  buf_ += "}}";
  end_event();
  begin_event();
  buf_ += "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":";
  buf_ += std::to_string(process);
  buf_ += ",\"tid\":0,\"args\":{\"sort_index\":";
  buf_ += std::to_string(sort_index);
  buf_ += "}}";
  end_event();
}

void ChromeTraceWriter::on_thread(uint32_t process, uint32_t thread, std::string_view name) {
  if (finished_ || !keep_process(process)) return;
  std::string ids = "\"pid\":" + std::to_string(process) + ",\"tid\":" + std::to_string(thread);
  begin_event();
  buf_ += "{\"ph\":\"M\",\"name\":\"thread_name\",";
  buf_ += ids;
  buf_ += ",\"args\":{\"name\":";
  append_json_string(buf_, name);
  buf_ += "}}";
  end_event();
  begin_event();
  buf_ += "{\"ph\":\"M\",\"name\":\"thread_sort_index\",";
  buf_ += ids;
  buf_ += ",\"args\":{\"sort_index\":";
  buf_ += std::to_string(thread);
  buf_ += "}}";
  end_event();
}

void ChromeTraceWriter::on_span(const sim::SpanRecord& r, const sim::NameTable& names) {
  if (finished_ || !keep_process(r.process)) return;
  SIM_ASSERT(r.start <= r.end, "span ends before it starts");
  // Overlap with [from, to); a zero-length span counts when its instant lies inside.
  bool overlaps = r.start < options_.window_to &&
                  (options_.window_from < r.end || options_.window_from <= r.start);
  if (!overlaps) return;
  begin_event();
  buf_ += "{\"ph\":\"X\"";
  if (r.category != sim::kNoName) {
    buf_ += ",\"cat\":";
    append_json_string(buf_, names.name(r.category));
  }
  buf_ += ",\"name\":";
  append_json_string(buf_, r.name != sim::kNoName ? std::string_view(names.name(r.name)) : std::string_view());
  buf_ += ",\"pid\":";
  buf_ += std::to_string(r.process);
  buf_ += ",\"tid\":";
  buf_ += std::to_string(r.thread);
  buf_ += ",\"ts\":";
  append_us_from_ns(buf_, r.start.count_ns());
  buf_ += ",\"dur\":";
  append_dur_us(buf_, r.start.count_ns(), r.end.count_ns());
  bool any_arg = false;
  for (size_t i = 0; i < r.args.size(); ++i) {
    const sim::SpanArg& a = r.args[i];
    if (a.key == sim::kNoName) continue;
    // A repeated key would make a JSON object with duplicate keys; the first one wins.
    bool repeated = false;
    for (size_t j = 0; j < i; ++j) repeated = repeated || r.args[j].key == a.key;
    if (repeated) continue;
    buf_ += any_arg ? "," : ",\"args\":{";
    any_arg = true;
    append_json_string(buf_, names.name(a.key));
    buf_ += ':';
    append_json_number(buf_, a.value);
  }
  if (any_arg) buf_ += '}';
  buf_ += '}';
  end_event();
}

void ChromeTraceWriter::write_counter(uint32_t process, std::string_view name, sim::Time time, double value) {
  begin_event();
  buf_ += "{\"ph\":\"C\",\"name\":";
  append_json_string(buf_, name);
  buf_ += ",\"pid\":";
  buf_ += std::to_string(process);
  buf_ += ",\"ts\":";
  append_us_from_ns(buf_, time.count_ns());
  buf_ += ",\"args\":{\"value\":";
  append_json_number(buf_, value);
  buf_ += "}}";
  end_event();
}

void ChromeTraceWriter::on_counter(const sim::CounterRecord& r, const sim::NameTable& names) {
  if (finished_ || !options_.write_counters || !keep_process(r.process)) return;
  if (r.time >= options_.window_to) return;
  std::string_view name = r.name != sim::kNoName ? std::string_view(names.name(r.name)) : std::string_view();
  auto track = std::make_pair(r.process, r.name);
  if (r.time < options_.window_from) {
    if (!started_counters_.count(track)) carried_counters_[track] = {std::string(name), r.value};
    return;
  }
  if (options_.window_from > sim::Time::ns(std::numeric_limits<int64_t>::min())) {
    if (started_counters_.insert(track).second) {
      auto it = carried_counters_.find(track);
      if (it != carried_counters_.end()) {
        if (r.time > options_.window_from) write_counter(r.process, name, options_.window_from, it->second.second);
        carried_counters_.erase(it);
      }
    }
  }
  write_counter(r.process, name, r.time, r.value);
}

void ChromeTraceWriter::append_track_time(uint32_t process, uint32_t thread, sim::Time time) {
  buf_ += ",\"pid\":";
  buf_ += std::to_string(process);
  buf_ += ",\"tid\":";
  buf_ += std::to_string(thread);
  buf_ += ",\"ts\":";
  append_us_from_ns(buf_, time.count_ns());
  buf_ += '}';
  end_event();
}

void ChromeTraceWriter::on_instant(const sim::InstantRecord& r, const sim::NameTable& names) {
  if (finished_ || !keep_process(r.process)) return;
  if (r.time < options_.window_from || r.time >= options_.window_to) return;
  begin_event();
  buf_ += "{\"ph\":\"i\",\"s\":\"t\",\"name\":";
  append_json_string(buf_, r.name != sim::kNoName ? std::string_view(names.name(r.name)) : std::string_view());
  append_track_time(r.process, r.thread, r.time);
}

void ChromeTraceWriter::on_flow(const sim::FlowRecord& r, const sim::NameTable& names) {
  if (finished_ || !keep_process(r.process)) return;
  if (r.time < options_.window_from || r.time >= options_.window_to) return;
  begin_event();
  buf_ += r.start ? "{\"ph\":\"s\",\"name\":" : "{\"ph\":\"f\",\"bp\":\"e\",\"name\":";
  append_json_string(buf_, r.name != sim::kNoName ? std::string_view(names.name(r.name)) : std::string_view());
  buf_ += ",\"cat\":\"flow\",\"id\":";
  buf_ += std::to_string(r.id);
  append_track_time(r.process, r.thread, r.time);
}

void ChromeTraceWriter::on_finish(sim::Time end) {
  if (finished_) return;
  finish(end);
}

void ChromeTraceWriter::finish(sim::Time end) {
  finished_ = true;
  // Counter tracks that never sampled inside the window still held a level during it (when the
  // run reached the window at all); std::map order keeps this deterministic.
  if (end > options_.window_from) {
    for (const auto& [track, carried] : carried_counters_) {
      write_counter(track.first, carried.first, options_.window_from, carried.second);
    }
  }
  carried_counters_.clear();
  if (!header_written_) {
    begin_event();  // writes the header; the separator it adds is harmless whitespace
  }
  buf_ += "\n],\"otherData\":{";
  for (size_t i = 0; i < metadata_.size(); ++i) {
    if (i != 0) buf_ += ',';
    append_json_string(buf_, metadata_[i].first);
    buf_ += ':';
    buf_ += metadata_[i].second;
  }
  buf_ += "}}\n";
  sink_->write(buf_);
  buf_.clear();
  sink_->close();
}

}  // namespace traces
