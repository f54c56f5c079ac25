// Label prometheus: what dsreport export writes, read by Prometheus' own parsers. `promtool check
// metrics` (Debian's prometheus: the Go parser node_exporter's textfile collector uses, plus the
// naming lint) must accept it without a single problem, and python3-prometheus-client's parsers (the
// text format, and the stricter OpenMetrics one) must read back every value and every hostile label
// exactly. Each test is skipped, saying what to install, when its tool is missing.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "engine/testing/paths.h"
#include "reports/export/openmetrics.h"
#include "reports/export/tests/export_fixtures.h"
#include "reports/json_io.h"
#include "reports/run/run_file.h"

using namespace ds::report;
using ds::testing::RunResult;
using ds::testing::TempDir;
namespace fx = ds::report::testfix;

namespace {

#define REQUIRE_PROMTOOL()                                                                                  \
  if (fx::promtool().empty())                                                                               \
  GTEST_SKIP() << "promtool not found (Debian package prometheus; scripts/setup.sh installs it): the text " \
                  "cannot be checked by Prometheus' own parser"
#define REQUIRE_PYTHON_CLIENT()                                                                         \
  if (fx::prometheusPython().empty())                                                                   \
  GTEST_SKIP()                                                                                          \
      << "python3 cannot import prometheus_client (Debian python3-prometheus-client; scripts/setup.sh " \
         "installs it)"

RunResult promtoolCheck(const std::string& file) {
  return ds::testing::run({"/bin/sh", "-c", "exec \"$0\" check metrics < \"$1\"", fx::promtool(), file},
                          ds::testing::cleanOptions(std::chrono::seconds(60)));
}

struct Parsed {
  nlohmann::json families;
  // (name, labels) -> value
  std::map<std::pair<std::string, std::map<std::string, std::string>>, double> values;
  std::string error;
};

Parsed parse(const std::string& file) {
  Parsed p;
  auto r =
      ds::testing::run({fx::prometheusPython(), std::string(DS_EXPORT_DIR) + "/tests/parse_prom.py", file},
                       ds::testing::cleanOptions(std::chrono::seconds(60)));
  if (r.exitCode != 0) {
    p.error = r.out + r.err;
    return p;
  }
  auto j = nlohmann::json::parse(r.out);
  p.families = j["families"];
  std::size_t n = 0;
  for (const auto& f : p.families) {
    for (const auto& s : f["samples"]) {
      EXPECT_TRUE(s["timestamp"].is_null()) << "a timestamp on " << s.dump();
      auto key =
          std::make_pair(s["name"].get<std::string>(), s["labels"].get<std::map<std::string, std::string>>());
      EXPECT_TRUE(p.values.emplace(key, s["value"].is_number() ? s["value"].get<double>() : -1).second)
          << "duplicate series " << s.dump();
      ++n;
    }
    EXPECT_EQ(f["type"], "gauge") << f["name"];
    EXPECT_FALSE(f["help"].get<std::string>().empty()) << f["name"];
  }
  EXPECT_EQ(j["openmetrics_samples"].get<std::size_t>(), n) << "both parsers read the same samples";
  return p;
}

// A bit of everything: hostile hosts and labels, repeats, several runs of one host, a job, a fleet
// run, a check report.
std::string richText(std::vector<Sample>& samples, CheckReport& check) {
  TempDir dir;
  auto a =
      fx::sweep({fx::kHostileHost}, "2026-12-01T02:00:00Z",
                {fx::row("allreduce", 1 << 30, 21.3), fx::row("allgather", 1 << 30, 19)}, "lab \"A\"\n\\");
  auto b = fx::sweep({"node02"}, "2026-12-01T02:00:00Z", {fx::row("allreduce", 1 << 30, 22)}, "lab");
  auto job =
      fx::sweep({"node01", "node02"}, "2026-12-01T04:00:00Z", {fx::row("allreduce", 1 << 30, 40, 16)}, "lab");
  for (const auto& run :
       {loadRunFile(fx::writeDoc(dir, "a.json", sweepToJson(a))),
        loadRunFile(fx::writeDoc(dir, "b.json", sweepToJson(b))),
        loadRunFile(fx::writeDoc(dir, "job.json", sweepToJson(job))),
        classifyRun(diagToJson(fx::fleetDiag({"f1", "f2", "f3\"x"}, 1.5, 0.1)), "fleet.json")})
    for (auto& s : samplesOf(run)) samples.push_back(s);
  check = fx::checkReport();
  return openMetricsText(samples, &check);
}

}  // namespace

TEST(Prometheus, PromtoolAcceptsTheExportWithoutALintProblem) {
  REQUIRE_PROMTOOL();
  TempDir dir;
  std::vector<Sample> samples;
  CheckReport check;
  const std::string file = dir.file("dsperf.prom");
  writeOpenMetricsFile(file, richText(samples, check));
  auto r = promtoolCheck(file);
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_EQ(r.out + r.err, "") << "promtool's lint found problems";
}

TEST(Prometheus, PromtoolIsAStrictJudge) {
  REQUIRE_PROMTOOL();
  TempDir dir;
  // Negative controls: promtool does reject what the writer must never write.
  const std::vector<std::string> bad = {
      "# HELP x h\n# TYPE x gauge\nx{a=\"\xff\"} 1\n",   // not UTF-8
      "# HELP x h\n# TYPE x gauge\nx{a=\"a\nb\"} 1\n",   // a raw line feed in a value
      "# HELP x h\n# TYPE x gauge\nx{a=\"a\\qb\"} 1\n",  // an unknown escape
      "# HELP x_microseconds h\n# TYPE x_microseconds gauge\nx_microseconds 1\n",  // not a base unit
      "# TYPE x gauge\nx 1\n",                                                     // no HELP
  };
  int i = 0;
  for (const auto& text : bad) {
    const std::string file = dir.file(fmt::format("bad{}.prom", i++));
    writeOpenMetricsFile(file, text);
    EXPECT_NE(promtoolCheck(file).exitCode, 0) << text;
  }
}

TEST(Prometheus, PythonParsersReadBackEveryValueAndLabel) {
  REQUIRE_PYTHON_CLIENT();
  TempDir dir;
  std::vector<Sample> samples;
  CheckReport check;
  const std::string file = dir.file("dsperf.prom");
  writeOpenMetricsFile(file, richText(samples, check));
  Parsed p = parse(file);
  ASSERT_TRUE(p.error.empty()) << p.error;
  std::set<std::string> names;
  for (const auto& f : p.families) names.insert(f["name"]);
  EXPECT_EQ(names.size(), 11u) << p.families.dump();
  const std::string fam = "dsperf_busbw_bytes_per_second";
  auto busbw = [&](const std::string& host, const std::string& coll, const std::string& op,
                   const std::string& label) {
    std::map<std::string, std::string> l{{"host", host},   {"collective", coll}, {"backend", "gloo"},
                                         {"dtype", "f32"}, {"op", op},           {"bytes", "1073741824"},
                                         {"place", "out"}, {"world_size", "2"},  {"label", label}};
    auto it = p.values.find({fam, l});
    return it == p.values.end() ? -1.0 : it->second;
  };
  // The hostile host and label come back as the writer documents: \ " and line feed exact, other
  // controls and the stray byte as U+FFFD.
  EXPECT_DOUBLE_EQ(busbw(fx::kHostileHostProm, "allreduce", "sum", "lab \"A\"\n\\"), 21.3e9);
  EXPECT_DOUBLE_EQ(busbw(fx::kHostileHostProm, "allgather", "none", "lab \"A\"\n\\"), 19e9);
  EXPECT_DOUBLE_EQ(busbw("node02", "allreduce", "sum", "lab"), 22e9);
  std::map<std::string, std::string> jobLabels{{"hosts", "node[01-02]"},
                                               {"collective", "allreduce"},
                                               {"backend", "gloo"},
                                               {"dtype", "f32"},
                                               {"op", "sum"},
                                               {"bytes", "1073741824"},
                                               {"place", "out"},
                                               {"world_size", "16"},
                                               {"label", "lab"}};
  EXPECT_DOUBLE_EQ(p.values.at({"dsperf_job_busbw_bytes_per_second", jobLabels}), 40e9);
  EXPECT_DOUBLE_EQ(p.values.at({"dsperf_link_bandwidth_bytes_per_second",
                                {{"host", "f3\"x"}, {"peer", "f1"}, {"label", ""}}}),
                   0.1e9);
  EXPECT_DOUBLE_EQ(
      p.values.at({"dsperf_link_latency_seconds", {{"host", "f1"}, {"peer", "f2"}, {"label", ""}}}), 20e-6);
  EXPECT_DOUBLE_EQ(
      p.values.at({"dsperf_host_link_bandwidth_bytes_per_second", {{"host", "f2"}, {"label", ""}}}), 0.8e9);
  EXPECT_DOUBLE_EQ(p.values.at({"dsperf_run_timestamp_seconds",
                                {{"host", "node[01-02]"}, {"kind", "sweep"}, {"label", "lab"}}}),
                   1796090400 + 2 * 3600);
  EXPECT_DOUBLE_EQ(
      p.values.at({"dsperf_check_state", {{"host", fx::kHostileHostProm}, {"state", "unhealthy"}}}), 1);
  EXPECT_DOUBLE_EQ(p.values.at({"dsperf_check_healthy", {{"host", "node01"}}}), 1);
  EXPECT_DOUBLE_EQ(p.values.at({"dsperf_check_failed_rules", {{"host", "node02"}}}), 1);
  EXPECT_DOUBLE_EQ(p.values.at({"dsperf_check_timestamp_seconds", {}}), 1796180400.25);
  // Every sample the exporter got is there (fleet links from both ends, the hosts' medians).
  std::size_t perFamily = 0;
  for (const auto& [key, v] : p.values)
    if (key.first == "dsperf_link_bandwidth_bytes_per_second") ++perFamily;
  EXPECT_EQ(perFamily, 6u);
}

TEST(Prometheus, DsreportExportEndToEnd) {
  REQUIRE_PROMTOOL();
  REQUIRE_PYTHON_CLIENT();
  TempDir dir;
  // Three nightly runs of one host (the newest slowed by half), a train result (nothing to export) and
  // a check verdict.
  std::vector<std::string> args{ds::testing::binDir() + "/dsreport", "export", "--openmetrics",
                                dir.file("out.prom")};
  const char* days[] = {"2026-11-29T02:00:00Z", "2026-12-01T02:00:00Z", "2026-11-30T02:00:00Z"};
  const double bw[] = {20, 10, 21};
  for (int i = 0; i < 3; ++i)
    args.push_back(
        fx::writeDoc(dir, fmt::format("night{}.json", i),
                     sweepToJson(fx::sweep({"gpu-node7"}, days[i], {fx::row("allreduce", 1 << 30, bw[i])}))));
  args.push_back(std::string(DS_REPORTS_TEST_DATA) + "/train_golden.json");
  args.push_back("--check");
  args.push_back(fx::writeDoc(dir, "check.json", checkToJson(fx::checkReport())));
  auto r = ds::testing::run(args, ds::testing::cleanOptions(std::chrono::seconds(60)));
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("train_golden.json (train) holds no figure to export"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("from 3 run(s) and the check of 6 host(s)"), std::string::npos) << r.out;
  auto check = promtoolCheck(dir.file("out.prom"));
  EXPECT_EQ(check.exitCode, 0) << check.out << check.err;
  EXPECT_EQ(check.out + check.err, "");
  Parsed p = parse(dir.file("out.prom"));
  ASSERT_TRUE(p.error.empty()) << p.error;
  std::map<std::string, std::string> l{
      {"host", "gpu-node7"}, {"collective", "allreduce"}, {"backend", "gloo"}, {"dtype", "f32"},
      {"op", "sum"},         {"bytes", "1073741824"},     {"place", "out"},    {"world_size", "2"},
      {"label", ""}};
  EXPECT_DOUBLE_EQ(p.values.at({"dsperf_busbw_bytes_per_second", l}), 10e9)
      << "the newest night, given second";
  EXPECT_DOUBLE_EQ(p.values.at({"dsperf_run_timestamp_seconds",
                                {{"host", "gpu-node7"}, {"kind", "sweep"}, {"label", ""}}}),
                   1796090400);
  EXPECT_DOUBLE_EQ(p.values.at({"dsperf_check_state", {{"host", "node04"}, {"state", "no_result"}}}), 1);
  EXPECT_DOUBLE_EQ(p.values.at({"dsperf_check_state", {{"host", "node05"}, {"state", "cannot_judge"}}}), 1);
}
