// The dsperf.diag schema, the exit-code rule and the text table.
#include <gtest/gtest.h>

#include "engine/common/error.h"
#include "engine/common/ranges.h"
#include "reports/diag/diag_schema.h"
#include "reports/diag/diag_text.h"

using namespace ds::report;

namespace {
DiagRecord r(const std::string& id, DiagStatus s, int rank, const std::string& msg = "m", const std::string& remedy = "") {
  return DiagRecord{id, id.substr(0, id.find('.')), s, msg, remedy, {{"k", 1}}, rank, "h"};
}
}  // namespace

TEST(DiagReport, ExitCodes) {
  EXPECT_EQ(diagExitCode({r("a.b", DiagStatus::kPass, 0), r("a.c", DiagStatus::kSkip, 0)}), 0);
  EXPECT_EQ(diagExitCode({r("a.b", DiagStatus::kWarn, 0), r("a.c", DiagStatus::kPass, 0)}), 1);
  EXPECT_EQ(diagExitCode({r("a.b", DiagStatus::kWarn, 0), r("a.c", DiagStatus::kFail, 0)}), 2);
}

TEST(DiagReport, JsonRoundTripAndVersionCheck) {
  DiagReport rep;
  rep.mode = "world";
  rep.worldSize = 2;
  rep.missingRanks = {1};
  rep.checks = {r("net.x", DiagStatus::kFail, 0, "bad", "fix it")};
  auto j = diagToJson(rep);
  EXPECT_EQ(j["schema"], "dsperf.diag");
  EXPECT_EQ(j["schema_version"], ds::report::kSchemaVersion);
  EXPECT_EQ(j["summary"]["exit_code"], 2);
  EXPECT_EQ(j["checks"][0]["status"], "FAIL");
  auto back = diagFromJson(j, "x.json");
  EXPECT_EQ(back.checks[0].remedy, "fix it");
  EXPECT_EQ(back.missingRanks, std::vector<int>{1});
  j["schema_version"] = 99;
  EXPECT_THROW(diagFromJson(j, "x.json"), ds::ConfigError);
  EXPECT_THROW(diagFromJson(nlohmann::json{{"schema", "dsperf.world"}}, "x.json"), ds::ConfigError);
}

TEST(DiagText, GroupsByFamilyMergesPassingRanksAndShowsRemedies) {
  DiagReport rep;
  rep.mode = "world";
  rep.worldSize = 4;
  rep.host = "h";
  for (int i = 0; i < 4; ++i) rep.checks.push_back(r("env.a", DiagStatus::kPass, i, "fine " + std::to_string(i)));
  rep.checks.push_back(r("net.b", DiagStatus::kFail, 2, "port taken", "pick another"));
  rep.checks.push_back(r("net.b", DiagStatus::kPass, 0, "free"));
  auto text = formatDiagText(rep);
  EXPECT_NE(text.find("[ranks 0-3] fine 0"), std::string::npos) << text;
  EXPECT_NE(text.find("[rank 2] port taken"), std::string::npos) << text;
  EXPECT_NE(text.find("-> pick another"), std::string::npos) << text;
  EXPECT_LT(text.find("\nenv\n"), text.find("\nnet\n"));
  EXPECT_EQ(text.find("\033["), std::string::npos) << "no colour unless asked";
  EXPECT_NE(formatDiagText(rep, {true, false}).find("\033[1;31mFAIL"), std::string::npos);
  EXPECT_NE(text.find("(exit 2)"), std::string::npos);
  EXPECT_EQ(ds::formatRanges({5, 0, 1, 2, 7, 6}), "0-2,5-7");
}
