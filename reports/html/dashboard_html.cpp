#include "reports/html/dashboard_html.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>

#include "reports/html/html_page.h"
#include "reports/json_io.h"

namespace ds::report::html {

using nlohmann::json;

bool parseIsoTimeMs(const std::string& text, double& ms) {
  int y, mo, d, h = 0, mi = 0, consumed = 0;
  double s = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%lf%n", &y, &mo, &d, &h, &mi, &s, &consumed) < 6) {
    consumed = 0;
    if (std::sscanf(text.c_str(), "%4d-%2d-%2d%n", &y, &mo, &d, &consumed) < 3 || consumed != 10)
      return false;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s < 0 || s >= 61) return false;
  std::string zone = text.substr(static_cast<std::size_t>(consumed));
  int offsetMin = 0;
  if (!zone.empty() && zone != "Z") {
    int oh = 0, om = 0;
    char sign = 0;
    if (std::sscanf(zone.c_str(), "%c%2d:%2d", &sign, &oh, &om) != 3 || (sign != '+' && sign != '-'))
      return false;
    offsetMin = (sign == '+' ? 1 : -1) * (oh * 60 + om);
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = 0;
  time_t t = timegm(&tm);
  ms = (static_cast<double>(t) + s - offsetMin * 60.0) * 1000.0;
  return true;
}

namespace {

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
       {Cell("regressed now", "key"), Cell(fmt::format("{} series (their latest run)", latestRegressed),
                                           latestRegressed ? "fail" : "pass")},
       {Cell("regressed points", "key"), Cell(std::to_string(regressedPoints), "num")}},
      "meta");
  page.paragraph(
      fmt::format("How points are judged: the baseline of a point is the median of the {} points before it "
                  "in the same series "
                  "(none with fewer than {}). A point is regressed when it is worse than its baseline by "
                  "more than {} % and by "
                  "more than {} times the noise of those points (1.4826 x their median absolute deviation); "
                  "improved likewise. "
                  "A lasting change becomes the new baseline once it holds the median of the window.",
                  o.window, o.minHistory, formatNumber(o.thresholdPct), formatNumber(o.noiseFactor)));

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
      "<label><input type=\"checkbox\" id=\"f-regressed\"> only series regressed now</label>"
      "<span id=\"f-count\" class=\"muted\"></span></div>\n");

  std::string group = "\x01";
  for (std::size_t i = 0; i < data.series.size(); ++i) {
    const auto& s = data.series[i];
    std::string g = s.collective == "train" ? "Training step" : fmt::format("{} busbw", s.collective);
    if (g != group) {
      page.section(g);
      group = g;
    }
    page.rawHtml(fmt::format("<div class=\"card\" id=\"card-{}\">\n", i));
    page.heading(s.title);
    page.paragraph(seriesContext(s), "muted");
    if (!s.points.empty()) {
      const auto& p = s.points.back();
      std::string line = fmt::format("latest {} {} ({})", formatNumber(p.value), s.unit, p.time);
      if (p.hasBaseline) {
        line += fmt::format("; baseline {} {}, {}: {}", formatNumber(p.baseline), s.unit,
                            signedPct(p.changePct), verdictOf(p));
      } else {
        line += "; no baseline yet (too few earlier runs)";
      }
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
          {{"label", fmt::format("baseline (median of previous {})", o.window)},
           {timeAxis ? "points" : "values", baseline},
           {"dashed", true},
           {"color", 9}}}}};
    if (!timeAxis) spec["labels"] = labels;
    page.chart(spec);
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
    page.rawHtml("</div>\n");
  }
  if (data.series.empty()) {
    page.section("Trends");
    page.paragraph(
        "No series to show: the database has no ingested runs that pass the filters. Add runs with "
        "`dsreport ingest --db FILE RUN.json`.",
        "warn");
  }

  // The filters read every series' label, backend and collective, and the lists for the selects.
  json series = json::array();
  for (const auto& s : data.series) {
    series.push_back({{"label", s.label},
                      {"backend", s.backend},
                      {"collective", s.collective},
                      {"latestRegressed", s.latestRegressed}});
  }
  page.data("dashboard", {{"labels", data.labels},
                          {"backends", data.backends},
                          {"collectives", data.collectives},
                          {"series", series}});
  page.script(dashboardScript());
  return page.render();
}

void writeDashboard(const history::DashboardData& data, const std::string& path) {
  writeTextAtomic(path, renderDashboard(data));
}

}  // namespace ds::report::html
