#include <gtest/gtest.h>

#include "engine/common/error.h"
#include "reports/train/train_schema.h"
#include "reports/train/train_text.h"

using namespace ds::report;

namespace {

TrainRunRecord sample() {
  TrainRunRecord r;
  r.model = "mlp:1024x24";
  r.params = 25190400;
  r.worldSize = 2;
  r.backend = "gloo";
  r.device = "cpu";
  r.perRankBatch = 32;
  r.steps = 10;
  r.warmup = 3;
  r.optimizer = "sgd";
  r.bucketCapMb = 25;
  r.commHook = "allreduce";
  r.buckets = 5;
  r.forwardMs = summarize({10, 12, 11});
  r.exposedCommMs = summarize({4, 5});
  r.samplesPerSec = 321.5;
  r.overlapEfficiency = 0.4;
  r.lossStart = 1.5;
  r.lossEnd = 0.75;
  r.ddp.bucket_sizes = {1048576, 26214400};
  r.ddp.avg_backward_comm_time = 123456789;
  return r;
}

TEST(TrainReport, PercentilesInterpolateLikeNumpy) {
  auto p = summarize({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(p.p50, 2.5);
  EXPECT_DOUBLE_EQ(p.p90, 3.7);
  EXPECT_DOUBLE_EQ(p.min, 1);
  EXPECT_DOUBLE_EQ(p.max, 4);
  EXPECT_DOUBLE_EQ(p.mean, 2.5);
  EXPECT_EQ(p.samples, 4u);
  EXPECT_EQ(summarize({}).samples, 0u);
}

TEST(TrainReport, JsonRoundTripsAndCarriesPyTorchsFieldNames) {
  auto j = trainToJson({sample()});
  EXPECT_EQ(j["schema"], "dsperf.train");
  EXPECT_EQ(j["schema_version"], "1.3");
  EXPECT_EQ(j["runs"][0]["ddp_logging"]["avg_backward_comm_time"], 123456789);
  EXPECT_TRUE(j["runs"][0]["ddp_logging"].contains("avg_backward_compute_comm_overlap_time"));
  EXPECT_EQ(j["runs"][0]["time_ms"]["forward"]["p50"], 11.0);
  auto back = trainFromJson(j, "t.json");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].model, "mlp:1024x24");
  EXPECT_EQ(back[0].ddp.bucket_sizes, sample().ddp.bucket_sizes);
  EXPECT_DOUBLE_EQ(back[0].exposedCommMs.p50, 4.5);
  EXPECT_DOUBLE_EQ(back[0].overlapEfficiency, 0.4);
}

TEST(TrainReport, DtypeAndGemmTflopsRoundTripAndOlderFilesAreF32) {
  auto r = sample();
  r.dtype = "bf16";
  r.gemmFlopsPerStep = 1.5e12;
  r.gemmTflops = 42.5;
  auto j = trainToJson({r});
  EXPECT_EQ(j["runs"][0]["dtype"], "bf16");
  EXPECT_EQ(j["runs"][0]["gemm_tflops"], 42.5);
  auto back = trainFromJson(j, "t.json");
  EXPECT_EQ(back[0].dtype, "bf16");
  EXPECT_DOUBLE_EQ(back[0].gemmFlopsPerStep, 1.5e12);
  EXPECT_DOUBLE_EQ(back[0].gemmTflops, 42.5);
  // f32 leaves the field out, so an older file re-serialises (and hashes to a run id) as before.
  EXPECT_FALSE(trainToJson({sample()})["runs"][0].contains("dtype"));
  // A file written before --dtype: f32, TFLOP/s unknown.
  j["runs"][0].erase("dtype");
  j["runs"][0].erase("gemm_flops_per_step");
  j["runs"][0].erase("gemm_tflops");
  back = trainFromJson(j, "old.json");
  EXPECT_EQ(back[0].dtype, "f32");
  EXPECT_EQ(back[0].gemmTflops, 0.0);
  // The table names the dtype of each row.
  auto text = formatTrainTable({sample(), r});
  EXPECT_NE(text.find("TFLOP/s"), std::string::npos) << text;
  EXPECT_NE(text.find("   bf16 "), std::string::npos) << text;
  EXPECT_NE(text.find("  42.500 "), std::string::npos) << text;
}

TEST(TrainReport, DeviceStepTimeRoundTripsAndIsLeftOutWithoutOne) {
  auto r = sample();
  r.device = "cuda";
  r.stepDeviceMs = summarize({7.5, 8.0, 8.5});
  auto j = trainToJson({r});
  EXPECT_DOUBLE_EQ(j["runs"][0]["time_ms"]["step_device"]["p50"].get<double>(), 8.0);
  auto back = trainFromJson(j, "gpu.json");
  EXPECT_EQ(back[0].stepDeviceMs.samples, 3u);
  EXPECT_DOUBLE_EQ(back[0].stepDeviceMs.p90, r.stepDeviceMs.p90);
  // A host run (or a file before 1.3) has none: not written, read back as no samples.
  EXPECT_FALSE(trainToJson({sample()})["runs"][0]["time_ms"].contains("step_device"));
  EXPECT_EQ(trainFromJson(trainToJson({sample()}), "cpu.json")[0].stepDeviceMs.samples, 0u);
  // The table says what it is beside the host's step column; a host run's table does not.
  auto text = formatTrainTable({r});
  EXPECT_NE(text.find("step on the device (CUDA events"), std::string::npos) << text;
  EXPECT_NE(text.find("median 8.000 ms"), std::string::npos) << text;
  EXPECT_EQ(formatTrainTable({sample()}).find("CUDA events"), std::string::npos);
}

TEST(TrainReport, ReadersCheckTheSchema) {
  auto j = trainToJson({sample()});
  j["schema_version"] = 99;
  try {
    trainFromJson(j, "t.json");
    FAIL() << "accepted version 99";
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("t.json was written by a newer dsperf (schema dsperf.train 99.0)"),
              std::string::npos);
  }
  EXPECT_THROW(trainFromJson(nlohmann::json{{"schema", "dsperf.world"}}, "w.json"), ds::ConfigError);
  auto broken = trainToJson({sample()});
  broken["runs"][0].erase("time_ms");
  EXPECT_THROW(trainFromJson(broken, "b.json"), ds::ConfigError);
}

TEST(TrainReport, TableShowsTheSplitAndTheHiddenShare) {
  auto text = formatTrainTable({sample()});
  EXPECT_NE(text.find("mlp:1024x24 (25.2M params), 2 rank(s) on gloo (cpu), batch 32/rank"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  40.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("11.00"), std::string::npos) << text;
  EXPECT_NE(text.find("1.5000 -> 0.7500"), std::string::npos) << text;
  EXPECT_NE(text.find("p90"), std::string::npos);
}

}  // namespace
