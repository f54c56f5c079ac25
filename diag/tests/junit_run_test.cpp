// runDiag's JUnit file (dsdiag --junit) when dsdiag cannot finish: one error case saying why, so the
// CI shows the reason instead of "no test results"; and where a rank that reports alone writes.
#include <gtest/gtest.h>

#include <filesystem>

#include "diag/diag.h"
#include "engine/common/error.h"
#include "engine/testing/subprocess.h"

using namespace ds::diag;
using ds::testing::TempDir;

TEST(DsdiagJunitRun, AToolErrorStillWritesOneErrorCase) {
  TempDir d;
  DiagCommand cmd;
  cmd.junitPath = d.file("r.xml");
  cmd.selection.only = {"no.such_check"};
  EXPECT_THROW(runDiag(cmd), ds::ConfigError);
  const std::string xml = ds::testing::readFile(d.file("r.xml"));
  EXPECT_NE(xml.find("<testsuites name=\"dsdiag\" tests=\"1\" failures=\"0\" errors=\"1\""),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("type=\"tool_error\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("matches no check"), std::string::npos) << xml;
}

TEST(DsdiagJunitRun, ListingChecksWritesNoFile) {
  TempDir d;
  DiagCommand cmd;
  cmd.junitPath = d.file("r.xml");
  cmd.list = true;
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(runDiag(cmd), kExitPass);
  ::testing::internal::GetCapturedStdout();
  EXPECT_FALSE(std::filesystem::exists(d.file("r.xml")));
}

TEST(DsdiagJunitRun, PerRankPaths) {
  EXPECT_EQ(perRankPath("out/r.xml", 0, true), "out/r.xml");
  EXPECT_EQ(perRankPath("out/r.xml", -1, true), "out/r.xml");
  EXPECT_EQ(perRankPath("out/r.xml", 3, true), "out/r.rank3.xml") << "CI globs on *.xml still match";
  EXPECT_EQ(perRankPath("out/r.xml", 3, false), "out/r.xml.rank3") << "the JSON's rule, as before";
  EXPECT_EQ(perRankPath("r.json", 2, false), "r.json.rank2");
  EXPECT_EQ(perRankPath("junit", 2, true), "junit.rank2");
  EXPECT_EQ(perRankPath(".xml", 2, true), ".xml.rank2");
}
