#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "engine/common/error.h"
#include "engine/common/ranges.h"
#include "reports/json_io.h"
#include "reports/schema/world.h"
#include "reports/world_text.h"

using namespace ds::report;

namespace {
std::vector<RankRecord> sample() {
  std::vector<RankRecord> v;
  for (int i = 0; i < 2; ++i) {
    RankRecord r;
    r.rank = i;
    r.worldSize = 2;
    r.localRank = i;
    r.localWorldSize = 2;
    r.host = "node-a";
    r.pid = 100 + i;
    r.accelerator = "cpu";
    r.device = "cpu";
    r.backend = "gloo";
    r.jobId = "j1";
    r.provenance = {"RANK=0 (from RANK)"};
    v.push_back(r);
  }
  return v;
}
}  // namespace

TEST(WorldReport, JsonRoundTripThroughAFile) {
  std::string path = ::testing::TempDir() + "/world_roundtrip.json";
  writeJsonAtomic(path, worldToJson(sample()));
  auto back = worldFromJson(readJson(path), path);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].pid, 101);
  EXPECT_EQ(back[1].provenance[0], "RANK=0 (from RANK)");
  std::remove(path.c_str());
}

TEST(WorldReport, RejectsAnotherSchemaAndVersion) {
  auto j = worldToJson(sample());
  j["schema_version"] = 99;
  EXPECT_THROW(worldFromJson(j, "x.json"), ds::ConfigError);
  j = worldToJson(sample());
  j["schema"] = "other";
  EXPECT_THROW(worldFromJson(j, "x.json"), ds::ConfigError);
  j = worldToJson(sample());
  j["ranks"][0].erase("host");
  EXPECT_THROW(worldFromJson(j, "x.json"), ds::ConfigError);
}

TEST(WorldReport, CorruptFileIsAConfigErrorNamingThePath) {
  std::string path = ::testing::TempDir() + "/corrupt.json";
  std::ofstream(path) << "{\"schema\": \"dsperf.world\", \"ra";
  try {
    readJson(path);
    FAIL();
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  std::remove(path.c_str());
}

TEST(WorldReport, WriteToAMissingFolderIsAnIoError) {
  EXPECT_THROW(writeJsonAtomic("/nonexistent-dir-dsperf/x.json", worldToJson(sample())), ds::IoError);
}

TEST(WorldReport, TableHasOneRowPerRank) {
  std::string t = formatWorldTable(sample());
  EXPECT_NE(t.find("2 rank(s) on 1 host(s), backend gloo"), std::string::npos) << t;
  EXPECT_NE(t.find("node-a"), std::string::npos);
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 4);
}

// ---------------- placement (reports/schema/placement.h) ----------------

TEST(Placement, CpuListsFormatAndParse) {
  EXPECT_EQ(ds::formatRanges({}), "");
  EXPECT_EQ(ds::formatRanges({0}), "0");
  EXPECT_EQ(ds::formatRanges({5, 0, 1, 2, 2}), "0-2,5");
  EXPECT_EQ(ds::parseRanges("0-2,5", "cpu list"), (std::vector<int>{0, 1, 2, 5}));
  EXPECT_EQ(ds::parseRanges("3", "cpu list"), (std::vector<int>{3}));
  for (const char* bad : {"", "a", "1-", "-1", "3-1", "0,,1", "0,", "1 2", "9999999"}) {
    EXPECT_THROW(ds::parseRanges(bad, "cpu list"), ds::ConfigError) << bad;
  }
}

TEST(Placement, LoadavgReadsLoadAndRunnable) {
  auto l = parseLoadavg("0.52 0.58 0.59 3/412 12345\n");
  ASSERT_TRUE(l.has_value());
  EXPECT_DOUBLE_EQ(l->load1, 0.52);
  EXPECT_EQ(l->runnable, 3);
  EXPECT_FALSE(parseLoadavg("").has_value());
  EXPECT_FALSE(parseLoadavg("0.5 0.5 0.5 x/3 1").has_value());
  EXPECT_FALSE(parseLoadavg("0.5 0.5").has_value());
}

TEST(Placement, JsonRoundTripAndOlderFilesWithout) {
  auto ranks = sample();
  ranks[0].placement = Placement{"0", 1, 2, 1.25, 3};
  auto back = worldFromJson(worldToJson(ranks), "w.json");
  ASSERT_TRUE(back[0].placement.has_value());
  EXPECT_EQ(back[0].placement->cpus, "0");
  EXPECT_EQ(back[0].placement->cpuCount, 1);
  EXPECT_EQ(back[0].placement->onlineCpus, 2);
  EXPECT_DOUBLE_EQ(back[0].placement->load1, 1.25);
  EXPECT_EQ(back[0].placement->runnable, 3);
  EXPECT_FALSE(back[1].placement.has_value());  // as a file written before placement was recorded
  EXPECT_FALSE(worldToJson(ranks)["ranks"][1].contains("placement"));
}

TEST(Placement, SharedCoresFlagBoundRanksOnOneHostOnly) {
  Placement cpu0{"0", 1, 2, 0.1, 1}, cpu1{"1", 1, 2, 0.1, 1}, all{"0-1", 2, 2, 0.1, 1};
  // Bound to distinct cores, or unbound: nothing to flag.
  EXPECT_TRUE(sharedCores({{0, "a", cpu0}, {1, "a", cpu1}}).empty());
  EXPECT_TRUE(sharedCores({{0, "a", all}, {1, "a", all}}).empty());
  // The same core on different hosts is no sharing.
  EXPECT_TRUE(sharedCores({{0, "a", cpu0}, {1, "b", cpu0}}).empty());
  // Two ranks on core 0 of host a (taskset -c 0).
  auto s = sharedCores({{0, "a", cpu0}, {1, "a", cpu0}, {2, "a", cpu1}, {3, "a", std::nullopt}});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0], "ranks 0-1 share CPU 0 on host a");
  EXPECT_EQ(ranksSharingCores({{0, "a", cpu0}, {1, "a", cpu0}, {2, "a", cpu1}}), (std::vector<int>{0, 1}));
}

TEST(Placement, TextShowsEveryRankTheLoadAndTheSharing) {
  auto ranks = sample();
  EXPECT_EQ(formatWorldTable(ranks).find("placement"), std::string::npos);  // older files: no lines
  ranks[0].placement = Placement{"0", 1, 2, 1.5, 4};
  ranks[1].placement = Placement{"0", 1, 2, 1.5, 4};
  std::string t = formatWorldTable(ranks);
  EXPECT_NE(t.find("# placement: rank 0 on node-a: cpus 0 (1 of 2 online)"), std::string::npos) << t;
  EXPECT_NE(t.find("# placement: rank 1 on node-a: cpus 0"), std::string::npos) << t;
  EXPECT_NE(t.find("# node load: node-a: load 1.50 (1 min), 4 runnable on 2 CPUs"), std::string::npos) << t;
  EXPECT_NE(t.find("# !! ranks 0-1 share CPU 0 on host node-a"), std::string::npos) << t;
}
