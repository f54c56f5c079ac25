// The Prometheus text writer on its own: exact text of small inputs, escaping, names, one family per
// metric, no timestamps, and how repeats and several runs collapse into one series. The text is read
// by Prometheus' own parsers in prometheus_test.cpp (label prometheus).
#include "reports/export/openmetrics.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "engine/common/error.h"
#include "reports/export/tests/export_fixtures.h"
#include "reports/json_io.h"

using namespace ds::report;
using ds::testing::TempDir;

namespace {

Sample busbw(const std::string& host, const std::string& runId, const std::string& time, double gbps,
             std::size_t bytes = 1 << 30) {
  Sample s;
  s.scope = "host";
  s.host = host;
  s.runId = runId;
  s.time = time;
  s.metric = "busbw";
  s.collective = "allreduce";
  s.backend = "nccl";
  s.dtype = "f32";
  s.op = "sum";
  s.bytes = bytes;
  s.worldSize = 8;
  s.place = "out";
  s.value = gbps;
  s.unit = "GB/s";
  return s;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The series lines of a family, as written.
std::vector<std::string> seriesOf(const std::string& text, const std::string& family) {
  std::vector<std::string> out;
  for (const auto& l : lines(text))
    if (l.rfind(family + "{", 0) == 0 || l.rfind(family + " ", 0) == 0) out.push_back(l);
  return out;
}

double valueOf(const std::string& line) { return std::stod(line.substr(line.rfind(' ') + 1)); }

}  // namespace

TEST(OpenMetrics, ExactTextOfOneRow) {
  auto s = busbw("node01", "r1", "2026-12-01T02:00:00Z", 21.3);
  s.label = "pod-a";
  EXPECT_EQ(
      openMetricsText({s}),
      "# HELP dsperf_busbw_bytes_per_second Bus bandwidth of a collective measured by dsbench on one host "
      "(out-of-place; in-place when only that was measured), bytes per second.\n"
      "# TYPE dsperf_busbw_bytes_per_second gauge\n"
      "dsperf_busbw_bytes_per_second{host=\"node01\",collective=\"allreduce\",backend=\"nccl\",dtype=\"f32\","
      "op=\"sum\",bytes=\"1073741824\",place=\"out\",world_size=\"8\",label=\"pod-a\"} 21300000000\n"
      "# HELP dsperf_run_timestamp_seconds Start of the newest exported dsperf run of a host (kind sweep or "
      "fleet), Unix time.\n"
      "# TYPE dsperf_run_timestamp_seconds gauge\n"
      "dsperf_run_timestamp_seconds{host=\"node01\",kind=\"sweep\",label=\"pod-a\"} 1796090400\n");
}

TEST(OpenMetrics, NothingGivesEmptyText) {
  EXPECT_EQ(openMetricsText({}), "");
  EXPECT_EQ(openMetricsOfRuns({}), "");
}

TEST(OpenMetrics, LabelValuesAreEscaped) {
  EXPECT_EQ(escapeLabelValue("plain"), "plain");
  EXPECT_EQ(escapeLabelValue("a\"b"), "a\\\"b");
  EXPECT_EQ(escapeLabelValue("a\\b"), "a\\\\b");
  EXPECT_EQ(escapeLabelValue("a\nb"), "a\\nb");
  EXPECT_EQ(escapeLabelValue("\\n"), "\\\\n") << "a backslash then n is not a line feed";
  EXPECT_EQ(escapeLabelValue("a\rb\tc\x01"),
            "a\xef\xbf\xbd"
            "b\xef\xbf\xbd"
            "c\xef\xbf\xbd");
  EXPECT_EQ(escapeLabelValue("\x7f"), "\xef\xbf\xbd");
  EXPECT_EQ(escapeLabelValue("caf\xc3\xa9 <&>"), "caf\xc3\xa9 <&>") << "UTF-8 and markup are plain text here";
  // Not UTF-8: a stray continuation byte, an overlong '/', a surrogate, a cut-short sequence, beyond
  // U+10FFFF.
  EXPECT_EQ(escapeLabelValue("\x80"), "\xef\xbf\xbd");
  EXPECT_EQ(escapeLabelValue("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(escapeLabelValue("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(escapeLabelValue("x\xe2\x82"), "x\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(escapeLabelValue("\xf4\x90\x80\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(escapeLabelValue("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80") << "a 4-byte emoji is kept";
  EXPECT_EQ(escapeLabelValue(std::string("a\0b", 3)),
            "a\xef\xbf\xbd"
            "b");
  EXPECT_EQ(escapeHelp("a\\b\nc\"d"), "a\\\\b\\nc\"d") << "HELP escapes \\ and line feed, not quotes";
}

TEST(OpenMetrics, NameRules) {
  for (const char* ok : {"dsperf_busbw_bytes_per_second", "a", "_x", "a:b", "A9_"})
    EXPECT_TRUE(isValidMetricName(ok)) << ok;
  for (const char* bad : {"", "9a", "a-b", "a b", "a.b", "é"}) EXPECT_FALSE(isValidMetricName(bad)) << bad;
  for (const char* ok : {"host", "world_size", "_x", "A9"}) EXPECT_TRUE(isValidLabelName(ok)) << ok;
  for (const char* bad : {"", "__name__", "__x", "a:b", "9a", "a-b"})
    EXPECT_FALSE(isValidLabelName(bad)) << bad;
}

TEST(OpenMetrics, SampleValues) {
  EXPECT_EQ(formatSampleValue(21.3e9), "21300000000");
  EXPECT_EQ(formatSampleValue(2e-05), "2e-05");
  EXPECT_EQ(formatSampleValue(0.5), "0.5");
  EXPECT_EQ(formatSampleValue(std::nan("")), "NaN");
  EXPECT_EQ(formatSampleValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(formatSampleValue(-1.0 / 0.0), "-Inf");
  EXPECT_DOUBLE_EQ(std::stod(formatSampleValue(0.1 + 0.2)), 0.1 + 0.2) << "round trip";
}

TEST(OpenMetrics, HostileHostIsOneEscapedLabelValueOnOneLine) {
  auto s = busbw(testfix::kHostileHost, "r1", "2026-12-01T02:00:00Z", 10);
  s.label = "lab \"x\"\n";
  const std::string text = openMetricsText({s});
  const auto series = seriesOf(text, "dsperf_busbw_bytes_per_second");
  ASSERT_EQ(series.size(), 1u) << text;
  EXPECT_NE(series[0].find("host=\"" + escapeLabelValue(testfix::kHostileHost) + "\""), std::string::npos);
  EXPECT_NE(series[0].find("label=\"lab \\\"x\\\"\\n\""), std::string::npos) << series[0];
  // No raw control character or stray byte reaches the file; every line is a comment or a series.
  for (unsigned char c : text) EXPECT_TRUE(c == '\n' || (c >= 0x20 && c != 0x7f)) << int(c);
  for (const auto& l : lines(text)) EXPECT_TRUE(l.rfind("# ", 0) == 0 || l.rfind("dsperf_", 0) == 0) << l;
}

TEST(OpenMetrics, EachFamilyIsOneGroupWithHelpAndTypeFirstAndNoTimestamps) {
  std::vector<Sample> samples;
  for (int h = 0; h < 3; ++h)
    for (std::size_t bytes : {std::size_t(1) << 20, std::size_t(1) << 30})
      samples.push_back(busbw(fmt::format("node{:02d}", 3 - h), "r1", "2026-12-01T02:00:00Z", 10 + h, bytes));
  Sample job = busbw("node[01-04]", "r2", "2026-12-01T03:00:00Z", 40);
  job.scope = "job";
  samples.push_back(job);
  DiagReport d = testfix::fleetDiag({"a1", "a2", "a3"}, 1.5, 0.1);
  RunFile fleet = classifyRun(diagToJson(d), "fleet.json");
  for (auto& s : samplesOf(fleet)) samples.push_back(s);
  CheckReport check = testfix::checkReport();
  const std::string text = openMetricsText(samples, &check);

  std::set<std::string> closed;  // families already ended
  std::string current;
  std::set<std::string> seriesSeen;
  bool sawHelp = false, sawType = false;
  for (const auto& l : lines(text)) {
    if (l.rfind("# HELP ", 0) == 0) {
      const std::string name = l.substr(7, l.find(' ', 7) - 7);
      EXPECT_FALSE(closed.count(name)) << name << " appears in two groups";
      if (!current.empty()) closed.insert(current);
      current = name;
      sawHelp = true;
      sawType = false;
      EXPECT_TRUE(isValidMetricName(name)) << name;
      continue;
    }
    if (l.rfind("# TYPE ", 0) == 0) {
      EXPECT_EQ(l, "# TYPE " + current + " gauge");
      sawType = true;
      continue;
    }
    ASSERT_TRUE(sawHelp && sawType) << "a series before its HELP and TYPE: " << l;
    const std::string name = l.substr(0, l.find_first_of("{ "));
    EXPECT_EQ(name, current) << l;
    // name{labels} value: exactly one space outside the labels, so no timestamp follows the value.
    const std::string rest = l.substr(l.rfind('}') == std::string::npos ? name.size() : l.rfind('}') + 1);
    EXPECT_EQ(std::count(rest.begin(), rest.end(), ' '), 1) << "a timestamp or junk after the value: " << l;
    EXPECT_TRUE(seriesSeen.insert(l.substr(0, l.rfind(' '))).second) << "duplicate series " << l;
  }
  for (const char* fam : {"dsperf_busbw_bytes_per_second", "dsperf_job_busbw_bytes_per_second",
                          "dsperf_link_bandwidth_bytes_per_second", "dsperf_link_latency_seconds",
                          "dsperf_host_link_bandwidth_bytes_per_second", "dsperf_host_link_latency_seconds",
                          "dsperf_run_timestamp_seconds", "dsperf_check_healthy", "dsperf_check_state",
                          "dsperf_check_failed_rules", "dsperf_check_timestamp_seconds"})
    EXPECT_FALSE(seriesOf(text, fam).empty()) << fam << " missing:\n" << text;
  EXPECT_EQ(seriesOf(text, "dsperf_busbw_bytes_per_second").size(), 6u);
  EXPECT_EQ(seriesOf(text, "dsperf_job_busbw_bytes_per_second").size(), 1u);
  EXPECT_NE(text.find("dsperf_job_busbw_bytes_per_second{hosts=\"node[01-04]\""), std::string::npos);
  // Sorted by labels: node01 before node03 although given last.
  EXPECT_LT(text.find("host=\"node01\""), text.find("host=\"node03\""));
  // Numbers as numbers: 8192 before 65536, which a plain string sort would put first.
  const std::string sizes = openMetricsText({busbw("n", "r", "", 1, 65536), busbw("n", "r", "", 1, 8192)});
  EXPECT_LT(sizes.find("bytes=\"8192\""), sizes.find("bytes=\"65536\"")) << sizes;
}

TEST(OpenMetrics, FleetLinksInBaseUnitsFromBothEnds) {
  RunFile fleet = classifyRun(diagToJson(testfix::fleetDiag({"a1", "a2", "a3"}, 1.5, 0.1)), "fleet.json");
  const std::string text = openMetricsOfRuns({fleet});
  const auto bw = seriesOf(text, "dsperf_link_bandwidth_bytes_per_second");
  ASSERT_EQ(bw.size(), 6u) << "3 pairs, each from both ends:\n" << text;
  EXPECT_NE(
      text.find("dsperf_link_bandwidth_bytes_per_second{host=\"a3\",peer=\"a1\",label=\"\"} 100000000\n"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find("dsperf_link_bandwidth_bytes_per_second{host=\"a1\",peer=\"a2\",label=\"\"} 1500000000\n"),
      std::string::npos);
  EXPECT_NE(text.find("dsperf_link_latency_seconds{host=\"a1\",peer=\"a2\",label=\"\"} 2e-05\n"),
            std::string::npos);
  // A host's median: a1's links are 1.5 and 0.1 GB/s -> 0.8 GB/s.
  EXPECT_NE(text.find("dsperf_host_link_bandwidth_bytes_per_second{host=\"a1\",label=\"\"} 800000000\n"),
            std::string::npos)
      << text;
  EXPECT_TRUE(seriesOf(text, "dsperf_run_timestamp_seconds").empty())
      << "the diag file records no start time";
}

TEST(OpenMetrics, TheNewestRunWinsAndOneRunsRepeatsGiveTheirMedian) {
  const std::string fam = "dsperf_busbw_bytes_per_second";
  // Newer by start time wins, whatever the argument order.
  auto older = busbw("n1", "old", "2026-12-01T02:00:00Z", 10);
  auto newer = busbw("n1", "new", "2026-12-02T02:00:00Z", 20);
  for (const auto& order : {std::vector<Sample>{older, newer}, std::vector<Sample>{newer, older}}) {
    auto s = seriesOf(openMetricsText(order), fam);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_DOUBLE_EQ(valueOf(s[0]), 20e9);
  }
  // A time zone offset is honoured: 03:00+02:00 is 01:00Z, older than 02:00Z.
  auto offset = busbw("n1", "off", "2026-12-01T03:00:00+02:00", 30);
  EXPECT_DOUBLE_EQ(valueOf(seriesOf(openMetricsText({older, offset}), fam)[0]), 10e9);
  // A run without a start time is older than any with one; between two without, the later argument wins.
  auto unknownA = busbw("n1", "ua", "", 40);
  auto unknownB = busbw("n1", "ub", "not a time", 50);
  EXPECT_DOUBLE_EQ(valueOf(seriesOf(openMetricsText({older, unknownA}), fam)[0]), 10e9);
  EXPECT_DOUBLE_EQ(valueOf(seriesOf(openMetricsText({unknownA, older}), fam)[0]), 10e9);
  EXPECT_DOUBLE_EQ(valueOf(seriesOf(openMetricsText({unknownA, unknownB}), fam)[0]), 50e9);
  EXPECT_DOUBLE_EQ(valueOf(seriesOf(openMetricsText({unknownB, unknownA}), fam)[0]), 40e9);
  // Equal start times: the later argument.
  auto twin = busbw("n1", "twin", "2026-12-01T02:00:00Z", 60);
  EXPECT_DOUBLE_EQ(valueOf(seriesOf(openMetricsText({older, twin}), fam)[0]), 60e9);
  // Repeats within one run (same runId): the median, whatever their order.
  auto r1 = busbw("n1", "rep", "2026-12-03T02:00:00Z", 9);
  auto r2 = busbw("n1", "rep", "2026-12-03T02:00:00Z", 1);
  auto r3 = busbw("n1", "rep", "2026-12-03T02:00:00Z", 5);
  EXPECT_DOUBLE_EQ(valueOf(seriesOf(openMetricsText({r1, older, r2, r3}), fam)[0]), 5e9);
  auto r4 = busbw("n1", "rep", "2026-12-03T02:00:00Z", 7);
  EXPECT_DOUBLE_EQ(valueOf(seriesOf(openMetricsText({r1, r2, r3, r4}), fam)[0]), 6e9);
  // Another host or another size is another series.
  EXPECT_EQ(seriesOf(openMetricsText(
                         {older, busbw("n2", "old", older.time, 1), busbw("n1", "old", older.time, 1, 8)}),
                     fam)
                .size(),
            3u);
  // The run timestamp is the newest run's start.
  auto ts = seriesOf(openMetricsText({older, newer}), "dsperf_run_timestamp_seconds");
  ASSERT_EQ(ts.size(), 1u);
  EXPECT_DOUBLE_EQ(valueOf(ts[0]), 1796090400 + 86400);
}

TEST(OpenMetrics, UnknownFiguresAndNonFiniteValuesAreLeftOut) {
  auto odd = busbw("n1", "r", "", 1);
  odd.metric = "something_new";
  auto nan = busbw("n2", "r", "", std::nan(""));
  auto inf = busbw("n3", "r", "", 1.0 / 0.0);
  auto scope = busbw("n4", "r", "", 1);
  scope.scope = "rack";
  EXPECT_EQ(openMetricsText({odd, nan, inf, scope}), "");
}

TEST(OpenMetrics, CheckVerdictsAsStateSets) {
  CheckReport c = testfix::checkReport();
  c.hosts.push_back(c.hosts[0]);  // node01 twice: its last entry stands
  c.hosts.back().state = CheckState::kNoResult;
  const std::string text = openMetricsText({}, &c);
  const auto healthy = seriesOf(text, "dsperf_check_healthy");
  ASSERT_EQ(healthy.size(), 6u) << text;
  const auto state = seriesOf(text, "dsperf_check_state");
  ASSERT_EQ(state.size(), 30u) << "5 states for each of 6 hosts";
  std::map<std::string, int> onesPerHost;
  for (const auto& l : state) {
    const double v = valueOf(l);
    EXPECT_TRUE(v == 0 || v == 1) << l;
    if (v == 1) ++onesPerHost[l.substr(0, l.find(",state="))];
  }
  EXPECT_EQ(onesPerHost.size(), 6u);
  for (const auto& [h, n] : onesPerHost) EXPECT_EQ(n, 1) << h;
  EXPECT_NE(text.find("dsperf_check_state{host=\"node01\",state=\"no_result\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("dsperf_check_healthy{host=\"node01\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("dsperf_check_state{host=\"node03\",state=\"no_baseline\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("dsperf_check_failed_rules{host=\"node02\"} 1\n"), std::string::npos);
  // A host that could not be judged: not healthy, and no rule counted as broken.
  EXPECT_NE(text.find("dsperf_check_state{host=\"node05\",state=\"cannot_judge\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("dsperf_check_healthy{host=\"node05\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("dsperf_check_failed_rules{host=\"node05\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("dsperf_check_timestamp_seconds 1796180400.25\n"), std::string::npos) << text;
  // No check time: no timestamp gauge, the rest stays.
  c.time = "";
  EXPECT_TRUE(seriesOf(openMetricsText({}, &c), "dsperf_check_timestamp_seconds").empty());
}

TEST(OpenMetrics, SameInputSameBytes) {
  TempDir dir;
  auto a = testfix::sweep({"n1"}, "2026-12-01T02:00:00Z",
                          {testfix::row("allreduce", 1 << 20, 3), testfix::row("allgather", 1 << 20, 2)});
  RunFile run = loadRunFile(testfix::writeDoc(dir, "a.json", sweepToJson(a)));
  CheckReport c = testfix::checkReport();
  EXPECT_EQ(openMetricsOfRuns({run}, &c), openMetricsOfRuns({run}, &c));
  EXPECT_EQ(seriesOf(openMetricsOfRuns({run}), "dsperf_busbw_bytes_per_second").size(), 2u);
}

TEST(OpenMetrics, WrittenAtomicallyWithATempNameTheCollectorIgnores) {
  TempDir dir;
  const std::string path = dir.file("dsperf.prom");
  writeOpenMetricsFile(path, "old\n");
  writeOpenMetricsFile(path, "# HELP x y\n");
  EXPECT_EQ(ds::testing::readFile(path), "# HELP x y\n");
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"dsperf.prom"}) << "no temp file left behind";
  EXPECT_THROW(writeOpenMetricsFile(dir.file("missing/x.prom"), "x"), ds::IoError);
  // The temp name: "<path>.tmp.<pid>", which the textfile collector's *.prom never matches. A folder
  // in its place makes the rename fail; the error names the path and the temp is removed.
  std::filesystem::create_directory(dir.file("taken.prom"));
  std::filesystem::create_directory(dir.file("taken.prom/inside"));
  EXPECT_THROW(writeOpenMetricsFile(dir.file("taken.prom"), "x"), ds::IoError);
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}
