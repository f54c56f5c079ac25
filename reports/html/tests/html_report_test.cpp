// Unit tests of the HTML pages: escaping of every input string, the data block, the content of a
// report (sections, charts, tables) for sweeps, train runs, pre-flight checks and overlays.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "engine/common/error.h"
#include "engine/common/iso_time.h"
#include "engine/testing/subprocess.h"
#include "reports/html/compare_html.h"
#include "reports/html/dashboard_html.h"
#include "reports/html/fleet_html.h"
#include "reports/html/html_escape.h"
#include "reports/html/html_page.h"
#include "reports/html/run_report.h"
#include "reports/html/tests/html_fixtures.h"

namespace ds::report::html {
namespace {

using testing::SweepFixture;

int count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (auto at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

// The JSON inside <script type="application/json" id="ds-data">, parsed.
nlohmann::json pageData(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"ds-data\">";
  auto a = page.find(open);
  EXPECT_NE(a, std::string::npos);
  a += open.size();
  auto b = page.find("</script>", a);
  return nlohmann::json::parse(page.substr(a, b - a));
}

TEST(HtmlEscape, EscapesMarkupCharacters) {
  EXPECT_EQ(escapeHtml("<script>alert(\"x\") & 'y'</script>"),
            "&lt;script&gt;alert(&quot;x&quot;) &amp; &#39;y&#39;&lt;/script&gt;");
  EXPECT_EQ(escapeHtml("plain-host.example"), "plain-host.example");
  EXPECT_EQ(escapeHtml("µs — ok"), "µs — ok");  // valid UTF-8 passes through
}

TEST(HtmlEscape, ReplacesInvalidUtf8AndNul) {
  EXPECT_EQ(escapeHtml(std::string("a\xff<b", 4)), "a\xEF\xBF\xBD&lt;b");
  EXPECT_EQ(escapeHtml(std::string("a\0b", 3)),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(escapeHtml("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
}

TEST(JsonForScript, CannotEndTheScriptElementAndRoundTrips) {
  nlohmann::json j = {{"host", "</script><script>alert(1)</script>"},
                      {"sep", "a\u2028b\u2029c"},
                      {"amp", "<!-- & -->"},
                      {"bad", std::string("x\xffy")}};
  std::string text = jsonForScript(j);
  EXPECT_EQ(text.find('<'), std::string::npos) << text;
  EXPECT_EQ(text.find('>'), std::string::npos) << text;
  EXPECT_EQ(text.find('&'), std::string::npos) << text;
  EXPECT_NE(text.find("\\u2028"), std::string::npos) << text;
  EXPECT_NE(text.find("\\u2029"), std::string::npos) << text;
  for (unsigned char c : text) EXPECT_LT(c, 0x80);
  nlohmann::json back = nlohmann::json::parse(text);
  EXPECT_EQ(back["host"], j["host"]);
  EXPECT_EQ(back["sep"], j["sep"]);
  EXPECT_EQ(back["amp"], j["amp"]);
  EXPECT_EQ(back["bad"], "x\uFFFDy");
}

TEST(HtmlReport, XssHostnameLabelAndEnvAreEscaped) {
  SweepFixture f;
  f.host = "<script>alert('host')</script>";
  f.label = "<img src=x onerror=alert(1)>";
  f.envValue = "\"><script>alert(2)</script>";
  std::string page = renderRunReport({testing::sweepRunFile(f), testing::diagRunFile("<b>diag-host</b>")});
  EXPECT_EQ(page.find("<script>alert"), std::string::npos);
  EXPECT_EQ(page.find("<img src=x"), std::string::npos);
  EXPECT_EQ(page.find("<b>diag-host"), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;alert(&#39;host&#39;)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(page.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  EXPECT_NE(page.find("&lt;b&gt;diag-host&lt;/b&gt;"), std::string::npos);
  // Exactly our three script elements: the data block, Chart.js and the page script.
  EXPECT_EQ(count(page, "<script"), 3);
  EXPECT_EQ(count(page, "</script>"), 3);
  // The label reaches the charts' data intact (drawn on a canvas, never parsed as HTML).
  std::string data = pageData(page).dump();
  EXPECT_EQ(data.find(f.host), std::string::npos);  // hosts are not chart data
  EXPECT_NE(pageData(page)["charts"].size(), 0u);
}

TEST(HtmlReport, SweepHasSectionsChartsAndRawTables) {
  SweepFixture f;
  std::string page = renderRunReport({testing::sweepRunFile(f, "/tmp/results/nightly.json")});
  EXPECT_NE(page.find("<title>dsperf report: nightly</title>"), std::string::npos);
  EXPECT_NE(page.find(">allreduce on gloo</h2>"), std::string::npos);
  EXPECT_NE(page.find(">allgather on gloo</h2>"), std::string::npos);
  EXPECT_NE(page.find("href=\"#"), std::string::npos);  // the nav
  nlohmann::json data = pageData(page);
  // Per collective: busbw, latency, straggler spread, the tails and per-rank bars.
  ASSERT_EQ(data["charts"].size(), 10u);
  EXPECT_EQ(page.find("data-charts-expected=\"10\"") != std::string::npos, true);
  const auto& bw = data["charts"][0];
  EXPECT_EQ(bw["kind"], "size");
  EXPECT_EQ(bw["yTitle"], "busbw (GB/s)");
  ASSERT_EQ(bw["series"].size(), 2u);  // out-of-place and in-place
  EXPECT_EQ(bw["series"][0]["label"], "out-of-place");
  EXPECT_EQ(bw["series"][1]["label"], "in-place");
  EXPECT_EQ(bw["series"][1]["dashed"], true);
  EXPECT_EQ(bw["series"][0]["points"].size(), 8u);  // 8 B .. 16 MiB by 8
  EXPECT_EQ(bw["series"][0]["points"][0][0], 8);
  EXPECT_EQ(data["charts"][1]["yLog"], true);  // latency
  // The raw table holds the sizes and the busbw figures.
  EXPECT_NE(page.find("<td class=\"num\">16 MiB</td>"), std::string::npos);
  EXPECT_NE(page.find("oop busbw (GB/s)"), std::string::npos);
  // Metadata: command line, hosts, versions, env.
  EXPECT_NE(page.find("dsbench coll -b 8 -e 16M -f 8 -J sweep.json"), std::string::npos);
  EXPECT_NE(page.find("env: NCCL_SOCKET_IFNAME"), std::string::npos);
  EXPECT_NE(page.find("versions: gloo"), std::string::npos);
  // Stragglers: rank 1 is slowest everywhere and highlighted in the per-rank table.
  EXPECT_NE(page.find("slowest rank"), std::string::npos);
  EXPECT_NE(page.find("<td class=\"num warn\">"), std::string::npos);
}

// Placement (issue 16): the ranks table gains affinity and load columns, and ranks that share a core are
// flagged; a file without placements keeps the old table.
TEST(HtmlReport, RanksTableShowsPlacementAndFlagsASharedCore) {
  SweepFixture f;
  RunFile plain = testing::sweepRunFile(f);
  EXPECT_EQ(renderRunReport({plain}).find("CPU affinity"), std::string::npos);
  RunFile run = testing::sweepRunFile(f);
  auto& ranks = run.sweep->metadata.ranks;
  ASSERT_GE(ranks.size(), 3u);
  for (auto& r : ranks) r.placement = Placement{"2", 1, 8, 1.5, 4};
  ranks[0].placement = Placement{"0", 1, 8, 1.5, 4};
  ranks[1].placement = Placement{"0", 1, 8, 1.5, 4};  // ranks 0 and 1 on CPU 0
  ranks[2].placement = Placement{"1", 1, 8, 1.5, 4};
  ranks.resize(3);
  std::string page = renderRunReport({run});
  EXPECT_NE(page.find("CPU affinity"), std::string::npos);
  EXPECT_NE(page.find("cpus 0 (1 of 8 online) — shares a core"), std::string::npos);
  EXPECT_NE(page.find("cpus 1 (1 of 8 online)</td>"), std::string::npos);
  EXPECT_NE(page.find("load 1.50 (1 min), 4 runnable on 8 CPUs"), std::string::npos);
  EXPECT_NE(page.find("ranks 0-1 share CPU 0 on host node-a"), std::string::npos);
}

TEST(HtmlReport, OverlaysSeveralRunsWithDistinctNames) {
  SweepFixture a, b;
  a.label = "cluster-a";
  b.label = "cluster-a";  // the same label twice: numbered
  b.peakBusBw = 20;
  std::vector<RunFile> runs{testing::sweepRunFile(a, "a.json"), testing::sweepRunFile(b, "b.json")};
  auto names = runDisplayNames(runs);
  EXPECT_EQ(names, (std::vector<std::string>{"cluster-a #1", "cluster-a #2"}));
  std::string page = renderRunReport(runs);
  nlohmann::json data = pageData(page);
  const auto& bw = data["charts"][0];
  ASSERT_EQ(bw["series"].size(), 4u);
  EXPECT_EQ(bw["series"][0]["label"], "cluster-a #1: out-of-place");
  EXPECT_EQ(bw["series"][2]["label"], "cluster-a #2: out-of-place");
  EXPECT_NE(bw["series"][0]["color"], bw["series"][2]["color"]);
  EXPECT_NE(page.find("dsperf report: cluster-a #1 vs cluster-a #2"), std::string::npos);
  // One metadata column per run.
  EXPECT_NE(page.find("<th>cluster-a #1</th><th>cluster-a #2</th>"), std::string::npos);
}

TEST(HtmlReport, TrainStepSplitAndOverlapEfficiency) {
  std::string page = renderRunReport({testing::trainRunFile()});
  nlohmann::json data = pageData(page);
  ASSERT_EQ(data["charts"].size(), 3u);
  const auto& split = data["charts"][0];
  EXPECT_EQ(split["stacked"], true);
  ASSERT_EQ(split["series"].size(), 5u);
  EXPECT_EQ(split["series"][2]["label"], "exposed comm");
  EXPECT_EQ(split["labels"].size(), 4u);
  // Forward + backward + exposed + optimizer + other = the mean step.
  double sum = 0;
  for (const auto& s : split["series"]) sum += s["values"][0].get<double>();
  EXPECT_NEAR(sum, 8.1, 1e-9);
  const auto& eff = data["charts"][1];
  EXPECT_EQ(eff["labels"], (nlohmann::json{"1 MB", "25 MB"}));
  ASSERT_EQ(eff["series"].size(), 2u);  // overlap, no overlap
  EXPECT_NEAR(eff["series"][0]["values"][0].get<double>(), 66.0, 1e-9);
  EXPECT_NE(page.find("overlap eff. (%)"), std::string::npos);
}

TEST(HtmlReport, DiagTableListsFailuresFirst) {
  std::string page = renderRunReport({testing::diagRunFile()});
  auto fail = page.find("<td class=\"fail\">FAIL</td>");
  auto pass = page.find("<td class=\"pass\">PASS</td>");
  ASSERT_NE(fail, std::string::npos);
  ASSERT_NE(pass, std::string::npos);
  EXPECT_LT(fail, pass);
  EXPECT_NE(page.find("start 4 processes or set WORLD_SIZE=2"), std::string::npos);
  EXPECT_EQ(pageData(page)["charts"].size(), 0u);
}

TEST(HtmlReport, EmptyInputIsAConfigError) { EXPECT_THROW(renderRunReport({}), ConfigError); }

TEST(HtmlReport, WritesAtomicallyAndNamesAnUnwritablePath) {
  ds::testing::TempDir dir("ds_html");
  std::string path = dir.file("r.html");
  writeRunReport({testing::diagRunFile()}, path);
  std::string text = ds::testing::readFile(path);
  EXPECT_EQ(text.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(text.find("</html>"), std::string::npos);
  try {
    writeRunReport({testing::diagRunFile()}, dir.file("missing-folder/r.html"));
    FAIL() << "no IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("missing-folder/r.html"), std::string::npos) << e.what();
  }
}

TEST(HtmlPage, EmbedsChartJsWithoutEndingTheScript) {
  PageBuilder page("t", "report");
  std::string text = page.render();
  EXPECT_NE(text.find("Chart.js v"), std::string::npos);
  EXPECT_GT(text.size(), 150000u);  // Chart.js itself is inline, not linked
  EXPECT_EQ(text.find("<script src"), std::string::npos);
  EXPECT_EQ(text.find("<link"), std::string::npos);
  EXPECT_EQ(count(text, "</script>"), 3);
}

TEST(HtmlPage, FormatsSizes) {
  EXPECT_EQ(formatBytes(8), "8 B");
  EXPECT_EQ(formatBytes(1024), "1 KiB");
  EXPECT_EQ(formatBytes(256.0 * 1024 * 1024), "256 MiB");
  EXPECT_EQ(formatBytes(1536), "1.5 KiB");
}

}  // namespace
}  // namespace ds::report::html

namespace ds::report::html {
namespace {

history::DashboardSeries dashSeries(const std::string& label, const std::string& collective,
                                    bool regressLast) {
  history::DashboardSeries s;
  s.id = "busbw|" + label + "|gloo|" + collective;
  s.metric = "busbw";
  s.title = collective + " busbw, 1 MiB, f32 sum";
  s.unit = "GB/s";
  s.label = label;
  s.backend = "gloo";
  s.collective = collective;
  s.worldSize = 4;
  for (int day = 1; day <= 6; ++day) {
    history::DashboardPoint p;
    p.time = fmt::format("2026-11-0{}T02:00:00Z", day);
    p.runId = fmt::format("{:016x}", day);
    p.sourceFile = "night<" + std::to_string(day) + ">.json";
    p.value = day == 6 && regressLast ? 5.0 : 10.0;
    p.hasBaseline = day > 3;
    p.baseline = 10.0;
    p.changePct = (p.value - 10.0) * 10.0;
    p.regressed = day == 6 && regressLast;
    s.points.push_back(p);
  }
  s.regressions = regressLast ? 1 : 0;
  s.latestRegressed = regressLast;
  return s;
}

TEST(DashboardHtml, OneChartPerSeriesRegressionsMarkedInputEscaped) {
  history::DashboardData d;
  d.dbPath = "/tmp/h<1>.sqlite";
  d.runs = 6;
  d.labels = {"<script>alert(1)</script>", "lab-b"};
  d.backends = {"gloo"};
  d.collectives = {"allgather", "allreduce"};
  d.series = {dashSeries(d.labels[0], "allreduce", true), dashSeries("lab-b", "allgather", false)};
  std::string page = renderDashboard(d);
  EXPECT_EQ(page.find("<script>alert"), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_EQ(page.find("night<"), std::string::npos);
  EXPECT_EQ(count(page, "</script>"), 3);
  nlohmann::json data = pageData(page);
  ASSERT_EQ(data["charts"].size(), 2u);
  const auto& c = data["charts"][0];
  EXPECT_EQ(c["kind"], "time");
  ASSERT_EQ(c["series"].size(), 2u);  // values and the baseline
  EXPECT_EQ(c["series"][0]["marks"], (nlohmann::json{false, false, false, false, false, true}));
  EXPECT_TRUE(c["series"][1]["points"][0][1].is_null());  // no baseline before enough history
  EXPECT_EQ(c["series"][1]["points"][5][1], 10.0);
  // The filters' data: lists for the selects and each series' keys, in card order.
  EXPECT_EQ(data["dashboard"]["labels"], nlohmann::json(d.labels));
  EXPECT_EQ(data["dashboard"]["series"][1]["collective"], "allgather");
  EXPECT_NE(page.find("id=\"card-1\""), std::string::npos);
  EXPECT_NE(page.find("id=\"f-collective\""), std::string::npos);
  EXPECT_NE(page.find("REGRESSED"), std::string::npos);
  EXPECT_NE(page.find("1 series (their newest 3 runs)"), std::string::npos);
  // The overview's data: the runs (columns) and each series' cells [run, change or null, flag].
  EXPECT_EQ(data["dashboard"]["runs"].size(), 6u);
  const auto& cells = data["dashboard"]["series"][0]["cells"];
  ASSERT_EQ(cells.size(), 6u);
  EXPECT_EQ(cells[5][2], 2) << "the regressed point is flagged";
  EXPECT_NE(page.find("id=\"heatmap\""), std::string::npos);
  EXPECT_NE(page.find("<div class=\"card\" id=\"card-0\">"), std::string::npos) << "few series: unfolded";
}

TEST(DashboardHtml, HundredsOfSeriesFoldTheirCardsAndDrawChartsOnOpening) {
  history::DashboardData d;
  d.dbPath = "h.sqlite";
  d.labels = {"lab"};
  for (int i = 0; i < 61; ++i) d.series.push_back(dashSeries("lab", "allreduce", i == 3));
  std::string page = renderDashboard(d);
  nlohmann::json data = pageData(page);
  EXPECT_EQ(data["charts"].size(), 0u);
  EXPECT_EQ(data["lazyCharts"].size(), 61u);
  EXPECT_EQ(count(page, "<details class=\"card\" id=\"card-"), 61);
  EXPECT_NE(page.find("data-charts-expected=\"0\""), std::string::npos);
}

TEST(DashboardHtml, EmptyHistorySaysWhatToDo) {
  history::DashboardData d;
  d.dbPath = "h.sqlite";
  std::string page = renderDashboard(d);
  EXPECT_NE(page.find("dsreport ingest"), std::string::npos);
  EXPECT_EQ(pageData(page)["charts"].size(), 0u);
}

TEST(DashboardHtml, ParsesIsoTimes) {
  double ms = 0;
  ASSERT_TRUE(parseIsoTimeMs("1970-01-02T00:00:00Z", ms));
  EXPECT_EQ(ms, 86400e3);
  ASSERT_TRUE(parseIsoTimeMs("2026-11-29T16:38:35.603Z", ms));
  EXPECT_NEAR(std::fmod(ms, 1000.0), 603, 1e-3);
  ASSERT_TRUE(parseIsoTimeMs("1970-01-01T01:00:00+01:00", ms));
  EXPECT_EQ(ms, 0);
  EXPECT_FALSE(parseIsoTimeMs("yesterday", ms));
  EXPECT_FALSE(parseIsoTimeMs("2026-13-01T00:00:00Z", ms));
}

TEST(CompareHtml, VerdictItemsAndEscaping) {
  CompareResult r;
  r.base.path = "/x/base.json";
  r.base.label = "<b>old</b>";
  r.cur.path = "/x/cur.json";
  r.mismatches = {"labels differ: <b>old</b> vs (none)"};
  for (std::size_t bytes : {1024u, 1u << 20}) {
    ComparedItem it;
    it.collective = "allreduce";
    it.backend = "gloo";
    it.dtype = "f32";
    it.op = "sum";
    it.bytes = bytes;
    it.place = "out-of-place";
    it.metric = "busbw";
    it.unit = "GB/s";
    it.base = 10;
    it.cur = bytes == 1024 ? 5 : 10;
    it.changePct = bytes == 1024 ? -50 : 0;
    it.verdict = bytes == 1024 ? Verdict::kRegressed : Verdict::kUnchanged;
    it.reason = "<why>";
    r.items.push_back(it);
  }
  r.regressions = 1;
  r.unchanged = 1;
  r.notCompared = {{"allgather gloo f32", "only in the baseline"}};
  std::string page = renderCompareHtml(r);
  EXPECT_NE(page.find("REGRESSION: 1 of 2 item(s)"), std::string::npos);
  EXPECT_EQ(page.find("<b>old"), std::string::npos);
  EXPECT_EQ(page.find("<why>"), std::string::npos);
  EXPECT_NE(page.find("only in the baseline"), std::string::npos);
  nlohmann::json data = pageData(page);
  ASSERT_GE(data["charts"].size(), 1u);
  EXPECT_EQ(data["charts"][0]["kind"], "size");
  EXPECT_EQ(data["charts"][0]["series"][0]["marks"], (nlohmann::json{true, false}));
  // Regressions are listed before unchanged items.
  EXPECT_LT(page.find(">regressed<"), page.find(">unchanged<"));
}

}  // namespace
}  // namespace ds::report::html

namespace ds::report::html {
namespace {

TEST(HtmlReport, BackendsOfOneCollectiveShareCharts) {
  testing::SweepFixture gloo, mpi;
  gloo.collectives = mpi.collectives = {"allreduce"};
  mpi.backend = "mpi";
  mpi.peakBusBw = 20;
  std::string page =
      renderRunReport({testing::sweepRunFile(gloo, "gloo.json"), testing::sweepRunFile(mpi, "mpi.json")});
  auto side = page.find(">allreduce: backends side by side</h2>");
  ASSERT_NE(side, std::string::npos);
  EXPECT_LT(side, page.find(">allreduce on gloo</h2>"));
  EXPECT_LT(page.find(">allreduce on gloo</h2>"), page.find(">allreduce on mpi</h2>"));
  nlohmann::json data = pageData(page);
  const auto& bw = data["charts"][0];
  EXPECT_EQ(bw["title"], "allreduce busbw by backend");
  ASSERT_EQ(bw["series"].size(), 4u);
  EXPECT_EQ(bw["series"][0]["label"], "gloo: gloo out-of-place");
  EXPECT_EQ(bw["series"][2]["label"], "mpi: mpi out-of-place");
  EXPECT_NE(bw["series"][0]["color"], bw["series"][2]["color"]);
}


// Results with one time per size (an nccl-tests text import) show "not in this data" where per-rank
// and per-iteration figures would be, never a flat 0% spread line or a table of 0.00 percentiles.
TEST(HtmlReport, SweepWithoutPerRankDataSaysNotInThisData) {
  SweepFixture f;
  f.perRankData = false;
  std::string page = renderRunReport({testing::sweepRunFile(f)});
  EXPECT_EQ(count(page, "Per-rank times: not in this data"), 2);  // one per collective
  EXPECT_EQ(count(page, "Per-iteration percentiles: not in this data"), 2);
  EXPECT_EQ(page.find("iter p50 (µs)"), std::string::npos);  // no table of zeros
  nlohmann::json charts = pageData(page)["charts"];
  EXPECT_EQ(charts.size(), 4u);  // busbw and latency per collective; no spread, no per-rank bars
  for (const auto& c : charts) EXPECT_EQ(c["title"].get<std::string>().find("slowest"), std::string::npos);
  // With the data, the straggler chart and table are there and the notice is not.
  std::string full = renderRunReport({testing::sweepRunFile(SweepFixture{})});
  EXPECT_EQ(full.find("not in this data"), std::string::npos);
  EXPECT_NE(full.find("iter p50 (µs)"), std::string::npos);
}

// Issue 29: the per-iteration table shows mean, p50, p90, p99, p99.9, max and cv, and a chart draws
// the mean and the tails by size on a log axis; a file without the 1.2 tails shows — for them and
// leaves their series out, never a 0.
TEST(HtmlReport, TailsTableAndChartAndUnknownTailsOfOlderFiles) {
  std::string page = renderRunReport({testing::sweepRunFile(SweepFixture{})});
  for (const char* h : {"iter mean (µs)", "iter p50 (µs)", "iter p90 (µs)", "iter p99 (µs)",
                        "iter p99.9 (µs)", "iter max (µs)", "iter cv (%)"}) {
    EXPECT_EQ(count(page, std::string(">") + h + "<"), 2) << h;  // one table per collective
  }
  nlohmann::json tails;
  const nlohmann::json charts = pageData(page)["charts"];
  for (const auto& c : charts) {
    if (c["title"] == "allreduce on gloo: mean and tails of the per-iteration time") tails = c;
  }
  ASSERT_FALSE(tails.is_null());
  EXPECT_EQ(tails["yLog"], true);
  ASSERT_EQ(tails["series"].size(), 8u);  // mean, p50, p99, p99.9 x out-of-place, in-place
  std::vector<std::string> labels;
  for (const auto& sr : tails["series"]) labels.push_back(sr["label"]);
  EXPECT_EQ(labels[0], "mean out-of-place");
  EXPECT_EQ(labels[3], "p99.9 out-of-place");
  EXPECT_EQ(labels[7], "p99.9 in-place");
  EXPECT_EQ(tails["series"][7]["dashed"], true);
  // The fixture's iterations are t, 1.1t, 0.95t and 3t: the p99.9 lies near 3t, far above the median.
  const double p50 = tails["series"][1]["points"][7][1], p999 = tails["series"][3]["points"][7][1];
  EXPECT_GT(p999, 2.5 * p50);
  EXPECT_EQ(page.find("not in some of this data"), std::string::npos);

  SweepFixture old;
  old.tailsUnknown = true;
  std::string o = renderRunReport({testing::sweepRunFile(old)});
  nlohmann::json oldTails;
  const nlohmann::json oldCharts = pageData(o)["charts"];
  for (const auto& c : oldCharts) {
    if (c["title"] == "allreduce on gloo: mean and tails of the per-iteration time") oldTails = c;
  }
  ASSERT_FALSE(oldTails.is_null());
  ASSERT_EQ(oldTails["series"].size(), 6u) << "no p99.9 series";
  for (const auto& sr : oldTails["series"])
    EXPECT_EQ(sr["label"].get<std::string>().find("p99.9"), std::string::npos);
  EXPECT_EQ(count(o, "p90 and p99.9: not in some of this data"), 2);
  // 2 collectives x 4 sizes x 2 places, each with two unknown cells (p90, p99.9): — and no 0.00.
  const auto table = o.substr(o.find("iter p99.9 (µs)"));
  EXPECT_GE(count(table, "<td class=\"num\">—</td>"), 2 * 4 * 2);
}

// nccl-tests prints algbw and busbw with 2 decimals; the tables keep them (103.36, not 103.4).
TEST(HtmlReport, TablesKeepNcclTestsPrecision) {
  SweepFixture f;
  f.peakBusBw = 103.36;  // the largest size's out-of-place busbw
  std::string page = renderRunReport({testing::sweepRunFile(f)});
  EXPECT_NE(page.find(">103.36<"), std::string::npos);
  EXPECT_EQ(page.find(">103.4<"), std::string::npos);
  EXPECT_NE(page.find(">68.91<"), std::string::npos);  // its algbw, 103.36 / 1.5, to 2 decimals
}

// "a vs b" is for runs of one kind; a sweep with its pre-flight run is not a comparison.
TEST(HtmlReport, TitleSaysVsOnlyForRunsOfOneKind) {
  std::string mixed = renderRunReport({testing::sweepRunFile(SweepFixture{}), testing::diagRunFile()});
  EXPECT_NE(mixed.find("<title>dsperf report: sweep, diag</title>"), std::string::npos);
  EXPECT_EQ(mixed.find(" vs diag"), std::string::npos);
  std::string two = renderRunReport(
      {testing::sweepRunFile(SweepFixture{}, "a.json"), testing::sweepRunFile(SweepFixture{}, "b.json")});
  EXPECT_NE(two.find("<title>dsperf report: a vs b</title>"), std::string::npos);
}

// An identical finding on several ranks is one row naming the ranks as ranges, as in the text output;
// a finding that differs keeps its own row.
TEST(HtmlReport, DiagTableGroupsIdenticalFindingsByRankRanges) {
  RunFile run = testing::diagRunFile();
  run.diag->worldSize = 6;
  run.diag->checks.clear();
  for (int r = 0; r < 6; ++r) {
    DiagRecord rec{"sys.shm_size", "system", DiagStatus::kWarn, "/dev/shm has 64 MiB",
                   "mount a larger /dev/shm", nlohmann::json::object(), r, r < 3 ? "node-a" : "node-b"};
    if (r == 4) rec.message = "/dev/shm has 32 MiB";
    run.diag->checks.push_back(rec);
  }
  std::string page = renderRunReport({run});
  EXPECT_EQ(count(page, "/dev/shm has 64 MiB"), 1);
  EXPECT_EQ(count(page, "/dev/shm has 32 MiB"), 1);
  EXPECT_NE(page.find(">0-3,5<"), std::string::npos);
  EXPECT_NE(page.find("node-a, node-b"), std::string::npos);
  EXPECT_NE(page.find(">4<"), std::string::npos);
}

}  // namespace
}  // namespace ds::report::html

namespace ds::report::html {
namespace {

TEST(HtmlFleet, SuspectsFirstWithEvidenceExcludeLinesAndTheHeatmapData) {
  std::string page = renderRunReport({testing::fleetRunFile(16, "<b>evil</b>")});
  auto suspects = page.find("class=\"fleet-suspects\"");
  ASSERT_NE(suspects, std::string::npos);
  auto node07 = page.find("node07", suspects), node14 = page.find("node14", suspects);
  auto folded = page.find("14 healthy host(s)");
  ASSERT_NE(node07, std::string::npos);
  ASSERT_NE(folded, std::string::npos);
  EXPECT_LT(node07, folded);
  EXPECT_LT(node14, folded);
  EXPECT_NE(page.find("fleet median 1.885 GB/s [link_slow, links]"), std::string::npos);
  EXPECT_NE(page.find("class=\"fleet-links\""), std::string::npos);
  EXPECT_NE(page.find("srun/sbatch --exclude): node[07,14]"), std::string::npos);
  EXPECT_NE(page.find("deepspeed --exclude): node07@node14"), std::string::npos);
  EXPECT_NE(page.find("NCCL_SOCKET_IFNAME=eth0 GLOO_SOCKET_IFNAME=eth0 for the whole job"),
            std::string::npos);
  EXPECT_NE(page.find("&lt;b&gt;evil&lt;/b&gt;"), std::string::npos);
  EXPECT_EQ(page.find("<b>evil"), std::string::npos) << "a host name became markup";
  EXPECT_NE(page.find("<canvas id=\"fleet-heatmap-0\""), std::string::npos);
  EXPECT_NE(page.find("fleetHeatmaps"), std::string::npos);

  auto data = fleetHeatmapData(*testing::makeFleetDiag(16).fleet, "x");
  ASSERT_EQ(data["hosts"].size(), 16u);
  EXPECT_EQ(data["hosts"][6], "node07");
  EXPECT_EQ(data["suspect"][6], 1);
  EXPECT_EQ(data["suspect"][0], 0);
  const auto& cells = data["cells"];
  ASSERT_EQ(cells.size() % 4, 0u);
  bool failedLink = false, slow = false;
  for (std::size_t k = 0; k < cells.size(); k += 4) {
    int i = cells[k], j = cells[k + 1], status = cells[k + 2], ratio = cells[k + 3];
    EXPECT_LT(i, j);
    if (i == 2 && j == 10) failedLink = status == 1;
    if ((i == 6 || j == 6) && status == 0) slow = slow || ratio < 30;  // < 3 % of the median
    if (i != 6 && j != 6 && status == 0) {
      EXPECT_GT(ratio, 900) << i << "-" << j;
    }
  }
  EXPECT_TRUE(failedLink) << "the failed pair node03-node11 is marked failed";
  EXPECT_TRUE(slow);
}

TEST(HtmlFleet, AThousandHostsStayCompact) {
  std::string page = renderRunReport({testing::fleetRunFile(1000)});
  EXPECT_LT(page.size(), 1500u * 1024) << "the page grows with the pairs that ran, not with hosts squared";
  auto suspects = page.find("class=\"fleet-suspects\"");
  ASSERT_NE(suspects, std::string::npos);
  EXPECT_LT(suspects, page.find("999 healthy host(s)"));
  EXPECT_NE(page.find("srun/sbatch --exclude): gpu0017"), std::string::npos);
  EXPECT_EQ(count(page, "<canvas id=\"fleet-heatmap-0\""), 1);
}

}  // namespace
}  // namespace ds::report::html
