// The shared order statistics (one quantile rule for sweeps, train runs and the dashboard) and the
// atomic text writer every result file goes through.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/common/error.h"
#include "engine/testing/subprocess.h"
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
  EXPECT_DOUBLE_EQ(ds::median({5, 1, 3}), 3);
  EXPECT_DOUBLE_EQ(ds::median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(ds::median({}), 0);
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

TEST(WriteTextAtomic, ReplacesTheWholeFileAndLeavesNoTempFile) {
  ds::testing::TempDir dir;
  const std::string path = dir.file("report.html");
  writeTextAtomic(path, "old contents that are longer");
  writeTextAtomic(path, "new");
  EXPECT_EQ(ds::testing::readFile(path), "new");
  int entries = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
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

TEST(ReadInt, AcceptsWhatFitsAndRefusesWhatDoesNotWithNlohmannExceptions) {
  using nlohmann::json;
  EXPECT_EQ(readInt<int>(json(42)), 42);
  EXPECT_EQ(readInt<int>(json(-7)), -7);
  EXPECT_EQ(readInt<std::size_t>(json(std::uint64_t{1} << 40)), std::size_t{1} << 40);
  EXPECT_EQ(readInt<int>(json(20.0)), 20);        // an integral float, as another tool may write it
  EXPECT_EQ(readInt<long long>(json(-2.9)), -2);  // truncated, as get<long long>() does
  // Beyond the type: nlohmann's get<>() would cast (undefined behaviour for the float).
  EXPECT_THROW(readInt<std::size_t>(json(1.04811e+60)), json::out_of_range);
  EXPECT_THROW(readInt<int>(json(1e10)), json::out_of_range);
  EXPECT_THROW(readInt<int>(json(std::int64_t{1} << 40)), json::out_of_range);
  EXPECT_THROW(readInt<std::size_t>(json(-1)), json::out_of_range);
  EXPECT_THROW(readInt<std::size_t>(json(-1.0)), json::out_of_range);
  EXPECT_THROW(readInt<std::uint64_t>(json(18446744073709551616.0)), json::out_of_range);  // 2^64
  EXPECT_THROW(readInt<int>(json("12")), json::type_error);
  EXPECT_EQ(readIntOr(json::object(), "world_size", 3), 3);
  EXPECT_EQ(readIntOr(json{{"world_size", 8}}, "world_size", 3), 8);
  std::vector<int> ranks;
  readTo(json{1, 2, 3}, ranks);
  EXPECT_EQ(ranks, (std::vector<int>{1, 2, 3}));
  EXPECT_THROW(readTo(json{1, 1e300}, ranks), json::out_of_range);
}

TEST(ReadInt, AFloatInAnIntegerFieldOfASweepIsAnErrorNamingTheFile) {
  ds::testing::TempDir dir;
  const std::string path = dir.file("sweep.json");
  nlohmann::json doc = sweepToJson(SweepRun{});
  doc["args"]["stepbytes"] = 1.04811e+60;
  writeJsonAtomic(path, doc);
  try {
    sweepFromJson(readJson(path), path);
    FAIL() << "expected a ConfigError";
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected a whole number from 0 to 18446744073709551615"), std::string::npos) << e.what();
  }
}

TEST(TextOr, AnythingButAStringGivesTheFallback) {
  using nlohmann::json;
  EXPECT_EQ(textOr(json{{"schema", "dsperf.sweep"}}, "schema", ""), "dsperf.sweep");
  EXPECT_EQ(textOr(json{{"schema", json::array()}}, "schema", "?"), "?");  // nlohmann's value() throws here
  EXPECT_EQ(textOr(json{{"schema", 3}}, "schema", ""), "");
  EXPECT_EQ(textOr(json::object(), "schema", "none"), "none");
  EXPECT_EQ(textOr(json::array(), "schema", "none"), "none");
}
