// The JUnit writer: every document validates against reports/export/junit.xsd with xmllint (libxml2),
// its counts agree with its test cases (counted by XPath), hostile text survives the round trip
// through a real XML parser, and check and dsdiag results map to the outcomes junit.h documents.
#include "reports/export/junit.h"

#include <gtest/gtest.h>

#include "reports/export/tests/export_fixtures.h"
#include "reports/json_io.h"

using namespace ds::report;
using ds::testing::TempDir;
namespace fx = ds::report::testfix;

namespace {

#define REQUIRE_XMLLINT()                                                                                    \
  if (fx::xmllint().empty())                                                                                 \
  GTEST_SKIP() << "xmllint not found (Debian libxml2-utils; scripts/setup.sh installs it): the JUnit files " \
                  "cannot be validated against junit.xsd"

// Writes xml to a file, validates it against the schema and checks the counts against the cases.
std::string validated(const TempDir& dir, const std::string& name, const std::string& xml) {
  const std::string path = dir.file(name);
  writeTextAtomic(path, xml);
  auto r = fx::validateJunit(path);
  EXPECT_EQ(r.exitCode, 0) << "junit.xsd rejects " << name << ":\n" << r.err << "\n" << xml;
  const bool suites = fx::xpath(path, "count(/testsuites/testsuite)") != "0";
  for (const char* scope : {"/testsuites", "/testsuites/testsuite[1]", "/testsuites/testsuite[last()]"}) {
    const std::string s = scope;
    if (!suites && s != "/testsuites") continue;
    EXPECT_EQ(fx::xpath(path, "string(" + s + "/@tests)"), fx::xpath(path, "count(" + s + "//testcase)"))
        << s;
    EXPECT_EQ(fx::xpath(path, "string(" + s + "/@failures)"), fx::xpath(path, "count(" + s + "//failure)"))
        << s;
    EXPECT_EQ(fx::xpath(path, "string(" + s + "/@errors)"), fx::xpath(path, "count(" + s + "//error)")) << s;
  }
  if (suites) {
    EXPECT_EQ(fx::xpath(path, "string(/testsuites/testsuite[1]/@skipped)"),
              fx::xpath(path, "count(/testsuites/testsuite[1]//skipped)"));
  }
  return path;
}

}  // namespace

TEST(Junit, ExactTextOfASmallSuite) {
  JunitSuite s{"dsdiag", "node01", "2026-12-02T10:38:06Z", {}};
  s.cases.push_back({"dsdiag.net", "net.master_port_free", "pass", "", "", 0.5, ""});
  s.cases.push_back({"dsdiag.nccl", "nccl.version", "fail", "no libnccl", "install it", 0, "FAIL"});
  s.cases.push_back({"dsdiag.gpu", "gpu.libcuda", "skip", "no GPU", "", 0, ""});
  EXPECT_EQ(
      junitXml({s}),
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<testsuites name=\"dsdiag\" tests=\"3\" failures=\"1\" errors=\"0\" time=\"0.500\">\n"
      "  <testsuite name=\"dsdiag\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\" time=\"0.500\" "
      "timestamp=\"2026-12-02T10:38:06\" hostname=\"node01\">\n"
      "    <testcase classname=\"dsdiag.net\" name=\"net.master_port_free\" time=\"0.500\"/>\n"
      "    <testcase classname=\"dsdiag.nccl\" name=\"nccl.version\" time=\"0.000\">\n"
      "      <failure message=\"no libnccl\" type=\"FAIL\">install it</failure>\n"
      "    </testcase>\n"
      "    <testcase classname=\"dsdiag.gpu\" name=\"gpu.libcuda\" time=\"0.000\">\n"
      "      <skipped message=\"no GPU\"/>\n"
      "    </testcase>\n"
      "  </testsuite>\n"
      "</testsuites>\n");
}

TEST(Junit, EveryShapeValidates) {
  REQUIRE_XMLLINT();
  TempDir dir;
  validated(dir, "none.xml", junitXml({}));
  validated(dir, "empty-suite.xml", junitXml({JunitSuite{"x", "", "", {}}}));
  JunitSuite s{"", "", "yesterday", {}};  // empty name, a timestamp that is not one
  s.cases.push_back({"", "", "pass", "m", "d", -3, ""});
  s.cases.push_back({"c", "n", "error", "", "", std::nan(""), ""});
  s.cases.push_back({"c", "n2", "bogus-status", "m", "", 1e9, ""});
  const std::string path = validated(dir, "odd.xml", junitXml({s, s}));
  EXPECT_EQ(fx::xpath(path, "string(//testsuite[1]/@name)"), "(unnamed)");
  EXPECT_EQ(fx::xpath(path, "count(//testsuite[@timestamp])"), "0") << "not a time: left out";
  EXPECT_EQ(fx::xpath(path, "string(//testcase[3]/error/@type)"), "unknown status bogus-status");
  EXPECT_EQ(fx::xpath(path, "string(//testcase[1]/system-out)"), "m\nd");
  EXPECT_EQ(fx::xpath(path, "string(//testcase[1]/@time)"), "0.000");
}

TEST(Junit, TheSchemaRejectsWhatCiSystemsWouldMisread) {
  REQUIRE_XMLLINT();
  TempDir dir;
  // Negative controls: the validation can fail.
  const char* bad[] = {
      "<testsuites tests=\"x\" failures=\"0\" errors=\"0\" time=\"0\"/>",
      "<testsuites tests=\"1\" failures=\"0\" errors=\"0\" time=\"0\"><testsuite name=\"s\" tests=\"1\" "
      "failures=\"0\" "
      "errors=\"0\" skipped=\"0\" time=\"0\"><testcase classname=\"c\" name=\"n\" "
      "time=\"0\"><failure/><error/>"
      "</testcase></testsuite></testsuites>",
      "<testsuites tests=\"0\" failures=\"0\" errors=\"0\" time=\"0\"><testsuite name=\"s\" tests=\"0\" "
      "failures=\"0\" "
      "errors=\"0\" skipped=\"0\" time=\"0\" timestamp=\"2026-12-02T10:38:06Z\"/></testsuites>",
      "<testcase classname=\"c\" name=\"n\" time=\"0\"/>",
      "<testsuites tests=\"0\" failures=\"0\" errors=\"0\" time=\"-1\"/>",
  };
  int i = 0;
  for (const char* xml : bad) {
    const std::string path = dir.file(fmt::format("bad{}.xml", i++));
    writeTextAtomic(path, xml);
    EXPECT_NE(fx::validateJunit(path).exitCode, 0) << xml;
  }
}

TEST(Junit, HostileTextSurvivesARealParser) {
  REQUIRE_XMLLINT();
  TempDir dir;
  const std::string evil = fx::kHostileHost + " ]]> <!-- --> &amp; \xef\xbf\xbe";
  JunitSuite s{fx::kHostileHost, fx::kHostileHost, "2026-12-02T10:38:06+02:00", {}};
  s.cases.push_back({fx::kHostileHost, evil, "fail", evil, evil, 0, evil});
  s.cases.push_back({"c", "pass-with-output", "pass", "", evil, 0, ""});
  const std::string path = validated(dir, "hostile.xml", junitXml({s}));
  // In attributes, tab, line feed and carriage return come back as they were (character references).
  const std::string evilXml = fx::kHostileHostXml + " ]]> <!-- --> &amp; ";  // U+FFFE dropped
  EXPECT_EQ(fx::xpath(path, "string(//testsuite/@hostname)"), fx::kHostileHostXml);
  EXPECT_EQ(fx::xpath(path, "string(//testcase[1]/@classname)"), fx::kHostileHostXml);
  EXPECT_EQ(fx::xpath(path, "string(//testcase[1]/@name)"), evilXml);
  EXPECT_EQ(fx::xpath(path, "string(//testcase[1]/failure/@message)"), evilXml);
  EXPECT_EQ(fx::xpath(path, "string(//testcase[1]/failure/@type)"), evilXml);
  EXPECT_EQ(fx::xpath(path, "string(//testcase[1]/failure)"), evilXml) << "element text too";
  EXPECT_EQ(fx::xpath(path, "string(//testcase[2]/system-out)"), evilXml);
  EXPECT_EQ(fx::xpath(path, "string(//testsuite/@timestamp)"), "2026-12-02T08:38:06") << "in UTC";
}

TEST(Junit, CheckReportOneCasePerFindingAndStatesOfTheirOwn) {
  REQUIRE_XMLLINT();
  TempDir dir;
  const CheckReport report = fx::checkReport();
  const JunitSuite suite = junitSuiteOfCheck(report);
  EXPECT_EQ(suite.name, "dsreport check");
  const std::string path = validated(dir, "check.xml", junitOfCheck(report));
  EXPECT_EQ(junitOfCheck(report), junitXml({suite}));
  auto status = [&](const std::string& cls, const std::string& name) {
    const std::string tc = "//testcase[@classname='" + cls + "' and @name='" + name + "']";
    if (fx::xpath(path, "count(" + tc + ")") != "1") return std::string("absent");
    for (const char* o : {"failure", "error", "skipped"})
      if (fx::xpath(path, "count(" + tc + "/" + o + ")") == "1") return std::string(o);
    return std::string("pass");
  };
  const std::string pattern = " (busbw allreduce nccl f32 sum 1073741824 out w16)";
  EXPECT_EQ(status("dsreport.check.node01", "allreduce_1g_variance" + pattern), "pass");
  EXPECT_EQ(status("dsreport.check.node01", "state"), "absent") << "its findings show it";
  EXPECT_EQ(status("dsreport.check.node02", "allreduce_1g_variance" + pattern), "failure");
  EXPECT_EQ(status("dsreport.check.node02", "allreduce_1g_floor" + pattern), "pass");
  EXPECT_EQ(status("dsreport.check.node02", "state"), "absent") << "counted once, by its failed finding";
  EXPECT_EQ(status("dsreport.check.node03", "baseline"), "skipped");
  EXPECT_EQ(status("dsreport.check.node04", "results"), "error");
  // A rule that could not tell the figure from noise is skipped, not passed; its host has no state case.
  EXPECT_EQ(status("dsreport.check.node05", "allreduce_1g_variance" + pattern), "skipped");
  EXPECT_EQ(status("dsreport.check.node05", "state"), "absent");
  EXPECT_EQ(fx::xpath(path, "string(//testcase[@classname='dsreport.check.node05']/skipped/@type)"),
            "cannot_judge");
  EXPECT_NE(fx::xpath(path, "string(//testcase[@classname='dsreport.check.node05']/skipped)")
                .find("the mean of 3 runs of the host would (--n 3)"),
            std::string::npos);
  EXPECT_EQ(fx::xpath(path, "string(//testsuite/@tests)"), "7");
  EXPECT_EQ(fx::xpath(path, "string(//testsuite/@failures)"), "2")
      << "node02's rule and the hostile host's state";
  EXPECT_EQ(fx::xpath(path, "string(//testsuite/@errors)"), "1");
  EXPECT_EQ(fx::xpath(path, "string(//testsuite/@skipped)"), "2");
  EXPECT_EQ(fx::xpath(path, "string(//testsuite/@timestamp)"), "2026-12-02T03:00:00");
  const std::string failure = "//testcase[@classname='dsreport.check.node02']/failure";
  EXPECT_EQ(fx::xpath(path, "string(" + failure + "/@type)"), "variance");
  EXPECT_NE(fx::xpath(path, "string(" + failure + ")").find("broke the rule in 3 of 3 run(s)"),
            std::string::npos);
  EXPECT_EQ(fx::xpath(path, "string(//testcase[@classname='dsreport.check.node04']/error/@message)"),
            "ERROR: No results reported");
  // A healthy host's rule that broke in fewer than k runs passes, with the count in its output.
  EXPECT_NE(
      fx::xpath(path, "string(//testcase[@classname='dsreport.check.node01']/system-out)").find("1 of 3"),
      std::string::npos);
  // Unhealthy without findings: a failed "state" case carries the summary.
  EXPECT_EQ(fx::xpath(path, "count(//testcase[@name='state']/failure)"), "1");
  // cannot_judge without findings (a hand-made file): a skipped "state" case carries the summary.
  CheckReport blind;
  blind.hosts = {HostCheck{"n8", "", CheckState::kCannotJudge, {}, "CANNOT JUDGE: too noisy"}};
  const std::string blindPath = validated(dir, "blind.xml", junitOfCheck(blind));
  EXPECT_EQ(fx::xpath(blindPath, "string(//testcase[@name='state']/skipped/@message)"),
            "CANNOT JUDGE: too noisy");
  // A host with nothing: healthy and no findings is one passing "state" case.
  CheckReport bare;
  bare.hosts = {HostCheck{"n9", "", CheckState::kHealthy, {}, "Healthy"}};
  const std::string barePath = validated(dir, "bare.xml", junitOfCheck(bare));
  EXPECT_EQ(fx::xpath(barePath, "string(//testcase/@name)"), "state");
  EXPECT_EQ(fx::xpath(barePath, "count(//testsuite[@timestamp])"), "0");
  validated(dir, "nohosts.xml", junitOfCheck(CheckReport{}));
}

TEST(Junit, DsdiagWarningsFollowFailOn) {
  REQUIRE_XMLLINT();
  TempDir dir;
  const DiagReport d = fx::localDiag();
  const std::string strict =
      validated(dir, "strict.xml", junitOfDiag(d, JunitWarn::kFailure, "2026-12-02T10:38:06Z"));
  const std::string lax = validated(dir, "lax.xml", junitOfDiag(d, JunitWarn::kPass, "2026-12-02T10:38:06Z"));
  auto tc = [](const std::string& name) { return "//testcase[@name='" + name + "']"; };
  EXPECT_EQ(fx::xpath(strict, "string(" + tc("system.shm_size") + "/failure/@type)"), "WARN");
  EXPECT_EQ(fx::xpath(lax, "count(" + tc("system.shm_size") + "/failure)"), "0");
  EXPECT_EQ(fx::xpath(lax, "substring(" + tc("system.shm_size") + "/system-out, 1, 6)"), "WARN: ");
  for (const auto& path : {strict, lax}) {
    EXPECT_EQ(fx::xpath(path, "string(" + tc("nccl.version") + "/failure/@type)"), "FAIL");
    EXPECT_EQ(fx::xpath(path, "string(" + tc("nccl.version") + "/failure/@message)"),
              "libnccl <missing> & \"broken\"\n]]> end");
    EXPECT_NE(fx::xpath(path, "string(" + tc("nccl.version") + "/failure)").find("What to do: install NCCL"),
              std::string::npos);
    EXPECT_EQ(fx::xpath(path, "count(" + tc("gpu.libcuda") + "/skipped)"), "1");
    EXPECT_EQ(fx::xpath(path, "string(" + tc("env.rank_range") + "/error/@type)"), "check_error")
        << "a check that threw is dsdiag's error, not the host's failure";
    EXPECT_EQ(fx::xpath(path, "string(" + tc("net.master_port_free") + "/system-out)"), "port 29500 is free");
    EXPECT_EQ(fx::xpath(path, "string(//testcase[@name='net.master_port_free']/@classname)"), "dsdiag.net");
    EXPECT_EQ(fx::xpath(path, "string(//testsuite/@hostname)"), fx::kHostileHostXml);
  }
  EXPECT_EQ(fx::xpath(strict, "string(/testsuites/@failures)"), "3") << "nccl.version and the two warnings";
  EXPECT_EQ(fx::xpath(lax, "string(/testsuites/@failures)"), "1");
  EXPECT_EQ(fx::xpath(strict, "string(/testsuites/@errors)"), "1");
}

TEST(Junit, FleetModeAddsASuiteOfHostsAndLinks) {
  REQUIRE_XMLLINT();
  TempDir dir;
  DiagReport d = fx::fleetDiag({"a1", "a2", "a3"}, 1.5, 0.1);
  d.checks.push_back(DiagRecord{"net.master_port_free", "net", DiagStatus::kPass, "free", "", {}, 1, "a2"});
  d.missingRanks = {7};
  d.fleet->judgement.hosts.push_back(HostVerdict{"a4", {3}, HostState::kNoResult, {}, ""});
  d.fleet->judgement.links.push_back(
      LinkVerdict{"a1", "a2", 0, 1, {Evidence{"link_failed", "links", "reset", {1}, 0, 0}}});
  const std::string path =
      validated(dir, "fleet.xml", junitOfDiag(d, JunitWarn::kFailure, "2026-12-02T10:38:06Z"));
  EXPECT_EQ(fx::xpath(path, "count(/testsuites/testsuite)"), "2");
  EXPECT_EQ(fx::xpath(path, "string(/testsuites/testsuite[2]/@name)"), "dsdiag fleet");
  EXPECT_EQ(fx::xpath(path, "count(//testcase[@name='net.master_port_free [rank 1 on a2]'])"), "1")
      << "world mode names the rank";
  EXPECT_EQ(fx::xpath(path, "count(//testcase[@name='world.report [rank 7]']/error)"), "1");
  EXPECT_EQ(fx::xpath(path, "count(//testcase[@classname='dsdiag.fleet' and @name='a1'])"), "1");
  EXPECT_EQ(fx::xpath(path,
                      "count(//testcase[@classname='dsdiag.fleet' and @name='a1']/*[self::failure or "
                      "self::error or self::skipped])"),
            "0")
      << "healthy: no outcome element";
  EXPECT_EQ(fx::xpath(path, "string(//testcase[@classname='dsdiag.fleet' and @name='a3']/failure/@type)"),
            "link_slow");
  EXPECT_NE(fx::xpath(path, "string(//testcase[@classname='dsdiag.fleet' and @name='a3']/failure)")
                .find("[link_slow, stage links] bandwidth with a1"),
            std::string::npos);
  EXPECT_EQ(fx::xpath(path, "count(//testcase[@classname='dsdiag.fleet' and @name='a4']/error)"), "1");
  EXPECT_EQ(fx::xpath(path, "count(//testcase[@classname='dsdiag.fleet.link' and @name='a1 - a2']/failure)"),
            "1");
}

TEST(Junit, ToolErrorIsOneErrorCase) {
  REQUIRE_XMLLINT();
  TempDir dir;
  const std::string path = validated(
      dir, "err.xml", junitOfToolError("dsdiag", "n1", junitTimestampNow(), "cannot read /proc & <x>"));
  EXPECT_EQ(fx::xpath(path, "string(//testcase/error/@message)"), "cannot read /proc & <x>");
  EXPECT_EQ(fx::xpath(path, "string(//testcase/error/@type)"), "tool_error");
  EXPECT_EQ(fx::xpath(path, "string(/testsuites/@errors)"), "1");
  // junitTimestampNow is what the schema wants: no zone, no fraction.
  const std::string now = junitTimestampNow();
  ASSERT_EQ(now.size(), 19u) << now;
  EXPECT_EQ(now[10], 'T');
}
