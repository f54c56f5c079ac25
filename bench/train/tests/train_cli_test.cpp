// `dsbench train` as users run it: under dsrun (gloo) and under mpirun (mpi), on a tiny model, with
// the JSON it writes checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "engine/testing/subprocess.h"
#include "reports/json_io.h"
#include "reports/train/train_schema.h"

using namespace ds::testing;

namespace {

RunOptions cleanEnv() { return cleanOptions(std::chrono::seconds(90)); }

const std::vector<std::string> kTiny = {
    "train",    "--model", "mlp:64x4,in=32,out=16", "--batch", "8",         "--steps", "4",
    "--warmup", "1",       "--bucket-cap-mb",       "0.01,1",  "--overlap", "both",    "--quiet"};

void checkRuns(const std::string& path, const std::string& backend, int ranks) {
  auto runs = ds::report::trainFromJson(ds::report::readJson(path), path);
  // Two caps with overlap, plus the one-bucket baseline once.
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_TRUE(runs[0].overlap);
  EXPECT_FALSE(runs[1].overlap);
  EXPECT_TRUE(runs[2].overlap);
  EXPECT_GT(runs[0].buckets, 2) << "0.01 MB buckets split the 45 KB of gradients";
  EXPECT_EQ(runs[1].buckets, 1);
  for (const auto& r : runs) {
    EXPECT_EQ(r.backend, backend);
    EXPECT_EQ(r.worldSize, ranks);
    EXPECT_EQ(r.steps, 4);
    EXPECT_EQ(r.stepMs.samples, static_cast<std::size_t>(4 * ranks));
    EXPECT_GT(r.backwardComputeMs.p50, 0);
    EXPECT_GT(r.commBusyMs.p50, 0);
    EXPECT_GT(r.samplesPerSec, 0);
    EXPECT_GE(r.overlapEfficiency, 0);
    EXPECT_LE(r.overlapEfficiency, 1);
    EXPECT_GT(r.lossStart, 0);
    EXPECT_EQ(r.model, "mlp:64x4,in=32,out=16");
    EXPECT_EQ(r.dtype, "f32");
    // mlp:64x4,in=32,out=16 at batch 8: (4*32*64 + 6*64*64*2 + 6*64*16) FLOPs per sample.
    EXPECT_DOUBLE_EQ(r.gemmFlopsPerStep, 8.0 * (4 * 32 * 64 + 6 * 64 * 64 * 2 + 6 * 64 * 16));
    EXPECT_GT(r.gemmTflops, 0);
  }
}

TEST(TrainUnderDsrun, TwoRanksOnGlooWriteTheSplitAsJson) {
  TempDir dir;
  std::vector<std::string> argv = {binDir() + "/dsrun", "--nproc-per-node", "2", "--standalone",
                                   binDir() + "/dsbench"};
  argv.insert(argv.end(), kTiny.begin(), kTiny.end());
  argv.insert(argv.end(), {"--json", dir.file("t.json")});
  auto r = run(argv, cleanEnv());
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  checkRuns(dir.file("t.json"), "gloo", 2);
  EXPECT_NE(r.out.find("# dsbench train: mlp:64x4,in=32,out=16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hidden"), std::string::npos) << r.out;
  auto j = ds::report::readJson(dir.file("t.json"));
  EXPECT_NE(j["metadata"]["command_line"].get<std::string>().find("dsbench train"), std::string::npos);
  EXPECT_EQ(j["metadata"]["hosts"].size(), 2u);
  EXPECT_EQ(j["metadata"]["backend"], "gloo");
  EXPECT_TRUE(j["metadata"].contains("start_time") && j["metadata"].contains("end_time"));
  // The journal has one line per finished run, as the final JSON has.
  std::string journal = ds::testing::readFile(dir.file("t.journal.jsonl"));
  EXPECT_EQ(static_cast<std::size_t>(std::count(journal.begin(), journal.end(), '\n')), j["runs"].size())
      << journal;
}

TEST(TrainUnderMpirun, TwoRanksOnMpi) {
  std::string mpirun = DS_MPIRUN_PATH;
  if (mpirun.empty()) GTEST_SKIP() << "built without MPI";
  TempDir dir;
  RunOptions o = mpirunOptions();
  std::vector<std::string> argv = {mpirun, "-np", "2", "--oversubscribe", binDir() + "/dsbench"};
  argv.insert(argv.end(), kTiny.begin(), kTiny.end());
  argv.insert(argv.end(), {"--backend", "mpi", "--json", dir.file("t.json")});
  auto r = run(argv, o);
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  checkRuns(dir.file("t.json"), "mpi", 2);
}

TEST(TrainUnderDsrun, ScalingRunsWorldSizesOneToN) {
  TempDir dir;
  std::vector<std::string> argv = {binDir() + "/dsrun",
                                   "--nproc-per-node",
                                   "3",
                                   "--standalone",
                                   binDir() + "/dsbench",
                                   "train",
                                   "--model",
                                   "mlp:64x4,in=32,out=16",
                                   "--batch",
                                   "8",
                                   "--steps",
                                   "4",
                                   "--warmup",
                                   "1",
                                   "--overlap",
                                   "on",
                                   "--quiet",
                                   "--scaling",
                                   "--json",
                                   dir.file("t.json")};
  auto r = run(argv, cleanEnv());
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  auto j = ds::report::readJson(dir.file("t.json"));
  ASSERT_EQ(j["runs"].size(), 4u) << j.dump();
  // The configuration itself on 3 ranks, then the scaling runs on 1, 2 and 3 ranks.
  EXPECT_EQ(j["runs"][1]["world_size"], 1);
  EXPECT_EQ(j["runs"][2]["world_size"], 2);
  EXPECT_EQ(j["runs"][2]["backend"], "gloo");
  EXPECT_EQ(j["runs"][3]["world_size"], 3);
  EXPECT_NE(r.out.find("# scaling (same configuration on ranks 0..k-1): 1 rank"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 ranks"), std::string::npos) << r.out;
}

TEST(TrainUnderMpirun, ScalingOnMpiSaysHowToRunIt) {
  std::string mpirun = DS_MPIRUN_PATH;
  if (mpirun.empty()) GTEST_SKIP() << "built without MPI";
  RunOptions o = mpirunOptions();
  std::vector<std::string> argv = {mpirun, "-np", "2", "--oversubscribe", binDir() + "/dsbench"};
  argv.insert(argv.end(), kTiny.begin(), kTiny.end());
  argv.insert(argv.end(), {"--backend", "mpi", "--scaling"});
  auto r = run(argv, o);
  EXPECT_NE(r.exitCode, 0);
  EXPECT_NE(r.err.find("mpirun -np $k dsbench train"), std::string::npos) << r.err;
}

TEST(TrainFlags, Bf16OnCpuIsRefusedSayingWhatToUseInstead) {
  // No bf16 GEMM on the host (Debian's OpenBLAS lacks cblas_sbgemm): a CPU "bf16" figure would time
  // f32 GEMMs plus conversions. The refusal names the way out; nothing is measured or written.
  TempDir dir;
  std::vector<std::string> argv = {binDir() + "/dsrun", "--nproc-per-node", "1", "--standalone",
                                   binDir() + "/dsbench"};
  argv.insert(argv.end(), kTiny.begin(), kTiny.end());
  argv.insert(argv.end(), {"--dtype", "f32,bf16", "--json", dir.file("t.json")});
  RunOptions env = cleanEnv();
  env.setEnv["DS_ACCELERATOR"] = "cpu";
  auto r = run(argv, env);
  EXPECT_NE(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("--dtype bf16 needs a CUDA GPU"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Use --dtype f32 on CPU"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("t.json")));
  auto bad = run({binDir() + "/dsbench", "train", "--dtype", "f16"}, cleanEnv());
  EXPECT_EQ(bad.exitCode, 5) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("use f32 (float32, fp32) or bf16 (bfloat16)"), std::string::npos) << bad.err;
}

TEST(TrainFlags, ABadModelIsAConfigurationErrorBeforeAnythingStarts) {
  auto r = run({binDir() + "/dsbench", "train", "--model", "resnet50"}, cleanEnv());
  EXPECT_EQ(r.exitCode, 5) << r.out << r.err;
  EXPECT_NE(r.err.find("unknown model 'resnet50'"), std::string::npos) << r.err;
}

}  // namespace
