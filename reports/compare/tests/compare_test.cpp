// compare on synthetic runs: real regressions found by the U test on repeats, one run per side
// honestly inconclusive, differences the repeats' spread explains, several runs per side, the
// false-discovery step over many rows, the whole-sweep interval, and runs that must not be compared.
#include "reports/compare/compare.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/common/error.h"
#include "reports/compare/tests/compare_fixtures.h"

using namespace ds::report;
using ds::report::testing::row;

namespace {

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

TEST(Compare, ARealSlowdownWithRepeatsIsARegression) {
  // 1 MiB: 100 us -> 125 us, 5 repeats a side with 2% spread: the samples separate completely.
  auto base = sweepRun({row(1 << 20, 100, 0.02, 5, 1)});
  auto cur = sweepRun({row(1 << 20, 125, 0.02, 5, 2)});
  auto r = compareRuns(base, cur, {});
  const auto& it = only(r);
  EXPECT_EQ(it.verdict, Verdict::kRegressed) << it.reason;
  EXPECT_EQ(it.metric, "busbw");
  EXPECT_NEAR(it.changePct, -20, 3);
  EXPECT_EQ(it.baseSamples.size(), 5u);
  EXPECT_NEAR(it.p, 2.0 / 252.0, 1e-12);
  EXPECT_TRUE(it.noiseKnown);
  EXPECT_LT(it.noisePct, 6);
  EXPECT_EQ(r.regressions, 1);
  EXPECT_EQ(r.exitCode(), 1);
  auto text = formatCompareText(r);
  EXPECT_NE(text.find("Regressions (1)"), std::string::npos) << text;
  EXPECT_NE(text.find("allreduce gloo f32 sum 1048576 B out-of-place"), std::string::npos) << text;
  EXPECT_NE(text.find("Verdict: REGRESSION in 1 of 1"), std::string::npos) << text;
  auto j = compareToJson(r);
  EXPECT_EQ(j["items"][0]["verdict"], "regressed");
  EXPECT_EQ(j["items"][0]["base_samples"].size(), 5u);
  EXPECT_EQ(j["counts"]["inconclusive"], 0);
}

TEST(Compare, OneRunPerSideWithoutRepeatsIsInconclusiveNeverARegression) {
  // Schema 1.0 files: one time per row. A 60% slowdown of one sample against one sample is beyond
  // the threshold, but nothing says how much of it is noise.
  auto base = sweepRun({row(4096, 100, 0, 1, 3), row(8192, 100, 0, 1, 4)});
  auto cur = sweepRun({row(4096, 160, 0, 1, 5), row(8192, 102, 0, 1, 6)});
  auto r = compareRuns(base, cur, {});
  ASSERT_EQ(r.items.size(), 2u);
  EXPECT_EQ(r.items[0].verdict, Verdict::kInconclusive) << r.items[0].reason;
  EXPECT_NE(r.items[0].reason.find("run with --repeat 5"), std::string::npos) << r.items[0].reason;
  EXPECT_EQ(r.items[1].verdict, Verdict::kUnchanged);
  EXPECT_FALSE(r.items[0].noiseKnown);
  EXPECT_EQ(r.regressions, 0);
  EXPECT_EQ(r.overall, Verdict::kInconclusive);
  EXPECT_EQ(r.exitCode(), kCompareExitInconclusive);
  auto text = formatCompareText(r);
  EXPECT_NE(text.find("Verdict: INCONCLUSIVE (exit 4)"), std::string::npos) << text;
  EXPECT_NE(text.find("--repeat 5"), std::string::npos) << text;
  // Within the threshold everywhere: a pass, even with one sample.
  auto same = sweepRun({row(4096, 101, 0, 1, 7), row(8192, 99, 0, 1, 8)});
  EXPECT_EQ(compareRuns(base, same, {}).exitCode(), 0);
}

TEST(Compare, OverlappingRepeatsAreNoiseNotARegression) {
  // Medians 10% apart, but each side's repeats spread 30%: the U test cannot tell them apart.
  auto base = sweepRun({row(4096, 100, 0.3, 5, 9)});
  auto cur = sweepRun({row(4096, 100, 0.3, 5, 10)});
  auto r = compareRuns(base, cur, {});
  const auto& it = only(r);
  ASSERT_GT(std::fabs(it.changePct), 5) << "the seeds must give a change beyond the threshold";
  EXPECT_EQ(it.verdict, Verdict::kNoise) << it.reason;
  EXPECT_GT(it.p, 0.05);
  EXPECT_GT(it.noisePct, 10);
  EXPECT_NE(r.exitCode(), 1);
}

TEST(Compare, ThresholdIsTheFloorOfASignificantChange) {
  // 3% slower with 0.1% spread: significant, but below the 5% that matters.
  auto base = sweepRun({row(1 << 20, 100, 0.001, 5, 11)});
  auto cur = sweepRun({row(1 << 20, 103, 0.001, 5, 12)});
  EXPECT_EQ(only(compareRuns(base, cur, {})).verdict, Verdict::kUnchanged);
  EXPECT_EQ(compareRuns(base, cur, {}).exitCode(), 0);
  CompareOptions strict;
  strict.thresholdPct = 1;
  EXPECT_EQ(only(compareRuns(base, cur, strict)).verdict, Verdict::kRegressed);
}

TEST(Compare, AFasterRunIsAnImprovement) {
  auto base = sweepRun({row(1 << 20, 200, 0.02, 5, 13), row(8, 20, 0.02, 5, 14)});
  auto cur = sweepRun({row(1 << 20, 150, 0.02, 5, 15), row(8, 20, 0.02, 5, 16)});
  auto r = compareRuns(base, cur, {});
  ASSERT_EQ(r.items.size(), 2u);
  EXPECT_EQ(r.items[0].verdict, Verdict::kImproved);
  EXPECT_GT(r.items[0].changePct, 25);
  EXPECT_EQ(r.improvements, 1);
  EXPECT_EQ(r.unchanged + r.noisy, 1);
  EXPECT_NE(r.exitCode(), 1);
  EXPECT_NE(formatCompareText(r).find("Improvements (1)"), std::string::npos);
}

TEST(Compare, SeveralRunsPerSidePoolTheirSamples) {
  // Four single-pass runs a side (old files, no repeats): one sample each, pooled to 4 vs 4.
  std::vector<RunFile> base, cur;
  for (int i = 0; i < 4; ++i) {
    base.push_back(sweepRun({row(1 << 20, 100 + i, 0, 1, 20)}));
    cur.push_back(sweepRun({row(1 << 20, 120 + i, 0, 1, 21)}));
  }
  auto r = compareRuns(base, cur, {});
  const auto& it = only(r);
  EXPECT_EQ(it.baseSamples.size(), 4u);
  EXPECT_EQ(it.verdict, Verdict::kRegressed) << it.reason;
  EXPECT_NEAR(it.p, 2.0 / 70.0, 1e-12);
  EXPECT_EQ(r.base.paths.size(), 4u);
  EXPECT_NE(formatCompareText(r).find("4 runs:"), std::string::npos);
  // Three a side cannot reach 5%: inconclusive, not a regression.
  base.pop_back();
  cur.pop_back();
  EXPECT_EQ(only(compareRuns(base, cur, {})).verdict, Verdict::kInconclusive);
  // Two runs of 3 repeats a side: 6 vs 6.
  std::vector<RunFile> b2{sweepRun({row(1 << 20, 100, 0.02, 3, 22)}),
                          sweepRun({row(1 << 20, 100, 0.02, 3, 23)})};
  std::vector<RunFile> c2{sweepRun({row(1 << 20, 130, 0.02, 3, 24)}),
                          sweepRun({row(1 << 20, 130, 0.02, 3, 25)})};
  auto r2 = compareRuns(b2, c2, {});
  EXPECT_EQ(only(r2).curSamples.size(), 6u);
  EXPECT_EQ(only(r2).verdict, Verdict::kRegressed);
}

TEST(Compare, ALoneBorderlineRowAmongManyIsNotADiscovery) {
  // 20 sizes; 19 alike on both sides, one 20% slower with 5 repeats: p = 2/252 = 0.008, above the
  // Benjamini-Hochberg bar of 0.05 / 20 for a single discovery. With 8 repeats (p = 2/12870) it is.
  auto make = [](int repeats, double slow) {
    std::vector<SweepMeasurement> b, c;
    for (int i = 0; i < 20; ++i) {
      const std::size_t bytes = std::size_t{1024} << i;
      b.push_back(row(bytes, 100, 0.02, repeats, 100 + i));
      c.push_back(row(bytes, i == 7 ? 100 * slow : 100, 0.02, repeats, 200 + i));
    }
    return std::pair{sweepRun(b), sweepRun(c)};
  };
  auto [b5, c5] = make(5, 1.25);
  auto r5 = compareRuns(b5, c5, {});
  EXPECT_EQ(r5.items.at(7).verdict, Verdict::kNoise) << r5.items.at(7).reason;
  EXPECT_EQ(r5.regressions, 0);
  auto [b8, c8] = make(8, 1.25);
  auto r8 = compareRuns(b8, c8, {});
  EXPECT_EQ(r8.items.at(7).verdict, Verdict::kRegressed) << r8.items.at(7).reason;
  EXPECT_EQ(r8.exitCode(), 1);
}

TEST(Compare, TheWholeSweepGetsAGeometricMeanIntervalVerdict) {
  std::vector<SweepMeasurement> b, c, same;
  for (int i = 0; i < 12; ++i) {
    const std::size_t bytes = std::size_t{1024} << i;
    b.push_back(row(bytes, 100, 0.02, 5, 300 + i));
    c.push_back(row(bytes, 112, 0.02, 5, 400 + i));
    same.push_back(row(bytes, 100, 0.02, 5, 500 + i));
  }
  auto r = compareRuns(sweepRun(b), sweepRun(c), {});
  EXPECT_EQ(r.overall, Verdict::kRegressed) << r.overallReason;
  EXPECT_TRUE(r.overallIntervalKnown);
  EXPECT_NEAR(r.overallChangePct, -10.7, 1.5);
  EXPECT_LT(r.overallHiPct, -5);
  EXPECT_LE(r.overallLoPct, r.overallChangePct);
  EXPECT_EQ(r.exitCode(), 1);
  auto j = compareToJson(r);
  EXPECT_EQ(j["overall"]["verdict"], "regressed");
  EXPECT_EQ(j["overall"]["interval_pct"].size(), 2u);
  auto aa = compareRuns(sweepRun(b), sweepRun(same), {});
  EXPECT_EQ(aa.overall, Verdict::kUnchanged) << aa.overallReason;
  EXPECT_EQ(aa.exitCode(), 0);
  // The same inputs give the same interval (a seeded bootstrap).
  auto again = compareRuns(sweepRun(b), sweepRun(c), {});
  EXPECT_DOUBLE_EQ(again.overallLoPct, r.overallLoPct);
}

TEST(Compare, RepeatsSurviveTheJsonAndOlderFilesStillLoad) {
  auto run = sweepRun({row(1 << 20, 100, 0.02, 4, 30)});
  const auto& p = run.sweep->results.at(0).outOfPlace;
  ASSERT_EQ(p.repeats.size(), 4u);
  // The row shows the median repeat (the lower middle one of 4).
  std::vector<double> t;
  for (const auto& x : p.repeats) t.push_back(x.timeUs);
  std::sort(t.begin(), t.end());
  EXPECT_DOUBLE_EQ(p.timeUs, t[1]);
  auto j = sweepToJson(*run.sweep);
  EXPECT_EQ(j["results"][0]["out_of_place"]["repeats"].size(), 4u);
  EXPECT_EQ(j["schema_version"], "1.1");
  // A 1.0 file: no "repeats", no args.repeat.
  j["schema_version"] = "1.0";
  j["results"][0]["out_of_place"].erase("repeats");
  j["args"].erase("repeat");
  auto old = classifyRun(j, "old.json");
  EXPECT_TRUE(old.sweep->results.at(0).outOfPlace.repeats.empty());
  EXPECT_EQ(old.sweep->args.repeat, 1);
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

TEST(Compare, TrainRunsMatchByConfigurationOnStepTimeRepeats) {
  auto train = [](double p50, double cap, int repeats, double spread) {
    TrainRunRecord t;
    t.model = "mlp:64x2";
    t.worldSize = 2;
    t.backend = "gloo";
    t.perRankBatch = 32;
    t.steps = 40;
    t.optimizer = "sgd";
    t.bucketCapMb = cap;
    t.commHook = "allreduce";
    std::vector<TrainRunRecord> reps;
    for (int r = 0; r < repeats; ++r) {
      TrainRunRecord x = t;
      x.stepMs.p50 = p50 * (1 + spread * (r - (repeats - 1) / 2.0));
      x.stepMs.p90 = x.stepMs.p50 * 1.05;
      x.stepMs.samples = 80;
      reps.push_back(x);
    }
    return mergeTrainRepeats(reps);
  };
  nlohmann::json meta{{"world_size", 2}, {"hosts", {"node-a", "node-a"}}};
  auto base = classifyRun(trainToJson({train(10, 25, 5, 0.01), train(12, 5, 5, 0.01)}, meta), "a.json");
  auto cur = classifyRun(trainToJson({train(13, 25, 5, 0.01), train(12.1, 1, 5, 0.01)}, meta), "b.json");
  ASSERT_EQ(base.train->at(0).repeats.size(), 5u);
  auto r = compareRuns(base, cur, {});
  ASSERT_EQ(r.items.size(), 1u);
  EXPECT_EQ(r.items[0].metric, "step");
  EXPECT_FALSE(r.items[0].higherIsBetter);
  EXPECT_EQ(r.items[0].verdict, Verdict::kRegressed) << r.items[0].reason;
  EXPECT_NEAR(r.items[0].changePct, -30, 1e-9);
  EXPECT_EQ(r.notCompared.size(), 2u);
  EXPECT_EQ(r.exitCode(), 1);
  // One pass a side (no repeats): 10% slower is inconclusive, whatever the per-step spread says.
  auto rb = classifyRun(trainToJson({train(10, 25, 1, 0)}, meta), "a.json");
  auto rc = classifyRun(trainToJson({train(11, 25, 1, 0)}, meta), "b.json");
  EXPECT_EQ(compareRuns(rb, rc, {}).items.at(0).verdict, Verdict::kInconclusive);
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
