#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "engine/common/error.h"
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
