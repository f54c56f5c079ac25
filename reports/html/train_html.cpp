#include "reports/html/train_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace ds::report::html {

using nlohmann::json;

namespace {

// The plain allreduce hook is DDP's default; only another hook is worth naming in a label.
bool defaultHook(const std::string& hook) { return hook.empty() || hook == "none" || hook == "allreduce"; }

std::string capText(double mb) { return fmt::format("{} MB", formatNumber(mb)); }

// Every train configuration of the page, in run order, and what varies among them (a label names only
// what varies).
struct TrainData {
  struct Config {
    std::size_t run;
    const TrainRunRecord* rec;
  };
  explicit TrainData(const std::vector<std::string>& runNames) : names(runNames) {}
  const std::vector<std::string>& names;
  std::vector<Config> configs;
  std::set<int> worlds;
  std::set<std::string> backends, models;
  bool several = false;       // several runs on the page: the table names each row's run
  bool severalTrain = false;  // several train runs: labels name the run
};

TrainData trainData(const std::vector<RunFile>& runs, const std::vector<std::string>& names) {
  TrainData t{names};
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].train) continue;
    for (const auto& r : *runs[i].train) {
      t.configs.push_back({i, &r});
      t.worlds.insert(r.worldSize);
      t.backends.insert(r.backend);
      t.models.insert(r.model);
    }
  }
  t.several = runs.size() > 1;
  int trainRuns = 0;
  for (const auto& r : runs) trainRuns += r.train ? 1 : 0;
  t.severalTrain = trainRuns > 1;
  return t;
}

// A configuration's label: what varies among the page's configurations, then the bucket cap (when
// `withCap`; the bucket charts have it on their axis), overlap, a hook other than the default and a
// dtype other than f32, joined by " · ".
std::string configName(const TrainData& t, const TrainData::Config& c, bool withCap) {
  const auto& r = *c.rec;
  std::string s;
  if (t.severalTrain) s += t.names[c.run] + " · ";
  if (t.models.size() > 1) s += r.model + " · ";
  if (t.backends.size() > 1) s += r.backend + " · ";
  if (t.worlds.size() > 1) s += fmt::format("n={} · ", r.worldSize);
  if (withCap) s += capText(r.bucketCapMb) + " · ";
  s += r.overlap ? "overlap" : "no overlap";
  if (!defaultHook(r.commHook)) s += " · " + r.commHook;
  if (r.dtype != "f32") s += " · " + r.dtype;
  return s;
}

// Mean time per step of every configuration, stacked: forward, backward compute, exposed comm,
// optimizer and the rest of the step.
void stepSplitChart(PageBuilder& page, const TrainData& t) {
  json labels = json::array();
  json parts[5] = {json::array(), json::array(), json::array(), json::array(), json::array()};
  for (const auto& c : t.configs) {
    const auto& r = *c.rec;
    labels.push_back(configName(t, c, true));
    double known = r.forwardMs.mean + r.backwardComputeMs.mean + r.exposedCommMs.mean + r.optimizerMs.mean;
    parts[0].push_back(r.forwardMs.mean);
    parts[1].push_back(r.backwardComputeMs.mean);
    parts[2].push_back(r.exposedCommMs.mean);
    parts[3].push_back(r.optimizerMs.mean);
    parts[4].push_back(std::max(0.0, r.stepMs.mean - known));
  }
  static const char* kParts[] = {"forward", "backward compute", "exposed comm", "optimizer", "other"};
  json stack = json::array();
  for (int k = 0; k < 5; ++k)
    stack.push_back({{"label", kParts[k]}, {"values", parts[k]}, {"color", k}, {"stack", "step"}});
  page.chart({{"kind", "category"},
              {"bar", true},
              {"stacked", true},
              {"title", "Step time split (mean per step)"},
              {"yTitle", "ms per step"},
              {"labels", labels},
              {"series", stack}});
}

// A chart of one value per bucket cap (the labels) for each configuration line (the series).
void bucketChart(PageBuilder& page, const char* title, const char* yTitle, bool percent,
                 const json& capLabels, const json& series) {
  json spec = {{"kind", "category"}, {"title", title},      {"xTitle", "bucket cap"},
               {"yTitle", yTitle},   {"labels", capLabels}, {"series", series}};
  if (percent) spec["yPercent"] = true;
  page.chart(std::move(spec));
}

// Overlap efficiency and step time against the bucket cap, one line per (run, overlap, hook, world).
void bucketCharts(PageBuilder& page, const TrainData& t) {
  std::set<double> caps;
  for (const auto& c : t.configs) caps.insert(c.rec->bucketCapMb);
  json capLabels = json::array();
  for (double cap : caps) capLabels.push_back(capText(cap));
  std::map<std::string, std::pair<json, json>> lines;  // name -> (efficiency %, step p50)
  std::vector<std::string> order;
  for (const auto& c : t.configs) {
    const auto& r = *c.rec;
    std::string name = configName(t, c, false);
    if (!lines.count(name)) {
      order.push_back(name);
      lines[name] = {json(std::vector<json>(caps.size())), json(std::vector<json>(caps.size()))};
    }
    std::size_t idx = std::distance(caps.begin(), caps.find(r.bucketCapMb));
    lines[name].first[idx] = r.overlapEfficiency * 100.0;
    lines[name].second[idx] = r.stepMs.p50;
  }
  json eff = json::array(), step = json::array();
  int color = 0;
  for (const auto& name : order) {
    eff.push_back({{"label", name}, {"values", lines[name].first}, {"color", color}});
    step.push_back({{"label", name}, {"values", lines[name].second}, {"color", color}});
    ++color;
  }
  bucketChart(page, "Overlap efficiency per bucket size", "communication hidden (%)", true, capLabels, eff);
  bucketChart(page, "Step time (p50) per bucket size", "ms per step", false, capLabels, step);
}

// The table: one row per configuration, its step percentiles and the mean of each part.
void configTable(PageBuilder& page, const TrainData& t) {
  std::vector<Row> rows;
  for (const auto& c : t.configs) {
    const auto& r = *c.rec;
    Row row;
    if (t.several) row.emplace_back(t.names[c.run]);
    row.emplace_back(r.model);
    row.emplace_back(r.backend);
    row.emplace_back(std::to_string(r.worldSize), "num");
    row.emplace_back(capText(r.bucketCapMb), "num");
    row.emplace_back(r.overlap ? "yes" : "no");
    row.emplace_back(r.commHook);
    row.emplace_back(std::to_string(r.buckets), "num");
    row.emplace_back(formatFixed(r.stepMs.p50, 3), "num");
    row.emplace_back(formatFixed(r.stepMs.p90, 3), "num");
    row.emplace_back(formatFixed(r.stepMs.p99, 3), "num");
    for (const Percentiles* p :
         {&r.forwardMs, &r.backwardComputeMs, &r.backwardCommMs, &r.exposedCommMs, &r.optimizerMs}) {
      row.emplace_back(formatFixed(p->mean, 3), "num");
    }
    row.emplace_back(formatFixed(r.overlapEfficiency * 100.0, 1), "num");
    row.emplace_back(formatFixed(r.hiddenCommMs, 3), "num");
    row.emplace_back(formatNumber(r.samplesPerSec), "num");
    row.emplace_back(fmt::format("{} → {}", formatNumber(r.lossStart), formatNumber(r.lossEnd)), "num");
    rows.push_back(std::move(row));
  }
  std::vector<std::string> header;
  if (t.several) header.push_back("run");
  for (const char* h :
       {"model", "backend", "ranks", "bucket cap", "overlap", "hook", "buckets", "step p50 (ms)", "step p90",
        "step p99", "forward (mean)", "bwd compute", "bwd comm", "exposed comm", "optimizer",
        "overlap eff. (%)", "hidden comm (ms)", "samples/s", "loss"}) {
    header.push_back(h);
  }
  page.table(header, rows);
}

}  // namespace

void trainSection(PageBuilder& page, const std::vector<RunFile>& runs,
                  const std::vector<std::string>& names) {
  const TrainData t = trainData(runs, names);
  if (t.configs.empty()) return;
  page.section("Training step");
  page.paragraph(
      "Mean time per optimizer step, split into forward, backward compute, exposed communication (what "
      "the step waited for after backward), optimizer and the rest. Overlap efficiency = 1 - exposed / "
      "busy communication time: the share of communication hidden behind backward compute.",
      "muted");
  stepSplitChart(page, t);
  bucketCharts(page, t);
  configTable(page, t);
}

}  // namespace ds::report::html
