#include "reports/html/dashboard_html.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>

#include "engine/common/iso_time.h"
#include "reports/html/html_escape.h"
#include "reports/html/html_page.h"
#include "reports/json_io.h"

namespace ds::report::html {

using nlohmann::json;

namespace {

// More series than this: cards are folded and their charts drawn when opened.
constexpr std::size_t kUnfoldedCards = 60;

std::string signedPct(double pct) { return fmt::format("{}{:.1f} %", pct >= 0 ? "+" : "", pct); }

std::string seriesContext(const history::DashboardSeries& s) {
  std::string c = s.label.empty() ? "no label" : "label " + s.label;
  c += " · " + s.backend;
  if (s.worldSize > 0) c += fmt::format(" · {} ranks", s.worldSize);
  if (!s.config.empty()) c += " · " + s.config;
  return c;
}

std::string verdictOf(const history::DashboardPoint& p) {
  if (!p.hasBaseline) return "no baseline yet";
  if (p.regressed) return "REGRESSED";
  if (p.improved) return "improved";
  return "within noise";
}

}  // namespace

std::string renderDashboard(const history::DashboardData& data) {
  PageBuilder page("dsperf dashboard", "dashboard");
  const auto& o = data.options;
  int latestRegressed = 0, regressedPoints = 0;
  for (const auto& s : data.series) {
    latestRegressed += s.latestRegressed ? 1 : 0;
    regressedPoints += s.regressions;
  }

  page.section("Overview");
  page.table(
      {"", ""},
      {{Cell("history database", "key"), Cell(data.dbPath, "mono")},
       {Cell("runs shown", "key"), Cell(std::to_string(data.runs), "num")},
       {Cell("time range (UTC)", "key"),
        data.firstTime.empty() ? std::string("—") : fmt::format("{} .. {}", data.firstTime, data.lastTime)},
       {Cell("series", "key"), Cell(std::to_string(data.series.size()), "num")},
       {Cell("regressed now", "key"),
        Cell(fmt::format("{} series (their newest {} runs)", latestRegressed, o.recent),
             latestRegressed ? "fail" : "pass")},
       {Cell("regressed points", "key"), Cell(std::to_string(regressedPoints), "num")}},
      "meta");
  page.paragraph(
      fmt::format("How points are judged (the test of dsreport compare): the current level at a point is "
                  "that point and the {} before it; its history is the {} points before those (no verdict "
                  "with fewer than {}), and the baseline is their median. A point is regressed when the "
                  "current level is worse than the baseline by more than {} % and a Mann-Whitney U test of "
                  "the level against the history gives p <= {}; improved likewise. A step is flagged once "
                  "the level is mostly past it, and until the history has moved with it.",
                  o.recent - 1, o.window, o.minHistory, formatNumber(o.thresholdPct), formatNumber(o.alpha)));

  page.section("Needs attention");
  std::vector<Row> attention;
  for (const auto& s : data.series) {
    if (!s.latestRegressed || s.points.empty()) continue;
    const auto& p = s.points.back();
    attention.push_back({s.title, seriesContext(s), p.time, Cell(formatNumber(p.value), "num"),
                         Cell(formatNumber(p.baseline), "num"), Cell(signedPct(p.changePct), "num fail"),
                         Cell(p.sourceFile, "mono")});
  }
  if (attention.empty()) {
    page.paragraph("No series regressed at its latest run.", "pass");
  } else {
    page.table({"series", "where", "latest run", "value", "baseline", "change", "file"}, attention);
  }
  page.endSection();

  page.rawHtml(
      "<div class=\"filters\" role=\"search\">"
      "<label>label<select id=\"f-label\"><option value=\"all\">all</option></select></label>"
      "<label>backend<select id=\"f-backend\"><option value=\"all\">all</option></select></label>"
      "<label>collective<select id=\"f-collective\"><option value=\"all\">all</option></select></label>"
      "<label>series<input type=\"search\" id=\"f-text\" placeholder=\"1 MiB, bf16, ...\"></label>"
      "<label><input type=\"checkbox\" id=\"f-regressed\"> only series regressed now</label>"
      "<span id=\"f-count\" class=\"muted\"></span></div>\n");

  // The overview: one row per series, one column per run, each cell coloured by the change against
  // that point's baseline (red worse, blue better, deeper up to 25 %), a triangle where the point was
  // flagged. dashboard.js builds it from the page data; a row's name opens its card.
  page.section("Overview: every series by run");
  page.paragraph(
      "Rows are series, columns runs (oldest left). A cell's colour is the change against the point's "
      "baseline in the direction that matters: red worse, blue better, deeper up to 25 %; white within "
      "the threshold; grey without a baseline yet. ▲ marks a point flagged regressed, ▼ one flagged "
      "improved. Hover a cell for its figures; click a series' name to open its card. The filters above "
      "apply here too.",
      "muted");
  page.rawHtml("<div id=\"heatmap\" class=\"heatmap\"></div>\n");
  page.endSection();

  // Hundreds of series (a nightly sweep of 8 collectives x 30 sizes x 3 backends is 720): the cards
  // are folded and each chart is drawn when its card is opened, so the page opens at once.
  const bool folded = data.series.size() > kUnfoldedCards;
  std::string group = "\x01";
  for (std::size_t i = 0; i < data.series.size(); ++i) {
    const auto& s = data.series[i];
    std::string g = s.collective == "train" ? "Training step" : fmt::format("{} busbw", s.collective);
    if (g != group) {
      page.section(g);
      group = g;
    }
    std::string latest;
    if (!s.points.empty()) {
      const auto& p = s.points.back();
      latest = fmt::format("latest {} {} ({})", formatNumber(p.value), s.unit, p.time);
      if (p.hasBaseline) {
        latest += fmt::format("; baseline {} {}, {}: {}", formatNumber(p.baseline), s.unit,
                              signedPct(p.changePct), verdictOf(p));
      } else {
        latest += "; no baseline yet (too few earlier runs)";
      }
    }
    if (folded) {
      page.rawHtml(fmt::format("<details class=\"card\" id=\"card-{}\"><summary>{}{}</summary>\n", i,
                               escapeHtml(s.title),
                               s.latestRegressed ? " <span class=\"fail\">REGRESSED</span>" : ""));
    } else {
      page.rawHtml(fmt::format("<div class=\"card\" id=\"card-{}\">\n", i));
      page.heading(s.title);
    }
    page.paragraph(seriesContext(s), "muted");
    if (!s.points.empty()) {
      std::string line = latest;
      line += fmt::format(". {} regressed and {} improved point(s) in this series; {} is better.",
                          s.regressions, s.improvements, s.higherIsBetter ? "higher" : "lower");
      page.paragraph(line, s.latestRegressed ? "fail" : "");
    }
    // The chart: values over time, the baseline dashed, regressed points marked.
    json values = json::array(), baseline = json::array(), marks = json::array(), tips = json::array();
    bool timeAxis = true;
    std::vector<double> ts;
    for (const auto& p : s.points) {
      double ms = 0;
      if (!parseIsoTimeMs(p.time, ms)) timeAxis = false;
      ts.push_back(ms);
    }
    json labels = json::array();
    for (std::size_t k = 0; k < s.points.size(); ++k) {
      const auto& p = s.points[k];
      double x = timeAxis ? ts[k] : static_cast<double>(k);
      json b = p.hasBaseline ? json(p.baseline) : json(nullptr);
      if (timeAxis) {
        values.push_back({x, p.value});
        baseline.push_back({x, b});
      } else {
        values.push_back(p.value);
        baseline.push_back(b);
        labels.push_back(p.time);
      }
      marks.push_back(p.regressed);
      tips.push_back(
          fmt::format("run {} · {}{}", p.runId, p.sourceFile,
                      p.hasBaseline ? fmt::format(" · {} · {}", signedPct(p.changePct), verdictOf(p)) : ""));
    }
    json spec = {
        {"kind", timeAxis ? "time" : "category"},
        {"title", s.title},
        {"yTitle", s.unit},
        {"tooltips", {tips, json::array()}},
        {"series",
         {{{"label", s.title}, {timeAxis ? "points" : "values", values}, {"marks", marks}, {"color", 0}},
          {{"label", fmt::format("baseline (median of {} history points)", o.window)},
           {timeAxis ? "points" : "values", baseline},
           {"dashed", true},
           {"color", 9}}}}};
    if (!timeAxis) spec["labels"] = labels;
    if (folded) {
      page.lazyChart(spec);
    } else {
      page.chart(spec);
    }
    std::vector<Row> rows;
    for (auto it = s.points.rbegin(); it != s.points.rend(); ++it) {
      const auto& p = *it;
      std::string cls = p.regressed ? "fail" : p.improved ? "improved" : "";
      rows.push_back({p.time, Cell(p.runId, "mono"), Cell(p.sourceFile, "mono"),
                      Cell(formatNumber(p.value), "num"),
                      Cell(p.hasBaseline ? formatNumber(p.baseline) : "—", "num"),
                      Cell(p.hasBaseline ? formatNumber(p.noise) : "—", "num"),
                      Cell(p.hasBaseline ? signedPct(p.changePct) : "—", "num"), Cell(verdictOf(p), cls)});
    }
    page.foldedTable(fmt::format("{} point(s), newest first", s.points.size()),
                     {"time (UTC)", "run id", "file", fmt::format("value ({})", s.unit), "baseline", "noise",
                      "change", "verdict"},
                     rows);
    page.rawHtml(folded ? "</details>\n" : "</div>\n");
  }
  if (data.series.empty()) {
    page.section("Trends");
    page.paragraph(
        "No series to show: the database has no ingested runs that pass the filters. Add runs with "
        "`dsreport ingest --db FILE RUN.json`.",
        "warn");
  }

  // The filters read every series' label, backend and collective, and the lists for the selects;
  // the overview reads the runs (the columns) and each series' cells: [run index, change % or null
  // without a baseline, 2 regressed / 1 improved / 0 neither].
  std::map<std::pair<std::string, std::string>, int> runIndex;
  for (const auto& s : data.series) {
    for (const auto& p : s.points) runIndex.emplace(std::pair{p.time, p.runId}, 0);
  }
  json runs = json::array();
  for (auto& [key, index] : runIndex) {
    index = static_cast<int>(runs.size());
    runs.push_back({{"time", key.first}, {"runId", key.second}});
  }
  json series = json::array();
  for (const auto& s : data.series) {
    json cells = json::array();
    for (const auto& p : s.points) {
      cells.push_back({runIndex.at({p.time, p.runId}),
                       p.hasBaseline ? json(std::round(p.changePct * 10) / 10) : json(nullptr),
                       p.regressed  ? 2
                       : p.improved ? 1
                                    : 0});
    }
    series.push_back({{"label", s.label},
                      {"backend", s.backend},
                      {"collective", s.collective},
                      {"title", s.title},
                      {"context", seriesContext(s)},
                      {"higherIsBetter", s.higherIsBetter},
                      {"folded", folded},
                      {"cells", cells},
                      {"latestRegressed", s.latestRegressed}});
  }
  page.data("dashboard", {{"labels", data.labels},
                          {"backends", data.backends},
                          {"runs", runs},
                          {"thresholdPct", o.thresholdPct},
                          {"collectives", data.collectives},
                          {"series", series}});
  page.script(dashboardScript());
  return page.render();
}

void writeDashboard(const history::DashboardData& data, const std::string& path) {
  writeTextAtomic(path, renderDashboard(data));
}

}  // namespace ds::report::html
