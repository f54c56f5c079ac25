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
  std::map<std::string, RuleVerdict> verdict;  // rule name -> its verdict (only rules that could judge it)
};

// A variance rule's judgement of the mean of a host's runs that did not break it, where single runs
// could not be told from a halved one (checkHosts says when).
struct Pool {
  int runs = 0;
  double mean = 0, noise = 0;
  VarianceBounds bounds;
  RuleVerdict verdict = RuleVerdict::kBlind;
};

struct Figure {
  Sample like;                          // the host's latest sample of the pattern
  std::map<std::string, Judged> byRun;  // runId -> judgement
  const BaselineEntry* entry = nullptr;
  std::map<std::string, Pool> pools;  // variance rule name -> the mean it judged, where it tried
};

struct RuleLimit {
  bool applies = false;
  double expected = 0, threshold = 0;
  VarianceBounds bounds;  // variance rules
  std::string how;        // "baseline 24.0 - 5%", "the rules file's min", "50% of 2x200 Gb/s NIC line rate"
};

// "half the baseline" / "twice the baseline", "a halving" / "a doubling": what a variance rule must
// tell from noise (kSlowdownToTell), in the metric's direction.
const char* slowdownPoint(bool higherIsBetter) {
  return higherIsBetter ? "half the baseline" : "twice the baseline";
}
const char* slowdownName(bool higherIsBetter) { return higherIsBetter ? "a halving" : "a doubling"; }

// The most the baseline's run-to-run spread may be, given how many figures it was measured from (its
// rejected hosts' count too, a slight overcount where hosts were dropped).
double spreadUpper(const BaselineEntry& e) { return e.spread * spreadUpperFactor(e.samples); }

RuleLimit limitOf(const Rule& r, const Sample& s, const BaselineEntry* entry) {
  RuleLimit l;
  switch (r.kind) {
    case RuleKind::kVariance:
      if (!entry) return l;
      l.applies = true;
      l.expected = entry->value;
      l.bounds = varianceBounds(r, entry->value, entry->spread, spreadUpper(*entry), s.higherIsBetter);
      l.threshold = l.bounds.limit;
      if (r.sigmas > 0 && entry->spread > 0)
        l.how = fmt::format(
            "baseline {} {} the larger of {:g}% and {:g} x its run-to-run spread {}{}{}", num(entry->value),
            s.higherIsBetter ? "-" : "+", r.threshold * 100, r.sigmas, num(entry->spread),
            l.bounds.capped ? fmt::format(", capped at {}", slowdownPoint(s.higherIsBetter)) : "",
            entry->floored ? ", floored at the hardware bound" : "");
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

RuleVerdict judge(const Rule& r, const RuleLimit& l, double v, bool higherIsBetter) {
  if (r.kind == RuleKind::kValue)
    return (r.min && v < *r.min) || (r.max && v > *r.max) ? RuleVerdict::kBreaks : RuleVerdict::kHolds;
  if (r.kind == RuleKind::kVariance) return judgeVariance(l.bounds, v);
  return worseThan(v, l.threshold, higherIsBetter) ? RuleVerdict::kBreaks : RuleVerdict::kHolds;
}

double meanOf(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

// A pool's limit, for people: "baseline 7.084 - the larger of 10% and 4 x 0.6084, the noise of a mean
// of 3 runs (the spread 1.015, at most 1.054 from its 1000 figures, / sqrt 3)".
std::string poolHow(const Rule& r, const BaselineEntry& e, const Pool& p) {
  return fmt::format(
      "baseline {} {} the larger of {:g}% and {:g} x {}, the noise of a mean of {} runs (the spread {}, at "
      "most "
      "{} from its {} figures, / sqrt {}{})",
      num(e.value), e.higherIsBetter ? "-" : "+", r.threshold * 100, r.sigmas, num(p.noise), p.runs,
      num(e.spread), num(spreadUpper(e)), e.samples, p.runs,
      e.stdev > 0 ? fmt::format(", with the baseline hosts' own stdev {}", num(e.stdev)) : "");
}

// Why a variance rule could not judge a figure, and what would let it: one clause each.
std::string blindText(const Rule& r, const Sample& s, const BaselineEntry& e, const RuleLimit& l,
                      const Pool* pool, int runsNeeded) {
  const bool hib = s.higherIsBetter;
  const double upper = spreadUpper(e);
  const std::string bound = upper > e.spread
                                ? fmt::format(", at most {} {} as far as its {} figures tell (95% bound)",
                                              num(upper), s.unit, e.samples)
                                : "";
  std::string why;
  if (l.bounds.capped)
    why = fmt::format(
        "the baseline {} {} has a run-to-run spread of {} {}, and {:g} x that reaches past {}, so the rule "
        "cannot tell {} from noise",
        num(e.value), s.unit, num(e.spread), s.unit, r.sigmas, slowdownPoint(hib), slowdownName(hib));
  else if (l.bounds.blindAll)
    why = fmt::format(
        "the baseline {} {} has a run-to-run spread of {} {}{}, and {:g} x that could reach past {}, so the "
        "rule cannot tell {} from noise",
        num(e.value), s.unit, num(e.spread), s.unit, bound, r.sigmas, slowdownPoint(hib), slowdownName(hib));
  else
    why = fmt::format(
        "within the limit {} {} ({}), but {} {} {}, which a host at {} still measures within {:g} x its "
        "noise "
        "(the spread {} {}{}; {} is {} {})",
        num(l.bounds.limit), s.unit, l.how, hib ? "below" : "above", num(l.bounds.halvingEdge), s.unit,
        hib ? "half speed" : "twice the latency", r.sigmas, num(e.spread), s.unit, bound, slowdownPoint(hib),
        num(l.bounds.halving), s.unit);
  if (pool)
    why += fmt::format("; the mean of its {} runs, {} {}, could not be told apart either", pool->runs,
                       num(pool->mean), s.unit);
  std::vector<std::string> todo;
  if (runsNeeded > 0)
    todo.push_back(fmt::format("the mean of {} runs of this host would tell: check its last {} runs (--n {})",
                               runsNeeded, runsNeeded, runsNeeded));
  const int figures = baselineFiguresToTell(r, e.value, e.spread, hib);
  if (figures > e.samples)
    todo.push_back(
        fmt::format("a baseline of {} runs or more (it has {}) would tell one run, if its spread holds",
                    figures, e.samples));
  if (todo.empty())
    todo.push_back(fmt::format(
        "no number of its runs would{}: build the baseline from several runs of each host, or judge this "
        "figure "
        "by a threshold without sigmas (a rules file)",
        e.stdev > 0
            ? fmt::format(", as the baseline's hosts differ by {} {} themselves", num(e.stdev), s.unit)
            : std::string()));
  return why + "; " + fmt::format("{}", fmt::join(todo, "; or "));
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
      if (l.applies) j.verdict[r.name] = judge(r, l, s.value, s.higherIsBetter);
    }
  }
  // Runs that a variance rule could not tell from a halved one decide nothing alone. Where they
  // could decide the host (fewer than k runs broke the rule, k or more with them), the rule judges
  // the mean of every run of the window that did not break it, against the noise of such a mean
  // (meanNoise): all of them break with it, or those runs hold. The runs that broke stay out of the
  // mean: they are counted already, and one bad run must not carry the rest when k > 1.
  for (auto& [name, h] : hosts) {
    for (auto& [key, f] : h.figures) {
      for (const Rule& r : rules.rules) {
        if (r.kind != RuleKind::kVariance || !f.entry) continue;
        int brokeRuns = 0, blindRuns = 0;
        std::vector<double> rest;
        for (auto& [runId, j] : f.byRun) {
          auto it = j.verdict.find(r.name);
          if (it == j.verdict.end()) continue;
          if (it->second == RuleVerdict::kBreaks) {
            ++brokeRuns;
          } else {
            rest.push_back(j.value);
            blindRuns += it->second == RuleVerdict::kBlind ? 1 : 0;
          }
        }
        if (blindRuns == 0 || brokeRuns >= report.k || brokeRuns + blindRuns < report.k || rest.size() < 2)
          continue;
        Pool p;
        p.runs = static_cast<int>(rest.size());
        p.mean = meanOf(rest);
        // A mean is a judgement that single runs did not make: its limit too is drawn with the most
        // the spread may be, so that a baseline that underrates its noise raises no alarm through it.
        p.noise = meanNoise(spreadUpper(*f.entry), f.entry->stdev, p.runs);
        p.bounds = varianceBounds(r, f.entry->value, p.noise, p.noise, f.like.higherIsBetter);
        p.verdict = judgeVariance(p.bounds, p.mean);
        if (p.verdict != RuleVerdict::kBlind)
          for (auto& [runId, j] : f.byRun) {
            auto it = j.verdict.find(r.name);
            if (it != j.verdict.end() && it->second != RuleVerdict::kBreaks) it->second = p.verdict;
          }
        f.pools[r.name] = p;
      }
      // Combinations, per run, from their rules' verdicts: broken when `need` of them broke; blind when
      // the blind ones could make up the difference.
      for (auto& [runId, j] : f.byRun) {
        for (const Rule& r : rules.rules) {
          if (r.kind != RuleKind::kMultiRules) continue;
          int brokeRules = 0, blindRules = 0, judgedRules = 0;
          for (const auto& ruleName : r.rules) {
            auto it = j.verdict.find(ruleName);
            if (it == j.verdict.end()) continue;
            ++judgedRules;
            brokeRules += it->second == RuleVerdict::kBreaks ? 1 : 0;
            blindRules += it->second == RuleVerdict::kBlind ? 1 : 0;
          }
          if (judgedRules == 0) continue;
          int need = r.failWhen == 0 ? static_cast<int>(r.rules.size()) : r.failWhen;
          j.verdict[r.name] = brokeRules >= need                ? RuleVerdict::kBreaks
                              : brokeRules + blindRules >= need ? RuleVerdict::kBlind
                                                                : RuleVerdict::kHolds;
        }
      }
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
          for (auto& [runId, j] : f.byRun) any = any || j.verdict.count(r.name);
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
        int blindRuns = 0;
        for (auto& [runId, j] : f.byRun) {
          auto it = j.verdict.find(r.name);
          if (it == j.verdict.end()) continue;
          values.push_back(j.value);
          ++c.runs;
          c.failedRuns += it->second == RuleVerdict::kBreaks ? 1 : 0;
          blindRuns += it->second == RuleVerdict::kBlind ? 1 : 0;
        }
        if (c.runs == 0) continue;  // e.g. a floor rule where no bound is known
        c.measured = median(values);
        RuleLimit l;
        if (r.kind == RuleKind::kMultiRules) {
          c.expected = 0;
          c.threshold = 0;
        } else {
          l = limitOf(r, s, f.entry);
          c.expected = l.expected;
          c.threshold = l.threshold;
        }
        // Passed only when fewer than k runs would have broken it even if every run it could not judge had.
        c.passed = c.failedRuns + blindRuns < report.k;
        c.cannotJudge = !c.passed && c.failedRuns < report.k;
        auto poolIt = f.pools.find(r.name);
        const Pool* pool = poolIt == f.pools.end() ? nullptr : &poolIt->second;
        if (r.kind == RuleKind::kVariance) {
          c.spread = f.entry->spread;
          c.spreadUpper = spreadUpper(*f.entry);
          if (pool && pool->verdict != RuleVerdict::kBlind) {
            c.pooledRuns = pool->runs;
            c.measured = pool->mean;
            c.threshold = pool->bounds.limit;
          }
          if (c.cannotJudge)
            c.runsNeeded = runsToTell(r, f.entry->value, c.spreadUpper, f.entry->stdev, s.higherIsBetter);
        }
        const char* cmp = s.higherIsBetter ? ">=" : "<=";
        if (r.kind == RuleKind::kMultiRules) {
          c.text = fmt::format("{} {} {}: {} of [{}] broke in {} of {} run(s)", figureName(s),
                               num(c.measured), s.unit, r.failWhen == 0 ? "all" : std::to_string(r.failWhen),
                               fmt::join(r.rules, ", "), c.failedRuns, c.runs);
          if (blindRuns > 0)
            c.text += fmt::format(", and in {} more a rule of them could not tell the figure from noise{}",
                                  blindRuns, c.cannotJudge ? ": cannot judge" : "");
        } else if (r.kind == RuleKind::kVariance && c.cannotJudge) {
          c.text = fmt::format(
              "{} {} {}: cannot judge: {}; {} of {} run(s) could not be told apart, {} broke the limit",
              figureName(s), num(c.measured), s.unit,
              blindText(r, s, *f.entry, l, pool && pool->verdict == RuleVerdict::kBlind ? pool : nullptr,
                        c.runsNeeded),
              blindRuns, c.runs, c.failedRuns);
        } else if (r.kind == RuleKind::kVariance && c.pooledRuns > 0) {
          c.text = fmt::format(
              "{} {} {}, the mean of {} runs (one run alone could not be told from {}), expected {} {} {} "
              "({}); "
              "broke in {} of {} run(s)",
              figureName(s), num(c.measured), s.unit, c.pooledRuns, slowdownName(s.higherIsBetter), cmp,
              num(c.threshold), s.unit, poolHow(r, *f.entry, *pool), c.failedRuns, c.runs);
        } else if (r.kind == RuleKind::kValue) {
          std::string want = r.min && r.max ? fmt::format("{} to {}", num(*r.min), num(*r.max))
                             : r.min        ? fmt::format(">= {}", num(*r.min))
                                            : fmt::format("<= {}", num(*r.max));
          c.text = fmt::format("{} {} {}, expected {} {} ({}); broke in {} of {} run(s)", figureName(s),
                               num(c.measured), s.unit, want, s.unit, l.how, c.failedRuns, c.runs);
        } else {
          c.text = fmt::format("{} {} {}, expected {} {} {} ({}); broke in {} of {} run(s)", figureName(s),
                               num(c.measured), s.unit, cmp, num(c.threshold), s.unit, l.how, c.failedRuns,
                               c.runs);
          if (blindRuns > 0)
            c.text += fmt::format(" and could not be told from {} in {} more", slowdownName(s.higherIsBetter),
                                  blindRuns);
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
    std::vector<const CheckFinding*> failed, blind;
    for (const auto& c : hc.findings) {
      if (broke(c)) failed.push_back(&c);
      if (c.cannotJudge) blind.push_back(&c);
    }
    if (!failed.empty()) {
      hc.state = CheckState::kUnhealthy;
      hc.summary = fmt::format("ERROR: {}: {}", failed.front()->rule, failed.front()->text);
      if (failed.size() > 1) hc.summary += fmt::format(" (and {} more)", failed.size() - 1);
    } else if (!blind.empty()) {
      hc.state = CheckState::kCannotJudge;
      hc.summary = fmt::format("CANNOT JUDGE: {}: {}", blind.front()->rule, blind.front()->text);
      if (blind.size() > 1) hc.summary += fmt::format(" (and {} more)", blind.size() - 1);
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
      case CheckState::kCannotJudge:
        return 2;
      case CheckState::kNoBaseline:
        return 3;
      case CheckState::kHealthy:
        return 4;
    }
    return 5;
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
    out += fmt::format("{:<{}}  {:<12}  {}\n", h->host, width, checkStateName(h->state), h->summary);
  }
  out +=
      fmt::format("# {} healthy, {} unhealthy, {} no result, {} no baseline, {} cannot judge\n",
                  counts[CheckState::kHealthy], counts[CheckState::kUnhealthy], counts[CheckState::kNoResult],
                  counts[CheckState::kNoBaseline], counts[CheckState::kCannotJudge]);
  return out;
}

}  // namespace ds::report
