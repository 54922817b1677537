// Link utilisation counters: a transfer that saturates a GPU's NVLink is reported as utilisation
// 1 from its start and 0 from its end, on the trace process of that GPU.
#include <gtest/gtest.h>

#include <vector>

#include "sim/simulation.h"
#include "topology/catalog.h"
#include "topology/cluster_resources.h"
#include "topology/topology.h"

namespace topo {
namespace {

class CounterLog : public sim::Observer {
 public:
  void on_counter(const sim::CounterRecord& r, const sim::NameTable& names) override {
    records.push_back({names.name(r.name), r.process, r.time, r.value});
  }
  struct Rec {
    std::string name;
    uint32_t process;
    sim::Time time;
    double value;
  };
  std::vector<Rec> records;
};

TEST(TopologyLinkCounters, SaturatedLinkReportsOneThenZero) {
  auto t = build_scale_up(2, ScaleUpSpec{ScaleUpKind::kNvSwitch, 100e9, sim::Time::zero()});
  sim::Simulation s(1);
  CounterLog log;
  s.observers().attach(&log);
  HardwareProfile o;
  o.scale_up_efficiency = 1.0;
  ClusterResources res(s, t, find_gpu("h100-sxm"), o);
  std::vector<uint32_t> traced{0};
  res.enable_link_counters(traced);
  Route r;
  t.route(0, 1, 0, r);
  std::vector<sim::Use> uses;
  for (uint32_t l : r.links) uses.push_back({res.link(l), 1.0});
  s.fluid().start(1e9, uses, sim::kUnbounded, nullptr, 0);  // 1 GB at 100 GB/s: 10 ms
  s.run();
  // The route is gpu0 -> switch -> gpu1: the up link starts at gpu0 (watched), the down link ends
  // at gpu1 (not traced). So one counter: 1 at t = 0, 0 at t = 1e9 B / 100e9 B/s = 10 ms.
  ASSERT_EQ(log.records.size(), 2u);
  EXPECT_EQ(log.records[0].process, 0u);
  EXPECT_EQ(log.records[0].time, sim::Time::zero());
  EXPECT_DOUBLE_EQ(log.records[0].value, 1.0);
  EXPECT_EQ(log.records[1].time, sim::Time::ms(10));
  EXPECT_DOUBLE_EQ(log.records[1].value, 0.0);
  EXPECT_NE(log.records[0].name.find("gpu0->"), std::string::npos) << log.records[0].name;
}

}  // namespace
}  // namespace topo

namespace topo {
namespace {

TEST(TopologyConstraintNames, MadeOnDemandFromTheTopology) {
  // Two GPUs on one NVSwitch: links gpu0->switch, switch->gpu0, ... as the topology lists them,
  // then each GPU's SM pool and HBM; no name is stored, each is made when asked.
  auto t = build_scale_up(2, ScaleUpSpec{ScaleUpKind::kNvSwitch, 100e9, sim::Time::zero()});
  sim::Simulation s(1);
  {
    ClusterResources res(s, t, find_gpu("h100-sxm"), HardwareProfile{});
    for (uint32_t l = 0; l < t.links().size(); ++l)
      EXPECT_EQ(s.fluid().name(res.link(l)), t.vertex_name(t.links()[l].src) + "->" + t.vertex_name(t.links()[l].dst));
    EXPECT_EQ(s.fluid().name(res.sm_pool(1)), "gpu1 SMs");
    EXPECT_EQ(s.fluid().name(res.hbm(0)), "gpu0 HBM");
  }
  // Once the resources are gone their constraints fall back to their ids.
  EXPECT_EQ(s.fluid().name(sim::ConstraintId(0)), "#0");
}

}  // namespace
}  // namespace topo
