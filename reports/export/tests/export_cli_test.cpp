// The real binaries: `dsreport export --openmetrics` (exit codes, bad inputs, the file left as it was
// when nothing can be exported) and `dsdiag --junit` (local and world mode, written when checks fail,
// warnings under --fail-on, a JSON that cannot be written), the JUnit validated against junit.xsd.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/testing/paths.h"
#include "reports/export/tests/export_fixtures.h"
#include "reports/json_io.h"

using namespace ds::report;
using ds::testing::RunOptions;
using ds::testing::RunResult;
using ds::testing::TempDir;
namespace fx = ds::report::testfix;

namespace {

std::string dsreport() { return ds::testing::binDir() + "/dsreport"; }
std::string dsdiag() { return ds::testing::binDir() + "/dsdiag"; }

RunResult exportRun(std::vector<std::string> args) {
  std::vector<std::string> argv{dsreport(), "export"};
  argv.insert(argv.end(), args.begin(), args.end());
  return ds::testing::run(argv, ds::testing::cleanOptions(std::chrono::seconds(60)));
}

// dsdiag's environment in the tests: no outer launcher, none of the variables its checks judge.
RunOptions diagEnv(std::map<std::string, std::string> set = {}) {
  RunOptions o = ds::testing::cleanOptions(std::chrono::seconds(60), std::move(set));
  for (const char* v : {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_DEBUG", "DS_ACCELERATOR",
                        "DSDIAG_JUNIT", "DSDIAG_JSON"})
    o.unsetEnv.emplace_back(v);
  if (!o.setEnv.count("OMP_NUM_THREADS")) o.unsetEnv.emplace_back("OMP_NUM_THREADS");
  return o;
}

std::vector<std::string> listing(const TempDir& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

std::string sweepFile(const TempDir& dir, const std::string& name, const std::string& host, double gbps) {
  return fx::writeDoc(
      dir, name,
      sweepToJson(fx::sweep({host}, "2026-12-01T02:00:00Z", {fx::row("allreduce", 1 << 20, gbps)})));
}

}  // namespace

TEST(ExportCli, WritesTheFileAndSaysWhatIsInIt) {
  TempDir dir;
  const std::string a = sweepFile(dir, "a.json", "n1", 3);
  const std::string f = fx::writeDoc(dir, "fleet.json", diagToJson(fx::fleetDiag({"h1", "h2"}, 1, 1)));
  auto r = exportRun({"--openmetrics", dir.file("dsperf.prom"), a, f});
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("dsreport export: wrote " + dir.file("dsperf.prom") + ": "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("from 2 run(s)"), std::string::npos) << r.out;
  const std::string text = ds::testing::readFile(dir.file("dsperf.prom"));
  EXPECT_NE(text.find("dsperf_busbw_bytes_per_second{host=\"n1\""), std::string::npos) << text;
  EXPECT_NE(text.find("dsperf_link_bandwidth_bytes_per_second{host=\"h2\",peer=\"h1\""), std::string::npos)
      << text;
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"a.json", "dsperf.prom", "fleet.json"}))
      << "no temp file left";
  // The environment twin of --openmetrics; only a check.
  RunOptions o =
      ds::testing::cleanOptions(std::chrono::seconds(60), {{"DSREPORT_OPENMETRICS", dir.file("c.prom")}});
  auto viaEnv = ds::testing::run(
      {dsreport(), "export", "--check", fx::writeDoc(dir, "check.json", checkToJson(fx::checkReport()))}, o);
  ASSERT_EQ(viaEnv.exitCode, 0) << viaEnv.out << viaEnv.err;
  EXPECT_NE(ds::testing::readFile(dir.file("c.prom"))
                .find("dsperf_check_state{host=\"node04\",state=\"no_result\"} 1"),
            std::string::npos);
}

TEST(ExportCli, BadInputsExitTwoAndLeaveTheOldFile) {
  TempDir dir;
  const std::string out = dir.file("dsperf.prom");
  writeTextAtomic(out, "# the previous export\n");
  const std::string good = sweepFile(dir, "good.json", "n1", 3);
  writeTextAtomic(dir.file("corrupt.json"), "{\"schema\": \"dsperf.sweep\", \"results\": [");
  writeTextAtomic(dir.file("garbage.json"), std::string("\x00\xff\xfe garbage", 11));
  const std::string train = std::string(DS_REPORTS_TEST_DATA) + "/train_golden.json";
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--openmetrics", out, good, dir.file("corrupt.json")}, "corrupt.json"},
      {{"--openmetrics", out, dir.file("garbage.json")}, "garbage.json"},
      {{"--openmetrics", out, train}, "none of the files holds a figure to export"},
      {{"--openmetrics", out}, "nothing to export"},
      {{"--openmetrics", out, "--check", good}, "is not a dsreport check result"},
      {{"--openmetrics", out, good, "--check", dir.file("corrupt.json")}, "corrupt.json"},
      {{good}, "--openmetrics"},
      {{"--openmetrics", dir.file("missing/x.prom"), good}, "does not exist"},
      {{"--openmetrics", dir.path(), good}, "is a directory"},
      {{"--openmetrics", out, dir.file("absent.json")}, "absent.json"},
  };
  for (const auto& c : cases) {
    auto r = exportRun(c.args);
    EXPECT_EQ(r.exitCode, 2) << c.args.back() << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
    EXPECT_EQ(ds::testing::readFile(out), "# the previous export\n") << "the old file stays";
  }
  // A check file with a state nobody knows.
  auto bad = checkToJson(fx::checkReport());
  bad["hosts"][0]["state"] = "sick";
  auto r = exportRun({"--openmetrics", out, "--check", fx::writeDoc(dir, "bad-check.json", bad)});
  EXPECT_EQ(r.exitCode, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("sick"), std::string::npos) << r.err;
  EXPECT_EQ(ds::testing::readFile(out), "# the previous export\n");
}

TEST(DsdiagJunit, LocalRunOneCasePerCheckValidates) {
  TempDir d;
  auto r = ds::testing::run(
      {dsdiag(), "--only", "env,net,system", "--json", d.file("r.json"), "--junit", d.file("r.xml")},
      diagEnv());
  ASSERT_NE(r.exitCode, 3) << r.out << r.err;
  auto report = diagFromJson(readJson(d.file("r.json")), "r.json");
  const std::string xml = ds::testing::readFile(d.file("r.xml"));
  ASSERT_FALSE(xml.empty()) << "no JUnit written";
  if (fx::xmllint().empty())
    GTEST_SKIP() << "xmllint not found (libxml2-utils; scripts/setup.sh installs it)";
  auto v = fx::validateJunit(d.file("r.xml"));
  EXPECT_EQ(v.exitCode, 0) << v.err << xml;
  EXPECT_EQ(fx::xpath(d.file("r.xml"), "count(//testcase)"), std::to_string(report.checks.size()));
  const auto counts = countStatuses(report.checks);
  EXPECT_EQ(fx::xpath(d.file("r.xml"), "count(//skipped)"), std::to_string(counts.skip));
  EXPECT_EQ(fx::xpath(d.file("r.xml"), "count(//failure) + count(//error)"),
            std::to_string(counts.fail + counts.warn))
      << "default --fail-on warn: a warning is a failure";
  EXPECT_EQ(fx::xpath(d.file("r.xml"),
                      "count(//testcase[@name='net.master_port_free' and @classname='dsdiag.net'])"),
            "1");
}

TEST(DsdiagJunit, WarningsFailOrPassWithTheExitCode) {
  if (fx::xmllint().empty())
    GTEST_SKIP() << "xmllint not found (libxml2-utils; scripts/setup.sh installs it)";
  TempDir d;
  auto env = diagEnv({{"OMP_NUM_THREADS", "abc"}});  // a WARN
  auto strict =
      ds::testing::run({dsdiag(), "--only", "env.omp_num_threads", "--junit", d.file("s.xml")}, env);
  EXPECT_EQ(strict.exitCode, 1) << strict.out << strict.err;
  EXPECT_EQ(fx::xpath(d.file("s.xml"), "string(//testcase[@name='env.omp_num_threads']/failure/@type)"),
            "WARN");
  env.setEnv["DSDIAG_JUNIT"] = d.file("l.xml");  // the environment twin
  auto lenient = ds::testing::run({dsdiag(), "--only", "env.omp_num_threads", "--fail-on", "fail"}, env);
  EXPECT_EQ(lenient.exitCode, 0) << lenient.out << lenient.err;
  EXPECT_EQ(fx::validateJunit(d.file("l.xml")).exitCode, 0);
  EXPECT_EQ(fx::xpath(d.file("l.xml"), "count(//failure)"), "0");
  EXPECT_EQ(fx::xpath(d.file("l.xml"), "substring(//testcase[@name='env.omp_num_threads']/system-out, 1, 6)"),
            "WARN: ");
}

TEST(DsdiagJunit, WrittenWhenTheJsonCannotBeAndWhenChecksFail) {
  if (fx::xmllint().empty())
    GTEST_SKIP() << "xmllint not found (libxml2-utils; scripts/setup.sh installs it)";
  TempDir d;
  // A name that passes the flag's checks but whose temp file ("<name>.tmp.<pid>") is too long to create.
  const std::string json = d.file(std::string(250, 'j') + ".json");
  auto r = ds::testing::run(
      {dsdiag(), "--only", "env.omp_num_threads", "--json", json, "--junit", d.file("r.xml")},
      diagEnv({{"OMP_NUM_THREADS", "abc"}}));
  EXPECT_EQ(r.exitCode, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("cannot write"), std::string::npos) << r.err;
  EXPECT_EQ(fx::validateJunit(d.file("r.xml")).exitCode, 0);
  EXPECT_EQ(fx::xpath(d.file("r.xml"), "count(//testcase[@name='env.omp_num_threads']/failure)"), "1")
      << "the findings, not a tool error: the checks did run";
  // A folder that is not there: a usage error before anything runs.
  auto missing = ds::testing::run({dsdiag(), "--only", "env", "--junit", d.file("no/r.xml")}, diagEnv());
  EXPECT_EQ(missing.exitCode, 3);
  EXPECT_NE(missing.err.find("--junit"), std::string::npos) << missing.err;
}

TEST(DsdiagJunit, WorldModeWritesOneFileWithTheFleetSuite) {
  if (fx::xmllint().empty())
    GTEST_SKIP() << "xmllint not found (libxml2-utils; scripts/setup.sh installs it)";
  TempDir d;
  auto r =
      ds::testing::run({ds::testing::binDir() + "/dsrun", "--nproc-per-node", "2", "--standalone", dsdiag(),
                        "--world", "--timeout", "20", "--json", d.file("w.json"), "--junit", d.file("w.xml")},
                       diagEnv());
  auto report = diagFromJson(readJson(d.file("w.json")), "w.json");
  ASSERT_TRUE(report.fleet.has_value()) << r.out << r.err;
  auto v = fx::validateJunit(d.file("w.xml"));
  ASSERT_EQ(v.exitCode, 0) << v.err << r.out << r.err;
  EXPECT_EQ(listing(d), (std::vector<std::string>{"w.json", "w.xml"})) << "rank 0 alone writes";
  EXPECT_EQ(fx::xpath(d.file("w.xml"), "count(/testsuites/testsuite[@name='dsdiag']/testcase)"),
            std::to_string(report.checks.size() + report.missingRanks.size()));
  EXPECT_EQ(
      fx::xpath(d.file("w.xml"),
                "count(/testsuites/testsuite[@name='dsdiag fleet']/testcase[@classname='dsdiag.fleet'])"),
      std::to_string(report.fleet->judgement.hosts.size()));
  EXPECT_EQ(
      fx::xpath(d.file("w.xml"), "count(//testcase[starts-with(@name, 'net.master_port_free [rank 1 on ')])"),
      "1");
  // Exported, this standalone run (every rank on this one host) gives no figure: links within a host
  // say nothing of its NIC (reports/baseline/sample.h). The command says so, exits 2, writes nothing.
  auto e = exportRun({"--openmetrics", d.file("w.prom"), d.file("w.json")});
  EXPECT_EQ(e.exitCode, 2) << e.out << e.err;
  EXPECT_NE(e.err.find("none of the files holds a figure to export"), std::string::npos) << e.err;
  EXPECT_FALSE(std::filesystem::exists(d.file("w.prom")));
}
