// The shared order statistics (one quantile rule for sweeps, train runs and the dashboard) and the
// atomic text writer every result file goes through.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/common/error.h"
#include "reports/json_io.h"
#include "reports/stats.h"
#include "reports/sweep/sweep_schema.h"
#include "reports/train/train_schema.h"

using namespace ds::report;

TEST(Stats, QuantileInterpolatesBetweenRanksLikeNumpy) {
  std::vector<double> v{1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(quantileSorted(v, 0.0), 1);
  EXPECT_DOUBLE_EQ(quantileSorted(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantileSorted(v, 1.0), 4);
  EXPECT_DOUBLE_EQ(quantileSorted(v, 0.9), 3.7);  // numpy.percentile([1,2,3,4], 90) = 3.7
  EXPECT_DOUBLE_EQ(quantileSorted({7}, 0.99), 7);
}

TEST(Stats, MedianSortsAndHandlesEvenOddAndEmpty) {
  EXPECT_DOUBLE_EQ(median({5, 1, 3}), 3);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0);
}

TEST(Stats, SweepAndTrainPercentilesAgreeOnTheSameSamples) {
  std::vector<double> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(i * 1.5);
  IterStats it = computeIterStats(samples);
  Percentiles tp = summarize(samples);
  EXPECT_DOUBLE_EQ(it.p50Us, tp.p50);
  EXPECT_DOUBLE_EQ(it.p99Us, tp.p99);
  EXPECT_DOUBLE_EQ(it.p50Us, 75.75);  // between 50 and 51 (x1.5)
}

namespace {
std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

TEST(WriteTextAtomic, ReplacesTheWholeFileAndLeavesNoTempFile) {
  auto dir = std::filesystem::temp_directory_path() / ("ds_stats_io_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "report.html").string();
  writeTextAtomic(path, "old contents that are longer");
  writeTextAtomic(path, "new");
  EXPECT_EQ(slurp(path), "new");
  int entries = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1);
  std::filesystem::remove_all(dir);
}

TEST(WriteTextAtomic, MissingFolderIsAnIoErrorNamingThePath) {
  try {
    writeTextAtomic("/nonexistent-ds-folder/report.html", "x");
    FAIL() << "expected IoError";
  } catch (const ds::IoError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("/nonexistent-ds-folder/report.html"), std::string::npos) << what;
    EXPECT_NE(what.find("folder exists"), std::string::npos) << what;
  }
}
