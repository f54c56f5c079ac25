// compare on synthetic runs: a real regression, a difference the per-iteration noise explains, an
// improvement, and runs that must not be compared.
#include "reports/compare/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/common/error.h"

using namespace ds::report;

namespace {

// Per-iteration times drawn around `meanUs` with relative spread `cv` (deterministic seed).
IterStats iterations(double meanUs, double cv, int n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(meanUs, meanUs * cv);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(std::max(0.1, d(gen)));
  return computeIterStats(v);
}

SweepMeasurement row(std::size_t bytes, double timeUs, double cv, int n, unsigned seed,
                     const std::string& coll = "allreduce") {
  SweepMeasurement m;
  m.backend = "gloo";
  m.collective = coll;
  m.dtype = "f32";
  m.op = "sum";
  m.worldSize = 2;
  m.requestedBytes = m.bytes = bytes;
  m.count = bytes / 4;
  m.busFactor = 1;
  PlaceResult& p = m.outOfPlace;
  p.measured = true;
  p.iter = iterations(timeUs, cv, n, seed);
  p.iters = n;
  p.timeUs = p.iter.avgUs;
  p.algBw = static_cast<double>(bytes) / (p.timeUs * 1e3);
  p.busBw = p.algBw;
  p.wrong = 0;
  return m;
}

RunFile sweepRun(std::vector<SweepMeasurement> rows, std::vector<std::string> hosts = {"node-a"},
                 int ws = 2) {
  SweepRun s;
  s.metadata.worldSize = ws;
  s.metadata.hosts = hosts;
  for (auto& r : rows) r.worldSize = ws;
  s.results = std::move(rows);
  s.summary = summarize(s.results);
  RunFile f = classifyRun(sweepToJson(s), "run.json");
  return f;
}

const ComparedItem& only(const CompareResult& r) {
  EXPECT_EQ(r.items.size(), 1u);
  return r.items.at(0);
}

}  // namespace

TEST(Compare, ARealSlowdownIsARegression) {
  // 1 MiB: 100 us -> 125 us with 2% per-iteration spread over 50 iterations: far beyond noise.
  auto base = sweepRun({row(1 << 20, 100, 0.02, 50, 1)});
  auto cur = sweepRun({row(1 << 20, 125, 0.02, 50, 2)});
  auto r = compareRuns(base, cur, {});
  const auto& it = only(r);
  EXPECT_EQ(it.verdict, Verdict::kRegressed) << it.reason;
  EXPECT_EQ(it.metric, "busbw");
  EXPECT_LT(it.changePct, -15);
  EXPECT_TRUE(it.noiseKnown);
  EXPECT_EQ(r.regressions, 1);
  EXPECT_EQ(r.exitCode(), 1);
  auto text = formatCompareText(r);
  EXPECT_NE(text.find("Regressions (1)"), std::string::npos) << text;
  EXPECT_NE(text.find("allreduce gloo f32 sum 1048576 B out-of-place"), std::string::npos) << text;
  EXPECT_NE(text.find("Verdict: REGRESSION in 1 of 1"), std::string::npos) << text;
  EXPECT_EQ(compareToJson(r)["items"][0]["verdict"], "regressed");
}

TEST(Compare, ADifferenceTheSpreadExplainsIsNoise) {
  // 10% slower on average, but the per-iteration times spread 60% over only 5 iterations.
  auto base = sweepRun({row(4096, 100, 0.6, 5, 3)});
  auto cur = sweepRun({row(4096, 100, 0.6, 5, 4)});
  // Force the means 10% apart while keeping each run's own spread.
  cur.sweep->results[0].outOfPlace.timeUs = base.sweep->results[0].outOfPlace.timeUs * 1.10;
  cur.sweep->results[0].outOfPlace.busBw = base.sweep->results[0].outOfPlace.busBw / 1.10;
  auto r = compareRuns(base, cur, {});
  const auto& it = only(r);
  EXPECT_EQ(it.verdict, Verdict::kNoise) << it.reason;
  EXPECT_GT(std::fabs(it.changePct), 5);
  EXPECT_GT(it.noise, std::fabs(it.curTime - it.baseTime));
  EXPECT_EQ(r.exitCode(), 0);
  EXPECT_NE(formatCompareText(r).find("1 beyond it but within noise"), std::string::npos);
  // The same 10% with a tight spread is a regression: the noise test, not the threshold, decided.
  auto tightBase = sweepRun({row(4096, 100, 0.01, 200, 5)});
  auto tightCur = sweepRun({row(4096, 110, 0.01, 200, 6)});
  EXPECT_EQ(only(compareRuns(tightBase, tightCur, {})).verdict, Verdict::kRegressed);
}

TEST(Compare, ThresholdAloneKeepsSmallChangesUnchanged) {
  auto base = sweepRun({row(1 << 20, 100, 0.001, 500, 7)});
  auto cur = sweepRun({row(1 << 20, 103, 0.001, 500, 8)});
  auto r = compareRuns(base, cur, {});
  EXPECT_EQ(only(r).verdict, Verdict::kUnchanged) << only(r).reason;
  CompareOptions strict;
  strict.thresholdPct = 1;
  EXPECT_EQ(only(compareRuns(base, cur, strict)).verdict, Verdict::kRegressed);
}

TEST(Compare, AFasterRunIsAnImprovement) {
  auto base = sweepRun({row(1 << 20, 200, 0.02, 50, 9), row(8, 20, 0.02, 50, 10)});
  auto cur = sweepRun({row(1 << 20, 150, 0.02, 50, 11), row(8, 20, 0.02, 50, 12)});
  auto r = compareRuns(base, cur, {});
  ASSERT_EQ(r.items.size(), 2u);
  EXPECT_EQ(r.items[0].verdict, Verdict::kImproved);
  EXPECT_GT(r.items[0].changePct, 25);
  EXPECT_EQ(r.improvements, 1);
  EXPECT_EQ(r.unchanged + r.noisy, 1);
  EXPECT_EQ(r.exitCode(), 0);
  EXPECT_NE(formatCompareText(r).find("Improvements (1)"), std::string::npos);
}

TEST(Compare, RowsInOneRunOnlyAndWrongDataAreListedNotCompared) {
  auto base = sweepRun({row(1024, 10, 0.02, 20, 1), row(1024, 10, 0.02, 20, 2, "allgather")});
  auto curRows = std::vector<SweepMeasurement>{row(1024, 10, 0.02, 20, 3), row(2048, 10, 0.02, 20, 4)};
  curRows[0].outOfPlace.wrong = 3;
  auto cur = sweepRun(curRows);
  auto r = compareRuns(base, cur, {});
  EXPECT_TRUE(r.items.empty());
  EXPECT_EQ(r.exitCode(), 2);
  auto text = formatCompareText(r);
  EXPECT_NE(text.find("allgather gloo f32 sum (1 row(s)): only in the baseline"), std::string::npos) << text;
  EXPECT_NE(text.find("allreduce gloo f32 sum (1 row(s)): only in the current run"), std::string::npos)
      << text;
  EXPECT_NE(text.find("wrong data"), std::string::npos) << text;
}

TEST(Compare, DifferentWorldSizeOrHostsAreNotCompared) {
  auto base = sweepRun({row(1024, 10, 0.02, 20, 1)}, {"node-a"}, 2);
  auto bigger = sweepRun({row(1024, 20, 0.02, 20, 1)}, {"node-a"}, 4);
  auto r = compareRuns(base, bigger, {});
  EXPECT_FALSE(r.comparable);
  EXPECT_EQ(r.exitCode(), 2);
  EXPECT_NE(formatCompareText(r).find("World size differs: 2 rank(s) in the baseline, 4 in the current run"),
            std::string::npos);

  auto elsewhere = sweepRun({row(1024, 30, 0.02, 20, 2)}, {"node-b"}, 2);
  r = compareRuns(base, elsewhere, {});
  EXPECT_FALSE(r.comparable);
  EXPECT_NE(formatCompareText(r).find("Hosts differ: baseline ran on node-a, current on node-b"),
            std::string::npos);
  CompareOptions o;
  o.ignoreHosts = true;
  r = compareRuns(base, elsewhere, o);
  EXPECT_TRUE(r.comparable);
  EXPECT_EQ(r.exitCode(), 1);
  EXPECT_NE(r.mismatches.at(0).find("Compared anyway"), std::string::npos);
}

TEST(Compare, TrainRunsMatchByConfigurationOnStepTime) {
  auto train = [](double p50, double p90, double cap) {
    TrainRunRecord t;
    t.model = "mlp:64x2";
    t.worldSize = 2;
    t.backend = "gloo";
    t.perRankBatch = 32;
    t.steps = 40;
    t.optimizer = "sgd";
    t.bucketCapMb = cap;
    t.commHook = "allreduce";
    t.stepMs.p50 = p50;
    t.stepMs.p90 = p90;
    t.stepMs.samples = 80;
    return t;
  };
  nlohmann::json meta{{"world_size", 2}, {"hosts", {"node-a", "node-a"}}};
  auto base = classifyRun(trainToJson({train(10, 10.5, 25), train(12, 12.5, 5)}, meta), "a.json");
  auto cur = classifyRun(trainToJson({train(13, 13.5, 25), train(12.1, 12.6, 1)}, meta), "b.json");
  auto r = compareRuns(base, cur, {});
  ASSERT_EQ(r.items.size(), 1u);
  EXPECT_EQ(r.items[0].metric, "step");
  EXPECT_FALSE(r.items[0].higherIsBetter);
  EXPECT_EQ(r.items[0].verdict, Verdict::kRegressed);
  EXPECT_NEAR(r.items[0].changePct, -30, 1e-9);
  EXPECT_EQ(r.notCompared.size(), 2u);
  EXPECT_EQ(r.exitCode(), 1);
  // Same medians, wide spread over few steps: noise.
  auto wide = train(10, 20, 25);
  wide.steps = 3;
  auto wideCur = train(11, 21, 25);
  wideCur.steps = 3;
  auto rb = classifyRun(trainToJson({wide}, meta), "a.json");
  auto rc = classifyRun(trainToJson({wideCur}, meta), "b.json");
  EXPECT_EQ(compareRuns(rb, rc, {}).items.at(0).verdict, Verdict::kNoise);
}

TEST(Compare, KindsThatCannotBeComparedAreRefused) {
  auto sweep = sweepRun({row(1024, 10, 0.02, 20, 1)});
  nlohmann::json meta{{"world_size", 2}, {"hosts", {"node-a"}}};
  auto train = classifyRun(trainToJson({TrainRunRecord{}}, meta), "t.json");
  auto r = compareRuns(sweep, train, {});
  EXPECT_FALSE(r.comparable);
  EXPECT_EQ(r.exitCode(), 2);
  auto diag = classifyRun(diagToJson(DiagReport{}), "d.json");
  EXPECT_THROW(compareRuns(diag, diag, {}), ds::ConfigError);
}

TEST(Compare, ARunWithoutHostsIsComparedWithANote) {
  auto base = sweepRun({row(1024, 10, 0.02, 20, 1)}, {}, 2);
  auto cur = sweepRun({row(1024, 10, 0.02, 20, 2)}, {"node-a"}, 2);
  auto r = compareRuns(base, cur, {});
  EXPECT_TRUE(r.comparable);
  EXPECT_EQ(r.items.size(), 1u);
  EXPECT_NE(r.mismatches.at(0).find("The baseline does not record its hosts"), std::string::npos);
}
