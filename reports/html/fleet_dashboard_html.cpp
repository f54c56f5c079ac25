#include "reports/html/fleet_dashboard_html.h"

#include <fmt/format.h>

#include <cmath>

#include "reports/diag/hostlist.h"
#include "reports/html/html_escape.h"
#include "reports/html/html_page.h"
#include "reports/json_io.h"

namespace ds::report::html {

namespace assets {
extern const char kFleetDashboardJs[];
}  // namespace assets

using nlohmann::json;

const char* fleetDashboardScript() { return assets::kFleetDashboardJs; }

std::string base64(const std::uint8_t* data, std::size_t size) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < size; i += 3) {
    std::uint32_t v = (std::uint32_t{data[i]} << 16) | (std::uint32_t{data[i + 1]} << 8) | data[i + 2];
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < size) {
    std::uint32_t v = std::uint32_t{data[i]} << 16;
    if (i + 1 < size) v |= std::uint32_t{data[i + 1]} << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < size ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

namespace {

// Four significant digits: enough for a median or a drift, and a third of the text of a double.
json sig4(double v) {
  if (!std::isfinite(v)) return nullptr;
  return std::stod(fmt::format("{:.4g}", v));
}

std::string durationText(double ms) {
  const double kHour = 3600e3, kDay = 24 * kHour;
  if (ms >= kDay) return fmt::format("{:g} day{}", ms / kDay, ms == kDay ? "" : "s");
  if (ms >= kHour) return fmt::format("{:g} h", ms / kHour);
  return fmt::format("{:g} min", ms / 60e3);
}

std::string stateWords(const std::string& states) {
  std::string out;
  for (char c : states) {
    out += out.empty() ? "" : ", ";
    out += history::checkStateWords(c);
  }
  return out;
}

}  // namespace

std::string renderFleetDashboard(const history::FleetData& d) {
  PageBuilder page("dsperf fleet dashboard", "fleet-dashboard");
  const auto& o = d.options;
  std::vector<std::string> unlisted;
  const std::string exclude = history::quarantineExcludeFile(d, &unlisted);

  page.section("Overview");
  page.table(
      {"", ""},
      {{Cell("history database", "key"), Cell(d.dbPath, "mono")},
       {Cell("hosts", "key"), Cell(std::to_string(d.hosts.size()), "num")},
       {Cell("runs shown", "key"), Cell(std::to_string(d.runs), "num")},
       {Cell("time range (UTC)", "key"),
        d.firstTime.empty() ? std::string("—") : fmt::format("{} .. {}", d.firstTime, d.lastTime)},
       {Cell("time columns", "key"),
        d.columns.empty() ? std::string("—")
                          : fmt::format("{} (one per {})", d.columns.size(), durationText(d.columnWidthMs))},
       {Cell("patterns shown", "key"),
        fmt::format("{} of {}", d.patterns.size(), d.patterns.size() + d.leftOut.size())},
       {Cell("checks ingested", "key"), Cell(std::to_string(d.checks), "num")},
       {Cell("quarantined", "key"),
        Cell(fmt::format("{} host(s): failed {} of their last {} checks", d.quarantine.size(), o.k, o.n),
             d.quarantine.empty() ? "pass" : "fail")}},
      "meta");
  page.paragraph(
      "Each cell is a host's figure in one time column relative to the fleet median: the median of the hosts "
      "of the same SKU in that column, so a change of the whole fleet (a new NCCL, a new driver) moves the "
      "median "
      "and not the cells. Relative values are kept in whole percent. Drift compares the median of a host's "
      "last "
      "quarter of columns with its first quarter; against the fleet, the same of its relative values. Only "
      "per-host figures are shown: single-host sweeps and each host's median link in fleet runs.",
      "muted");
  if (!d.leftOut.empty()) {
    std::string left;
    for (std::size_t i = 0; i < d.leftOut.size() && i < 12; ++i) left += (i ? "; " : "") + d.leftOut[i];
    page.paragraph(fmt::format("{} more pattern(s) with per-host samples are not on this page (choose with "
                               "--pattern KEY, repeatable, or --metric): {}{}",
                               d.leftOut.size(), left, d.leftOut.size() > 12 ? "; ..." : ""),
                   "muted");
  }
  if (d.jobSamples + d.linkSamples > 0)
    page.paragraph(
        fmt::format("Not shown here: {} sample(s) of multi-host jobs (a job's figure is not one host's) "
                    "and {} of single links (dsreport baseline and loadSamples read them).",
                    d.jobSamples, d.linkSamples),
        "muted");

  page.section("Quarantine");
  page.paragraph(fmt::format(
      "Hosts that failed (unhealthy, or reported no result) at least {} of their last {} "
      "dsreport check verdicts; no baseline yet and cannot judge (too noisy to tell) are not failures. "
      "{} check(s) ingested.",
      o.k, o.n, d.checks));
  if (d.quarantine.empty()) {
    page.paragraph(d.checks ? "No host is quarantined."
                            : "No checks in the history: ingest dsreport check results "
                              "(dsreport ingest check.json --db ...).",
                   d.checks ? "pass" : "warn");
  } else {
    std::vector<Row> rows;
    for (const auto& q : d.quarantine) {
      rows.push_back({Cell(q.host, "mono"), Cell(fmt::format("{} of {}", q.failed, q.checks), "num fail"),
                      q.lastFailure.time, Cell(q.lastFailure.state, "fail"), Cell(q.lastFailure.rule, "mono"),
                      q.lastFailure.summary, q.latest.state});
    }
    page.table({"host", "failed", "last failure (UTC)", "state", "rule", "summary", "latest state"}, rows);
  }
  page.heading("Exclude file");
  page.paragraph(
      "The quarantine list in fleet mode's exclude-file format: one line, a Slurm hostlist (empty when no "
      "host "
      "is quarantined). srun --exclude=./quarantine-exclude.txt, or sbatch --exclude=\"$(cat "
      "quarantine-exclude.txt)\"; dsreport dashboard --fleet --exclude-file FILE writes the same file.",
      "muted");
  page.rawHtml(fmt::format("<pre id=\"fl-exclude\" class=\"mono exclude\">{}</pre>\n", escapeHtml(exclude)));
  page.rawHtml(
      "<p><button type=\"button\" id=\"fl-copy\">Copy</button> <button type=\"button\" "
      "id=\"fl-download\">Download "
      "quarantine-exclude.txt</button> <span id=\"fl-copy-status\" class=\"muted\"></span></p>\n");
  if (!exclude.empty()) {
    std::vector<std::string> hosts;
    for (const auto& q : d.quarantine)
      if (std::find(unlisted.begin(), unlisted.end(), q.host) == unlisted.end()) hosts.push_back(q.host);
    page.paragraph("DeepSpeed launcher (deepspeed --exclude): " + deepspeedExclude(hosts), "mono wrap");
  }
  if (!unlisted.empty()) {
    std::string names;
    for (const auto& h : unlisted) names += (names.empty() ? "" : ", ") + fmt::format("'{}'", h);
    page.paragraph(
        fmt::format("Not in the exclude file: {} quarantined host name(s) that cannot stand in a Slurm "
                    "hostlist (empty, or with a comma, bracket or space): {}. Exclude them by hand.",
                    unlisted.size(), names),
        "warn");
  }
  page.endSection();

  page.rawHtml("<div class=\"filters\" role=\"search\"><label>pattern<select id=\"fl-pattern\">");
  for (std::size_t i = 0; i < d.patterns.size(); ++i)
    page.rawHtml(fmt::format("<option value=\"{}\">{}</option>", i, escapeHtml(d.patterns[i].title)));
  page.rawHtml(
      "</select></label><label>rows<select id=\"fl-sort\"><option value=\"name\">by name</option><option "
      "value=\"now\">worst now first</option><option value=\"drift\">worst drift first</option><option "
      "value=\"quarantine\">quarantined first</option></select></label><label>host<input type=\"search\" "
      "id=\"fl-host\" list=\"fl-hosts\" placeholder=\"a host name\"></label><datalist "
      "id=\"fl-hosts\"></datalist>"
      "</div>\n");

  page.section("Hosts × time");
  page.paragraph(
      "One row per host, one column per time bucket (oldest left). Green: at or above the fleet median of "
      "its "
      "SKU; yellow: 15 % worse; red: 30 % worse or more (for latencies, higher is worse); grey: no sample. A "
      "red "
      "mark left of a row: the host is quarantined. Point at a cell for its figures; click a row for the "
      "host's "
      "panel.",
      "muted");
  page.rawHtml(
      "<div class=\"heatmap fleet-grid\"><canvas id=\"fl-heatmap\" role=\"img\" aria-label=\"hosts by time "
      "heatmap\"></canvas></div><div id=\"fl-tip\" class=\"tip mono\"></div>\n");
  if (d.patterns.empty())
    page.paragraph(
        "No per-host samples in the history: ingest single-host sweeps (one dsbench run per host) or "
        "fleet-mode dsdiag reports (dsreport ingest --db FILE RUN.json).",
        "warn");

  page.section("Host");
  page.paragraph(
      "One host's figure for the chosen pattern over time, with its SKU's fleet median dashed. On opening, "
      "the "
      "host with the worst drift; click a row of the heatmap or of the drift table, or type a host name "
      "above.",
      "muted");
  page.rawHtml(
      "<div id=\"fl-host-panel\"><p id=\"fl-host-title\" class=\"muted\">No host chosen.</p><div "
      "class=\"chart\"><canvas id=\"fl-host-chart\" role=\"img\" "
      "aria-label=\"the host's series\"></canvas></div><p id=\"fl-host-info\"></p></div>\n");

  page.section("Drift per host");
  page.rawHtml("<p id=\"fl-drift-note\" class=\"muted\"></p>\n");
  page.rawHtml(
      "<div class=\"table-wrap\"><table id=\"fl-drift\"><thead><tr><th>host</th><th>SKU</th><th>columns</th>"
      "<th>first quarter</th><th>last quarter</th><th>drift</th><th>vs fleet</th><th>last "
      "checks</th></tr></thead>"
      "<tbody></tbody></table></div><p><button type=\"button\" id=\"fl-drift-all\">Show every "
      "host</button></p>\n");

  // The page data.
  json hostSku = json::array(), checks = json::array(), quarantined = json::array();
  for (std::size_t h = 0; h < d.hosts.size(); ++h) {
    hostSku.push_back(d.hostSku.empty() ? -1 : d.hostSku[h]);
    const auto& c = d.hostChecks.empty() ? history::FleetHostChecks{} : d.hostChecks[h];
    if (c.states.empty()) {
      checks.push_back(nullptr);
    } else {
      checks.push_back({c.states, c.failed, c.lastFailure.time, c.lastFailure.rule, c.lastFailure.summary,
                        stateWords(c.states)});
    }
  }
  for (const auto& q : d.quarantine) {
    auto it = std::lower_bound(d.hosts.begin(), d.hosts.end(), q.host);
    if (it != d.hosts.end() && *it == q.host) quarantined.push_back(it - d.hosts.begin());
  }
  json columns = json::array();
  for (const auto& c : d.columns) columns.push_back({c.firstMs, c.lastMs, c.runs});
  json patterns = json::array();
  for (const auto& p : d.patterns) {
    json medians = json::array();
    for (const auto& m : p.medians) {
      json row = json::array();
      for (double v : m) row.push_back(v > 0 ? sig4(v) : json(nullptr));
      medians.push_back(std::move(row));
    }
    json fleet = json::array();
    for (double v : p.fleetMedian) fleet.push_back(v > 0 ? sig4(v) : json(nullptr));
    json drift = json::array();
    for (const auto& r : p.drift)
      drift.push_back({r.host, r.points, sig4(r.first), sig4(r.last), sig4(r.pct), sig4(r.vsFleetPct)});
    patterns.push_back({{"key", p.key},
                        {"title", p.title},
                        {"unit", p.unit},
                        {"higherIsBetter", p.higherIsBetter},
                        {"hosts", p.hosts},
                        {"samples", p.samples},
                        {"cells", base64(p.cells.data(), p.cells.size())},
                        {"medians", medians},
                        {"fleetMedian", fleet},
                        {"drift", drift},
                        {"fleetDrift", p.fleetDriftKnown ? sig4(p.fleetDriftPct) : json(nullptr)}});
  }
  page.data("fleet", {{"hosts", d.hosts},
                      {"skus", d.skus},
                      {"hostSku", hostSku},
                      {"columns", columns},
                      {"widthMs", d.columnWidthMs},
                      {"patterns", patterns},
                      {"checks", checks},
                      {"k", o.k},
                      {"n", o.n},
                      {"quarantined", quarantined},
                      {"excludeFile", exclude}});
  page.script(fleetDashboardScript());
  return page.render();
}

void writeFleetDashboard(const history::FleetData& data, const std::string& path) {
  writeTextAtomic(path, renderFleetDashboard(data));
}

}  // namespace ds::report::html
