// The hang page (dsreport html HANG.json): the verdict, culprits, group and per-rank timelines and
// problems of a report of 1.1 made in code and round-tripped through its JSON; every string from
// the report escaped; a damaged hang report refused naming the file, another JSON left to the run
// readers.
#include <gtest/gtest.h>

#include <fstream>

#include "engine/common/error.h"
#include "engine/testing/subprocess.h"
#include "reports/diag/hang_schema.h"
#include "reports/html/hang_html.h"
#include "reports/html/tests/html_fixtures.h"

namespace ds::report::html {
namespace {

const char* kEvilHost = "<script>document.body.dataset.pwned=1</script>";

HangReport fixture() { return testing::makeHangReport(kEvilHost); }

TEST(HangHtml, ShowsVerdictCulpritTimelinesAndProblems) {
  const HangReport r = hangReportFromJson(toJson(fixture()));
  const std::string page = renderHangReport(r, "runs/hang.json");
  EXPECT_NE(page.find("dsdiag hang: hang"), std::string::npos);
  EXPECT_NE(page.find("Rank 3 on node-b never entered all_reduce #21"), std::string::npos);
  EXPECT_NE(page.find("culprit_found (exit 2)"), std::string::npos);
  EXPECT_NE(page.find("What to do"), std::string::npos);
  EXPECT_NE(page.find("never_entered"), std::string::npos);
  // The group timeline: one row per kind of member, the divergent seq marked.
  EXPECT_NE(page.find("table class=\"timeline\""), std::string::npos);
  EXPECT_NE(page.find("ranks 0-1"), std::string::npos);
  EXPECT_NE(page.find("completed up to #20, waiting in #21 (started)"), std::string::npos);
  EXPECT_NE(page.find("never entered #21"), std::string::npos);
  EXPECT_NE(page.find("th class=\"seq divergent\""), std::string::npos);
  EXPECT_NE(page.find("cell not_entered"), std::string::npos);
  EXPECT_NE(page.find("cell no_dump"), std::string::npos);
  // The per-rank timeline and the ranks without a dump.
  EXPECT_NE(page.find("Per-rank timelines"), std::string::npos);
  EXPECT_NE(page.find("rank 0, group 0: 2 entries"), std::string::npos);
  EXPECT_NE(page.find("its peers last saw it at #20"), std::string::npos);
  // Problems and inputs, escaped.
  EXPECT_NE(page.find("dumps/rank_9 &lt;b&gt;is not&lt;/b&gt; a Flight Recorder dump"), std::string::npos);
  EXPECT_NE(page.find("dumps/rank_&lt;0-1,3&gt;"), std::string::npos);
}

TEST(HangHtml, EscapesEveryStringFromTheReport) {
  const std::string page = renderHangReport(fixture(), "x.json");
  EXPECT_EQ(page.find(kEvilHost), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;document.body.dataset.pwned=1&lt;/script&gt;"), std::string::npos);
}

TEST(HangHtml, ReportOfVersion10DrawsTimelinesFromItsRanks) {
  HangReport r = fixture();
  r.groupTimelines.clear();
  const std::string page = renderHangReport(r, "old.json");
  EXPECT_NE(page.find("table class=\"timeline\""), std::string::npos);
  EXPECT_NE(page.find("waiting in #21 (started)"), std::string::npos);
}

TEST(HangHtml, NoCollectiveMeansNoTimeline) {
  HangReport r;
  r.verdict = HangVerdict::kNoFaultFound;
  r.headline = "No fault found.";
  const std::string page = renderHangReport(r, "ok.json");
  EXPECT_NE(page.find("there is no timeline to draw"), std::string::npos);
  EXPECT_NE(page.find("verdict pass"), std::string::npos);
}

TEST(HangHtmlFile, ReadsAHangReportAndLeavesOtherJsonAlone) {
  ds::testing::TempDir dir;
  const std::string hang = dir.path() + "/hang.json", other = dir.path() + "/run.json";
  std::ofstream(hang) << toJson(fixture()).dump(1);
  std::ofstream(other) << R"({"schema": "dsperf.sweep", "schema_version": "1.0"})";
  const auto read = readHangReportFile(hang);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(*read, hangReportFromJson(toJson(fixture())));
  EXPECT_FALSE(readHangReportFile(other).has_value());
}

TEST(HangHtmlFile, DamagedHangReportIsAClearError) {
  ds::testing::TempDir dir;
  const std::string truncated = dir.path() + "/truncated.json", wrong = dir.path() + "/wrong.json";
  const std::string text = toJson(fixture()).dump(1);
  std::ofstream(truncated) << text.substr(0, text.size() - 20);  // the schema key kept, the end cut
  nlohmann::json bad = toJson(fixture());
  bad["verdict"] = 7;
  std::ofstream(wrong) << bad.dump();
  for (const auto& path : {truncated, wrong}) {
    try {
      (void)readHangReportFile(path);
      ADD_FAILURE() << path << " was read";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ds::report::html
