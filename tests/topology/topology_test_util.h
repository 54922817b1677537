// Shared checks for the topology tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "topology/topology.h"

namespace topo::testing {

// A route is a chain of links from src to dst whose latency is the sum of theirs.
inline void expect_valid_route(const Topology& t, uint32_t s, uint32_t d, const Route& r) {
  const auto& links = t.links();
  if (s == d) {
    EXPECT_TRUE(r.links.empty());
    return;
  }
  ASSERT_FALSE(r.links.empty()) << s << "->" << d;
  sim::Time total = sim::Time::zero();
  uint32_t at = s;
  for (uint32_t l : r.links) {
    ASSERT_LT(l, links.size());
    ASSERT_EQ(links[l].src, at) << "route " << s << "->" << d << " breaks at link " << l;
    at = links[l].dst;
    total += links[l].latency;
  }
  EXPECT_EQ(at, d);
  EXPECT_EQ(r.latency, total);
}

}  // namespace topo::testing
