// `dsbench gpu` as users run it, on whatever this host has: with a GPU it measures tiny copies and the
// JSON is checked; without one (or in a build without CUDA) it must say so in one sentence and exit 2,
// never crash and never pass silently. Bad flags exit 5 before CUDA is touched.
#include <gtest/gtest.h>

#include "engine/testing/subprocess.h"
#include "reports/gpu/gpu_copy.h"
#include "reports/json_io.h"

using namespace ds::testing;

namespace {

TEST(DsbenchGpuCli, MeasuresOrSaysWhyNot) {
  TempDir dir("ds_gpu_cli");
  const std::string json = dir.file("gpu.json");
  auto r = run({binDir() + "/dsbench", "gpu", "--size", "1M", "-n", "3", "--warmup", "1", "-J", json},
               cleanOptions(std::chrono::seconds(120)));
  ASSERT_FALSE(r.timedOut);
  if (r.exitCode == 0) {
    const auto run = ds::report::gpuCopyRunFromJson(ds::report::readJson(json), json);
    ASSERT_FALSE(run.rows.empty());
    for (const auto& row : run.rows) {
      if (row.skipped) continue;
      EXPECT_GT(row.medianGBps, 0) << row.testcase;
      EXPECT_GE(row.maxGBps, row.medianGBps) << row.testcase;
    }
    EXPECT_NE(r.out.find("host_to_device_memcpy_ce"), std::string::npos) << r.out;
    return;
  }
  EXPECT_EQ(r.exitCode, 2) << r.out << r.err;
  EXPECT_TRUE(r.err.find("built without CUDA") != std::string::npos ||
              r.err.find("cudaGetDeviceCount") != std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(json));
}

TEST(DsbenchGpuCli, BadFlagsAreRefusedWithExitFive) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--size", "huge"},
                                        {"--size", "1M", "-n", "0"},
                                        {"--warmup", "-1"},
                                        {"-J", "/"},
                                        {"--device", "0,zero"},
                                        {"--device", "1,1"}}) {
    std::vector<std::string> argv = {binDir() + "/dsbench", "gpu"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = run(argv, cleanOptions(std::chrono::seconds(60)));
    EXPECT_EQ(r.exitCode, 5) << args[0] << " " << args[1] << ": " << r.err;
  }
}

}  // namespace
