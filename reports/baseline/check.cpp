#include "reports/baseline/check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "reports/stats.h"
#include "reports/sweep/sweep_reporter.h"

namespace ds::report {

namespace {

std::string figureName(const Sample& s) {
  if (s.metric == "busbw")
    return fmt::format("{} {} {} {} busbw at {}", s.collective, s.backend, s.dtype, s.op,
                       humanBytes(s.bytes));
  if (s.metric == "link_bw") return "median link bandwidth";
  if (s.metric == "link_latency") return "median link latency";
  return s.metric;
}

std::string num(double v) { return fmt::format("{:.4g}", v); }

// One figure of one host in one run, and what each rule said of it.
struct Judged {
  double value = 0;
  std::map<std::string, bool> broke;  // rule name -> broke (only rules that could judge it)
};

struct Figure {
  Sample like;                          // the host's latest sample of the pattern
  std::map<std::string, Judged> byRun;  // runId -> judgement
  const BaselineEntry* entry = nullptr;
};

struct RuleLimit {
  bool applies = false;
  double expected = 0, threshold = 0;
  std::string how;  // "baseline 24.0 - 5%", "the rules file's min", "50% of 2x200 Gb/s NIC line rate"
};

RuleLimit limitOf(const Rule& r, const Sample& s, const BaselineEntry* entry) {
  RuleLimit l;
  switch (r.kind) {
    case RuleKind::kVariance:
      if (!entry) return l;
      l.applies = true;
      l.expected = entry->value;
      l.threshold = varianceLimit(r, entry->value, entry->spread, s.higherIsBetter);
      if (r.sigmas > 0 && entry->spread > 0)
        l.how = fmt::format("baseline {} {} the larger of {:g}% and {:g} x its run-to-run spread {}{}",
                            num(entry->value), s.higherIsBetter ? "-" : "+", r.threshold * 100, r.sigmas,
                            num(entry->spread), entry->floored ? ", floored at the hardware bound" : "");
      else
        l.how = fmt::format("baseline {} {} {:g}%{}", num(entry->value), s.higherIsBetter ? "-" : "+",
                            r.threshold * 100, entry->floored ? ", floored at the hardware bound" : "");
      return l;
    case RuleKind::kValue:
      l.applies = true;
      l.expected = r.min ? *r.min : *r.max;
      l.threshold = l.expected;
      l.how = r.min ? "the rules file's min" : "the rules file's max";
      return l;
    case RuleKind::kFloor:
      if (s.boundGBps <= 0 || !s.higherIsBetter) return l;
      l.applies = true;
      l.expected = s.boundGBps;
      l.threshold = r.fraction * s.boundGBps;
      l.how = fmt::format("{:g}% of {} {} GB/s", r.fraction * 100,
                          s.boundName.empty() ? "the hardware bound" : s.boundName, num(s.boundGBps));
      return l;
    default:
      return l;
  }
}

bool breaks(const Rule& r, const RuleLimit& l, double v, bool higherIsBetter) {
  if (r.kind == RuleKind::kValue) return (r.min && v < *r.min) || (r.max && v > *r.max);
  return worseThan(v, l.threshold, higherIsBetter);
}

struct HostData {
  std::string sku;
  std::vector<std::string> runs;          // runIds in time order, the host's last n
  std::map<std::string, Figure> figures;  // pattern key (sku/stack/pattern) -> figure
  std::map<std::string, std::vector<const RunFailure*>> failures;  // runId -> failures
  bool noResultOnly = true;                                        // every mention is a no-result
};

}  // namespace

std::vector<RunFailure> failuresOf(const RunFile& run) {
  std::vector<RunFailure> out;
  if (run.kind == RunKind::kSweep && run.sweep && run.sweep->metadata.hosts.size() == 1) {
    const auto& m = run.sweep->metadata;
    for (const auto& row : run.sweep->results)
      for (const PlaceResult* p : {&row.outOfPlace, &row.inPlace})
        if (p->measured && p->wrong > 0) {
          out.push_back({m.hosts.front(), run.runId, m.startTime,
                         fmt::format("{} {} {} {} at {} ({}): {} element(s) wrong", row.collective,
                                     row.backend, row.dtype, row.op, humanBytes(row.bytes),
                                     p == &row.outOfPlace ? "out of place" : "in place", p->wrong),
                         false});
          break;
        }
  }
  if (run.kind == RunKind::kDiag && run.diag && run.diag->fleet) {
    const std::string time = run.raw.is_object() ? run.raw.value("start_time", std::string{}) : std::string{};
    for (const auto& h : run.diag->fleet->judgement.hosts) {
      if (h.state == HostState::kHealthy) continue;
      std::string why = h.evidence.empty() ? std::string("no evidence recorded") : h.evidence.front().text;
      out.push_back({h.host, run.runId, time,
                     fmt::format("fleet mode named it {}: {}",
                                 h.state == HostState::kSuspect ? "suspect" : "no result", why),
                     h.state == HostState::kNoResult});
    }
  }
  return out;
}

CheckReport checkHosts(const std::vector<Sample>& samples, const std::vector<RunFailure>& failures,
                       const Baseline* baseline, const RuleSet& rules, const CheckOptions& options) {
  CheckReport report;
  report.time = options.time;
  report.baselineId = baseline ? baseline->id : "";
  report.rulesFile = rules.path;
  report.k = options.k > 0 ? options.k : rules.k;
  report.n = options.n > 0 ? options.n : rules.n;
  if (report.k > report.n) report.k = report.n;

  // Runs in time order (ties: the order given), and each host's runs.
  std::map<std::string, std::string> runTime;
  std::vector<std::string> runOrder;
  auto noteRun = [&](const std::string& id, const std::string& time) {
    if (runTime.emplace(id, time).second) runOrder.push_back(id);
  };
  const std::vector<Sample> judged = judgedSamples(samples, rules);
  for (const auto& s : samples) noteRun(s.runId, s.time);
  for (const auto& f : failures) noteRun(f.runId, f.time);
  std::stable_sort(runOrder.begin(), runOrder.end(),
                   [&](const std::string& a, const std::string& b) { return runTime[a] < runTime[b]; });
  std::map<std::string, int> runIndex;
  for (std::size_t i = 0; i < runOrder.size(); ++i) runIndex[runOrder[i]] = static_cast<int>(i);
  report.runIds = runOrder;

  std::map<std::string, HostData> hosts;
  std::map<std::string, std::set<int>> hostRuns;
  for (const auto& s : samples)
    if (s.scope == "host") hostRuns[s.host].insert(runIndex[s.runId]);
  for (const auto& f : failures) hostRuns[f.host].insert(runIndex[f.runId]);
  for (const auto& [host, idx] : hostRuns) {
    HostData& h = hosts[host];
    std::vector<int> v(idx.begin(), idx.end());
    std::size_t from = v.size() > static_cast<std::size_t>(report.n) ? v.size() - report.n : 0;
    for (std::size_t i = from; i < v.size(); ++i) h.runs.push_back(runOrder[v[i]]);
  }
  auto inWindow = [&](const HostData& h, const std::string& runId) {
    return std::find(h.runs.begin(), h.runs.end(), runId) != h.runs.end();
  };

  for (const auto& s : judged) {
    HostData& h = hosts[s.host];
    if (!inWindow(h, s.runId)) continue;
    h.noResultOnly = false;
    h.sku = s.sku;
    Figure& f = h.figures[s.sku + "\x1f" + s.stack + "\x1f" + patternKey(s)];
    if (f.byRun.empty() || runIndex[s.runId] >= runIndex[f.like.runId]) f.like = s;
    if (baseline && !f.entry) f.entry = findEntry(*baseline, s);
    Judged& j = f.byRun[s.runId];
    j.value = s.value;  // one figure per host, pattern and run (samplesOf gives one per row)
    for (const Rule& r : rules.rules) {
      if (!ruleApplies(r, s, true)) continue;
      RuleLimit l = limitOf(r, s, f.entry);
      if (l.applies) j.broke[r.name] = breaks(r, l, s.value, s.higherIsBetter);
    }
    for (const Rule& r : rules.rules) {
      if (r.kind != RuleKind::kMultiRules) continue;
      int broke = 0, judgedRules = 0;
      for (const auto& name : r.rules) {
        auto it = j.broke.find(name);
        if (it == j.broke.end()) continue;
        ++judgedRules;
        broke += it->second ? 1 : 0;
      }
      if (judgedRules == 0) continue;
      int need = r.failWhen == 0 ? static_cast<int>(r.rules.size()) : r.failWhen;
      j.broke[r.name] = broke >= need;
    }
  }
  for (const auto& f : failures) {
    HostData& h = hosts[f.host];
    if (!inWindow(h, f.runId)) continue;
    h.failures[f.runId].push_back(&f);
    if (!f.noResult) h.noResultOnly = false;
  }
  for (const auto& e : options.expectedHosts) hosts[e];

  const Rule* failureRule = nullptr;
  for (const Rule& r : rules.rules)
    if (r.kind == RuleKind::kFailureCheck) failureRule = &r;

  for (auto& [name, h] : hosts) {
    HostCheck hc;
    hc.host = name;
    hc.sku = h.sku.empty() ? "unknown" : h.sku;
    bool anyBaselineRule = false, anyBaselineFound = false;
    for (auto& [key, f] : h.figures) {
      const Sample& s = f.like;
      for (const Rule& r : rules.rules) {
        if (!r.standalone) continue;
        bool usesBaseline = r.kind == RuleKind::kVariance;
        if (r.kind == RuleKind::kMultiRules) {
          bool any = false;
          for (auto& [runId, j] : f.byRun) any = any || j.broke.count(r.name);
          if (!any) continue;
        } else if (!ruleApplies(r, s, true)) {
          continue;
        }
        if (usesBaseline) {
          anyBaselineRule = true;
          if (!f.entry) continue;
          anyBaselineFound = true;
        }
        CheckFinding c;
        c.rule = r.name;
        c.kind = ruleKindName(r.kind);
        c.pattern = patternKey(s);
        c.metric = s.metric;
        c.bytes = s.bytes;
        c.unit = s.unit;
        std::vector<double> values;
        for (auto& [runId, j] : f.byRun) {
          auto it = j.broke.find(r.name);
          if (it == j.broke.end()) continue;
          values.push_back(j.value);
          ++c.runs;
          c.failedRuns += it->second ? 1 : 0;
        }
        if (c.runs == 0) continue;  // e.g. a floor rule where no bound is known
        c.measured = median(values);
        if (r.kind == RuleKind::kMultiRules) {
          c.expected = 0;
          c.threshold = 0;
        } else {
          RuleLimit l = limitOf(r, s, f.entry);
          c.expected = l.expected;
          c.threshold = l.threshold;
        }
        c.passed = c.failedRuns < report.k;
        const char* cmp = s.higherIsBetter ? ">=" : "<=";
        if (r.kind == RuleKind::kMultiRules) {
          c.text = fmt::format("{} {} {}: {} of [{}] broke in {} of {} run(s)", figureName(s),
                               num(c.measured), s.unit, r.failWhen == 0 ? "all" : std::to_string(r.failWhen),
                               fmt::join(r.rules, ", "), c.failedRuns, c.runs);
        } else if (r.kind == RuleKind::kValue) {
          std::string want = r.min && r.max ? fmt::format("{} to {}", num(*r.min), num(*r.max))
                             : r.min        ? fmt::format(">= {}", num(*r.min))
                                            : fmt::format("<= {}", num(*r.max));
          c.text = fmt::format("{} {} {}, expected {} {} ({}); broke in {} of {} run(s)", figureName(s),
                               num(c.measured), s.unit, want, s.unit, limitOf(r, s, f.entry).how,
                               c.failedRuns, c.runs);
        } else {
          c.text = fmt::format("{} {} {}, expected {} {} {} ({}); broke in {} of {} run(s)", figureName(s),
                               num(c.measured), s.unit, cmp, num(c.threshold), s.unit,
                               limitOf(r, s, f.entry).how, c.failedRuns, c.runs);
        }
        hc.findings.push_back(std::move(c));
      }
    }
    if (failureRule && !h.failures.empty()) {
      CheckFinding c;
      c.rule = failureRule->name;
      c.kind = ruleKindName(RuleKind::kFailureCheck);
      c.runs = static_cast<int>(h.runs.size());
      c.failedRuns = static_cast<int>(h.failures.size());
      c.passed = c.failedRuns < report.k;
      const RunFailure* last = h.failures.rbegin()->second.front();
      for (const auto& [runId, v] : h.failures)
        if (runIndex[runId] >= runIndex[last->runId]) last = v.front();
      c.text = fmt::format("{}; in {} of {} run(s)", last->text, c.failedRuns, c.runs);
      hc.findings.push_back(std::move(c));
    }
    std::vector<const CheckFinding*> failed;
    for (const auto& c : hc.findings)
      if (!c.passed) failed.push_back(&c);
    if (!failed.empty()) {
      hc.state = CheckState::kUnhealthy;
      hc.summary = fmt::format("ERROR: {}: {}", failed.front()->rule, failed.front()->text);
      if (failed.size() > 1) hc.summary += fmt::format(" (and {} more)", failed.size() - 1);
    } else if (h.figures.empty() && (h.failures.empty() || h.noResultOnly)) {
      hc.state = CheckState::kNoResult;
      hc.summary = h.failures.empty() ? "ERROR: No results reported"
                                      : "ERROR: No results reported (fleet mode heard nothing from it)";
    } else if (anyBaselineRule && !anyBaselineFound && hc.findings.empty()) {
      hc.state = CheckState::kNoBaseline;
      hc.summary = baseline ? fmt::format(
                                  "No baseline yet for SKU '{}' and these figures; build one with `dsreport "
                                  "baseline` from runs of healthy hosts of this SKU",
                                  hc.sku)
                            : "No baseline given; pass --baseline B.json (made by `dsreport baseline`)";
    } else {
      hc.state = CheckState::kHealthy;
      hc.summary = "Healthy";
      if (anyBaselineRule && !anyBaselineFound)
        hc.summary += " (no baseline for its figures: only absolute rules applied)";
    }
    report.hosts.push_back(std::move(hc));
  }
  return report;
}

CheckReport checkRuns(const std::vector<RunFile>& runs, const Baseline* baseline, const RuleSet& rules,
                      const CheckOptions& options) {
  std::vector<Sample> samples;
  std::vector<RunFailure> failures;
  for (const auto& run : runs) {
    auto s = samplesOf(run);
    samples.insert(samples.end(), s.begin(), s.end());
    auto f = failuresOf(run);
    failures.insert(failures.end(), f.begin(), f.end());
  }
  return checkHosts(samples, failures, baseline, rules, options);
}

std::string checkText(const CheckReport& r, bool healthyToo) {
  std::vector<const HostCheck*> order;
  for (const auto& h : r.hosts) order.push_back(&h);
  auto rank = [](CheckState s) {
    switch (s) {
      case CheckState::kUnhealthy:
        return 0;
      case CheckState::kNoResult:
        return 1;
      case CheckState::kNoBaseline:
        return 2;
      case CheckState::kHealthy:
        return 3;
    }
    return 4;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](const HostCheck* a, const HostCheck* b) { return rank(a->state) < rank(b->state); });
  std::size_t width = 4;
  for (const auto* h : order) width = std::max(width, h->host.size());
  std::string out = fmt::format(
      "# check of {} host(s) over {} run(s); unhealthy when a rule broke in {} of a host's last {} run(s)\n",
      r.hosts.size(), r.runIds.size(), r.k, r.n);
  std::map<CheckState, int> counts;
  for (const auto* h : order) {
    ++counts[h->state];
    if (h->state == CheckState::kHealthy && !healthyToo) continue;
    out += fmt::format("{:<{}}  {:<11}  {}\n", h->host, width, checkStateName(h->state), h->summary);
  }
  out += fmt::format("# {} healthy, {} unhealthy, {} no result, {} no baseline\n",
                     counts[CheckState::kHealthy], counts[CheckState::kUnhealthy],
                     counts[CheckState::kNoResult], counts[CheckState::kNoBaseline]);
  return out;
}

}  // namespace ds::report
