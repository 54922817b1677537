// Tests of traces/chrome/chrome_trace.h: the streaming Chrome trace writer. Expected values are
// worked out by hand from the records each test emits.
#include "traces/chrome/chrome_trace.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "sim/error.h"

namespace {

using nlohmann::json;
using sim::Time;
using traces::ChromeTraceOptions;
using traces::ChromeTraceWriter;

// A fresh directory per test under GoogleTest's temp dir.
std::string temp_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "chrome_trace_test" /
                              (std::string(info->test_suite_name()) + "." + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string read_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr);
  if (f == nullptr) return {};
  std::string out;
  char buf[4096];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, n);
  EXPECT_EQ(n, 0);
  gzclose(f);
  return out;
}

// The hand-checked run: two ranks, three streams, three spans, two counter samples, an instant.
//   p0 "rank 0" (sort 0): t0 "compute", t1 "tp";  p1 "rank 1" (sort 1): t0 "compute"
//   span p0/t0 gemm [1234567, 2234567) ns   cat compute  args bytes=1048576 flops=1.5e12 eff=0.1
//   span p0/t1 allreduce [500, 3000500) ns  cat comm     args bytes=2.5
//   span p1/t0 gemm [0, 999) ns             cat compute  no args
//   counter p0 "hbm util" 0.25 at 0, 0.75 at 2000000 ns
//   instant p1/t0 "link failure" at 1500000 ns
void emit_small_run(sim::Observer& w) {
  sim::ObserverBus bus;
  bus.attach(&w);
  auto& n = bus.names();
  uint32_t gemm = n.intern("gemm"), compute = n.intern("compute"), bytes = n.intern("bytes"),
           flops = n.intern("flops"), eff = n.intern("eff"), allreduce = n.intern("allreduce"),
           comm = n.intern("comm"), hbm = n.intern("hbm util"), failure = n.intern("link failure");
  bus.declare_process(0, "rank 0", 0);
  bus.declare_process(1, "rank 1", 1);
  bus.declare_thread(0, 0, "compute");
  bus.declare_thread(0, 1, "tp");
  bus.declare_thread(1, 0, "compute");
  bus.counter({.process = 0, .name = hbm, .time = Time::ns(0), .value = 0.25});
  bus.span({.process = 1, .thread = 0, .name = gemm, .category = compute, .start = Time::ns(0), .end = Time::ns(999)});
  bus.instant({.process = 1, .thread = 0, .name = failure, .time = Time::ns(1500000)});
  bus.counter({.process = 0, .name = hbm, .time = Time::ns(2000000), .value = 0.75});
  sim::SpanRecord s{.process = 0, .thread = 0, .name = gemm, .category = compute,
                    .start = Time::ns(1234567), .end = Time::ns(2234567)};
  s.args = {sim::SpanArg{bytes, 1048576.0}, sim::SpanArg{flops, 1.5e12}, sim::SpanArg{eff, 0.1}};
  bus.span(s);
  sim::SpanRecord c{.process = 0, .thread = 1, .name = allreduce, .category = comm,
                    .start = Time::ns(500), .end = Time::ns(3000500)};
  c.args[1] = {bytes, 2.5};  // args[0] and [2] unused
  bus.span(c);
  bus.finish(Time::ns(3000500));
}

std::vector<json> events_with(const json& doc, const std::string& ph) {
  std::vector<json> out;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == ph) out.push_back(e);
  }
  return out;
}

const json* find_event(const json& doc, const std::string& ph, const std::string& name, int pid) {
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == ph && e.at("name") == name && e.at("pid") == pid) return &e;
  }
  return nullptr;
}

TEST(ChromeTraceWriter, WritesHandCheckedEvents) {
  std::string path = temp_dir() + "/run.json";
  {
    ChromeTraceWriter w({.path = path});
    w.set_metadata("scenario", "small");
    w.set_metadata("ranks", 2);
    w.set_metadata("step_s", 0.5);
    emit_small_run(w);
    EXPECT_EQ(w.events_written(), 16u);  // 4 process + 6 thread metadata, 3 X, 2 C, 1 i
  }
  json doc = json::parse(read_file(path));
  EXPECT_EQ(doc.at("displayTimeUnit"), "ns");
  EXPECT_EQ(doc.at("otherData"), json({{"scenario", "small"}, {"ranks", 2}, {"step_s", 0.5}}));
  ASSERT_EQ(doc.at("traceEvents").size(), 16u);

  // Metadata.
  auto meta = events_with(doc, "M");
  ASSERT_EQ(meta.size(), 10u);
  EXPECT_EQ(meta[0], json::parse(R"({"ph":"M","name":"process_name","pid":0,"tid":0,"args":{"name":"rank 0"}})"));
  EXPECT_EQ(meta[1], json::parse(R"({"ph":"M","name":"process_sort_index","pid":0,"tid":0,"args":{"sort_index":0}})"));
  EXPECT_EQ(meta[2]["args"]["name"], "rank 1");
  EXPECT_EQ(meta[3]["args"]["sort_index"], 1);
  EXPECT_EQ(meta[4], json::parse(R"({"ph":"M","name":"thread_name","pid":0,"tid":0,"args":{"name":"compute"}})"));
  EXPECT_EQ(meta[6], json::parse(R"({"ph":"M","name":"thread_name","pid":0,"tid":1,"args":{"name":"tp"}})"));
  EXPECT_EQ(meta[7], json::parse(R"({"ph":"M","name":"thread_sort_index","pid":0,"tid":1,"args":{"sort_index":1}})"));
  EXPECT_EQ(meta[8]["pid"], 1);
  EXPECT_EQ(meta[8]["args"]["name"], "compute");

  // Complete events: ts/dur in microseconds.
  const json* g0 = find_event(doc, "X", "gemm", 0);
  ASSERT_NE(g0, nullptr);
  EXPECT_EQ(g0->at("cat"), "compute");
  EXPECT_EQ(g0->at("tid"), 0);
  EXPECT_DOUBLE_EQ(g0->at("ts").get<double>(), 1234.567);
  EXPECT_EQ(g0->at("dur"), 1000);
  EXPECT_EQ(g0->at("args"), json({{"bytes", 1048576}, {"flops", 1500000000000}, {"eff", 0.1}}));
  const json* ar = find_event(doc, "X", "allreduce", 0);
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->at("tid"), 1);
  EXPECT_EQ(ar->at("cat"), "comm");
  EXPECT_DOUBLE_EQ(ar->at("ts").get<double>(), 0.5);
  EXPECT_EQ(ar->at("dur"), 3000);
  EXPECT_EQ(ar->at("args"), json({{"bytes", 2.5}}));
  const json* g1 = find_event(doc, "X", "gemm", 1);
  ASSERT_NE(g1, nullptr);
  EXPECT_EQ(g1->at("ts"), 0);
  EXPECT_DOUBLE_EQ(g1->at("dur").get<double>(), 0.999);
  EXPECT_FALSE(g1->contains("args"));

  // Counters and the instant.
  auto counters = events_with(doc, "C");
  ASSERT_EQ(counters.size(), 2u);
  EXPECT_EQ(counters[0], json::parse(R"({"ph":"C","name":"hbm util","pid":0,"ts":0,"args":{"value":0.25}})"));
  EXPECT_EQ(counters[1], json::parse(R"({"ph":"C","name":"hbm util","pid":0,"ts":2000,"args":{"value":0.75}})"));
  auto instants = events_with(doc, "i");
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(instants[0],
            json::parse(R"({"ph":"i","s":"t","name":"link failure","pid":1,"tid":0,"ts":1500})"));
}

TEST(ChromeTraceWriter, WritesExactDecimalText) {
  std::string path = temp_dir() + "/run.json";
  {
    ChromeTraceWriter w({.path = path});
    emit_small_run(w);
  }
  std::string text = read_file(path);
  // Exact decimal renderings of the integer nanoseconds, no floating-point noise.
  EXPECT_NE(text.find(R"("ts":1234.567,"dur":1000,)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("ts":0.5,"dur":3000,)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("ts":0,"dur":0.999})"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("args":{"bytes":1048576,"flops":1500000000000,"eff":0.1})"), std::string::npos) << text;
  EXPECT_EQ(text.rfind("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", 0), 0u) << text;
  // otherData last: what is known only at the end of the run can go there.
  EXPECT_EQ(text.substr(text.size() - 19), "\n],\"otherData\":{}}\n");
}

TEST(ChromeTraceFormat, MicrosecondsFromNanoseconds) {
  auto us = [](int64_t ns) {
    std::string s;
    traces::append_us_from_ns(s, ns);
    return s;
  };
  EXPECT_EQ(us(0), "0");
  EXPECT_EQ(us(1), "0.001");
  EXPECT_EQ(us(10), "0.01");
  EXPECT_EQ(us(999), "0.999");
  EXPECT_EQ(us(1000), "1");
  EXPECT_EQ(us(1500), "1.5");
  EXPECT_EQ(us(1234567), "1234.567");
  EXPECT_EQ(us(1234560), "1234.56");
  EXPECT_EQ(us(-1), "-0.001");
  EXPECT_EQ(us(-2500), "-2.5");
  EXPECT_EQ(us(std::numeric_limits<int64_t>::max()), "9223372036854775.807");
  EXPECT_EQ(us(std::numeric_limits<int64_t>::min()), "-9223372036854775.808");
}

TEST(ChromeTraceFormat, NumbersAreDeterministicAndShortest) {
  auto num = [](double v) {
    std::string s;
    traces::append_json_number(s, v);
    return s;
  };
  EXPECT_EQ(num(0.0), "0");
  EXPECT_EQ(num(-0.0), "0");
  EXPECT_EQ(num(42.0), "42");
  EXPECT_EQ(num(-7.0), "-7");
  EXPECT_EQ(num(1e15), "1000000000000000");
  EXPECT_EQ(num(0.1), "0.1");
  EXPECT_EQ(num(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(num(2.5e-7), "2.5e-07");
  EXPECT_EQ(num(1e20), "1e+20");
  EXPECT_EQ(num(std::numeric_limits<double>::quiet_NaN()), "\"NaN\"");
  EXPECT_EQ(num(std::numeric_limits<double>::infinity()), "\"Infinity\"");
  EXPECT_EQ(num(-std::numeric_limits<double>::infinity()), "\"-Infinity\"");
  // Every rendering reads back to the same double.
  for (double v : {0.1, 1.0 / 3.0, 2.5e-7, 1e20, 123456.789, 9007199254740993.0, -1e-300}) {
    EXPECT_EQ(json::parse(num(v)).get<double>(), v) << num(v);
  }
}

TEST(ChromeTraceWriter, GzipRoundTrip) {
  std::string dir = temp_dir();
  {
    ChromeTraceWriter plain({.path = dir + "/run.json"});
    emit_small_run(plain);
    ChromeTraceWriter gz({.path = dir + "/run.json.gz"});
    emit_small_run(gz);
  }
  std::string raw = read_file(dir + "/run.json.gz");
  ASSERT_GE(raw.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(raw[0]), 0x1f);  // gzip magic
  EXPECT_EQ(static_cast<unsigned char>(raw[1]), 0x8b);
  std::string unzipped = read_gz(dir + "/run.json.gz");
  EXPECT_EQ(unzipped, read_file(dir + "/run.json"));
  EXPECT_EQ(json::parse(unzipped).at("traceEvents").size(), 16u);

  // The option overrides the suffix.
  {
    ChromeTraceWriter w({.path = dir + "/forced.json", .gzip = true});
    emit_small_run(w);
  }
  EXPECT_EQ(static_cast<unsigned char>(read_file(dir + "/forced.json")[0]), 0x1f);
  EXPECT_EQ(read_gz(dir + "/forced.json"), unzipped);
}

TEST(ChromeTraceWriter, FiltersByProcess) {
  std::string path = temp_dir() + "/run.json";
  {
    ChromeTraceWriter w({.path = path, .processes = {1}});
    emit_small_run(w);
    EXPECT_EQ(w.events_written(), 6u);  // 2 process + 2 thread metadata, 1 X, 1 i
  }
  json doc = json::parse(read_file(path));
  ASSERT_EQ(doc.at("traceEvents").size(), 6u);
  for (const auto& e : doc.at("traceEvents")) EXPECT_EQ(e.at("pid"), 1) << e;
  EXPECT_NE(find_event(doc, "X", "gemm", 1), nullptr);
  EXPECT_NE(find_event(doc, "i", "link failure", 1), nullptr);
  EXPECT_EQ(find_event(doc, "M", "process_name", 1)->at("args").at("name"), "rank 1");
}

TEST(ChromeTraceWriter, FiltersByTimeWindow) {
  std::string dir = temp_dir();
  {
    // [1500, 2500) us: both p0 spans overlap it, the p1 span [0, 0.999) us does not; the instant at
    // exactly 1500 us is inside; the counter's level 0.25 from before the window is repeated at
    // 1500 us, then its sample at 2000 us follows.
    ChromeTraceWriter w({.path = dir + "/mid.json", .window_from = Time::us(1500), .window_to = Time::us(2500)});
    emit_small_run(w);
  }
  json mid = json::parse(read_file(dir + "/mid.json"));
  EXPECT_EQ(events_with(mid, "M").size(), 10u);  // metadata is not time-filtered
  auto spans = events_with(mid, "X");
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_NE(find_event(mid, "X", "gemm", 0), nullptr);
  EXPECT_NE(find_event(mid, "X", "allreduce", 0), nullptr);
  EXPECT_EQ(find_event(mid, "X", "allreduce", 0)->at("dur"), 3000);  // kept whole, not clipped
  EXPECT_EQ(events_with(mid, "i").size(), 1u);
  auto counters = events_with(mid, "C");
  ASSERT_EQ(counters.size(), 2u);
  EXPECT_EQ(counters[0].at("ts"), 1500);
  EXPECT_EQ(counters[0].at("args").at("value"), 0.25);
  EXPECT_EQ(counters[1].at("ts"), 2000);
  EXPECT_EQ(counters[1].at("args").at("value"), 0.75);

  {
    // [2500, 4000) us: only the allreduce overlaps; the instant is before; the counter has no
    // sample inside, so its last level 0.75 is written at 2500 us when the run finishes.
    ChromeTraceWriter w({.path = dir + "/late.json", .window_from = Time::us(2500), .window_to = Time::us(4000)});
    emit_small_run(w);
  }
  json late = json::parse(read_file(dir + "/late.json"));
  ASSERT_EQ(events_with(late, "X").size(), 1u);
  EXPECT_EQ(events_with(late, "X")[0].at("name"), "allreduce");
  EXPECT_TRUE(events_with(late, "i").empty());
  ASSERT_EQ(events_with(late, "C").size(), 1u);
  EXPECT_EQ(events_with(late, "C")[0],
            json::parse(R"({"ph":"C","name":"hbm util","pid":0,"ts":2500,"args":{"value":0.75}})"));

  {
    // [0, 1) us: the p1 gemm [0, 0.999) and the allreduce starting at 0.5 us; the counter sample
    // at exactly 0 is inside, so nothing is carried.
    ChromeTraceWriter w({.path = dir + "/early.json", .window_from = Time::zero(), .window_to = Time::us(1)});
    emit_small_run(w);
  }
  json early = json::parse(read_file(dir + "/early.json"));
  EXPECT_EQ(events_with(early, "X").size(), 2u);
  EXPECT_NE(find_event(early, "X", "gemm", 1), nullptr);
  ASSERT_EQ(events_with(early, "C").size(), 1u);
  EXPECT_EQ(events_with(early, "C")[0].at("ts"), 0);
}

TEST(ChromeTraceWriter, CountersCanBeOmitted) {
  std::string path = temp_dir() + "/run.json";
  {
    ChromeTraceWriter w({.path = path, .write_counters = false});
    emit_small_run(w);
  }
  json doc = json::parse(read_file(path));
  EXPECT_TRUE(events_with(doc, "C").empty());
  EXPECT_EQ(doc.at("traceEvents").size(), 14u);
}

TEST(ChromeTraceWriter, EscapesJsonStrings) {
  std::string path = temp_dir() + "/run.json";
  const std::string nasty = "q\"b\\s/n\nt\tr\rc\x01\x1f del\x7f";
  const std::string utf8 = "\xC2\xB5s \xE2\x9C\x93 \xF0\x9F\x9A\x80";  // "µs ✓ 🚀"
  const std::string broken = std::string("a\xFF") + "b\xC3" + "\xED\xA0\x80";  // bad byte, cut, surrogate
  {
    ChromeTraceWriter w({.path = path});
    w.set_metadata("key \"with\" quotes", nasty);
    sim::ObserverBus bus;
    bus.attach(&w);
    bus.declare_process(3, utf8, -5);
    bus.declare_thread(3, 7, broken);
    sim::SpanRecord s{.process = 3, .thread = 7, .name = bus.names().intern(nasty),
                      .category = bus.names().intern(utf8), .start = Time::ns(10), .end = Time::ns(20)};
    s.args[0] = {bus.names().intern(nasty), 1.0};
    bus.span(s);
    bus.finish(Time::ns(20));
  }
  std::string text = read_file(path);
  EXPECT_NE(text.find(R"(q\"b\\s/n\nt\tr\rc\u0001\u001f del)"), std::string::npos) << text;
  EXPECT_NE(text.find(utf8), std::string::npos);  // passed through unescaped
  json doc = json::parse(text);
  EXPECT_EQ(doc.at("otherData").at("key \"with\" quotes"), nasty);
  EXPECT_EQ(find_event(doc, "M", "process_name", 3)->at("args").at("name"), utf8);
  EXPECT_EQ(find_event(doc, "M", "process_sort_index", 3)->at("args").at("sort_index"), -5);
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(find_event(doc, "M", "thread_name", 3)->at("args").at("name"),
            "a" + fffd + "b" + fffd + fffd + fffd + fffd);
  const json* x = find_event(doc, "X", nasty, 3);
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->at("cat"), utf8);
  EXPECT_EQ(x->at("args").at(nasty), 1);
}

TEST(ChromeTraceWriter, EmptyTraceIsValidJson) {
  std::string dir = temp_dir();
  {
    ChromeTraceWriter w({.path = dir + "/finished.json"});
    w.on_finish(Time::zero());
  }
  {
    ChromeTraceWriter w({.path = dir + "/finished.json.gz"});
    w.on_finish(Time::zero());
  }
  {
    // A writer dropped before its run finished (the run failed) leaves the earlier file as it was
    // and no partial file behind.
    std::ofstream(dir + "/destroyed.json") << "earlier";
    ChromeTraceWriter w({.path = dir + "/destroyed.json"});
  }
  EXPECT_EQ(read_file(dir + "/destroyed.json"), "earlier");
  EXPECT_FALSE(std::filesystem::exists(dir + "/destroyed.json.partial"));
  {
    ChromeTraceWriter w({.path = dir + "/filtered.json", .processes = {42}});
    w.set_metadata("note", "nothing kept");
    emit_small_run(w);
    EXPECT_EQ(w.events_written(), 0u);
  }
  json a = json::parse(read_file(dir + "/finished.json"));
  EXPECT_EQ(a, json::parse(R"({"displayTimeUnit":"ns","otherData":{},"traceEvents":[]})"));
  json b = json::parse(read_gz(dir + "/finished.json.gz"));
  EXPECT_EQ(b, a);
  json c = json::parse(read_file(dir + "/filtered.json"));
  EXPECT_TRUE(c.at("traceEvents").empty());
  EXPECT_EQ(c.at("otherData").at("note"), "nothing kept");
}

// What is known only when the run ends (a run's summary and result) can still go into otherData
// after the events were written, up to the finish.
TEST(ChromeTraceWriter, MetadataSetAfterTheEventsIsWrittenAtTheFinish) {
  const std::string path = temp_dir() + "/late.json";
  {
    ChromeTraceWriter w({.path = path});
    w.set_metadata("scenario", "late");
    sim::ObserverBus bus;
    bus.attach(&w);
    bus.declare_process(0, "rank 0", 0);
    w.set_metadata("summary", "step 1.5 s");
    w.set_metadata_json("result", R"({"step_time_s":1.5,"parts":[1,2]})");
    bus.finish(Time::ns(10));
  }
  const json doc = json::parse(read_file(path));
  EXPECT_EQ(doc.at("traceEvents").size(), 2u);  // process_name and process_sort_index
  EXPECT_EQ(doc.at("otherData"), json::parse(R"({"scenario":"late","summary":"step 1.5 s",
                                                  "result":{"step_time_s":1.5,"parts":[1,2]}})"));
}

TEST(ChromeTraceWriter, IdenticalRunsGiveIdenticalBytes) {
  std::string dir = temp_dir();
  for (const char* ext : {".json", ".json.gz"}) {
    for (int run = 0; run < 2; ++run) {
      ChromeTraceWriter w({.path = dir + "/run" + std::to_string(run) + ext});
      w.set_metadata("seed", 7);
      w.set_metadata("seed", uint64_t{18446744073709551615u});  // replaces, keeps position
      w.set_metadata("name", "det");
      emit_small_run(w);
    }
    std::string a = read_file(dir + "/run0" + ext), b = read_file(dir + "/run1" + ext);
    EXPECT_FALSE(a.empty());
    EXPECT_EQ(a, b) << ext;
  }
  std::string text = read_file(dir + "/run0.json");
  const std::string tail = R"(],"otherData":{"seed":18446744073709551615,"name":"det"}})"
                           "\n";
  EXPECT_EQ(text.substr(text.size() - tail.size()), tail) << text;
}

TEST(ChromeTraceWriter, StreamsLargeTraces) {
  // Enough events to pass the internal flush threshold many times.
  std::string path = temp_dir() + "/big.json.gz";
  constexpr int kSpans = 100000;
  {
    ChromeTraceWriter w({.path = path, .display_time_unit = "ms"});
    sim::ObserverBus bus;
    bus.attach(&w);
    uint32_t op = bus.names().intern("op");
    bus.declare_process(0, "rank 0", 0);
    for (int i = 0; i < kSpans; ++i) {
      bus.span({.process = 0, .thread = static_cast<uint32_t>(i % 4), .name = op,
                .start = Time::ns(int64_t{i} * 1000), .end = Time::ns(int64_t{i} * 1000 + 999)});
    }
    bus.finish(Time::ns(int64_t{kSpans} * 1000));
    EXPECT_EQ(w.events_written(), kSpans + 2u);
  }
  json doc = json::parse(read_gz(path));
  EXPECT_EQ(doc.at("displayTimeUnit"), "ms");
  ASSERT_EQ(doc.at("traceEvents").size(), kSpans + 2u);
  const json& last = doc.at("traceEvents").back();
  EXPECT_DOUBLE_EQ(last.at("ts").get<double>(), (kSpans - 1) * 1.0);
  EXPECT_EQ(last.at("tid"), (kSpans - 1) % 4);
  EXPECT_FALSE(last.contains("cat"));  // no category given
}

TEST(ChromeTraceWriter, UnwritablePathThrowsNamingIt) {
  std::string path = temp_dir() + "/no/such/dir/trace.json";
  try {
    ChromeTraceWriter w({.path = path});
    FAIL() << "expected sim::UserError";
  } catch (const sim::UserError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
  }
  // A directory is not a file either.
  EXPECT_THROW(ChromeTraceWriter({.path = temp_dir()}), sim::UserError);
}

TEST(ChromeTraceWriter, RejectsBadOptions) {
  std::string dir = temp_dir();
  EXPECT_THROW(ChromeTraceWriter({.path = dir + "/a.json", .display_time_unit = "s"}), sim::UserError);
  EXPECT_THROW(ChromeTraceWriter({.path = dir + "/b.json", .window_from = Time::us(5), .window_to = Time::us(5)}),
               sim::UserError);
}

TEST(ChromeTraceWriter, IgnoresRecordsAfterFinish) {
  std::string path = temp_dir() + "/run.json";
  ChromeTraceWriter w({.path = path});
  emit_small_run(w);  // ends with on_finish
  sim::NameTable names;
  w.on_instant({.process = 0, .thread = 0, .name = names.intern("late"), .time = Time::ns(1)}, names);
  w.on_finish(Time::ns(2));
  EXPECT_EQ(w.events_written(), 16u);
  EXPECT_EQ(json::parse(read_file(path)).at("traceEvents").size(), 16u);
}

}  // namespace

namespace traces {
namespace {

TEST(ChromeTraceFormat, DurationNeverOvershootsTheEndInFloatingPoint) {
  // 1000.003 us + 0.003 us: in binary floating point 1000.003 + 0.003 > 1000.006 (checked by hand
  // in Python), so a viewer would see this slice overlap one starting at 1000.006 us. The writer
  // then gives 0.0029 us; in the common case the plain three-decimal value.
  std::string out;
  append_dur_us(out, 1000003, 1000006);
  EXPECT_EQ(out, "0.0029");
  EXPECT_LE(1000.003 + 0.0029, 1000.006);
  out.clear();
  append_dur_us(out, 1000000, 1002500);  // 1000 + 2.5 is exact
  EXPECT_EQ(out, "2.5");
  out.clear();
  append_dur_us(out, 5, 5);
  EXPECT_EQ(out, "0");
}

}  // namespace
}  // namespace traces
