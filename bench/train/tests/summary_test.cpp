#include <gtest/gtest.h>

#include <cmath>

#include "bench/train/train.h"
#include "engine/common/error.h"
#include "reports/train/train_text.h"

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

TEST(TrainSummary, GemmTflopsAreTheModelsFlopsAtTheSlowestRanksMedianStep) {
  // Slowest rank per step: 120, 100 -> median 110 ms; 2.2e12 FLOPs per rank per step -> 20 TFLOP/s.
  std::vector<std::vector<StepSample>> ranks{{step(100, 5, 1, 2.0), step(100, 5, 1, 1.0)},
                                             {step(120, 5, 2, 4.0), step(80, 5, 2, 3.0)}};
  ds::report::TrainRunRecord r;
  r.gemmFlopsPerStep = 2.2e12;
  ds::bench::summarizeSteps(ranks, 64, r);
  EXPECT_NEAR(r.gemmTflops, 20.0, 1e-9);
  ds::report::TrainRunRecord unknown;
  ds::bench::summarizeSteps(ranks, 64, unknown);
  EXPECT_EQ(unknown.gemmTflops, 0.0);
}

TEST(TrainSummary, DeviceStepTimeOnlyWhereEveryStepHasOne) {
  auto timed = [](double host, double device) {
    StepSample s = step(host, 0, 0, 1.0);
    s.deviceStepMs = device;
    return s;
  };
  ds::report::TrainRunRecord gpu;
  ds::bench::summarizeSteps({{timed(10, 8), timed(12, 9)}, {timed(11, 7), timed(13, 10)}}, 8, gpu);
  EXPECT_EQ(gpu.stepDeviceMs.samples, 4u);
  EXPECT_DOUBLE_EQ(gpu.stepDeviceMs.p50, 8.5);
  EXPECT_DOUBLE_EQ(gpu.stepDeviceMs.min, 7);
  // The host (no CUDA events) or a partial set: none, rather than a median of some steps.
  ds::report::TrainRunRecord cpu, partial;
  ds::bench::summarizeSteps({{step(10, 0, 0, 1), step(12, 0, 0, 1)}}, 8, cpu);
  EXPECT_EQ(cpu.stepDeviceMs.samples, 0u);
  ds::bench::summarizeSteps({{timed(10, 8), step(12, 0, 0, 1)}}, 8, partial);
  EXPECT_EQ(partial.stepDeviceMs.samples, 0u);
}

TEST(TrainDType, FlagValuesAreF32OrBf16UnderTheirUsualNames) {
  using ds::comm::DType;
  EXPECT_EQ(ds::bench::parseTrainDType("f32"), DType::kF32);
  EXPECT_EQ(ds::bench::parseTrainDType("fp32"), DType::kF32);
  EXPECT_EQ(ds::bench::parseTrainDType("float32"), DType::kF32);
  EXPECT_EQ(ds::bench::parseTrainDType("bf16"), DType::kBF16);
  EXPECT_EQ(ds::bench::parseTrainDType("bfloat16"), DType::kBF16);
  for (const char* bad : {"f16", "fp16", "int8", "", "BF16"}) {
    try {
      ds::bench::parseTrainDType(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ds::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("use f32 (float32, fp32) or bf16 (bfloat16)"), std::string::npos)
          << e.what();
    }
  }
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

// The loss users should trust: a fixed evaluation batch before the first and after the last step.
// A healthy run (small MLP, SGD, one process) learns, so it must fall; the training loss of the first
// and last steps compares two different batches and is not asserted on.
TEST(TrainEval, AHealthyRunShowsAFallingEvalLoss) {
  ds::ddp::TrainConfig c;
  c.model = ds::ddp::parseModelSpec("mlp:32x2,in=16,out=4");
  c.samples = 512;
  c.batch = 16;
  c.steps = 60;
  c.optimizer.kind = "sgd";
  c.optimizer.lr = 0.05f;
  c.evalSamples = 64;
  auto r = ds::ddp::train(c, nullptr);
  ASSERT_TRUE(std::isfinite(r.evalLossStart) && std::isfinite(r.evalLossEnd));
  EXPECT_LT(r.evalLossEnd, 0.9 * r.evalLossStart) << r.evalLossStart << " -> " << r.evalLossEnd;
  // Taken with no gradient: the same run without it trains to the very same parameters.
  c.evalSamples = 0;
  auto plain = ds::ddp::train(c, nullptr);
  EXPECT_TRUE(std::isnan(plain.evalLossStart));
  EXPECT_EQ(plain.finalChecksum, r.finalChecksum);
}

TEST(TrainEval, ReportShowsTheEvalLossInTextAndJson) {
  ds::report::TrainRunRecord r;
  r.model = "mlp:32x2";
  r.lossStart = 0.5;
  r.lossEnd = 0.7;  // another batch: rose
  r.evalLossStart = 0.6;
  r.evalLossEnd = 0.2;
  r.evalSamples = 64;
  auto j = ds::report::trainToJson({r});
  EXPECT_DOUBLE_EQ(j["runs"][0]["loss"]["eval_start"].get<double>(), 0.6);
  EXPECT_DOUBLE_EQ(j["runs"][0]["loss"]["eval_end"].get<double>(), 0.2);
  EXPECT_EQ(j["runs"][0]["loss"]["eval_samples"], 64);
  auto back = ds::report::trainFromJson(j, "t.json");
  EXPECT_DOUBLE_EQ(back[0].evalLossEnd, 0.2);
  std::string t = ds::report::formatTrainTable({r});
  EXPECT_NE(t.find("eval loss start -> end"), std::string::npos) << t;
  EXPECT_NE(t.find("0.6000 -> 0.2000"), std::string::npos) << t;
  EXPECT_NE(t.find("fixed batch of 64 samples"), std::string::npos) << t;
  // Older files have no eval loss: the training loss, labelled as such.
  j["runs"][0]["loss"].erase("eval_start");
  j["runs"][0]["loss"].erase("eval_end");
  auto old = ds::report::trainFromJson(j, "old.json");
  EXPECT_TRUE(std::isnan(old[0].evalLossStart));
  t = ds::report::formatTrainTable(old);
  EXPECT_NE(t.find("0.5000 -> 0.7000"), std::string::npos) << t;
  EXPECT_NE(t.find("two different batches"), std::string::npos) << t;
}
