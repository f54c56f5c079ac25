#include <gtest/gtest.h>

#include "bench/train/train.h"

using ds::bench::StepSample;

namespace {

StepSample step(double total, double busy, double exposed, double loss) {
  StepSample s;
  s.stepMs = total;
  s.commBusyMs = busy;
  s.exposedCommMs = exposed;
  s.forwardMs = 1;
  s.loss = loss;
  return s;
}

TEST(TrainSummary, OverlapEfficiencyIsTheShareOfCommNotWaitedFor) {
  // Rank 0: 10 ms of comm, 2 exposed; rank 1: 10 ms, 4 exposed -> 14/20 hidden.
  std::vector<std::vector<StepSample>> ranks{{step(100, 5, 1, 2.0), step(100, 5, 1, 1.0)},
                                             {step(120, 5, 2, 4.0), step(80, 5, 2, 3.0)}};
  ds::report::TrainRunRecord r;
  ds::bench::summarizeSteps(ranks, 64, r);
  EXPECT_DOUBLE_EQ(r.overlapEfficiency, 0.7);
  EXPECT_DOUBLE_EQ(r.hiddenCommMs, 14.0 / 4);
  // Slowest rank per step: 120, 100 -> median 110 ms -> 64 / 0.11 s.
  EXPECT_NEAR(r.samplesPerSec, 64 / 0.110, 1e-9);
  EXPECT_DOUBLE_EQ(r.lossStart, 3.0);
  EXPECT_DOUBLE_EQ(r.lossEnd, 2.0);
  EXPECT_EQ(r.stepMs.samples, 4u);
  EXPECT_DOUBLE_EQ(r.stepMs.p50, 100);
}

TEST(TrainSummary, NoCommMeansNoEfficiencyAndExposedNeverExceedsBusy) {
  ds::report::TrainRunRecord r;
  ds::bench::summarizeSteps({{step(10, 0, 0, 1)}}, 8, r);
  EXPECT_EQ(r.overlapEfficiency, 0.0);
  // Exposed wait longer than the collectives ran (scheduling noise) counts as all exposed, not negative.
  ds::bench::summarizeSteps({{step(10, 2, 3, 1)}}, 8, r);
  EXPECT_EQ(r.overlapEfficiency, 0.0);
  EXPECT_EQ(r.hiddenCommMs, 0.0);
}

}  // namespace
