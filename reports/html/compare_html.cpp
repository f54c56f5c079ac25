#include "reports/html/compare_html.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "reports/html/html_page.h"
#include "reports/json_io.h"

namespace ds::report {

using html::Cell;
using html::Row;
using nlohmann::json;

namespace {

std::string verdictClass(Verdict v) {
  switch (v) {
    case Verdict::kRegressed:
      return "fail";
    case Verdict::kImproved:
      return "improved";
    case Verdict::kNoise:
    case Verdict::kInconclusive:
      return "skip";
    case Verdict::kUnchanged:
      return "";
  }
  return "";
}

std::string signedPct(double pct) { return fmt::format("{}{:.1f} %", pct >= 0 ? "+" : "", pct); }

std::string runName(const RunBrief& b, const char* role) {
  const std::string file = std::filesystem::path(b.path).filename().string();
  return fmt::format("{}: {}", role, b.label.empty() ? file : b.label);
}

}  // namespace

std::string renderCompareHtml(const CompareResult& r) {
  std::string baseName = runName(r.base, "baseline"), curName = runName(r.cur, "current");
  html::PageBuilder page(fmt::format("dsperf compare: {} vs {}", baseName, curName), "compare");

  page.section("Verdict");
  int code = r.exitCode();
  std::string verdict;
  if (code == 2 || !r.comparable || r.items.empty()) {
    verdict = "Not comparable: nothing could be compared (exit 2). See the differences below.";
  } else if (code == 1) {
    verdict = r.regressions > 0
                  ? fmt::format(
                        "REGRESSION: {} of {} item(s) got worse beyond the threshold, and the U test "
                        "finds it significant (exit 1).",
                        r.regressions, r.items.size())
                  : fmt::format("REGRESSION of the whole run: {} (exit 1).", r.overallReason);
  } else if (code == kCompareExitInconclusive) {
    verdict = fmt::format(
        "INCONCLUSIVE (exit {}): no regression shown, but {} run(s) against {} cannot tell a {} % change from "
        "run-to-run noise. Compare {} runs a side (separate dsbench runs; --repeat inside one run does not "
        "see what moves between runs).",
        kCompareExitInconclusive, r.baseRunCount, r.curRunCount, html::formatNumber(r.options.thresholdPct),
        runsNeeded(r.options.alpha));
  } else {
    verdict = fmt::format("No regression among {} item(s) (exit 0).", r.items.size());
  }
  page.rawHtml(fmt::format("<div class=\"verdict {}\">", code == 0                          ? "pass"
                                                         : code == kCompareExitInconclusive ? "warn"
                                                                                            : "fail"));
  page.paragraph(verdict);
  page.rawHtml("</div>\n");
  page.paragraph(
      fmt::format(
          "{} regressed, {} improved, {} inconclusive, {} within noise, {} unchanged, {} not compared. A "
          "change counts when it exceeds {} % of the baseline and a Mann-Whitney U test of the two sides' "
          "runs finds it (one sample per run, the median of its repeats; false-discovery rate {} over the "
          "items, and the whole run's own test at that level). Whole run: {}: {}.",
          r.regressions, r.improvements, r.inconclusive, r.noisy, r.unchanged, r.notCompared.size(),
          html::formatNumber(r.options.thresholdPct), html::formatNumber(r.options.alpha),
          verdictName(r.overall), r.overallReason),
      "muted");

  page.section("Runs");
  auto brief = [](const RunBrief& b) {
    return std::vector<std::string>{fmt::format("{}", fmt::join(b.paths, ", ")),
                                    b.label.empty() ? "—" : b.label,
                                    b.kind,
                                    b.runId,
                                    b.startTime,
                                    b.worldSize ? std::to_string(b.worldSize) : "—",
                                    fmt::format("{}", fmt::join(b.hosts, ", ")),
                                    fmt::format("{}", fmt::join(b.backends, ", ")),
                                    b.source.empty() ? "—" : b.source};
  };
  static const char* kKeys[] = {"file",  "label", "kind",     "run id", "start (UTC)",
                                "ranks", "hosts", "backends", "source"};
  auto bv = brief(r.base), cv = brief(r.cur);
  std::vector<Row> runs;
  for (std::size_t i = 0; i < bv.size(); ++i) {
    std::string cls = bv[i] != cv[i] && i != 0 && i != 3 && i != 4 ? "warn" : "";
    runs.push_back({Cell(kKeys[i], "key"), Cell(bv[i], cls), Cell(cv[i], cls)});
  }
  page.table({"", "baseline", "current"}, runs, "meta");
  if (!r.mismatches.empty()) {
    page.heading("Runs differ");
    std::vector<Row> rows;
    for (const auto& m : r.mismatches) rows.push_back({m});
    page.table({"difference"}, rows);
  }

  // Sweep items: change against size, one line per (collective, backend, dtype, op, root, place).
  std::vector<std::string> keys;
  std::map<std::string, std::vector<const ComparedItem*>> byKey;
  std::vector<const ComparedItem*> trainItems;
  for (const auto& it : r.items) {
    if (!it.config.empty() || it.collective.empty()) {
      trainItems.push_back(&it);
      continue;
    }
    std::string k = fmt::format("{} {} {} {}{} {}", it.collective, it.backend, it.dtype, it.op,
                                it.root >= 0 ? fmt::format(" root {}", it.root) : "", it.place);
    if (!byKey.count(k)) keys.push_back(k);
    byKey[k].push_back(&it);
  }
  if (!keys.empty()) {
    page.section("Change per size");
    json series = json::array(), tips = json::array();
    int color = 0;
    std::map<std::string, int> colorOf;
    for (const auto& k : keys) {
      auto items = byKey[k];
      std::stable_sort(items.begin(), items.end(),
                       [](const ComparedItem* a, const ComparedItem* b) { return a->bytes < b->bytes; });
      json pts = json::array(), marks = json::array(), t = json::array();
      for (const auto* it : items) {
        if (it->bytes == 0) continue;  // a 0-byte row has no place on a log axis; it is in the table
        pts.push_back({it->bytes, it->changePct});
        marks.push_back(it->verdict == Verdict::kRegressed);
        t.push_back(fmt::format(
            "{} → {} {}, noise {}, {}", html::formatNumber(it->base), html::formatNumber(it->cur), it->unit,
            it->noiseKnown ? fmt::format("±{:.1f} %", it->noisePct) : "unknown", verdictName(it->verdict)));
      }
      // Each line its own colour (in-place and out-of-place too): "dashed" means the baseline on
      // this page, and nothing else.
      if (!colorOf.count(k)) colorOf[k] = color++;
      series.push_back({{"label", k}, {"points", pts}, {"marks", marks}, {"color", colorOf[k]}});
      tips.push_back(t);
    }
    page.chart({{"kind", "size"},
                {"title", "Change from baseline (+ better, - worse); regressions marked red"},
                {"xTitle", "size"},
                {"yTitle", "change (%)"},
                {"yPercent", true},
                {"tooltips", tips},
                {"series", series}});
    // Both runs' busbw per size for each line, so the change has its absolute figures beside it.
    json abs = json::array();
    for (const auto& k : keys) {
      auto items = byKey[k];
      std::stable_sort(items.begin(), items.end(),
                       [](const ComparedItem* a, const ComparedItem* b) { return a->bytes < b->bytes; });
      json b = json::array(), c = json::array();
      for (const auto* it : items) {
        if (it->bytes == 0 || it->metric != "busbw") continue;
        b.push_back({it->bytes, it->base});
        c.push_back({it->bytes, it->cur});
      }
      if (b.empty()) continue;
      abs.push_back({{"label", "baseline " + k}, {"points", b}, {"dashed", true}, {"color", colorOf[k]}});
      abs.push_back({{"label", "current " + k}, {"points", c}, {"color", colorOf[k]}});
    }
    if (!abs.empty()) {
      page.chart({{"kind", "size"},
                  {"title", "busbw: baseline dashed, current solid"},
                  {"xTitle", "size"},
                  {"yTitle", "busbw (GB/s)"},
                  {"series", abs}});
    }
  }
  if (!trainItems.empty()) {
    page.section("Change per training configuration");
    json labels = json::array(), values = json::array(), marks = json::array();
    for (const auto* it : trainItems) {
      labels.push_back(it->config.empty() ? it->label() : it->config);
      values.push_back(it->changePct);
      marks.push_back(it->verdict == Verdict::kRegressed);
    }
    page.chart({{"kind", "category"},
                {"bar", true},
                {"title", "Step time change from baseline (+ better, - worse)"},
                {"yTitle", "change (%)"},
                {"yPercent", true},
                {"labels", labels},
                {"series", {{{"label", "change"}, {"values", values}, {"marks", marks}, {"color", 0}}}}});
  }

  page.section("Every matched item");
  std::vector<const ComparedItem*> sorted;
  for (const auto& it : r.items) sorted.push_back(&it);
  auto rank = [](Verdict v) {
    return v == Verdict::kRegressed ? 0 : v == Verdict::kInconclusive ? 1 : v == Verdict::kImproved ? 3 : 2;
  };
  std::stable_sort(sorted.begin(), sorted.end(), [&](const ComparedItem* a, const ComparedItem* b) {
    if (rank(a->verdict) != rank(b->verdict)) return rank(a->verdict) < rank(b->verdict);
    return a->verdict == Verdict::kImproved ? a->changePct > b->changePct : a->changePct < b->changePct;
  });
  std::vector<Row> rows;
  for (const auto* it : sorted) {
    rows.push_back(
        {it->label(), it->metric, Cell(html::formatNumber(it->base), "num"),
         Cell(html::formatNumber(it->cur), "num"), it->unit,
         Cell(signedPct(it->changePct), "num " + verdictClass(it->verdict)),
         Cell(it->noiseKnown ? fmt::format("±{:.1f} %", it->noisePct) : std::string("unknown"), "num"),
         Cell(fmt::format("{}/{}", it->baseSamples.size(), it->curSamples.size()), "num"),
         Cell(fmt::format("{:.2g}", it->p), "num"), Cell(verdictName(it->verdict), verdictClass(it->verdict)),
         it->reason});
  }
  page.paragraph(
      "Regressions first (worst first), then the inconclusive, the rest and the improvements. Noise is in "
      "the unit of the change: the run-to-run spread of each side (1.4826 × median absolute deviation of "
      "its runs, in % of the median), the two sides combined, unknown with one run a side; runs is the "
      "runs of baseline/current, p the U test's two-sided p-value.",
      "muted");
  page.table({"item", "metric", "baseline", "current", "unit", "change", "noise", "runs", "p", "verdict", "why"},
             rows);

  if (!r.notCompared.empty()) {
    page.section("Not compared");
    std::vector<Row> nc;
    for (const auto& n : r.notCompared) nc.push_back({n.what, n.reason});
    page.table({"what", "why"}, nc);
  }
  return page.render();
}

void writeCompareHtml(const CompareResult& result, const std::string& path) {
  writeTextAtomic(path, renderCompareHtml(result));
}

}  // namespace ds::report
