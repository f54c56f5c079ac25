// One self-contained HTML page: static HTML (headings, tables, escaped by escapeHtml) plus charts drawn
// by the embedded Chart.js from a JSON block. Charts are declared as specs (see assets/charts.js for
// the fields); the page script draws them and then sets body data-charts-rendered="N",
// data-chart-errors="N" and data-render-done="1", which the browser tests read.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace ds::report::html {

// The Chart.js version embedded in every page ("v3.9.1").
const char* chartJsVersion();
// The dashboard's filter script (assets/dashboard.js), for PageBuilder::script.
const char* dashboardScript();

// A table cell: text (escaped when rendered) and an optional CSS class ("num", "pass", "fail", ...).
struct Cell {
  std::string text;
  std::string cls;
  Cell() = default;
  Cell(std::string t, std::string c = {}) : text(std::move(t)), cls(std::move(c)) {}
  Cell(const char* t) : text(t) {}
};
using Row = std::vector<Cell>;

// A <table> with a header row; every text escaped. Numeric cells ("num") align right.
std::string renderTable(const std::vector<std::string>& header, const std::vector<Row>& rows,
                        std::string_view cls = {});

class PageBuilder {
 public:
  // `kind` names the page for scripts and tests ("report", "compare", "dashboard").
  PageBuilder(std::string title, std::string kind);

  // A top-level section with an entry in the nav; ids are made here, so input never becomes an id.
  void section(const std::string& title);
  // Closes the current section, so that what follows stands outside any (the dashboard's filters).
  void endSection();
  void heading(const std::string& text);  // <h3> inside the current section
  void paragraph(const std::string& text, std::string_view cls = {});
  void table(const std::vector<std::string>& header, const std::vector<Row>& rows, std::string_view cls = {});
  // A table folded under a one-line summary (per-rank data, long env lists).
  void foldedTable(const std::string& summary, const std::vector<std::string>& header,
                   const std::vector<Row>& rows);
  // A chart: `spec` as assets/charts.js reads it, without "canvas" (assigned here).
  void chart(nlohmann::json spec);
  // A chart drawn only when a script asks for it (DS.drawLazy(canvas id)), e.g. when its folded card
  // is opened: a page of hundreds of charts then opens at once. Not counted in data-charts-expected.
  // Returns the canvas id.
  std::string lazyChart(nlohmann::json spec);
  // Trusted markup made by this library (never input text).
  void rawHtml(std::string_view html) { body_ += html; }
  // Extra data for a page script (the dashboard's series), under data[key].
  void data(const std::string& key, nlohmann::json value) { data_[key] = std::move(value); }
  // An extra embedded script run after charts.js and before the finishing marker.
  void script(std::string_view js) { scripts_.emplace_back(js); }

  int chartCount() const { return charts_; }
  std::string render() const;

 private:
  std::string newId(const char* prefix);
  // The canvas of a chart, placed here; sets spec["canvas"] and returns its id.
  std::string addCanvas(nlohmann::json& spec);
  std::string title_, kind_;
  std::string body_;
  std::vector<std::pair<std::string, std::string>> nav_;  // id, title
  bool inSection_ = false;
  nlohmann::json data_ = nlohmann::json::object();
  std::vector<std::string> scripts_;
  int ids_ = 0;
  int charts_ = 0;
};


// Number formatting shared by the renderers.
std::string formatBytes(double bytes);  // "1 KiB", "1.5 MiB", "8 B"
std::string formatNumber(double v, int significant = 4);
std::string formatFixed(double v, int decimals);

}  // namespace ds::report::html
