// Tests of workloads/schedules/pipeline_order.h: per-rank orders of GPipe, 1F1B, interleaved
// 1F1B and ZB-H1, and the reference list scheduler. Every expected order and makespan is worked
// out by hand in the comment next to it or taken from the published bubble formula
// (Narayanan et al. SC'21 §2.2; Qi et al., arXiv 2401.10241).
#include "workloads/schedules/pipeline_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "sim/error.h"

namespace wl {
namespace {

using PS = PipelineSchedule;

PipelineWork F(int32_t mb, int32_t c = 0) { return {PassKind::kForward, mb, c}; }
PipelineWork Bf(int32_t mb, int32_t c = 0) { return {PassKind::kBackward, mb, c}; }
PipelineWork Bi(int32_t mb) { return {PassKind::kBackwardInput, mb, 0}; }
PipelineWork Wg(int32_t mb) { return {PassKind::kBackwardWeight, mb, 0}; }

std::string show(const std::vector<PipelineWork>& order) {
  std::string out;
  for (const PipelineWork& w : order) {
    static const char* kNames[] = {"F", "Bf", "B", "W"};
    out += kNames[static_cast<int>(w.pass)] + std::to_string(w.micro_batch) + "." +
           std::to_string(w.chunk) + " ";
  }
  return out;
}

// Peak of (forwards done - W done) along an order: activations still referenced by a pending W.
int32_t peak_until_weight(const std::vector<PipelineWork>& order) {
  int32_t live = 0, peak = 0;
  for (const PipelineWork& w : order) {
    if (w.pass == PassKind::kForward) peak = std::max(peak, ++live);
    if (w.pass == PassKind::kBackwardWeight) --live;
  }
  return peak;
}

std::string error_of(const PipelineParams& params) {
  try {
    validate_pipeline(params);
  } catch (const sim::ConfigError& e) {
    return e.what();
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// Contents: every (pass, micro-batch, chunk) exactly once on every rank.

TEST(PipelineOrderContents, EveryItemExactlyOnce) {
  std::vector<PipelineParams> cases;
  for (int32_t p : {1, 2, 3, 4, 8}) {
    for (int32_t m : {1, 2, 3, 4, 7, 8, 16}) {
      cases.push_back({PS::kGPipe, p, m, 1});
      cases.push_back({PS::kOneFOneB, p, m, 1});
      cases.push_back({PS::kZeroBubbleH1, p, m, 1});
      for (int32_t v : {1, 2, 3, 4}) {
        if (m % p == 0) cases.push_back({PS::kInterleaved1F1B, p, m, v});
      }
    }
  }
  for (const PipelineParams& pp : cases) {
    const bool zb = pp.schedule == PS::kZeroBubbleH1;
    std::vector<PipelineWork> expected;
    for (int32_t mb = 0; mb < pp.micro_batches; ++mb) {
      for (int32_t c = 0; c < pp.virtual_stages; ++c) {
        expected.push_back(F(mb, c));
        if (zb) {
          expected.push_back(Bi(mb));
          expected.push_back(Wg(mb));
        } else {
          expected.push_back(Bf(mb, c));
        }
      }
    }
    auto key = [](const PipelineWork& w) {
      return std::tuple(static_cast<int>(w.pass), w.micro_batch, w.chunk);
    };
    auto less = [&](const PipelineWork& a, const PipelineWork& b) { return key(a) < key(b); };
    std::sort(expected.begin(), expected.end(), less);
    for (int32_t s = 0; s < pp.stages; ++s) {
      std::vector<PipelineWork> got = pipeline_order(pp, s);
      std::sort(got.begin(), got.end(), less);
      EXPECT_EQ(got, expected) << "schedule " << static_cast<int>(pp.schedule) << " p="
                               << pp.stages << " m=" << pp.micro_batches
                               << " v=" << pp.virtual_stages << " stage " << s;
    }
    // ...and the timing model runs them without deadlock.
    EXPECT_NO_THROW(simulate_pipeline_makespan(pp, 1.0, 2.0, 0.5));
  }
}

TEST(PipelineOrderContents, GlobalChunkIsMegatronInterleaving) {
  const PipelineParams pp{PS::kInterleaved1F1B, 4, 8, 3};
  // Rank s holds model chunks s, s+p, s+2p.
  EXPECT_EQ(global_chunk(pp, 0, 0), 0);
  EXPECT_EQ(global_chunk(pp, 1, 0), 1);
  EXPECT_EQ(global_chunk(pp, 3, 0), 3);
  EXPECT_EQ(global_chunk(pp, 0, 1), 4);
  EXPECT_EQ(global_chunk(pp, 2, 2), 10);
}

// ---------------------------------------------------------------------------------------------
// Orders spelled out by hand.

// GPipe, p = 2, m = 3: all forwards, then the backwards last-in first-out.
TEST(PipelineOrderGPipe, OrderByHand) {
  const PipelineParams pp{PS::kGPipe, 2, 3, 1};
  const std::vector<PipelineWork> want = {F(0), F(1), F(2), Bf(2), Bf(1), Bf(0)};
  EXPECT_EQ(pipeline_order(pp, 0), want);
  EXPECT_EQ(pipeline_order(pp, 1), want);
}

// 1F1B, p = 4, m = 8, stage 0: warm-up p-0-1 = 3 forwards (F0 F1 F2); steady state m-3 = 5
// pairs (F3 B0)(F4 B1)(F5 B2)(F6 B3)(F7 B4); cool-down B5 B6 B7.
TEST(PipelineOrder1F1B, Stage0ByHand) {
  const PipelineParams pp{PS::kOneFOneB, 4, 8, 1};
  const std::vector<PipelineWork> want = {F(0),  F(1),  F(2), F(3),  Bf(0), F(4),
                                          Bf(1), F(5),  Bf(2), F(6), Bf(3), F(7),
                                          Bf(4), Bf(5), Bf(6), Bf(7)};
  EXPECT_EQ(pipeline_order(pp, 0), want) << show(pipeline_order(pp, 0));
}

// Stage 2 of the same: warm-up 1 (F0), pairs (F1 B0) ... (F7 B6), cool-down B7.
// Stage 3 (last): no warm-up, F B alternate from the start.
TEST(PipelineOrder1F1B, LaterStagesByHand) {
  const PipelineParams pp{PS::kOneFOneB, 4, 8, 1};
  std::vector<PipelineWork> want2 = {F(0)};
  for (int32_t i = 0; i < 7; ++i) {
    want2.push_back(F(i + 1));
    want2.push_back(Bf(i));
  }
  want2.push_back(Bf(7));
  EXPECT_EQ(pipeline_order(pp, 2), want2) << show(pipeline_order(pp, 2));
  std::vector<PipelineWork> want3;
  for (int32_t i = 0; i < 8; ++i) {
    want3.push_back(F(i));
    want3.push_back(Bf(i));
  }
  EXPECT_EQ(pipeline_order(pp, 3), want3) << show(pipeline_order(pp, 3));
}

// Fewer micro-batches than stages: p = 4, m = 2, stage 0 warm-up is capped at m = 2, so the
// order degenerates to GPipe's shape: F0 F1 B0 B1.
TEST(PipelineOrder1F1B, WarmupCappedByMicroBatches) {
  const PipelineParams pp{PS::kOneFOneB, 4, 2, 1};
  const std::vector<PipelineWork> want = {F(0), F(1), Bf(0), Bf(1)};
  EXPECT_EQ(pipeline_order(pp, 0), want);
}

// Interleaved, p = 2, m = 4, v = 2 (global chunks: rank 0 holds 0 and 2, rank 1 holds 1 and 3).
// Virtual micro-batch k: forward chunk (k/2)%2, micro-batch (k/4)*2 + k%2:
//   k:  0    1    2    3    4    5    6    7
//   F: 0.0  1.0  0.1  1.1  2.0  3.0  2.1  3.1     (mb.chunk)
//   B: 0.1  1.1  0.0  1.0  2.1  3.1  2.0  3.0     (chunks reversed)
// Stage 0 warm-up = (2-0-1)*2 + (2-1)*2 = 4, stage 1 warm-up = 0 + 2 = 2.
TEST(PipelineOrderInterleaved, OrdersByHand) {
  const PipelineParams pp{PS::kInterleaved1F1B, 2, 4, 2};
  const std::vector<PipelineWork> want0 = {
      F(0, 0),  F(1, 0), F(0, 1),  F(1, 1),                                     // warm-up
      F(2, 0),  Bf(0, 1), F(3, 0), Bf(1, 1), F(2, 1), Bf(0, 0), F(3, 1), Bf(1, 0),  // 1F1B
      Bf(2, 1), Bf(3, 1), Bf(2, 0), Bf(3, 0)};                                  // cool-down
  EXPECT_EQ(pipeline_order(pp, 0), want0) << show(pipeline_order(pp, 0));
  const std::vector<PipelineWork> want1 = {
      F(0, 0), F(1, 0),                                                          // warm-up
      F(0, 1), Bf(0, 1), F(1, 1), Bf(1, 1), F(2, 0), Bf(0, 0), F(3, 0), Bf(1, 0),  // 1F1B
      F(2, 1), Bf(2, 1), F(3, 1), Bf(3, 1),                                      //
      Bf(2, 0), Bf(3, 0)};                                                       // cool-down
  EXPECT_EQ(pipeline_order(pp, 1), want1) << show(pipeline_order(pp, 1));
}

// ZB-H1, p = 4, m = 8. Stage 0 keeps 0 W's pending: W right after each B.
// Stage 3 keeps 3 pending: its first W (W0) comes after B3, the last four W's close the step.
TEST(PipelineOrderZeroBubble, OrdersByHand) {
  const PipelineParams pp{PS::kZeroBubbleH1, 4, 8, 1};
  const std::vector<PipelineWork> want0 = {
      F(0),  F(1),  F(2),  F(3),  Bi(0), Wg(0), F(4),  Bi(1), Wg(1), F(5),  Bi(2), Wg(2),
      F(6),  Bi(3), Wg(3), F(7),  Bi(4), Wg(4), Bi(5), Wg(5), Bi(6), Wg(6), Bi(7), Wg(7)};
  EXPECT_EQ(pipeline_order(pp, 0), want0) << show(pipeline_order(pp, 0));
  const std::vector<PipelineWork> want3 = {
      F(0),  Bi(0), F(1),  Bi(1), F(2),  Bi(2), F(3),  Bi(3), Wg(0), F(4),  Bi(4), Wg(1),
      F(5),  Bi(5), Wg(2), F(6),  Bi(6), Wg(3), F(7),  Bi(7), Wg(4), Wg(5), Wg(6), Wg(7)};
  EXPECT_EQ(pipeline_order(pp, 3), want3) << show(pipeline_order(pp, 3));
}

// ---------------------------------------------------------------------------------------------
// Makespans against the published formulas (t_f = 1, t_b = 2).

// GPipe and 1F1B: (m + p - 1)(t_f + t_b); bubble fraction (p-1)/(m+p-1) of the step.
TEST(PipelineOrderMakespan, GPipeAndOneFOneBFormula) {
  for (PS s : {PS::kGPipe, PS::kOneFOneB}) {
    for (auto [p, m] : std::vector<std::pair<int32_t, int32_t>>{
             {1, 1}, {1, 5}, {2, 1}, {2, 2}, {4, 8}, {4, 3}, {8, 3}, {8, 32}, {3, 7}}) {
      const PipelineParams pp{s, p, m, 1};
      std::vector<double> busy;
      const double ms = simulate_pipeline_makespan(pp, 1.0, 2.0, 0.0, &busy);
      EXPECT_DOUBLE_EQ(ms, (m + p - 1) * 3.0) << "schedule " << static_cast<int>(s) << " p=" << p
                                              << " m=" << m;
      EXPECT_NEAR((ms - 3.0 * m) / ms, (p - 1.0) / (m + p - 1.0), 1e-12);
      ASSERT_EQ(busy.size(), static_cast<size_t>(p));
      for (double b : busy) EXPECT_DOUBLE_EQ(b, 3.0 * m);
    }
  }
  // p = 4, m = 8 by hand: 11 slots of 3 = 33, bubble 9/33 = 3/11.
  EXPECT_DOUBLE_EQ(simulate_pipeline_makespan({PS::kOneFOneB, 4, 8, 1}, 1, 2, 0), 33.0);
}

// Interleaved: bubble (p-1)(t_f+t_b)/v (Narayanan et al. SC'21 §2.2.2), so the makespan is
// (m + (p-1)/v)(t_f + t_b) and the bubble fraction of the step is (p-1)/(v m + p - 1).
//   (4, 8, 2): (8 + 3/2) * 3 = 28.5       (8, 16, 4): (16 + 7/4) * 3 = 53.25
//   (2, 4, 2): (4 + 1/2) * 3 = 13.5       (4, 4, 2):  (4 + 3/2) * 3 = 16.5
//   (4, 12, 3): (12 + 1) * 3 = 39         (8, 8, 2):  (8 + 7/2) * 3 = 34.5
TEST(PipelineOrderMakespan, InterleavedFormula) {
  const std::vector<std::tuple<int32_t, int32_t, int32_t, double>> cases = {
      {4, 8, 2, 28.5}, {8, 16, 4, 53.25}, {2, 4, 2, 13.5},
      {4, 4, 2, 16.5}, {4, 12, 3, 39.0},  {8, 8, 2, 34.5}};
  for (auto [p, m, v, want] : cases) {
    const PipelineParams pp{PS::kInterleaved1F1B, p, m, v};
    std::vector<double> busy;
    const double ms = simulate_pipeline_makespan(pp, 1.0, 2.0, 0.0, &busy);
    EXPECT_NEAR(ms, want, 1e-9 * want) << "p=" << p << " m=" << m << " v=" << v;
    EXPECT_NEAR(ms, (m + (p - 1.0) / v) * 3.0, 1e-9 * want);
    EXPECT_NEAR((ms - 3.0 * m) / ms, (p - 1.0) / (v * m + p - 1.0), 1e-9);
    for (double b : busy) EXPECT_NEAR(b, 3.0 * m, 1e-9);
  }
  // The formula does not rely on t_b = 2 t_f: (4, 8, 2) with t_f = 1, t_b = 1: 9.5 * 2 = 19.
  EXPECT_NEAR(simulate_pipeline_makespan({PS::kInterleaved1F1B, 4, 8, 2}, 1, 1, 0), 19.0, 1e-9);
  // v = 1 interleaved (deeper warm-up, same bubble as 1F1B): (8 + 3) * 3 = 33.
  EXPECT_NEAR(simulate_pipeline_makespan({PS::kInterleaved1F1B, 4, 8, 1}, 1, 2, 0), 33.0, 1e-9);
}

// ZB-H1 with T_F = T_B = T_W = 1 (t_f = 1, t_b = 2, W fraction 0.5), p = 4, m = 8.
// Hand timeline (start times):
//   stage 3: F0 3, then back to back F B F B F B F B W F B W ... (3 W's pending), B7 at 22-23,
//            W4..W7 23-27.
//   stage 2: F0 2, F1 3, idle 4, B0 5, F2 6, B1 7, F3 8, B2 9, W0 10, F4 11, B3 12, ... B7 23,
//            W5 W6 W7 24-27.
//   stage 1: F0..F2 1-4, idle 4-6, B0 6, F3 7, B1 8, W0 9, F4 10, ... B7 24, W6 25, W7 26-27.
//   stage 0: F0..F3 0-4, idle 4-7, B0 7, W0 8, F4 9, B1 10, ... B7 25, W7 26-27.
// Every rank idles exactly p-1 = 3 units, so the step is 8*3 + 3 = 27, against 1F1B's
// 8*3 + 3*3 = 33: the bubble is 3 = (p-1)(T_F + T_B - T_W), a third of 1F1B's 9
// (Qi et al. §2.1).
TEST(PipelineOrderMakespan, ZeroBubbleH1ByHand) {
  std::vector<double> busy;
  EXPECT_DOUBLE_EQ(simulate_pipeline_makespan({PS::kZeroBubbleH1, 4, 8, 1}, 1, 2, 0.5, &busy),
                   27.0);
  for (double b : busy) EXPECT_DOUBLE_EQ(b, 24.0);
  const double bubble_zb = 27.0 - 24.0;
  const double bubble_1f1b = simulate_pipeline_makespan({PS::kOneFOneB, 4, 8, 1}, 1, 2, 0) - 24;
  EXPECT_DOUBLE_EQ(bubble_zb * 3, bubble_1f1b);
}

// Paper formula m(T_F + T_B + T_W) + (p-1)(T_F + T_B - T_W) for every m >= p, and for an uneven
// split T_F = 1, T_B = 1.4, T_W = 0.6 (t_b = 2, fraction 0.3): p = 4, m = 8 -> 24 + 3*1.8 = 29.4.
TEST(PipelineOrderMakespan, ZeroBubbleH1Formula) {
  for (int32_t p = 1; p <= 8; ++p) {
    for (int32_t m = p; m <= 16; ++m) {
      EXPECT_DOUBLE_EQ(simulate_pipeline_makespan({PS::kZeroBubbleH1, p, m, 1}, 1, 2, 0.5),
                       3.0 * m + (p - 1)) << "p=" << p << " m=" << m;
    }
  }
  EXPECT_NEAR(simulate_pipeline_makespan({PS::kZeroBubbleH1, 4, 8, 1}, 1, 2, 0.3), 29.4, 1e-9);
  // p = 8, m = 16: 48 + 7 = 55 (1F1B: 69).
  EXPECT_DOUBLE_EQ(simulate_pipeline_makespan({PS::kZeroBubbleH1, 8, 16, 1}, 1, 2, 0.5), 55.0);
}

// ---------------------------------------------------------------------------------------------
// Activation stashes in flight (forwards done - backwards done), rank 0.

TEST(PipelineOrderInFlight, PeakOnFirstStage) {
  // 1F1B: p while m >= p, else m.
  EXPECT_EQ(peak_in_flight(pipeline_order({PS::kOneFOneB, 4, 8, 1}, 0)), 4);
  EXPECT_EQ(peak_in_flight(pipeline_order({PS::kOneFOneB, 8, 32, 1}, 0)), 8);
  EXPECT_EQ(peak_in_flight(pipeline_order({PS::kOneFOneB, 8, 3, 1}, 0)), 3);
  // ...and p - s on rank s.
  for (int32_t s = 0; s < 4; ++s) {
    EXPECT_EQ(peak_in_flight(pipeline_order({PS::kOneFOneB, 4, 8, 1}, s)), 4 - s);
  }
  // GPipe: all m.
  EXPECT_EQ(peak_in_flight(pipeline_order({PS::kGPipe, 4, 8, 1}, 0)), 8);
  EXPECT_EQ(peak_in_flight(pipeline_order({PS::kGPipe, 4, 8, 1}, 3)), 8);
  // Interleaved p = 4, m = 8, v = 2, rank 0: warm-up (4-1)*2 + (2-1)*4 = 10 chunk-forwards, then
  // the first steady forward comes before the first backward: 11 chunk stashes. Each chunk
  // holds 1/v of the rank's layers, so that is 11/2 = 5.5 micro-batches' worth, i.e.
  // p (1 + (p-1)/(p v)) = 4 * 1.375 (Korthikanti et al.'s interleaving factor).
  EXPECT_EQ(peak_in_flight(pipeline_order({PS::kInterleaved1F1B, 4, 8, 2}, 0)), 11);
  EXPECT_DOUBLE_EQ(11.0 / 2, 4 * (1 + 3.0 / 8));
  // Last rank: warm-up (v-1)p = 4, peak 5.
  EXPECT_EQ(peak_in_flight(pipeline_order({PS::kInterleaved1F1B, 4, 8, 2}, 3)), 5);
  // p = 8, m = 16, v = 4, rank 0: 7*2 + 3*8 + 1 = 39.
  EXPECT_EQ(peak_in_flight(pipeline_order({PS::kInterleaved1F1B, 8, 16, 4}, 0)), 39);
  // Capped at m v: p = 4, m = 4, v = 2, rank 0: warm-up min(10, 8) = 8.
  EXPECT_EQ(peak_in_flight(pipeline_order({PS::kInterleaved1F1B, 4, 4, 2}, 0)), 8);
}

// ZB-H1 keeps 1F1B's memory: p - s B-stashes on rank s, and counting a stash until its W,
// never more than p on any rank (paper: worker i holds (p-i+1) M_B + (i-1) M_W).
TEST(PipelineOrderInFlight, ZeroBubbleH1MatchesOneFOneB) {
  for (int32_t s = 0; s < 4; ++s) {
    const std::vector<PipelineWork> order = pipeline_order({PS::kZeroBubbleH1, 4, 8, 1}, s);
    EXPECT_EQ(peak_in_flight(order), 4 - s) << "stage " << s;
    EXPECT_EQ(peak_until_weight(order), 4) << "stage " << s;
  }
}

// ---------------------------------------------------------------------------------------------
// Validation and protection of the orders.

TEST(PipelineOrderValidation, BadParameters) {
  std::string e = error_of({PS::kInterleaved1F1B, 4, 6, 2});
  EXPECT_NE(e.find("micro_batches (m) = 6"), std::string::npos) << e;
  EXPECT_NE(e.find("stages (p) = 4"), std::string::npos) << e;
  e = error_of({PS::kOneFOneB, 4, 8, 2});
  EXPECT_NE(e.find("virtual_stages (v) = 2"), std::string::npos) << e;
  EXPECT_NE(error_of({PS::kZeroBubbleH1, 4, 8, 2}), "");
  EXPECT_NE(error_of({PS::kGPipe, 4, 8, 2}), "");
  e = error_of({PS::kOneFOneB, 0, 8, 1});
  EXPECT_NE(e.find("stages (p) must be >= 1, got 0"), std::string::npos) << e;
  e = error_of({PS::kOneFOneB, 4, 0, 1});
  EXPECT_NE(e.find("micro_batches (m) must be >= 1, got 0"), std::string::npos) << e;
  e = error_of({PS::kInterleaved1F1B, 4, 8, 0});
  EXPECT_NE(e.find("virtual_stages (v) must be >= 1, got 0"), std::string::npos) << e;
  EXPECT_NE(error_of({PS::kGPipe, -1, 8, 1}), "");
  EXPECT_EQ(error_of({PS::kInterleaved1F1B, 4, 8, 2}), "");
  EXPECT_EQ(error_of({PS::kZeroBubbleH1, 1, 1, 1}), "");
  // The order and timing entry points validate too.
  EXPECT_THROW(pipeline_order({PS::kInterleaved1F1B, 4, 6, 2}, 0), sim::ConfigError);
  EXPECT_THROW(pipeline_order({PS::kOneFOneB, 4, 8, 1}, 4), sim::ConfigError);
  EXPECT_THROW(pipeline_order({PS::kOneFOneB, 4, 8, 1}, -1), sim::ConfigError);
  EXPECT_THROW(simulate_pipeline_makespan({PS::kOneFOneB, 4, 0, 1}, 1, 2, 0), sim::ConfigError);
  EXPECT_THROW(simulate_pipeline_makespan({PS::kOneFOneB, 4, 8, 1}, -1, 2, 0), sim::ConfigError);
  EXPECT_THROW(simulate_pipeline_makespan({PS::kOneFOneB, 4, 8, 1}, 1, NAN, 0),
               sim::ConfigError);
  EXPECT_THROW(simulate_pipeline_makespan({PS::kZeroBubbleH1, 4, 8, 1}, 1, 2, 1.5),
               sim::ConfigError);
}

// p = 2, m = 2. Rank 1 runs F1 before F0: F1 needs F1 on rank 0, which rank 0 only runs after
// B0, which needs B0 on rank 1, which waits behind F1 -> deadlock, reported on rank 0 at B0
// (the first rank that is stuck).
TEST(PipelineOrderValidation, DeadlockIsDetected) {
  const PipelineParams pp{PS::kOneFOneB, 2, 2, 1};
  const std::vector<std::vector<PipelineWork>> orders = {
      {F(0), Bf(0), F(1), Bf(1)},
      {F(1), F(0), Bf(0), Bf(1)},
  };
  try {
    simulate_pipeline_orders(pp, orders, 1, 2, 0);
    FAIL() << "no deadlock reported";
  } catch (const sim::ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("deadlock"), std::string::npos) << msg;
    EXPECT_NE(msg.find("stage 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Bfull(micro_batch 0, chunk 0)"), std::string::npos) << msg;
  }
  // A backward ahead of its own forward on the last rank deadlocks too.
  EXPECT_THROW(simulate_pipeline_orders(pp, {{F(0), F(1), Bf(0), Bf(1)},
                                             {Bf(0), F(0), F(1), Bf(1)}},
                                        1, 2, 0),
               sim::ConfigError);
  // The real orders pass: 1F1B p = 2, m = 2 is (2 + 1) * 3 = 9.
  EXPECT_DOUBLE_EQ(simulate_pipeline_orders(
                       pp, {pipeline_order(pp, 0), pipeline_order(pp, 1)}, 1, 2, 0),
                   9.0);
}

TEST(PipelineOrderValidation, MalformedOrdersAreRejected) {
  const PipelineParams pp{PS::kOneFOneB, 2, 2, 1};
  auto msg_of = [&](const std::vector<std::vector<PipelineWork>>& orders) {
    try {
      simulate_pipeline_orders(pp, orders, 1, 2, 0.5);
    } catch (const sim::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::vector<PipelineWork> good = {F(0), F(1), Bf(0), Bf(1)};
  // Duplicate forward.
  EXPECT_NE(msg_of({{F(0), F(0), F(1), Bf(0), Bf(1)}, good}).find("twice"), std::string::npos);
  // Missing backward of micro-batch 1 on rank 0.
  const std::string missing = msg_of({{F(0), F(1), Bf(0)}, good});
  EXPECT_NE(missing.find("backward of micro_batch 1 on global chunk 0"), std::string::npos)
      << missing;
  // Out of range micro-batch and chunk.
  EXPECT_NE(msg_of({{F(0), F(2), Bf(0), Bf(1)}, good}).find("out of range"), std::string::npos);
  EXPECT_NE(msg_of({{F(0, 1), F(1), Bf(0), Bf(1)}, good}).find("out of range"),
            std::string::npos);
  // A B without its W, and a W after a full backward.
  EXPECT_NE(msg_of({{F(0), F(1), Bi(0), Wg(0), Bi(1)}, {F(0), Bi(0), Wg(0), F(1), Bi(1), Wg(1)}})
                .find("weight-gradient (W) of micro_batch 1"),
            std::string::npos);
  EXPECT_NE(msg_of({{F(0), F(1), Bf(0), Bf(1), Wg(1)}, good}).find("full backward"),
            std::string::npos);
  // Wrong number of orders.
  EXPECT_NE(msg_of({good}).find("1 orders given for 2 stages"), std::string::npos);
}

}  // namespace
}  // namespace wl
