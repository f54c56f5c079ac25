// compare on synthetic runs: real regressions found by the U test over runs, one run per side
// honestly inconclusive however tight its repeats, differences the run-to-run spread explains, the
// false-discovery step over many rows, the whole-run verdict, and runs that must not be compared.
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

// n runs of one row each: run i is `row(bytes, timeUs, cv, 3, seed + i)`, three repeats spread by cv,
// so each run's sample (its median repeat) differs from the next as separate runs do.
std::vector<RunFile> runsOf(int n, std::size_t bytes, double timeUs, double cv, unsigned seed) {
  std::vector<RunFile> v;
  for (int i = 0; i < n; ++i) v.push_back(sweepRun({row(bytes, timeUs, cv, 3, seed + i)}));
  return v;
}

TEST(Compare, ARealSlowdownOverFiveRunsASideIsARegression) {
  // 1 MiB: 100 us -> 125 us, 5 runs a side with 2% spread: the runs separate completely.
  auto base = runsOf(5, 1 << 20, 100, 0.02, 1);
  auto cur = runsOf(5, 1 << 20, 125, 0.02, 11);
  auto r = compareRuns(base, cur, {});
  const auto& it = only(r);
  EXPECT_EQ(it.verdict, Verdict::kRegressed) << it.reason;
  EXPECT_EQ(it.metric, "busbw");
  EXPECT_NEAR(it.changePct, -20, 3);
  EXPECT_EQ(it.baseSamples.size(), 5u);
  EXPECT_EQ(it.baseRepeats, 15);
  EXPECT_NEAR(it.p, 2.0 / 252.0, 1e-12);
  EXPECT_TRUE(it.noiseKnown);
  EXPECT_LT(it.noisePct, 6);
  EXPECT_EQ(r.regressions, 1);
  EXPECT_EQ(r.overall, Verdict::kRegressed) << r.overallReason;
  EXPECT_EQ(r.exitCode(), 1);
  auto text = formatCompareText(r);
  EXPECT_NE(text.find("Regressions (1)"), std::string::npos) << text;
  EXPECT_NE(text.find("allreduce gloo f32 sum 1048576 B out-of-place"), std::string::npos) << text;
  EXPECT_NE(text.find("Verdict: REGRESSION in 1 of 1"), std::string::npos) << text;
  auto j = compareToJson(r);
  EXPECT_EQ(j["items"][0]["verdict"], "regressed");
  EXPECT_EQ(j["items"][0]["base_samples"].size(), 5u);
  EXPECT_EQ(j["items"][0]["base_repeats"], 15);
  EXPECT_EQ(j["overall"]["base_runs"], 5);
  EXPECT_EQ(j["counts"]["inconclusive"], 0);
}

TEST(Compare, OneRunASideNeverCriesRegressionOnItsRepeatsAlone) {
  // One run a side with 8 tight repeats, 25% slower: the repeats separate completely (pooled, the U
  // test would give p = 2/12870), but they all share one process and one minute of the machine.
  // Two runs of the same build differ more than that on a shared machine: inconclusive, exit 4.
  auto base = sweepRun({row(1 << 20, 100, 0.01, 8, 40), row(1 << 16, 10, 0.01, 8, 41)});
  auto cur = sweepRun({row(1 << 20, 125, 0.01, 8, 42), row(1 << 16, 12.5, 0.01, 8, 43)});
  auto r = compareRuns(base, cur, {});
  ASSERT_EQ(r.items.size(), 2u);
  for (const auto& it : r.items) {
    EXPECT_EQ(it.verdict, Verdict::kInconclusive) << it.reason;
    EXPECT_EQ(it.baseSamples.size(), 1u);
    EXPECT_EQ(it.baseRepeats, 8);
    EXPECT_NE(it.reason.find("compare 5 runs a side"), std::string::npos) << it.reason;
  }
  EXPECT_EQ(r.overall, Verdict::kInconclusive) << r.overallReason;
  EXPECT_FALSE(r.overallIntervalKnown);
  EXPECT_EQ(r.exitCode(), kCompareExitInconclusive);
  auto text = formatCompareText(r);
  EXPECT_NE(text.find("Verdict: INCONCLUSIVE (exit 4)"), std::string::npos) << text;
  EXPECT_NE(text.find("compare 5 runs a side"), std::string::npos) << text;
  EXPECT_EQ(text.find("REGRESSION"), std::string::npos) << text;
}

TEST(Compare, OneRunPerSideWithoutRepeatsIsInconclusiveNeverARegression) {
  // Schema 1.0 files: one time per row. A 60% slowdown of one sample against one sample is beyond
  // the threshold, but nothing says how much of it is noise.
  auto base = sweepRun({row(4096, 100, 0, 1, 3), row(8192, 100, 0, 1, 4)});
  auto cur = sweepRun({row(4096, 160, 0, 1, 5), row(8192, 102, 0, 1, 6)});
  auto r = compareRuns(base, cur, {});
  ASSERT_EQ(r.items.size(), 2u);
  EXPECT_EQ(r.items[0].verdict, Verdict::kInconclusive) << r.items[0].reason;
  EXPECT_NE(r.items[0].reason.find("compare 5 runs a side"), std::string::npos) << r.items[0].reason;
  EXPECT_EQ(r.items[1].verdict, Verdict::kUnchanged);
  EXPECT_FALSE(r.items[0].noiseKnown);
  EXPECT_EQ(r.regressions, 0);
  EXPECT_EQ(r.overall, Verdict::kInconclusive);
  EXPECT_EQ(r.exitCode(), kCompareExitInconclusive);
  // Within the threshold everywhere: a pass, even with one sample.
  auto same = sweepRun({row(4096, 101, 0, 1, 7), row(8192, 99, 0, 1, 8)});
  EXPECT_EQ(compareRuns(base, same, {}).exitCode(), 0);
}

TEST(Compare, OverlappingRunsAreNoiseNotARegression) {
  // Each side's runs spread 30%: the U test cannot tell the sides apart.
  auto base = runsOf(5, 4096, 100, 0.3, 9);
  auto cur = runsOf(5, 4096, 100, 0.3, 19);
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
  auto base = runsOf(5, 1 << 20, 100, 0.001, 11);
  auto cur = runsOf(5, 1 << 20, 103, 0.001, 21);
  EXPECT_EQ(only(compareRuns(base, cur, {})).verdict, Verdict::kUnchanged);
  EXPECT_EQ(compareRuns(base, cur, {}).exitCode(), 0);
  CompareOptions strict;
  strict.thresholdPct = 1;
  EXPECT_EQ(only(compareRuns(base, cur, strict)).verdict, Verdict::kRegressed);
}

TEST(Compare, AFasterRunIsAnImprovement) {
  std::vector<RunFile> base, cur;
  for (unsigned i = 0; i < 5; ++i) {
    base.push_back(sweepRun({row(1 << 20, 200, 0.02, 3, 13 + i), row(8, 20, 0.02, 3, 23 + i)}));
    cur.push_back(sweepRun({row(1 << 20, 150, 0.02, 3, 33 + i), row(8, 20, 0.02, 3, 43 + i)}));
  }
  auto r = compareRuns(base, cur, {});
  ASSERT_EQ(r.items.size(), 2u);
  EXPECT_EQ(r.items[0].verdict, Verdict::kImproved);
  EXPECT_GT(r.items[0].changePct, 25);
  EXPECT_EQ(r.improvements, 1);
  EXPECT_EQ(r.unchanged + r.noisy, 1);
  EXPECT_NE(r.exitCode(), 1);
  EXPECT_NE(formatCompareText(r).find("Improvements (1)"), std::string::npos);
}

TEST(Compare, EachRunIsOneSample) {
  // Four single-pass runs a side (old files, no repeats): 4 vs 4.
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
  // Two runs of 3 repeats a side are 2 vs 2 samples, not 6 vs 6: still inconclusive.
  std::vector<RunFile> b2{sweepRun({row(1 << 20, 100, 0.02, 3, 22)}),
                          sweepRun({row(1 << 20, 100, 0.02, 3, 23)})};
  std::vector<RunFile> c2{sweepRun({row(1 << 20, 130, 0.02, 3, 24)}),
                          sweepRun({row(1 << 20, 130, 0.02, 3, 25)})};
  auto r2 = compareRuns(b2, c2, {});
  EXPECT_EQ(only(r2).curSamples.size(), 2u);
  EXPECT_EQ(only(r2).curRepeats, 6);
  EXPECT_EQ(only(r2).verdict, Verdict::kInconclusive);
  // A run's sample is the median of its repeats.
  EXPECT_DOUBLE_EQ(only(r2).baseSamples[0], b2[0].sweep->results[0].outOfPlace.timeUs);
}

TEST(Compare, ALoneBorderlineRowAmongManyIsNotADiscovery) {
  // 20 sizes; 19 alike on both sides, one 20% slower over 5 runs a side: p = 2/252 = 0.008, above
  // the Benjamini-Hochberg bar of 0.05 / 20 for a single discovery among 20 items.
  // With 8 runs (p = 2/12870) it is one.
  auto make = [](int runs, double slow) {
    std::vector<RunFile> base, cur;
    for (int k = 0; k < runs; ++k) {
      std::vector<SweepMeasurement> b, c;
      for (int i = 0; i < 20; ++i) {
        const std::size_t bytes = std::size_t{1024} << i;
        b.push_back(row(bytes, 100, 0.02, 3, 100 + 40 * k + i));
        c.push_back(row(bytes, i == 7 ? 100 * slow : 100, 0.02, 3, 1000 + 40 * k + i));
      }
      base.push_back(sweepRun(b));
      cur.push_back(sweepRun(c));
    }
    return std::pair{base, cur};
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

TEST(Compare, TheWholeRunGetsAGeometricMeanVerdictOverItsRuns) {
  // 12 sizes 12% slower over 5 runs a side; and the same 12 sizes with a run-level shift: every
  // size of a run moves together by +-10% from run to run, as a shared machine makes them.
  auto sweep = [](double t, unsigned seed, double runShift) {
    std::vector<SweepMeasurement> v;
    for (int i = 0; i < 12; ++i) v.push_back(row(std::size_t{1024} << i, t * runShift, 0.02, 3, seed + i));
    return sweepRun(v);
  };
  std::vector<RunFile> b, c, same;
  const double shifts[] = {1.0, 0.9, 1.1, 0.95, 1.05};
  for (unsigned k = 0; k < 5; ++k) {
    b.push_back(sweep(100, 300 + 20 * k, 1.0));
    c.push_back(sweep(112, 400 + 20 * k, 1.0));
    same.push_back(sweep(100, 500 + 20 * k, shifts[k]));
  }
  auto r = compareRuns(b, c, {});
  EXPECT_EQ(r.overall, Verdict::kRegressed) << r.overallReason;
  EXPECT_TRUE(r.overallIntervalKnown);
  EXPECT_NEAR(r.overallChangePct, -10.7, 1.5);
  EXPECT_LT(r.overallHiPct, -5);
  EXPECT_LE(r.overallLoPct, r.overallChangePct);
  EXPECT_NEAR(r.overallP, 2.0 / 252.0, 1e-12);
  EXPECT_EQ(r.exitCode(), 1);
  auto j = compareToJson(r);
  EXPECT_EQ(j["overall"]["verdict"], "regressed");
  EXPECT_EQ(j["overall"]["interval_pct"].size(), 2u);
  // Runs that move together by 10% are run-to-run noise, not a regression.
  auto aa = compareRuns(b, same, {});
  EXPECT_NE(aa.overall, Verdict::kRegressed) << aa.overallReason;
  EXPECT_EQ(aa.regressions, 0);
  EXPECT_NE(aa.exitCode(), 1);
  // The same inputs give the same interval (a seeded bootstrap).
  auto again = compareRuns(b, c, {});
  EXPECT_DOUBLE_EQ(again.overallLoPct, r.overallLoPct);
  // One run a side: the point estimate, no interval, and no verdict beyond the threshold.
  auto one = compareRuns(b[0], c[0], {});
  EXPECT_FALSE(one.overallIntervalKnown);
  EXPECT_EQ(one.overall, Verdict::kInconclusive) << one.overallReason;
}

TEST(Compare, ASmallSlowdownOfEverySizeIsFoundWhenNoSizeAloneIsSignificant) {
  // 20 sizes 12% slower over 5 runs a side. Each size's runs spread by +-20% (0.8 .. 1.2, a different
  // order for every size), so no size's runs separate; but over the 20 sizes every run averages the
  // same, so the runs' summaries separate completely (p = 2/252). The whole run is its own test at
  // alpha: inside the items' false-discovery family it would have had to beat 0.05 / 21.
  const double spread[] = {0.8, 0.9, 1.0, 1.1, 1.2};
  auto sweep = [&](int k, double slow) {
    std::vector<SweepMeasurement> v;
    for (int i = 0; i < 20; ++i) {
      const double t = 100 * spread[(i + k) % 5] * (1 + 0.004 * k) * slow;
      v.push_back(row(std::size_t{1024} << i, t, 0.01, 3, 700 + 40 * k + i));
    }
    return sweepRun(v);
  };
  std::vector<RunFile> b, c;
  for (int k = 0; k < 5; ++k) {
    b.push_back(sweep(k, 1.0));
    c.push_back(sweep(k, 1.12));
  }
  auto r = compareRuns(b, c, {});
  EXPECT_EQ(r.regressions, 0);
  for (const auto& it : r.items) EXPECT_GT(it.p, 0.05) << it.label();
  EXPECT_NEAR(r.overallP, 2.0 / 252.0, 1e-12);
  EXPECT_EQ(r.overall, Verdict::kRegressed) << r.overallReason;
  EXPECT_NE(r.overallReason.find("summaries p = 0.0079 <= 0.05"), std::string::npos) << r.overallReason;
  EXPECT_EQ(r.exitCode(), 1);
  // At --alpha 0.005, 5 runs a side can never be significant: inconclusive, not a regression.
  CompareOptions strict;
  strict.alpha = 0.005;
  auto s = compareRuns(b, c, strict);
  EXPECT_EQ(s.overall, Verdict::kInconclusive) << s.overallReason;
  EXPECT_EQ(s.exitCode(), kCompareExitInconclusive);
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
  EXPECT_EQ(j["schema_version"], "1.3");
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
  EXPECT_EQ(r.items.size(), 1u);
  EXPECT_EQ(r.exitCode(), kCompareExitInconclusive);  // 3x slower, but one run a side
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
  // One run a side: the 30% slower configuration is only inconclusive.
  EXPECT_EQ(compareRuns(base, cur, {}).items.at(0).verdict, Verdict::kInconclusive);
  std::vector<RunFile> bs, cs;
  for (int k = 0; k < 5; ++k) {
    bs.push_back(classifyRun(trainToJson({train(10 + 0.1 * k, 25, 3, 0.01), train(12, 5, 3, 0.01)}, meta), "a.json"));
    cs.push_back(classifyRun(trainToJson({train(13 + 0.1 * k, 25, 3, 0.01), train(12.1, 1, 3, 0.01)}, meta), "b.json"));
  }
  auto r = compareRuns(bs, cs, {});
  ASSERT_EQ(r.items.size(), 1u);
  EXPECT_EQ(r.items[0].metric, "step");
  EXPECT_FALSE(r.items[0].higherIsBetter);
  EXPECT_EQ(r.items[0].verdict, Verdict::kRegressed) << r.items[0].reason;
  EXPECT_NEAR(r.items[0].changePct, -29.4, 0.5);
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
