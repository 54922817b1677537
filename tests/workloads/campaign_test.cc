// The campaign simulator (workloads/campaign): failure counts against the Poisson and renewal
// means, Daly's published optimum checkpoint intervals (formula and simulated sweep), the Llama 3
// 405B 54-day snapshot, the research-cluster failure rates of Kokolis et al., determinism across
// thread counts, policies against closed forms, and binding errors. Every expected value is worked
// out in the comment next to it, never copied from the program's output.
#include "workloads/campaign/campaign.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/config.h"
#include "sim/error.h"
#include "workloads/campaign/campaign_config.h"
#include "workloads/campaign/failure_model.h"
#include "workloads/job/scenario.h"
#include "workloads/training/recovery.h"

namespace wl {
namespace {

constexpr double kHour = 3600, kDay = 86400;

// A fixed test double: every replica adds `tokens_per_replica` tokens; the step time does not
// depend on how many replicas run.
class FixedCost final : public StepCostSource {
 public:
  FixedCost(double seconds, double tokens_per_replica, int64_t replicas = 1)
      : seconds_(seconds), tokens_(tokens_per_replica), replicas_(replicas) {}
  StepCost step(int64_t down) override {
    ++calls;
    return {seconds_, tokens_ * static_cast<double>(replicas_ - down)};
  }
  int calls = 0;

 private:
  double seconds_, tokens_;
  int64_t replicas_;
};

FailureProcess process(double rate_per_node_s, bool replace, FailureCategory cat = FailureCategory::kGpu) {
  FailureProcess p;
  p.name = "test";
  p.category = cat;
  p.rate_per_node_s = rate_per_node_s;
  p.replace = replace;
  return p;
}

// A job of `nodes` nodes with every recovery cost zero and a free checkpoint every step: the only
// losses are the ones a test switches on.
CampaignSpec zero_cost_spec(int64_t nodes, const FailureProcess& p) {
  CampaignSpec s;
  s.job.job_nodes = nodes;
  s.job.gpus_per_node = 8;
  s.failures.processes = {p};
  s.policy = CampaignPolicy::kRestart;
  s.checkpoint.every_steps = 1;
  s.checkpoint.size_bytes = 0;
  s.detect_crash_s = s.detect_hang_s = 0;
  s.teardown_s = s.init_s = 0;
  s.repair_mean_s = 0;
  s.reconfigure_s = 0;
  return s;
}

double trial_sum(const CampaignSummary& s, double TrialResult::*field) {
  double x = 0;
  for (const TrialResult& t : s.per_trial) x += t.*field;
  return x;
}

// ---- 1. failure counts ---------------------------------------------------------------------------

// Exponential failures of rate lambda per node on N nodes that are never removed (software
// failures) give a Poisson count of mean and variance lambda N T.
TEST(CampaignFailures, ExponentialCountIsPoisson) {
  const double lambda = 1.0 / (200 * kHour);  // per node
  const int64_t nodes = 16, trials = 2000;
  CampaignSpec s = zero_cost_spec(nodes, process(lambda, false));
  s.duration_s = 625 * kHour;  // lambda N T = 16 x 625 / 200 = 50
  FixedCost cost(1.0, 1.0);
  const CampaignSummary r = run_campaign(s, cost, trials, 7, 2);
  const double mean = 50, sigma = std::sqrt(50.0);
  EXPECT_NEAR(r.interruptions.mean, mean, 4 * sigma / std::sqrt(double(trials)));
  double var = 0;
  for (const TrialResult& t : r.per_trial)
    var += (t.interruptions - r.interruptions.mean) * (t.interruptions - r.interruptions.mean);
  var /= double(trials - 1);
  // The sample variance of 2,000 Poisson(50) draws has a standard error of about
  // sqrt((2 mean^2 + mean) / n) = sqrt(5050 / 2000) = 1.6.
  EXPECT_NEAR(var, 50, 4 * 1.6);
  EXPECT_DOUBLE_EQ(r.by_category[size_t(FailureCategory::kGpu)].mean, r.interruptions.mean);
}

// Hardware failures with hot spares and instant repair keep every position occupied, so the count
// is still lambda N T, and each failure sends a node to repair.
TEST(CampaignFailures, HardwareFailuresWithSparesKeepTheRate) {
  const double lambda = 1.0 / (100 * kHour);
  CampaignSpec s = zero_cost_spec(8, process(lambda, true));
  s.policy = CampaignPolicy::kHotSpares;
  s.spares = 2;
  s.duration_s = 500 * kHour;  // lambda N T = 8 x 5 = 40
  FixedCost cost(1.0, 1.0);
  const int64_t trials = 1000;
  const CampaignSummary r = run_campaign(s, cost, trials, 11, 2);
  EXPECT_NEAR(r.interruptions.mean, 40, 4 * std::sqrt(40.0 / trials));
  EXPECT_NEAR(r.lost_waiting_h.mean, 0, 1e-12);
}

// Weibull renewal clocks started fresh at time 0, scale = mean / Gamma(1 + 1/k): by renewal
// theory (Cox, "Renewal Theory", 1962) the expected count per node over T is
// T / mu + (CV^2 - 1) / 2 + o(1). For k = 2, CV^2 = Gamma(1 + 2/k) / Gamma(1 + 1/k)^2 - 1 =
// 1 / (sqrt(pi)/2)^2 - 1 = 4/pi - 1 = 0.27324, so over T = 50 mu one node sees 50 - 0.36338
// failures and 16 nodes 794.19; the count's variance is about N T sigma^2 / mu^3 = 16 x 50 x
// 0.27324 = 218.6.
TEST(CampaignFailures, WeibullRenewalMean) {
  const double mu = 100 * kHour;
  FailureProcess p = process(1.0 / mu, false);
  p.distribution = FailureDistribution::kWeibull;
  p.weibull_shape = 2;
  CampaignSpec s = zero_cost_spec(16, p);
  s.duration_s = 50 * mu;
  FixedCost cost(1.0, 1.0);
  const int64_t trials = 800;
  const CampaignSummary r = run_campaign(s, cost, trials, 3, 2);
  const double cv2 = 4 / M_PI - 1;
  const double expected = 16 * (50 + (cv2 - 1) / 2);
  EXPECT_NEAR(r.interruptions.mean, expected, 4 * std::sqrt(16 * 50 * cv2 / trials));
}

// ---- 2. Daly -------------------------------------------------------------------------------------

// Daly (2006, FGCS 22(3)), abstract: for a 500 h solve, R = 10 min and delta = 5 min, the
// higher-order optimum is 117 min at M = 24 h, 57 min at M = 6 h and 9.1 min at M = 15 min.
TEST(CampaignDaly, FormulaGivesPublishedPoints) {
  const double min = 60;
  EXPECT_NEAR(daly_interval(5 * min, 24 * kHour) / min, 117, 0.5);
  EXPECT_NEAR(daly_interval(5 * min, 6 * kHour) / min, 57, 0.5);
  EXPECT_NEAR(daly_interval(5 * min, 15 * min) / min, 9.1, 0.05);
  // Young (1974): sqrt(2 x 5 x 1440) = 120 min.
  EXPECT_NEAR(young_interval(5 * min, 24 * kHour) / min, 120, 1e-9);
  // delta >= 2M: Daly's interval is M.
  EXPECT_DOUBLE_EQ(daly_interval(3 * kHour, 1 * kHour), 1 * kHour);
}

// Daly's model simulated: one node, exponential failures of mean M during everything (work,
// checkpoints, restarts), a restart of R = 10 min that starts over when a failure hits it, a
// synchronous checkpoint of delta = 5 min, 500 h of work in 1 s steps. A sweep with common random
// numbers over a grid that is not centred on Daly's interval (0.45 to 1.58 times it, ratio 1.15)
// finds its best grid point and the vertex of the parabola through it and its neighbours (mean
// wall time against log interval) within 10% of Daly's interval.
void expect_simulated_optimum_near_daly(double mtbf_s, int64_t trials) {
  const double delta = 300, restart = 600;
  CampaignSpec s = zero_cost_spec(1, process(1.0 / mtbf_s, false, FailureCategory::kSoftware));
  s.init_s = restart;
  s.checkpoint.size_bytes = delta;  // over 1 node at 1 B/s: a 300 s write
  s.checkpoint.write_bandwidth_per_node_Bps = 1;
  s.work_steps = 500 * 3600;
  FixedCost cost(1.0, 1.0);
  const double daly = daly_interval(delta, mtbf_s);
  std::vector<double> grid;
  for (int i = 0; i < 10; ++i) grid.push_back(0.45 * daly * std::pow(1.15, i));
  const IntervalSweep sw = sweep_checkpoint_interval(s, cost, grid, trials, 2024, 2);
  EXPECT_NEAR(sw.daly_s, daly, 1e-9);
  EXPECT_NEAR(sw.checkpoint_stall_s, delta, 1e-9);
  EXPECT_NEAR(sw.job_mtbf_s, mtbf_s, 1e-9 * mtbf_s);
  EXPECT_NEAR(sw.best_interval_s / daly, 1.0, 0.10) << "M = " << mtbf_s << " s";
  EXPECT_NEAR(sw.refined_best_s / daly, 1.0, 0.10) << "M = " << mtbf_s << " s";
  ASSERT_EQ(sw.points.size(), 10u);
  EXPECT_EQ(sw.points[0].summary.per_trial.size(), size_t(trials));
}

TEST(CampaignDaly, SimulatedOptimumAt24Hours) { expect_simulated_optimum_near_daly(24 * kHour, 3000); }  // 117 min
TEST(CampaignDaly, SimulatedOptimumAtSixHours) { expect_simulated_optimum_near_daly(6 * kHour, 2000); }  // 57 min
TEST(CampaignDaly, SimulatedOptimumAt15Minutes) { expect_simulated_optimum_near_daly(15 * 60, 150); }    // 9.1 min

// ---- 3. Llama 3 405B -----------------------------------------------------------------------------

// The 54-day snapshot of Llama 3 405B pre-training (arXiv 2407.21783, §3.3.4): 16,384 H100 GPUs in
// 2,048 nodes, 419 unexpected interruptions, more than 90% effective training time.
// Settings, and why:
//  * step: 6.1 s for 16M tokens (6 x 405e9 x 16M FLOP at about 40% of 16,384 x 989 TFLOP/s
//    dense BF16, the MFU range of Table 4); a fixed test double.
//  * checkpoint size: 405e9 parameters x 14 bytes (BF16 weights 2 + FP32 master weights 4 + FP32
//    Adam moments 8; the mixed-precision Adam state of ZeRO, arXiv 1910.02054, without
//    gradients) = 5.67 TB, written at the default 2 TB/s over the job (Tectonic's sustained
//    figure in §3.3.1): a 2.8 s synchronous stall.
//  * interval 5 min: Young's sqrt(2 x 2.8 s x M) with M = 54 d / 419 = 3.1 h is 4.2 min.
//  * hot spares (64 nodes, 3%) and the default detection (30 s crash, 10 min watchdog), teardown
//    (1 min) and initialisation (5 min). The paper gives no restart time; > 90% needs the cost of
//    an interruption (detection + restart + half an interval of recomputation) below
//    10% x 1,296 h / 419 = 18.6 min, which these assumptions meet with margin (about 9 min).
TEST(CampaignLlama3, SnapshotInterruptionsAndEttr) {
  CampaignSpec s;
  s.job.job_nodes = 2048;
  s.job.gpus_per_node = 8;
  s.failures = *failure_profile("llama3-405b", false);
  s.policy = CampaignPolicy::kHotSpares;
  s.spares = 64;
  s.duration_s = 54 * kDay;
  s.checkpoint.interval_s = 300;
  s.checkpoint.size_bytes = 405e9 * 14;
  FixedCost cost(6.1, 16.0 * 1024 * 1024);
  const CampaignSummary r = run_campaign(s, cost, 400, 405, 2);
  // The profile's rates are count / (54 d x 2,048 nodes), so the job's expected count is 419.
  EXPECT_NEAR(job_failure_rate(s.failures, 2048, false) * 54 * kDay, 419, 1e-9);
  EXPECT_LE(r.unexpected_interruptions.lo, 419);
  EXPECT_GE(r.unexpected_interruptions.hi, 419);
  EXPECT_NEAR(r.unexpected_interruptions.mean, 419, 4 * std::sqrt(419.0 / 400));
  EXPECT_GT(r.ettr.mean, 0.90);
  EXPECT_GT(r.ettr.lo, 0.90);
  EXPECT_EQ(r.every_steps, 49);  // round(300 / 6.1)
  EXPECT_NEAR(r.checkpoint_stall_s, 405e9 * 14 / 2e12, 1e-9);
  // The paper's GPU rows (faulty GPU, HBM3, SRAM, system processor, SDC, thermal) add to
  // 148 + 72 + 19 + 17 + 6 + 6 = 268 of the 419.
  EXPECT_NEAR(r.by_category[size_t(FailureCategory::kGpu)].mean, 268, 4 * std::sqrt(268.0 / 400));
  EXPECT_EQ(cost.calls, 1);  // one state (no replicas down), asked once
}

// ---- 3b. Kokolis et al. (Meta research clusters) -----------------------------------------------

// "Revisiting Reliability in Large-Scale Machine Learning Research Clusters" (Kokolis et al.,
// arXiv 2410.21680, HPCA 2025) measures the failure rate r_f of its two A100 clusters: 6.50
// failures per 1,000 node-days on RSC-1 and 2.34 on RSC-2. Its job MTTF is 1 / (nodes x r_f), with
// which it projects RSC-1's rate to an MTTF of 1.8 h for 16,384 GPUs and 0.23 h for 131,072 GPUs
// (8 GPUs a node): 1,000 / (6.50 x 2,048) days = 1.803 h and 1,000 / (6.50 x 16,384) days =
// 0.2254 h, which the paper prints to one and two decimals.
TEST(CampaignKokolis, RatesGiveThePapersProjectedMttf) {
  const FailureModel rsc1 = *failure_profile("kokolis-rsc1", false);
  const FailureModel rsc2 = *failure_profile("kokolis-rsc2", false);
  ASSERT_EQ(rsc1.processes.size(), 1u);
  ASSERT_EQ(rsc2.processes.size(), 1u);
  EXPECT_NEAR(per_1000_node_days(job_failure_rate(rsc1, 1, true)), 6.50, 1e-12);
  EXPECT_NEAR(per_1000_node_days(job_failure_rate(rsc2, 1, true)), 2.34, 1e-12);
  EXPECT_NEAR(1 / job_failure_rate(rsc1, 16384 / 8, false) / kHour, 1.8, 0.05);
  EXPECT_NEAR(1 / job_failure_rate(rsc1, 131072 / 8, false) / kHour, 0.23, 0.005);
  // No planned interruptions in the paper's rates: `planned` adds nothing.
  EXPECT_EQ(failure_profile("kokolis-rsc1", true)->processes.size(), 1u);
}

// The same projection simulated: a 16,384-GPU job (2,048 nodes) at RSC-1's rate, with spares and
// instant repair so that every position stays occupied, sees 2,048 x 54 x 6.50 / 1,000 = 718.85
// interruptions in 54 days (54 d / 1.803 h), Poisson: a standard error of sqrt(718.85 / 200) = 1.9
// over 200 trials.
TEST(CampaignKokolis, SimulatedCountMatchesTheProjectedMttf) {
  const FailureModel rsc1 = *failure_profile("kokolis-rsc1", false);
  CampaignSpec s = zero_cost_spec(2048, rsc1.processes[0]);
  s.policy = CampaignPolicy::kHotSpares;
  s.spares = 8;
  s.duration_s = 54 * kDay;
  FixedCost cost(1.0, 1.0);
  const int64_t trials = 200;
  const CampaignSummary r = run_campaign(s, cost, trials, 2410, 2);
  const double expected = 2048 * 54 * 6.50 / 1000;
  EXPECT_NEAR(r.interruptions.mean, expected, 4 * std::sqrt(expected / trials));
  EXPECT_DOUBLE_EQ(r.by_category[size_t(FailureCategory::kUnknown)].mean, r.interruptions.mean);
}

// ---- 4. determinism ------------------------------------------------------------------------------

TEST(CampaignDeterminism, ThreadCountDoesNotMatterSeedDoes) {
  CampaignSpec s;
  s.job.job_nodes = 64;
  s.failures = *failure_profile("kokolis-rsc1", false);
  FailureProcess w = process(1.0 / (30 * kDay), true);
  w.name = "weibull";
  w.distribution = FailureDistribution::kWeibull;
  w.weibull_shape = 0.7;
  w.nodes = 4;
  s.failures.processes.push_back(w);
  s.policy = CampaignPolicy::kHotSpares;
  s.spares = 2;
  s.duration_s = 30 * kDay;
  s.checkpoint.interval_s = 1800;
  s.checkpoint.size_bytes = 1e12;
  s.checkpoint.mode = CheckpointMode::kAsync;
  s.checkpoint.in_memory = true;
  FixedCost cost(2.0, 1e6);
  const CampaignSummary a = run_campaign(s, cost, 64, 99, 1);
  const CampaignSummary b = run_campaign(s, cost, 64, 99, 2);
  ASSERT_EQ(a.per_trial.size(), b.per_trial.size());
  for (size_t i = 0; i < a.per_trial.size(); ++i) EXPECT_EQ(a.per_trial[i], b.per_trial[i]) << "trial " << i;
  EXPECT_EQ(campaign_summary_text(s, a), campaign_summary_text(s, b));
  nlohmann::ordered_json ja, jb;
  campaign_to_json(s, a, ja);
  campaign_to_json(s, b, jb);
  EXPECT_EQ(ja.dump(), jb.dump());
  // Trials differ from each other, and another seed gives other trials.
  EXPECT_NE(a.per_trial[0], a.per_trial[1]);
  const CampaignSummary c = run_campaign(s, cost, 64, 100, 2);
  int same = 0;
  for (size_t i = 0; i < a.per_trial.size(); ++i) same += a.per_trial[i] == c.per_trial[i];
  EXPECT_EQ(same, 0);
}

// ---- 5. policies against closed forms ------------------------------------------------------------

// Every trial's time adds up: productive + detection + restart + recomputation + checkpointing +
// waiting (+ island waits and syncs) = wall.
void expect_time_conserved(const CampaignSummary& r) {
  for (const TrialResult& t : r.per_trial) {
    const double sum = t.productive_s + t.detection_s + t.restart_s + t.recompute_s + t.checkpoint_s + t.waiting_s +
                       t.island_wait_s + t.outer_sync_s;
    EXPECT_NEAR(sum, t.wall_s, 1e-6 * t.wall_s);
  }
}

// One node, software failures at rate lambda, a restart of R that starts over when a failure hits
// it, nothing else. Up times are Exp(lambda); a failure costs a down time of expectation
// (e^{lambda R} - 1) / lambda (restarts until one survives R). By renewal-reward,
// ETTR = (1/lambda) / (1/lambda + (e^{lambda R} - 1)/lambda) = e^{-lambda R}: e^{-0.5} = 0.60653
// for lambda = 1/h, R = 30 min.
TEST(CampaignPolicy, RestartEttrIsExpOfMinusLambdaR) {
  CampaignSpec s = zero_cost_spec(1, process(1.0 / kHour, false, FailureCategory::kSoftware));
  s.init_s = 1800;
  s.duration_s = 2000 * kHour;
  FixedCost cost(1.0, 1.0);
  const CampaignSummary r = run_campaign(s, cost, 200, 5, 2);
  EXPECT_NEAR(r.ettr.mean, std::exp(-0.5), 0.005);
  expect_time_conserved(r);
  // Interruptions: lambda x (time up + time restarting) = lambda x T = 2000.
  EXPECT_NEAR(r.interruptions.mean, 2000, 4 * std::sqrt(2000.0 / 200));
}

// One node, hardware failures at rate lambda, a fixed repair Rp, nothing else. restart: the job
// waits for its node (no failures while it is away): ETTR = 1 / (1 + lambda Rp) = 2/3 for
// lambda Rp = 0.5. hot_spares with one spare: after a failure the spare goes in at once unless it
// is itself still in repair; the wait after failure k is (Rp - wait_{k-1} - X_k)^+ <= (Rp - X)^+,
// so E[wait] <= Rp - (1 - e^{-lambda Rp}) / lambda and ETTR >= 1 / (lambda Rp + e^{-lambda Rp}) =
// 1 / (0.5 + 0.60653) = 0.9037.
TEST(CampaignPolicy, HotSparesBeatWaitingForRepair) {
  CampaignSpec s = zero_cost_spec(1, process(1.0 / (10 * kHour), true));
  s.repair_mean_s = 5 * kHour;
  s.repair = RepairDistribution::kFixed;
  s.duration_s = 5000 * kHour;
  FixedCost cost(1.0, 1.0);
  const CampaignSummary restart = run_campaign(s, cost, 100, 8, 2);
  EXPECT_NEAR(restart.ettr.mean, 2.0 / 3.0, 0.01);
  expect_time_conserved(restart);
  s.policy = CampaignPolicy::kHotSpares;
  s.spares = 1;
  const CampaignSummary spares = run_campaign(s, cost, 100, 8, 2);
  EXPECT_GT(spares.ettr.mean, 1.0 / (0.5 + std::exp(-0.5)) - 0.01);
  EXPECT_LT(spares.ettr.mean, 1.0);
  EXPECT_LT(spares.lost_waiting_h.mean, restart.lost_waiting_h.mean);
  expect_time_conserved(spares);
}

// Elastic: 8 replicas of one node, hardware failures at lambda per node, fixed repair Rp, no
// spares, free reconfiguration. Each replica alternates Exp(lambda) up and Rp in repair, so it is
// up a fraction 1 / (1 + lambda Rp) = 1 / 1.1 of the time, and goodput = 8 x 1,000 tokens/s /
// 1.1 = 7,272.7 tokens/s; the missing throughput, 1 - 1/1.1 = 9.09% of the wall time, is the
// degraded loss. Nothing is recomputed but interrupted 1 s steps. ETTR counts the degraded steps'
// time as productive (about 1). restart on the same job loses far more.
TEST(CampaignPolicy, ElasticDropsReplicasAndRunsDegraded) {
  CampaignSpec s = zero_cost_spec(8, process(1.0 / (10 * kHour), true));
  s.job.dp_replicas = 8;
  s.policy = CampaignPolicy::kElastic;
  s.repair_mean_s = 1 * kHour;
  s.repair = RepairDistribution::kFixed;
  s.duration_s = 2000 * kHour;
  FixedCost cost(1.0, 1000, 8);
  const CampaignSummary r = run_campaign(s, cost, 100, 21, 2);
  EXPECT_NEAR(r.goodput_tokens_per_s.mean, 8000 / 1.1, 8000 / 1.1 * 0.01);
  EXPECT_NEAR(r.lost_degraded_h.mean / r.wall_h.mean, 1 - 1 / 1.1, 0.003);
  EXPECT_GT(r.ettr.mean, 0.999);
  EXPECT_LT(r.lost_recompute_h.mean, 1.0);
  expect_time_conserved(r);
  // Fewer tokens per step while degraded: useful tokens / useful steps < 8,000.
  const double tokens = trial_sum(r, &TrialResult::useful_tokens), steps = trial_sum(r, &TrialResult::steps);
  EXPECT_LT(tokens / steps, 8000 * 0.95);
  EXPECT_GT(cost.calls, 1);  // degraded states were asked for
  s.policy = CampaignPolicy::kRestart;
  const CampaignSummary restart = run_campaign(s, cost, 100, 21, 2);
  EXPECT_LT(restart.goodput_tokens_per_s.mean, r.goodput_tokens_per_s.mean - 500);
}

// Planned interruptions (announced maintenance) under elastic data parallelism: the job takes a
// checkpoint and restarts with the replicas it has; a replica dropped earlier rejoins when its node
// is back, as without the maintenance. Same job as ElasticDropsReplicasAndRunsDegraded (8 one-node
// replicas, hardware failures at lambda = 1 / 10 h per node, fixed repair 1 h, no spares) plus a
// planned process at 1 / 2 h per node, every cost zero (no checkpoint bytes, teardown, init or
// detection): a planned stop loses only the interrupted 1 s step (4 stops an hour, 0.5 s each:
// 0.01% of the time), so goodput stays 8 x 1,000 tokens/s / (1 + lambda Rp) = 7,272.7 tokens/s.
// (Were the restart to wait for a dropped replica's repair, the whole job would idle for the rest
// of it, 0.5 h on average, and a planned stop finds a replica down 1 - (1/1.1)^8 = 53% of the time.)
TEST(CampaignPolicy, ElasticPlannedRestartKeepsDroppedReplicasOut) {
  FailureProcess hw = process(1.0 / (10 * kHour), true);
  FailureProcess planned = process(1.0 / (2 * kHour), false, FailureCategory::kPlanned);
  planned.manifests = Manifestation::kPlanned;
  CampaignSpec s = zero_cost_spec(8, hw);
  s.failures.processes.push_back(planned);
  s.job.dp_replicas = 8;
  s.policy = CampaignPolicy::kElastic;
  s.repair_mean_s = 1 * kHour;
  s.repair = RepairDistribution::kFixed;
  s.duration_s = 2000 * kHour;
  FixedCost cost(1.0, 1000, 8);
  const CampaignSummary r = run_campaign(s, cost, 100, 21, 2);
  EXPECT_NEAR(r.goodput_tokens_per_s.mean, 8000 / 1.1, 8000 / 1.1 * 0.01);
  EXPECT_NEAR(r.lost_waiting_h.mean, 0, 1e-9);  // nothing waits for a repair: the replica stays out
  // Planned: 8 nodes x 2,000 h / 2 h, less the time nodes spend in repair (1/1.1 exposed): 7,273.
  EXPECT_NEAR(r.by_category[static_cast<size_t>(FailureCategory::kPlanned)].mean, 8000 / 1.1, 8000 / 1.1 * 0.02);
  expect_time_conserved(r);
}

// Below elastic.min_replicas the job restarts in full from its last checkpoint: with 2 replicas
// and min_replicas 2 every failure is a full restart, so elastic behaves as hot_spares (same
// seeds: the same failures; zero reconfiguration and detection costs so the pauses match).
TEST(CampaignPolicy, ElasticBelowMinimumFallsBackToRestart) {
  CampaignSpec s = zero_cost_spec(2, process(1.0 / (10 * kHour), false));
  s.job.dp_replicas = 2;
  s.init_s = 600;
  s.policy = CampaignPolicy::kElastic;
  s.min_replicas = 2;
  s.duration_s = 500 * kHour;
  FixedCost cost(1.0, 1000, 2);
  const CampaignSummary el = run_campaign(s, cost, 50, 4, 2);
  s.policy = CampaignPolicy::kHotSpares;
  const CampaignSummary hs = run_campaign(s, cost, 50, 4, 2);
  for (size_t i = 0; i < el.per_trial.size(); ++i) EXPECT_EQ(el.per_trial[i], hs.per_trial[i]) << "trial " << i;
  EXPECT_DOUBLE_EQ(el.lost_degraded_h.mean, 0);

  // A source that cannot run the job with a replica down ({0 s, 0 tokens}) has the same effect.
  class NoDegraded final : public StepCostSource {
   public:
    StepCost step(int64_t down) override { return down == 0 ? StepCost{1.0, 2000} : StepCost{}; }
  } no_degraded;
  s.policy = CampaignPolicy::kElastic;
  s.min_replicas = 1;
  const CampaignSummary el2 = run_campaign(s, no_degraded, 50, 4, 2);
  for (size_t i = 0; i < el2.per_trial.size(); ++i) EXPECT_EQ(el2.per_trial[i], hs.per_trial[i]) << "trial " << i;
  // Not even the full job: a clear error.
  class Broken final : public StepCostSource {
   public:
    StepCost step(int64_t) override { return StepCost{}; }
  } broken;
  try {
    run_campaign(s, broken, 1, 1, 1);
    ADD_FAILURE() << "no error";
  } catch (const sim::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("the step with 0 replicas down costs 0"), std::string::npos) << e.what();
  }
}

// Which replicas a node failure takes down follows the layout. parallelism.order [dp, tp] with
// dp = 2 and tp = 8 on two 8-GPU nodes places rank = dp + 2 tp (layout.h: innermost first), so
// node 0 (ranks 0-7) holds tp 0-3 of both replicas and node 1 (ranks 8-15) tp 4-7 of both:
// replicas_by_node {{0, 1}, {0, 1}}. Any node failure then takes both replicas down, fewer than
// min_replicas = 1 are left, and the job restarts in full: elastic is hot_spares trial by trial
// (same seeds, same failures) and never runs degraded. Software failures at lambda = 1 / 2 h per
// node and a restart of R = 30 min that starts over when a failure hits it (the job's rate is
// 2 lambda = 1 / h), every other cost zero: ETTR = e^{-2 lambda R} = e^{-0.5} = 0.60653 (as in
// RestartEttrIsExpOfMinusLambdaR, at the job's rate) and goodput 2 x 1,000 tokens/s x e^{-0.5} =
// 1,213.1 tokens/s. (Taking the replicas for contiguous nodes, one per node, as the campaign did
// whatever the order, a failure dropped one replica for R while the other ran on.)
TEST(CampaignPolicy, ElasticDropsEveryReplicaWithRanksOnTheFailedNode) {
  CampaignSpec s = zero_cost_spec(2, process(1.0 / (2 * kHour), false, FailureCategory::kSoftware));
  s.job.dp_replicas = 2;
  s.job.replicas_by_node = {{0, 1}, {0, 1}};
  s.init_s = 1800;
  s.policy = CampaignPolicy::kElastic;
  s.duration_s = 2000 * kHour;
  FixedCost cost(1.0, 1000, 2);
  const CampaignSummary el = run_campaign(s, cost, 200, 5, 2);
  EXPECT_NEAR(el.ettr.mean, std::exp(-0.5), 0.005);
  EXPECT_NEAR(el.goodput_tokens_per_s.mean, 2000 * std::exp(-0.5), 2000 * 0.005);
  EXPECT_DOUBLE_EQ(el.degraded_h.mean, 0);
  expect_time_conserved(el);
  s.policy = CampaignPolicy::kHotSpares;
  const CampaignSummary hs = run_campaign(s, cost, 200, 5, 2);
  for (size_t i = 0; i < el.per_trial.size(); ++i) EXPECT_EQ(el.per_trial[i], hs.per_trial[i]) << "trial " << i;

  // The same job with data parallelism outermost (replica k on node k): a failure drops one
  // replica and the other goes on, so the job runs degraded and stops less.
  s.policy = CampaignPolicy::kElastic;
  s.job.replicas_by_node = {{0}, {1}};
  const CampaignSummary outer = run_campaign(s, cost, 200, 5, 2);
  EXPECT_GT(outer.degraded_h.mean, 0);
  EXPECT_GT(outer.ettr.mean, el.ettr.mean);
}

// Megatron-LM's order [tp, cp, dp, pp] (tp-cp-ep-dp-pp) puts replica k on every dp-th node: with
// tp = 8, dp = 2, pp = 2 on four 8-GPU nodes, rank = tp + 8 dp + 16 pp, so node n holds dp = n mod 2
// and replica 0 has nodes 0 and 2, replica 1 nodes 1 and 3. A correlated failure of an aligned
// pair of nodes ({0, 1} or {2, 3}: a rack) takes both replicas down, so every failure restarts
// the job in full, as hot_spares does (same seeds: the same failures, trial by trial). With data
// parallelism outermost (replica 0 on nodes 0-1, replica 1 on 2-3) a rack holds one replica and
// the other goes on.
TEST(CampaignPolicy, ElasticReplicasOnEveryOtherNodeAllFallWithARack) {
  FailureProcess rack = process(1.0 / (20 * kHour), true, FailureCategory::kNetwork);
  rack.nodes = 2;
  CampaignSpec s = zero_cost_spec(4, rack);
  s.job.dp_replicas = 2;
  s.job.replicas_by_node = {{0}, {1}, {0}, {1}};
  s.init_s = 600;
  s.repair_mean_s = 2 * kHour;
  s.spares = 2;
  s.policy = CampaignPolicy::kElastic;
  s.duration_s = 1000 * kHour;
  FixedCost cost(1.0, 1000, 2);
  const CampaignSummary el = run_campaign(s, cost, 50, 9, 2);
  EXPECT_DOUBLE_EQ(el.degraded_h.mean, 0);
  s.policy = CampaignPolicy::kHotSpares;
  const CampaignSummary hs = run_campaign(s, cost, 50, 9, 2);
  for (size_t i = 0; i < el.per_trial.size(); ++i) EXPECT_EQ(el.per_trial[i], hs.per_trial[i]) << "trial " << i;
  s.policy = CampaignPolicy::kElastic;
  s.job.replicas_by_node = {{0}, {0}, {1}, {1}};
  EXPECT_GT(run_campaign(s, cost, 50, 9, 2).degraded_h.mean, 0);
}

// Failure-free checkpoint cost. sync: a stall of size / (nodes x bandwidth) every k steps.
// async with a write longer than the interval: the first cycle stalls for the snapshot only
// (5 s), later ones also wait for the previous write: 150 s write - 100 s of steps = 50 s + 5 s.
// Over 1,500 s: 100 s of steps + 5 s, then 9 x (100 + 55) s: 1,000 s productive, 500 s stalled.
TEST(CampaignCheckpoint, SyncAndAsyncStalls) {
  CampaignSpec s = zero_cost_spec(2, process(0, false));
  s.checkpoint.every_steps = 100;
  s.checkpoint.write_bandwidth_per_node_Bps = 1;
  s.checkpoint.size_bytes = 2 * 20;  // sync: 20 s per checkpoint
  s.duration_s = 10 * 120;
  FixedCost cost(1.0, 1.0);
  CampaignSummary r = run_campaign(s, cost, 1, 1, 1);
  EXPECT_NEAR(r.per_trial[0].productive_s, 1000, 1e-6);
  EXPECT_NEAR(r.per_trial[0].checkpoint_s, 200, 1e-6);
  EXPECT_NEAR(r.checkpoint_stall_s, 20, 1e-12);

  s.checkpoint.mode = CheckpointMode::kAsync;
  s.checkpoint.size_bytes = 2 * 150;                     // 150 s background write
  s.checkpoint.snapshot_bandwidth_Bps = 300.0 / 16 / 5;  // 300 B over 16 GPUs in 5 s
  s.duration_s = 1500;
  r = run_campaign(s, cost, 1, 1, 1);
  EXPECT_NEAR(r.per_trial[0].productive_s, 1000, 1e-6);
  EXPECT_NEAR(r.per_trial[0].checkpoint_s, 500, 1e-6);
  EXPECT_NEAR(r.checkpoint_stall_s, 55, 1e-9);
}

// Restore source: with in-memory peer copies a single-node hardware failure reloads from the
// peer (size / nodes / peer bandwidth); a correlated failure of the node pair (nodes: 2) takes
// both copies, so it reloads from storage (size / (nodes x read bandwidth)). Per failure the
// restart bucket is teardown + init + load (no failure lands in a 3 min restart often enough to
// matter: 4 nodes x 1/(100 h) x 3 min is 0.02%, hence the 1% tolerance).
TEST(CampaignCheckpoint, InMemoryRestoreFromPeerUnlessThePeerFailedToo) {
  CampaignSpec s = zero_cost_spec(4, process(1.0 / (100 * kHour), true));
  s.policy = CampaignPolicy::kHotSpares;
  s.spares = 4;
  s.teardown_s = 60;
  s.init_s = 60;
  s.checkpoint.every_steps = 600;
  s.checkpoint.size_bytes = 4 * 60e9;              // 60 GB per node
  s.checkpoint.read_bandwidth_per_node_Bps = 1e9;  // storage: 60 s
  s.checkpoint.peer_bandwidth_Bps = 10e9;          // peer: 6 s
  s.checkpoint.write_bandwidth_per_node_Bps = 1e12;
  s.checkpoint.in_memory = true;
  s.duration_s = 2000 * kHour;
  FixedCost cost(1.0, 1.0);
  CampaignSummary r = run_campaign(s, cost, 40, 9, 2);
  EXPECT_NEAR(r.lost_restart_h.mean * kHour / r.interruptions.mean, 60 + 60 + 6, 126 * 0.01);
  s.failures.processes[0].nodes = 2;
  r = run_campaign(s, cost, 40, 9, 2);
  EXPECT_NEAR(r.lost_restart_h.mean * kHour / r.interruptions.mean, 60 + 60 + 60, 180 * 0.01);
  expect_time_conserved(r);
}

// DiLoCo islands, failure-free: a round is H steps then the outer sync, 100 x 1 s + 20 s = 120 s,
// so ETTR = 100 / 120 and goodput = 4 islands x 100 tokens/step x 100 steps / 120 s = 333.3/s.
// Fixed work of 1,000 steps per island is 10 rounds: 1,200 s.
TEST(CampaignIslands, FailureFreeRoundsMatchClosedForm) {
  CampaignSpec s = zero_cost_spec(2, process(0, false));
  s.job.diloco = true;
  s.job.islands = 4;
  s.job.inner_steps_per_round = 100;
  s.job.outer_sync_s = 20;
  s.policy = CampaignPolicy::kIslands;
  s.checkpoint.every_steps = 100;
  s.duration_s = 12000;
  FixedCost cost(1.0, 100);
  CampaignSummary r = run_campaign(s, cost, 2, 1, 1);
  EXPECT_NEAR(r.ettr.mean, 100.0 / 120, 1e-9);
  EXPECT_NEAR(r.goodput_tokens_per_s.mean, 4 * 100 * 100 / 120.0, 1e-6);
  EXPECT_NEAR(r.outer_sync_h.mean * kHour, 100 * 20, 1e-6);
  s.duration_s = 0;
  s.work_steps = 1000;
  r = run_campaign(s, cost, 2, 1, 1);
  EXPECT_NEAR(r.wall_h.mean * kHour, 1200, 1e-6);
}

// Four DiLoCo islands of 2 nodes, rounds of H = 100 inner steps and a 20 s outer sync, rare
// failures, 12,000 s: the set-up of the tests on checkpoints within a round.
CampaignSpec islands_of_100_steps() {
  CampaignSpec s = zero_cost_spec(2, process(1.0 / (1000 * kHour), false));
  s.job.diloco = true;
  s.job.islands = 4;
  s.job.inner_steps_per_round = 100;
  s.job.outer_sync_s = 20;
  s.policy = CampaignPolicy::kIslands;
  s.duration_s = 12000;
  return s;
}

// Islands take checkpoints only within a round (every k steps from its start): with H = 100 inner
// steps, k = 100 (or more) takes none, so the summary says so instead of printing "checkpoint
// every 100 steps" and Young's and Daly's intervals, and the JSON has checkpoints_taken false;
// k = 50 takes one in the middle of each round and prints them as before.
TEST(CampaignIslands, AnIntervalNotWithinARoundIsReportedAsNoCheckpoints) {
  CampaignSpec s = islands_of_100_steps();
  FixedCost cost(1.0, 100);
  for (int64_t k : {100, 250}) {
    s.checkpoint.every_steps = k;
    const CampaignSummary r = run_campaign(s, cost, 2, 1, 1);
    const std::string text = campaign_summary_text(s, r);
    EXPECT_NE(text.find("no checkpoints: the interval of " + std::to_string(k) + " steps"), std::string::npos) << text;
    EXPECT_NE(text.find("is not shorter than a round of 100 inner steps"), std::string::npos) << text;
    EXPECT_EQ(text.find("checkpoint every"), std::string::npos) << text;
    EXPECT_EQ(text.find("optimum interval for delta"), std::string::npos) << text;
    EXPECT_NE(text.find("do not apply"), std::string::npos) << text;
    nlohmann::ordered_json j;
    campaign_to_json(s, r, j);
    EXPECT_FALSE(j["results"]["checkpoints_taken"].get<bool>());
  }
  s.checkpoint.every_steps = 50;
  const CampaignSummary r = run_campaign(s, cost, 2, 1, 1);
  const std::string text = campaign_summary_text(s, r);
  EXPECT_NE(text.find("checkpoint every 50 steps"), std::string::npos) << text;
  EXPECT_NE(text.find("Young"), std::string::npos) << text;
  EXPECT_EQ(text.find("no checkpoints"), std::string::npos) << text;
  nlohmann::ordered_json j;
  campaign_to_json(s, r, j);
  EXPECT_TRUE(j["results"]["checkpoints_taken"].get<bool>());
  // Not islands: the same interval on one job takes its checkpoints.
  s.policy = CampaignPolicy::kRestart;
  s.checkpoint.every_steps = 100;
  EXPECT_NE(campaign_summary_text(s, run_campaign(s, cost, 2, 1, 1)).find("checkpoint every 100 steps"),
            std::string::npos);
}

// The same in a checkpoint-interval sweep: with 1 s steps and rounds of 100 inner steps, intervals
// of 50, 100 and 250 s are 50, 100 and 250 steps; only the first is shorter than a round, so the
// other two rows say they take no checkpoint (text and JSON).
TEST(CampaignIslands, SweepRowsNotWithinARoundSayTheyTakeNoCheckpoint) {
  CampaignSpec s = islands_of_100_steps();
  FixedCost cost(1.0, 100);
  const IntervalSweep sw = sweep_checkpoint_interval(s, cost, {50, 100, 250}, 2, 1, 1);
  ASSERT_EQ(sw.points.size(), 3u);
  const std::string text = campaign_sweep_text(s, sw);
  std::vector<std::string> rows;
  for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
    const std::string line = text.substr(at, nl - at);
    for (const char* steps : {"      50 ", "     100 ", "     250 "})
      if (line.find(steps) != std::string::npos) rows.push_back(line);
  }
  ASSERT_EQ(rows.size(), 3u) << text;
  EXPECT_EQ(rows[0].find("(no checkpoint)"), std::string::npos) << rows[0];
  EXPECT_NE(rows[1].find("(no checkpoint)"), std::string::npos) << rows[1];
  EXPECT_NE(rows[2].find("(no checkpoint)"), std::string::npos) << rows[2];
  EXPECT_NE(text.find("an interval of 100 steps or more is not shorter than a round"), std::string::npos) << text;
  nlohmann::ordered_json j;
  campaign_sweep_to_json(s, sw, j);
  EXPECT_TRUE(j["sweep"]["points"][0]["checkpoints_taken"].get<bool>());
  EXPECT_FALSE(j["sweep"]["points"][1]["checkpoints_taken"].get<bool>());
  EXPECT_FALSE(j["sweep"]["points"][2]["checkpoints_taken"].get<bool>());
}

// One island, software failures at lambda, restart R, no outer sync time, no checkpoint inside a
// round (the synced parameters at the round's start are the recovery point): a round needs
// W = H s of failure-free work, which takes e^{lambda R} (e^{lambda W} - 1) / lambda on average
// (the classic time to finish W under restarts, with a restart that starts over when hit). For
// lambda = 1/h, W = 30 min, R = 10 min: e^{1/6} (e^{0.5} - 1) h = 2,759.4 s per round, so
// ETTR = 1,800 / 2,759.4 = 0.6523.
TEST(CampaignIslands, RoundsUnderFailuresMatchRestartClosedForm) {
  CampaignSpec s = zero_cost_spec(1, process(1.0 / kHour, false, FailureCategory::kSoftware));
  s.job.diloco = true;
  s.job.islands = 1;
  s.job.inner_steps_per_round = 1800;
  s.job.outer_sync_s = 0;
  s.policy = CampaignPolicy::kIslands;
  s.checkpoint.every_steps = 1800;
  s.init_s = 600;
  s.duration_s = 3000 * kHour;
  FixedCost cost(1.0, 1.0);
  const CampaignSummary r = run_campaign(s, cost, 40, 6, 2);
  const double round = std::exp(1.0 / 6) * (std::exp(0.5) - 1) * kHour;
  EXPECT_NEAR(r.ettr.mean, 1800 / round, 0.01);
  expect_time_conserved(r);
}

// Several islands under failures: waiting for every island idles the healthy ones; proceeding
// without the failed one drops its round instead, and only the recovered island idles until the
// next round starts.
TEST(CampaignIslands, WaitIdlesProceedDropsRounds) {
  CampaignSpec s = zero_cost_spec(4, process(1.0 / (20 * kHour), true));
  s.job.diloco = true;
  s.job.islands = 4;
  s.job.inner_steps_per_round = 600;
  s.job.outer_sync_s = 30;
  s.policy = CampaignPolicy::kIslands;
  s.spares = 2;
  s.init_s = 300;
  s.detect_crash_s = 30;
  s.checkpoint.every_steps = 300;
  s.duration_s = 500 * kHour;
  FixedCost cost(1.0, 10.0);
  const CampaignSummary wait = run_campaign(s, cost, 20, 2, 2);
  EXPECT_GT(wait.island_wait_h.mean, 1.0);
  EXPECT_DOUBLE_EQ(wait.dropped_rounds.mean, 0);
  expect_time_conserved(wait);
  s.outer = OuterRule::kProceed;
  const CampaignSummary proceed = run_campaign(s, cost, 20, 2, 2);
  EXPECT_GT(proceed.dropped_rounds.mean, 10);
  EXPECT_LT(proceed.island_wait_h.mean, wait.island_wait_h.mean / 2);
  expect_time_conserved(proceed);
  // Same failures (4 islands x 4 nodes / 20 h x 500 h = 400 expected) either way.
  EXPECT_NEAR(wait.interruptions.mean, 400, 4 * std::sqrt(400.0 / 20) + 10);
  EXPECT_NEAR(proceed.interruptions.mean, 400, 4 * std::sqrt(400.0 / 20) + 10);
}

// Planned interruptions write a checkpoint on demand and lose no work.
TEST(CampaignPolicy, PlannedInterruptionsLoseNoWork) {
  FailureProcess p = process(1.0 / (5 * kHour), false, FailureCategory::kPlanned);
  p.manifests = Manifestation::kPlanned;
  CampaignSpec s = zero_cost_spec(1, p);
  s.checkpoint.every_steps = 3600;
  s.init_s = 60;
  s.duration_s = 1000 * kHour;
  FixedCost cost(1.0, 1.0);
  const CampaignSummary r = run_campaign(s, cost, 20, 2, 2);
  EXPECT_GT(r.interruptions.mean, 150);
  EXPECT_DOUBLE_EQ(r.unexpected_interruptions.mean, 0);
  // Only the step under way is lost: at most 1 s per interruption.
  EXPECT_LT(r.lost_recompute_h.mean * kHour, r.interruptions.mean * 1.0);
  expect_time_conserved(r);
}

// Every policy and option together (async and in-memory checkpoints, Weibull and correlated
// hardware failures, hangs, planned stops, spares, repairs): every trial's time adds up to its
// wall time, fixed work is done exactly, and rejoining only at checkpoints keeps replicas out
// longer than rejoining at once.
TEST(CampaignInvariants, TimeAddsUpUnderEveryPolicy) {
  FailureProcess gpu = process(1.0 / (40 * kHour), true);
  FailureProcess rack = process(1.0 / (400 * kHour), true, FailureCategory::kNetwork);
  rack.distribution = FailureDistribution::kWeibull;
  rack.weibull_shape = 0.7;
  rack.nodes = 4;
  FailureProcess hang = process(1.0 / (80 * kHour), false, FailureCategory::kUnknown);
  hang.manifests = Manifestation::kHang;
  FailureProcess planned = process(1.0 / (500 * kHour), false, FailureCategory::kPlanned);
  planned.manifests = Manifestation::kPlanned;
  for (CampaignPolicy policy :
       {CampaignPolicy::kRestart, CampaignPolicy::kHotSpares, CampaignPolicy::kElastic, CampaignPolicy::kIslands})
    for (bool async : {false, true})
      for (bool fixed_work : {false, true}) {
        CampaignSpec s;
        s.job.job_nodes = 16;
        s.job.dp_replicas = 8;
        s.job.diloco = true;
        s.job.islands = 3;
        s.job.inner_steps_per_round = 500;
        s.job.outer_sync_s = 40;
        s.failures.processes = {gpu, rack, hang, planned};
        s.policy = policy;
        s.spares = policy == CampaignPolicy::kRestart ? 0 : 2;
        s.repair_mean_s = 6 * kHour;
        s.min_replicas = 4;
        s.outer = async ? OuterRule::kProceed : OuterRule::kWait;
        s.rejoin = async ? RejoinRule::kAtCheckpoint : RejoinRule::kImmediately;
        s.checkpoint.every_steps = 400;
        s.checkpoint.size_bytes = 16 * 200e9;
        s.checkpoint.write_bandwidth_per_node_Bps = 1e9;  // 200 s
        s.checkpoint.mode = async ? CheckpointMode::kAsync : CheckpointMode::kSync;
        s.checkpoint.in_memory = async;
        if (fixed_work)
          s.work_steps = 100000;
        else
          s.duration_s = 30 * kDay;
        FixedCost cost(1.5, 1000, 8);
        const CampaignSummary r = run_campaign(s, cost, 20, 17, 2);
        SCOPED_TRACE(std::string(policy_name(policy)) + (async ? " async" : " sync") +
                     (fixed_work ? " work" : " duration"));
        expect_time_conserved(r);
        EXPECT_GT(r.interruptions.mean, 10);
        if (fixed_work) {
          const double islands = policy == CampaignPolicy::kIslands ? 3 : 1;
          for (const TrialResult& t : r.per_trial)
            if (!(policy == CampaignPolicy::kIslands && async)) { EXPECT_EQ(t.steps, 100000 * islands); }
        }
      }
  // Elastic rejoin at the next checkpoint (every 1,000 steps of 1.5 s) leaves replicas out longer.
  CampaignSpec s = zero_cost_spec(16, gpu);
  s.job.dp_replicas = 8;
  s.policy = CampaignPolicy::kElastic;
  s.spares = 4;
  s.checkpoint.every_steps = 1000;
  s.duration_s = 60 * kDay;
  FixedCost cost(1.5, 1000, 8);
  const CampaignSummary now = run_campaign(s, cost, 20, 3, 2);
  s.rejoin = RejoinRule::kAtCheckpoint;
  const CampaignSummary later = run_campaign(s, cost, 20, 3, 2);
  EXPECT_GT(later.degraded_h.mean, now.degraded_h.mean);
  expect_time_conserved(later);
}

// ---- 6. binding ----------------------------------------------------------------------------------

constexpr const char* kScenario = R"(campaign:
  trials: 50
  duration: 54d
  policy: hot_spares
  spares: 64
  failures:
    profile: llama3-405b
  checkpoint:
    interval: 30min
    mode: async
)";

CampaignDefaults llama_defaults() {
  CampaignDefaults d;
  d.job_nodes = 2048;
  d.gpus_per_node = 8;
  d.dp_replicas = 128;
  d.nodes_per_replica = 16;
  d.checkpoint_bytes = 405e9 * 14;
  return d;
}

CampaignSpec bind(const std::vector<std::string>& overrides, const CampaignDefaults& d = llama_defaults()) {
  auto doc = sim::ConfigDoc::load_string(kScenario, "campaign.yaml");
  for (const auto& o : overrides) doc.apply_override(o);
  CampaignSpec s = bind_campaign(doc.root().child("campaign"), d);
  doc.check_all_used();
  return s;
}

std::string bind_error(const std::vector<std::string>& overrides, const CampaignDefaults& d = llama_defaults()) {
  try {
    bind(overrides, d);
  } catch (const sim::ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(CampaignConfig, BindsProfileAndDefaults) {
  const CampaignSpec s = bind({});
  EXPECT_EQ(s.trials, 50);
  EXPECT_EQ(s.duration_s, 54 * kDay);
  EXPECT_EQ(s.policy, CampaignPolicy::kHotSpares);
  EXPECT_EQ(s.spares, 64);
  EXPECT_EQ(s.failures.processes.size(), 18u);
  EXPECT_EQ(s.checkpoint.interval_s, 1800);
  EXPECT_EQ(s.checkpoint.every_steps, 0);
  EXPECT_EQ(s.checkpoint.mode, CheckpointMode::kAsync);
  EXPECT_EQ(s.checkpoint.size_bytes, 405e9 * 14);
  EXPECT_EQ(s.detect_hang_s, 600);  // PyTorch's NCCL default timeout
  // 30 min over 6.1 s steps: round(295.08) = 295 steps.
  FixedCost cost(6.1, 1);
  CampaignSpec small = s;
  small.job.job_nodes = 16;
  small.spares = 1;
  const CampaignSummary r = run_campaign(small, cost, 1, 1, 1);
  EXPECT_EQ(r.every_steps, 295);
}

TEST(CampaignConfig, ProfileOverridesAndExtraProcesses) {
  const CampaignSpec s =
      bind({"campaign.failures.planned=true",
            "campaign.failures.processes=[{name: Faulty GPU, distribution: weibull, shape: 0.8}, "
            "{name: rack power, category: host, mtbf_per_node: 1000d, nodes: 16, manifests: hang}]"});
  ASSERT_EQ(s.failures.processes.size(), 20u);  // 18 + planned + the rack
  const FailureProcess& gpu = s.failures.processes[0];
  EXPECT_EQ(gpu.name, "Faulty GPU");
  EXPECT_EQ(gpu.distribution, FailureDistribution::kWeibull);
  EXPECT_EQ(gpu.weibull_shape, 0.8);
  EXPECT_NEAR(gpu.rate_per_node_s * 54 * kDay * 2048, 148, 1e-9);  // rate kept from the profile
  EXPECT_EQ(s.failures.processes[18].manifests, Manifestation::kPlanned);
  EXPECT_NEAR(s.failures.processes[18].rate_per_node_s * 54 * kDay * 2048, 47, 1e-9);
  const FailureProcess& rack = s.failures.processes[19];
  EXPECT_EQ(rack.category, FailureCategory::kHost);
  EXPECT_NEAR(rack.rate_per_node_s, 1.0 / (1000 * kDay), 1e-20);
  EXPECT_EQ(rack.nodes, 16);
  EXPECT_EQ(rack.manifests, Manifestation::kHang);
  EXPECT_TRUE(rack.replace);
}

TEST(CampaignConfig, BindsTheKokolisProfiles) {
  const CampaignSpec s = bind({"campaign.failures.profile=kokolis-rsc2"});
  ASSERT_EQ(s.failures.processes.size(), 1u);
  EXPECT_EQ(s.failures.profile, "kokolis-rsc2");
  EXPECT_NEAR(per_1000_node_days(s.failures.processes[0].rate_per_node_s), 2.34, 1e-12);
  EXPECT_TRUE(s.failures.processes[0].replace);
  EXPECT_EQ(s.failures.processes[0].manifests, Manifestation::kCrash);
}

TEST(CampaignConfig, SweepListOrAuto) {
  CampaignSpec s = bind({"campaign.checkpoint.sweep=[10min, 20min]"});
  EXPECT_EQ(s.checkpoint.sweep_intervals_s, (std::vector<double>{600, 1200}));
  s = bind({"campaign.checkpoint.sweep=auto"});
  EXPECT_TRUE(s.checkpoint.sweep_auto);
  // The automatic grid: 13 points, ratio sqrt(2), centred on Daly's interval.
  s.job.job_nodes = 16;
  s.spares = 1;
  FixedCost cost(1.0, 1.0);
  const std::vector<double> g = sweep_intervals(s, cost);
  ASSERT_EQ(g.size(), 13u);
  EXPECT_NEAR(g[7] / g[6], std::sqrt(2.0), 1e-12);
}

// Checkpoints come every whole number of steps: with 10 s steps, intervals of 10, 12, 20, 26 and
// 40 s round to 1, 1, 2, 3 and 4 steps (llround(1.2) = 1, llround(2.6) = 3), so 12 s is the same
// point as 10 s and the sweep has 4 points, not 5.
TEST(CampaignConfig, SweepIntervalsThatRoundToTheSameStepsAreOnePoint) {
  CampaignSpec s = zero_cost_spec(4, process(1.0 / (100 * kHour), false));
  s.duration_s = 10 * kHour;
  s.checkpoint.sweep_intervals_s = {10, 12, 20, 26, 40};
  FixedCost cost(10.0, 1.0);
  EXPECT_EQ(sweep_intervals(s, cost), (std::vector<double>{10, 20, 26, 40}));
  const IntervalSweep sw = sweep_checkpoint_interval(s, cost, s.checkpoint.sweep_intervals_s, 2, 1, 1);
  ASSERT_EQ(sw.points.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(sw.points[i].summary.every_steps, static_cast<int64_t>(i + 1));
}

// The cluster's spare nodes (cluster.spare_nodes) are the campaign's hot spare pool unless
// `spares` is given; giving both, differently, is refused; restart has no spares.
TEST(CampaignConfig, SparesDefaultToTheClustersSpareNodes) {
  const char* yaml = "campaign: {duration: 54d, failures: {profile: llama3-405b}}\n";
  CampaignDefaults d = llama_defaults();
  d.spare_nodes = 32;
  auto bind_yaml = [&](const std::vector<std::string>& overrides) {
    auto doc = sim::ConfigDoc::load_string(yaml, "campaign.yaml");
    for (const auto& o : overrides) doc.apply_override(o);
    return bind_campaign(doc.root().child("campaign"), d);
  };
  EXPECT_EQ(bind_yaml({}).spares, 32);
  EXPECT_EQ(bind_yaml({"campaign.spares=32"}).spares, 32);
  EXPECT_EQ(bind_yaml({"campaign.policy=restart"}).spares, 0);
  try {
    bind_yaml({"campaign.spares=64"});
    ADD_FAILURE() << "spares 64 beside cluster.spare_nodes 32 was accepted";
  } catch (const sim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("campaign.spares"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cluster.spare_nodes"), std::string::npos) << e.what();
  }
  d.spare_nodes = 0;
  EXPECT_EQ(bind_yaml({}).spares, 0);
}

// Elastic on a job without whole replicas (ZeRO-2 over 128 data-parallel ranks: dp_replicas 1)
// says why, instead of asking for "2 data-parallel replicas" of a job that has 128 dp ranks.
TEST(CampaignConfig, ElasticWithoutWholeReplicasSaysWhy) {
  CampaignDefaults d = llama_defaults();
  d.dp_replicas = 1;
  const std::string e = bind_error({"campaign.policy=elastic"}, d);
  EXPECT_NE(e.find("campaign.policy"), std::string::npos) << e;
  EXPECT_NE(e.find("ZeRO and FSDP shard the state"), std::string::npos) << e;
}

// A process whose events take more nodes than the job has is refused at its key, with the job's
// node count (the model used to take the whole job without a word); the whole job (2,048 of the
// llama_defaults job's 2,048 nodes) is accepted. For islands the bound is one island's nodes.
TEST(CampaignConfig, ProcessNodesBeyondTheJobAreRefused) {
  const std::string rack = "campaign.failures.processes=[{name: rack, category: host, rate_per_1000_node_days: 1, ";
  const std::string e = bind_error({rack + "nodes: 4096}]"});
  EXPECT_NE(e.find("campaign.failures.processes[0].nodes: 4096 nodes per event, more than the job's 2048 nodes"),
            std::string::npos)
      << e;
  EXPECT_EQ(bind({rack + "nodes: 2048}]"}).failures.processes.back().nodes, 2048);
  // A profile's entry given more nodes is named the same way.
  const std::string g = bind_error({"campaign.failures.processes=[{name: Faulty GPU, nodes: 2049}]"});
  EXPECT_NE(g.find("campaign.failures.processes[0].nodes: 2049 nodes per event"), std::string::npos) << g;
}

// detection.watchdog: 0 is refused as the step's failures.watchdog: 0 is, in the same words (a
// timeout of 0 would abort every collective as it is issued); a positive one is taken.
TEST(CampaignConfig, AZeroWatchdogIsRefusedAsInTheStep) {
  const std::string e = bind_error({"campaign.detection.watchdog=0s"});
  EXPECT_NE(e.find("campaign.detection.watchdog: the watchdog timeout must be positive"), std::string::npos) << e;
  EXPECT_EQ(bind({"campaign.detection.watchdog=1s"}).detect_hang_s, 1);
  EXPECT_EQ(bind({"campaign.detection.crash=0s"}).detect_crash_s, 0);  // an instant crash report is a model
}

TEST(CampaignConfig, ErrorsNameLocationAndKey) {
  struct Case {
    std::vector<std::string> set;
    std::string key, what;
  };
  const Case cases[] = {
      {{"campaign.failures.processes=[{name: x, category: gpu, rate_per_1000_node_days: -1}]"},
       "campaign.failures.processes[0].rate_per_1000_node_days",
       "must be >= 0"},
      {{"campaign.checkpoint.interval=0s"}, "campaign.checkpoint.interval", "must be > 0"},
      {{"campaign.checkpoint={every_steps: 0}"}, "campaign.checkpoint.every_steps", "must be >= 1"},
      {{"campaign.spares=3000"}, "campaign.spares", "more spares (3000) than the job's 2048 nodes"},
      {{"campaign.policy=pray"}, "campaign.policy", "restart"},
      {{"campaign.failures.profile=bluegene"}, "campaign.failures.profile", "llama3-405b"},
      {{"campaign.failures.profile=kokolis-10-per-1000"}, "campaign.failures.profile", "kokolis-rsc1"},
      {{"campaign.failures.processes=[{name: x, category: gremlins, rate_per_1000_node_days: 1}]"},
       "campaign.failures.processes[0].category",
       "gpu"},
      {{"campaign.failures.processes=[{name: x, category: gpu, rate_per_1000_node_days: 1, distribution: weibull, "
        "shape: 0}]"},
       "campaign.failures.processes[0].shape",
       "must be > 0"},
      {{"campaign.policy=islands"}, "campaign.policy", "needs a DiLoCo job"},
      {{"campaign.duration=0d"}, "campaign.duration", "must be > 0"},
      {{"campaign.work_steps=100"}, "campaign.work_steps", "not both"},
      {{"campaign.failures.processes=[{name: x, category: gpu}]"},
       "campaign.failures.processes[0]",
       "needs rate_per_1000_node_days or mtbf_per_node"},
      {{"campaign.policy=restart"}, "campaign.spares", "use policy hot_spares"},
      {{"campaign.checkpoint.intervall=1h"}, "campaign.checkpoint.intervall", "unknown key"},
      {{"campaign.repair={mean: 1d, distribution: gaussian}"}, "campaign.repair.distribution", "fixed"},
  };
  for (const Case& c : cases) {
    const std::string e = bind_error(c.set);
    EXPECT_NE(e.find(c.key + ": "), std::string::npos) << c.set[0] << " -> " << e;
    EXPECT_NE(e.find(c.what), std::string::npos) << c.set[0] << " -> " << e;
  }
  // A value from the file is named by file:line:col (spares is on line 5, its value at column 11).
  auto d = llama_defaults();
  d.job_nodes = 32;
  EXPECT_EQ(bind_error({}, d).rfind("campaign.yaml:5:11: campaign.spares: more spares (64)", 0), 0u)
      << bind_error({}, d);
  // Elastic needs replicas that tile the nodes.
  d = llama_defaults();
  d.dp_replicas = 3;
  EXPECT_NE(bind_error({"campaign.policy=elastic"}, d).find("campaign.policy: policy elastic needs the 3"),
            std::string::npos);
}

// The replicas on each node, counted by hand from rank = sum coord[d] x stride[d] (layout.h,
// innermost first) with rank r on GPU r and 8 GPUs per node, for tp = 8, pp = 2, dp = 2 (32 ranks,
// 4 nodes):
//   default [tp, cp, pp, dp]: rank = tp + 8 pp + 16 dp: nodes 0-1 hold replica 0, nodes 2-3 replica 1;
//   Megatron-LM's [tp, cp, dp, pp]: rank = tp + 8 dp + 16 pp: node n holds replica n mod 2;
//   [dp, tp, cp, pp]: rank = dp + 2 tp + 16 pp: each node holds ranks of both replicas.
// HSDP (FSDP with dp_outer = 2, dp = 2, tp = 4, pp = 2; default order: rank = tp + 4 pp + 8 dp + 16 dp_outer):
// the replicas are the dp_outer groups, nodes 0-1 and 2-3. ZeRO has no whole replicas: replica 0.
TEST(CampaignLayout, ReplicasByNodeFollowTheOrder) {
  TrainingJob j;
  j.tp = 8;
  j.pp = 2;
  j.dp = 2;
  using Nodes = std::vector<std::vector<int32_t>>;
  EXPECT_EQ(replicas_by_node(j, 8), (Nodes{{0}, {0}, {1}, {1}}));
  j.order = {Dim::kTp, Dim::kCp, Dim::kDp, Dim::kPp, Dim::kDpOuter};
  EXPECT_EQ(replicas_by_node(j, 8), (Nodes{{0}, {1}, {0}, {1}}));
  j.order = {Dim::kDp, Dim::kTp, Dim::kCp, Dim::kPp, Dim::kDpOuter};
  EXPECT_EQ(replicas_by_node(j, 8), (Nodes{{0, 1}, {0, 1}, {0, 1}, {0, 1}}));
  TrainingJob h;
  h.tp = 4;
  h.pp = 2;
  h.dp = 2;
  h.dp_outer = 2;
  h.data_parallel = DataParallel::kFsdp;  // HSDP: FSDP with dp_outer > 1
  EXPECT_EQ(replicas_by_node(h, 8), (Nodes{{0}, {0}, {1}, {1}}));
  h.dp_outer = 1;
  h.dp = 4;
  h.data_parallel = DataParallel::kZero2;
  EXPECT_EQ(replicas_by_node(h, 8), (Nodes{{0}, {0}, {0}, {0}}));
}

// End to end: a campaign of a training job whose parallelism.order puts dp innermost. Two nodes of
// 8 H100, tp = 8, dp = 2, order [dp, tp]: rank = dp + 2 tp, so each node holds ranks of both
// replicas (CampaignLayout.ReplicasByNodeFollowTheOrder) and any node failure takes both down,
// fewer than min_replicas = 1 are left, and the job restarts in full. Elastic is then hot_spares
// (no spares here) trial by trial, to the last digit of every result, with no degraded running;
// the report says why.
TEST(CampaignLayout, ElasticWithDataParallelismInsideANodeRestartsTheJob) {
  const std::string yaml = R"(name: elastic-order
seed: 1
cluster:
  gpu: h100-sxm
  nodes: 2
  gpus_per_node: 8
  scale_up: {kind: nvswitch}
  scale_out:
    kind: fat-tree
    nic_bandwidth: 400Gbps
    tiers:
      - {name: leaf, nodes: 2}
workload:
  kind: campaign
  job:
    kind: training
    model: {preset: llama3-8b, layers: 2}
    training: {seq_len: 2048, global_batch: 2, micro_batch: 1, precision: bf16}
    parallelism: {tp: 8, dp: 2, order: [dp, tp], data_parallel: ddp}
    schedule: {kind: 1f1b}
  duration: 30d
  trials: 40
  policy: elastic
  failures:
    processes: [{name: crash, category: software, rate_per_1000_node_days: 200, replace: false}]
  checkpoint: {interval: 30min}
)";
  auto run = [&](const std::string& policy, std::string* text) {
    auto doc = sim::ConfigDoc::load_string(yaml, "elastic-order.yaml");
    doc.apply_override("workload.policy=" + policy);
    Scenario sc = bind_scenario(std::move(doc), "elastic-order", true);
    sim::Simulation sim(sc.seed);
    JobContext ctx;
    ctx.threads = 2;
    ScenarioRun r = run_scenario(sc, sim, ctx);
    if (text) *text = r.result->summary();
    nlohmann::ordered_json out;
    r.result->to_json(out);
    return out;
  };
  std::string text;
  const nlohmann::ordered_json el = run("elastic", &text);
  const nlohmann::ordered_json hs = run("hot_spares", nullptr);
  EXPECT_GT(el["results"]["interruptions"]["mean"].get<double>(), 1);  // 2 nodes x 30 d x 0.2 / d = 12
  EXPECT_EQ(el["results"]["degraded_h"]["mean"].get<double>(), 0);
  EXPECT_EQ(el["results"].dump(), hs["results"].dump());
  EXPECT_NE(text.find("a node holds ranks of 2 of the 2 data-parallel replicas"), std::string::npos) << text;
  EXPECT_NE(text.find("every failure restarts the job in full"), std::string::npos) << text;
}

// ---- speed (by hand) -----------------------------------------------------------------------------

// 1,000 trials x 54 days x 131,072 GPUs (16,384 nodes) with the Llama 3 profile (about 3,350
// failures per trial). Run by hand:
//   /usr/bin/time -v build/tests/test_workloads --gtest_also_run_disabled_tests
//       --gtest_filter='CampaignSpeed.*'
TEST(CampaignSpeed, DISABLED_Llama3At131kGpus) {
  CampaignSpec s;
  s.job.job_nodes = 16384;
  s.failures = *failure_profile("llama3-405b", false);
  s.policy = CampaignPolicy::kHotSpares;
  s.spares = 512;
  s.duration_s = 54 * kDay;
  s.checkpoint.interval_s = 300;
  s.checkpoint.size_bytes = 405e9 * 14;
  s.checkpoint.mode = CheckpointMode::kAsync;
  FixedCost cost(6.1, 16.0 * 1024 * 1024);
  const CampaignSummary r = run_campaign(s, cost, 1000, 1, 2);
  std::printf("%s", campaign_summary_text(s, r).c_str());
  EXPECT_NEAR(r.unexpected_interruptions.mean, 419.0 * 8, 30);
}

}  // namespace
}  // namespace wl

namespace wl {
namespace {
// What an MPI rank sends back for a trial must decode to the very same doubles (hexadecimal
// floating point loses nothing), or the summary on many ranks would differ from one process's.
TEST(CampaignText, AMeanOutsideItsBandIsExplained) {
  // 99 trials at ETTR 0.99 and one at 0.5: mean 0.9851, below the 2.5-97.5th percentile band
  // [0.99, 0.99], which holds the 99. The text says why instead of leaving it to look wrong.
  CampaignSpec spec;
  spec.duration_s = 54 * kDay;
  CampaignSummary s;
  s.ettr = Estimate{0.9851, 0.99, 0.99};
  const std::string below = campaign_summary_text(spec, s);
  EXPECT_NE(below.find("ETTR 98.51% [99.00%, 99.00%] (mean and 2.5-97.5th percentile over trials; the mean lies below "
                       "the band: a few trials fared far worse than the rest)"),
            std::string::npos)
      << below;
  s.ettr = Estimate{0.99, 0.98, 0.995};  // inside: nothing added
  const std::string inside = campaign_summary_text(spec, s);
  EXPECT_NE(inside.find("ETTR 99.00% [98.00%, 99.50%] (mean and 2.5-97.5th percentile over trials)\n"), std::string::npos)
      << inside;
}

TEST(CampaignTrialText, RoundTripIsExact) {
  TrialResult r;
  r.wall_s = 1.0 / 3.0;
  r.productive_s = 4665600.000000001;
  r.useful_tokens = 1e300;
  r.steps = 0.1;
  r.interruptions = 3348;
  r.unexpected = -1;
  for (size_t i = 0; i < r.by_category.size(); ++i) r.by_category[i] = static_cast<int64_t>(i * 7);
  r.detection_s = 5e-324;  // the smallest subnormal
  r.restart_s = 2.5;
  r.recompute_s = 1e-9;
  r.checkpoint_s = 123456.789;
  r.waiting_s = 0;
  r.degraded_loss_s = 7.0 / 9.0;
  r.degraded_wall_s = 1e15;
  r.island_wait_s = 3.14159;
  r.outer_sync_s = 2.0 / 7.0;
  r.dropped_rounds = 42;
  EXPECT_EQ(decode_trial(encode_trial(r)), r);
}
}  // namespace
}  // namespace wl
