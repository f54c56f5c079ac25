#include "reports/html/html_page.h"

#include <fmt/format.h>

#include <cmath>

#include "reports/html/html_escape.h"

#ifndef DS_CHARTJS_VERSION
#define DS_CHARTJS_VERSION "unknown"
#endif

namespace ds::report::html {

namespace assets {
extern const char kChartJs[];
extern const char kPageCss[];
extern const char kChartsJs[];
extern const char kDashboardJs[];
}  // namespace assets

const char* chartJsVersion() { return DS_CHARTJS_VERSION; }
const char* dashboardScript() { return assets::kDashboardJs; }

namespace {

std::string classAttr(std::string_view cls) {
  return cls.empty() ? std::string() : fmt::format(" class=\"{}\"", escapeHtml(cls));
}

}  // namespace

std::string renderTable(const std::vector<std::string>& header, const std::vector<Row>& rows,
                        std::string_view cls) {
  std::string s = fmt::format("<div class=\"table-wrap\"><table{}>\n<thead><tr>", classAttr(cls));
  for (const auto& h : header) s += fmt::format("<th>{}</th>", escapeHtml(h));
  s += "</tr></thead>\n<tbody>\n";
  for (const auto& row : rows) {
    s += "<tr>";
    for (const auto& c : row) s += fmt::format("<td{}>{}</td>", classAttr(c.cls), escapeHtml(c.text));
    s += "</tr>\n";
  }
  s += "</tbody></table></div>\n";
  return s;
}

PageBuilder::PageBuilder(std::string title, std::string kind)
    : title_(std::move(title)), kind_(std::move(kind)) {
  data_["charts"] = nlohmann::json::array();
}

std::string PageBuilder::newId(const char* prefix) { return fmt::format("{}{}", prefix, ++ids_); }

void PageBuilder::section(const std::string& title) {
  if (inSection_) body_ += "</section>\n";
  std::string id = newId("s");
  nav_.emplace_back(id, title);
  body_ += fmt::format("<section id=\"{}\">\n<h2>{}</h2>\n", id, escapeHtml(title));
  inSection_ = true;
}

void PageBuilder::endSection() {
  if (inSection_) body_ += "</section>\n";
  inSection_ = false;
}

void PageBuilder::heading(const std::string& text) {
  body_ += fmt::format("<h3>{}</h3>\n", escapeHtml(text));
}

void PageBuilder::paragraph(const std::string& text, std::string_view cls) {
  body_ += fmt::format("<p{}>{}</p>\n", classAttr(cls), escapeHtml(text));
}

void PageBuilder::table(const std::vector<std::string>& header, const std::vector<Row>& rows,
                        std::string_view cls) {
  body_ += renderTable(header, rows, cls);
}

void PageBuilder::foldedTable(const std::string& summary, const std::vector<std::string>& header,
                              const std::vector<Row>& rows) {
  body_ += fmt::format("<details><summary>{}</summary>\n", escapeHtml(summary));
  body_ += renderTable(header, rows);
  body_ += "</details>\n";
}

std::string PageBuilder::addCanvas(nlohmann::json& spec) {
  std::string id = newId("c");
  spec["canvas"] = id;
  body_ +=
      fmt::format("<div class=\"chart\"><canvas id=\"{}\" role=\"img\" aria-label=\"{}\"></canvas></div>\n",
                  id, escapeHtml(spec.value("title", std::string("chart"))));
  return id;
}

void PageBuilder::chart(nlohmann::json spec) {
  addCanvas(spec);
  data_["charts"].push_back(std::move(spec));
  ++charts_;
}

std::string PageBuilder::lazyChart(nlohmann::json spec) {
  std::string id = addCanvas(spec);
  data_["lazyCharts"][id] = std::move(spec);
  return id;
}

std::string PageBuilder::render() const {
  std::string s;
  s += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  s += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  s += fmt::format("<meta name=\"generator\" content=\"dsreport (dsperf) with Chart.js {}\">\n",
                   chartJsVersion());
  s += fmt::format("<title>{}</title>\n<style>\n{}\n</style>\n</head>\n", escapeHtml(title_),
                   assets::kPageCss);
  s += fmt::format("<body data-page=\"{}\" data-charts-expected=\"{}\">\n", escapeHtml(kind_), charts_);
  s += "<nav><div class=\"brand\">dsperf</div>\n<ul>\n";
  for (const auto& [id, t] : nav_) s += fmt::format("<li><a href=\"#{}\">{}</a></li>\n", id, escapeHtml(t));
  s += "</ul></nav>\n<main>\n";
  s += fmt::format("<h1>{}</h1>\n", escapeHtml(title_));
  s += "<div id=\"ds-errors\" class=\"errors\" hidden></div>\n";
  s += "<noscript><p class=\"warn\">Charts need JavaScript; the tables below hold every "
       "number.</p></noscript>\n";
  s += body_;
  if (inSection_) s += "</section>\n";
  s += fmt::format(
      "<footer>Made by dsreport; charts by Chart.js {}, embedded so this file opens offline.</footer>\n",
      chartJsVersion());
  s += "</main>\n";
  s += "<script type=\"application/json\" id=\"ds-data\">" + jsonForScript(data_) + "</script>\n";
  s += fmt::format("<script>\n{}\n</script>\n", assets::kChartJs);
  s += fmt::format("<script>\n{}\n", assets::kChartsJs);
  for (const auto& js : scripts_) s += js + "\n";
  s += "DS.finish();\n</script>\n</body>\n</html>\n";
  return s;
}

std::string formatBytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  if (bytes == std::floor(bytes)) return fmt::format("{:.0f} {}", bytes, kUnits[u]);
  return fmt::format("{:.1f} {}", bytes, kUnits[u]);
}

std::string formatNumber(double v, int significant) {
  if (!std::isfinite(v)) return "—";
  return fmt::format("{:.{}g}", v, significant);
}

std::string formatFixed(double v, int decimals) {
  if (!std::isfinite(v)) return "—";
  return fmt::format("{:.{}f}", v, decimals);
}

}  // namespace ds::report::html
