#include "reports/compare/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "engine/common/error.h"
#include "reports/json_io.h"
#include "reports/stats.h"

namespace ds::report {

const char* verdictName(Verdict v) {
  switch (v) {
    case Verdict::kUnchanged:
      return "unchanged";
    case Verdict::kNoise:
      return "noise";
    case Verdict::kImproved:
      return "improved";
    case Verdict::kRegressed:
      return "regressed";
    case Verdict::kInconclusive:
      return "inconclusive";
  }
  return "?";
}

std::string ComparedItem::label() const {
  if (!config.empty()) return config;
  std::string s = fmt::format("{} {} {}", collective, backend, dtype);
  if (op != "none" && !op.empty()) s += " " + op;
  if (root >= 0) s += fmt::format(" root={}", root);
  return s + fmt::format(" {} B {}", bytes, place);
}

int CompareResult::exitCode() const {
  if (!comparable || items.empty()) return 2;
  if (regressions > 0 || overall == Verdict::kRegressed) return 1;
  if (inconclusive > 0 || overall == Verdict::kInconclusive) return kCompareExitInconclusive;
  return 0;
}

int runsNeeded(double alpha) {
  int n = 1;
  while (n < 50 && minUTestP(n, n) > alpha) ++n;
  return n + 1;
}

namespace {

std::string joinList(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "(none)" : s;
}

// A robust standard deviation in percent of the median: 1.4826 x MAD / median; -1 for < 2 samples.
double robustSdPct(const std::vector<double>& v) {
  if (v.size() < 2) return -1;
  const double m = median(v);
  if (!(m > 0)) return -1;
  std::vector<double> dev;
  for (double x : v) dev.push_back(std::fabs(x - m));
  return 100.0 * 1.4826 * median(dev) / m;
}

// One side of an item: one sample per run that has it: its times (what the test ranks) and its metric
// values (what the change is reported in), sample for sample, with the run each came from.
struct Side {
  std::vector<double> times, metric;
  std::vector<int> runs;
  int repeats = 0;
  // One run's sample: the median of its repeats (time and metric alike), or its one value.
  void addRun(int run, const std::vector<double>& t, const std::vector<double>& m) {
    times.push_back(median(t));
    metric.push_back(median(m));
    runs.push_back(run);
    repeats += static_cast<int>(t.size());
  }
};

std::string runsText(int n) { return fmt::format("{} run{}", n, n == 1 ? "" : "s"); }

// Why too few runs cannot give a verdict, and what to do.
std::string tooFewRuns(int ca, int cb, const CompareOptions& o) {
  return fmt::format(
      "{} vs {} cannot tell it from run-to-run noise (the U test cannot reach p <= {:g} with so few); "
      "compare {} runs a side (separate dsbench runs: repeats inside one run do not see what moves "
      "between runs)",
      runsText(ca), runsText(cb), o.alpha, runsNeeded(o.alpha));
}

// Fills an item's figures from both sides and takes the decisions that need no other item: within
// the threshold, or too few samples to ever be significant. The rest waits for the false-discovery
// step over all items (settle()).
void measureItem(ComparedItem& it, const Side& a, const Side& b, const CompareOptions& o) {
  it.baseSamples = a.times;
  it.curSamples = b.times;
  it.baseRuns = a.runs;
  it.curRuns = b.runs;
  it.baseRepeats = a.repeats;
  it.curRepeats = b.repeats;
  it.baseTime = median(a.times);
  it.curTime = median(b.times);
  it.base = median(a.metric);
  it.cur = median(b.metric);
  double change = it.base != 0 ? (it.cur - it.base) / it.base * 100.0 : 0.0;
  it.changePct = it.higherIsBetter ? change : -change;
  const double na = robustSdPct(a.times), nb = robustSdPct(b.times);
  it.noiseKnown = na >= 0 && nb >= 0;
  it.noisePct = it.noiseKnown ? std::sqrt(na * na + nb * nb) : 0;
  const int ca = static_cast<int>(a.times.size()), cb = static_cast<int>(b.times.size());
  it.minP = minUTestP(ca, cb);
  it.p = mannWhitneyU(a.times, b.times).p;
  if (std::fabs(it.changePct) <= o.thresholdPct) {
    it.verdict = Verdict::kUnchanged;
    it.reason = fmt::format("{:+.1f}% is within the {:g}% threshold", it.changePct, o.thresholdPct);
  } else if (it.minP > o.alpha) {
    it.verdict = Verdict::kInconclusive;
    it.reason = fmt::format("{:+.1f}% is beyond the {:g}% threshold, but {}", it.changePct, o.thresholdPct,
                            tooFewRuns(ca, cb, o));
  } else {
    it.verdict = Verdict::kNoise;  // provisional: settle() decides
  }
}

// The whole run's figures: each run summarised by the geometric mean, over the items it has, of its
// time over the baseline side's median time for the item; the change from the two sides' medians of
// these, its bootstrap interval over the runs, and the U test of the summaries. settle() gives the verdict.
void measureOverall(CompareResult& r) {
  const CompareOptions& o = r.options;
  std::vector<double> sumB(static_cast<std::size_t>(r.baseRunCount), 0.0),
      sumC(static_cast<std::size_t>(r.curRunCount), 0.0);
  std::vector<int> nB(sumB.size(), 0), nC(sumC.size(), 0);
  for (const auto& it : r.items) {
    if (!(it.baseTime > 0)) continue;
    auto add = [&](const std::vector<double>& v, const std::vector<int>& runs, std::vector<double>& sum,
                   std::vector<int>& n) {
      for (std::size_t i = 0; i < v.size() && i < runs.size(); ++i) {
        if (!(v[i] > 0) || runs[i] < 0 || runs[i] >= static_cast<int>(sum.size())) continue;
        sum[runs[i]] += std::log(v[i] / it.baseTime);
        ++n[runs[i]];
      }
    };
    add(it.baseSamples, it.baseRuns, sumB, nB);
    add(it.curSamples, it.curRuns, sumC, nC);
  }
  SamplePair runs;
  for (std::size_t j = 0; j < sumB.size(); ++j) {
    if (nB[j] > 0) runs.base.push_back(std::exp(sumB[j] / nB[j]));
  }
  for (std::size_t j = 0; j < sumC.size(); ++j) {
    if (nC[j] > 0) runs.cur.push_back(std::exp(sumC[j] / nC[j]));
  }
  const int nb = static_cast<int>(runs.base.size()), nc = static_cast<int>(runs.cur.size());
  const bool interval = nb >= 2 && nc >= 2;
  RatioInterval ci = bootstrapGeomeanRatio({runs}, interval ? o.bootstrapResamples : 0, 0.95, o.seed);
  if (ci.items == 0) return;
  // A time ratio g is a metric change of 1/g - 1 (+ better), for bandwidth and time alike.
  auto pct = [](double g) { return (1.0 / g - 1.0) * 100.0; };
  r.overallChangePct = pct(ci.ratio);
  r.overallLoPct = pct(ci.hi);
  r.overallHiPct = pct(ci.lo);
  r.overallIntervalKnown = interval;
  r.overallMinP = minUTestP(nb, nc);
  r.overallP = mannWhitneyU(runs.base, runs.cur).p;
}

// Benjamini-Hochberg at alpha over every item whose runs can reach significance: the largest p-value
// that still counts as a discovery (-1: none). Items beyond the threshold with p at or below it are
// regressions or improvements; the others stay noise. The whole run is one test of its own, at alpha:
// it answers a different question (did the run as a whole move?) and it is the one test that sees
// a small slowdown of every size, which each size's test alone cannot tell from noise. Inside the
// items' family its p had to beat alpha / (items + 1) unless several sizes were significant too, and
// 5 runs a side never reach that (2/252 = 0.008 at best): scripts/verdict-calibration.sh measured
// the cost (README, "Calibrating the gate").
void settle(CompareResult& r) {
  const CompareOptions& o = r.options;
  std::vector<double> ps;
  for (const auto& it : r.items) {
    if (it.minP <= o.alpha) ps.push_back(it.p);
  }
  const bool overallTestable = !r.items.empty() && r.overallMinP <= o.alpha;
  std::sort(ps.begin(), ps.end());
  double cutoff = -1;
  const auto m = static_cast<double>(ps.size());
  for (std::size_t k = 0; k < ps.size(); ++k) {
    if (ps[k] <= o.alpha * static_cast<double>(k + 1) / m) cutoff = ps[k];
  }
  const std::string fdr = fmt::format("within the false-discovery rate {:g} over {} test(s)", o.alpha, ps.size());
  for (auto& it : r.items) {
    if (it.verdict != Verdict::kNoise) continue;
    const std::string n = fmt::format("{} vs {}", runsText(static_cast<int>(it.baseSamples.size())),
                                      runsText(static_cast<int>(it.curSamples.size())));
    if (cutoff >= 0 && it.p <= cutoff) {
      it.verdict = it.changePct < 0 ? Verdict::kRegressed : Verdict::kImproved;
      it.reason = fmt::format("{:+.1f}% is beyond the {:g}% threshold and significant: U test p = {:.2g} ({}), {}",
                              it.changePct, o.thresholdPct, it.p, n, fdr);
    } else {
      it.reason = fmt::format(
          "{:+.1f}% is beyond the {:g}% threshold, but not significant: U test p = {:.2g} ({}); the "
          "runs overlap too much to call it",
          it.changePct, o.thresholdPct, it.p, n);
    }
  }
  if (r.items.empty()) return;
  const double t = o.thresholdPct;
  const std::string change =
      r.overallIntervalKnown ? fmt::format("{:+.1f}% (95% interval {:+.1f}% .. {:+.1f}%)", r.overallChangePct,
                                           r.overallLoPct, r.overallHiPct)
                             : fmt::format("{:+.1f}%", r.overallChangePct);
  if (std::fabs(r.overallChangePct) <= t) {
    r.overall = Verdict::kUnchanged;
    r.overallReason = fmt::format("{} is within the {:g}% threshold", change, t);
  } else if (!overallTestable) {
    r.overall = Verdict::kInconclusive;
    r.overallReason = fmt::format("{} is beyond the {:g}% threshold, but {}", change, t,
                                  tooFewRuns(r.baseRunCount, r.curRunCount, o));
  } else if (r.overallP <= o.alpha) {
    r.overall = r.overallChangePct < 0 ? Verdict::kRegressed : Verdict::kImproved;
    r.overallReason = fmt::format("{} is beyond the {:g}% threshold and significant: U test of the runs' summaries "
                                  "p = {:.2g} <= {:g} ({} vs {})",
                                  change, t, r.overallP, o.alpha, runsText(r.baseRunCount),
                                  runsText(r.curRunCount));
  } else {
    r.overall = Verdict::kNoise;
    r.overallReason = fmt::format(
        "{} is beyond the {:g}% threshold, but not significant: U test of the runs' summaries p = {:.2g} > {:g} "
        "({} vs {}); the runs overlap too much to call it",
        change, t, r.overallP, o.alpha, runsText(r.baseRunCount), runsText(r.curRunCount));
  }
}

// ---- sweeps ----

using SweepKey =
    std::tuple<std::string, std::string, std::string, std::string, int, std::size_t, std::string>;

struct PlaceRef {
  const SweepMeasurement* m = nullptr;
  const PlaceResult* p = nullptr;
};

std::map<SweepKey, PlaceRef> indexSweep(const SweepRun& run, std::vector<SweepKey>* order) {
  std::map<SweepKey, PlaceRef> out;
  for (const auto& m : run.results) {
    for (auto [p, name] : {std::pair{&m.outOfPlace, "out-of-place"}, std::pair{&m.inPlace, "in-place"}}) {
      if (!p->measured) continue;
      SweepKey k{m.collective, m.backend, m.dtype, m.op, m.root, m.bytes, name};
      if (out.emplace(k, PlaceRef{&m, p}).second && order) order->push_back(k);
    }
  }
  return out;
}

// "allreduce gloo f32 sum" for a group of rows in the not-compared section.
std::string groupName(const SweepKey& k) {
  std::string s = fmt::format("{} {} {}", std::get<0>(k), std::get<1>(k), std::get<2>(k));
  if (std::get<3>(k) != "none") s += " " + std::get<3>(k);
  if (std::get<4>(k) >= 0) s += fmt::format(" root={}", std::get<4>(k));
  return s;
}

// Every run's rows of a side, indexed; `order` gets the keys in the first run's order, then new ones.
std::vector<std::map<SweepKey, PlaceRef>> indexSide(const std::vector<const SweepRun*>& runs,
                                                    std::vector<SweepKey>* order) {
  std::vector<std::map<SweepKey, PlaceRef>> out;
  std::set<SweepKey> seen;
  for (const SweepRun* run : runs) {
    std::vector<SweepKey> o;
    out.push_back(indexSweep(*run, &o));
    for (const auto& k : o) {
      if (order && seen.insert(k).second) order->push_back(k);
    }
  }
  return out;
}

// The samples of one side for a row: one per run that has it (see Side::addRun).
Side sweepSide(const std::vector<std::pair<int, const PlaceResult*>>& places, bool busbw) {
  Side s;
  for (const auto& [run, p] : places) {
    std::vector<double> t, m;
    if (p->repeats.empty()) {
      t.push_back(p->timeUs);
      m.push_back(busbw ? p->busBw : p->timeUs);
    }
    for (const auto& x : p->repeats) {
      t.push_back(x.timeUs);
      m.push_back(busbw ? x.busBw : x.timeUs);
    }
    s.addRun(run, t, m);
  }
  return s;
}

void compareSweeps(const std::vector<const SweepRun*>& a, const std::vector<const SweepRun*>& b,
                   CompareResult& r) {
  std::vector<SweepKey> order;
  auto ia = indexSide(a, &order);
  auto ib = indexSide(b, nullptr);
  auto collect = [](const std::vector<std::map<SweepKey, PlaceRef>>& side, const SweepKey& k) {
    std::vector<std::pair<int, const PlaceResult*>> out;
    for (std::size_t j = 0; j < side.size(); ++j) {
      auto it = side[j].find(k);
      if (it != side[j].end()) out.emplace_back(static_cast<int>(j), it->second.p);
    }
    return out;
  };
  auto wrongOf = [](const std::vector<std::pair<int, const PlaceResult*>>& v) {
    long long w = 0;
    for (const auto& [run, p] : v) w += std::max<long long>(p->wrong, 0);
    return w;
  };
  // Rows in only one side, grouped by (collective, backend, dtype, op, root) so that a missing
  // collective is one line, not one per size.
  std::map<std::string, int> onlyA, onlyB;
  std::set<SweepKey> inA;
  for (const auto& k : order) {
    inA.insert(k);
    auto x = collect(ia, k);
    auto y = collect(ib, k);
    if (y.empty()) {
      ++onlyA[groupName(k)];
      continue;
    }
    ComparedItem c;
    std::tie(c.collective, c.backend, c.dtype, c.op, c.root, c.bytes, c.place) = k;
    const long long wa = wrongOf(x), wb = wrongOf(y);
    if (wa > 0 || wb > 0) {
      r.notCompared.push_back(
          {c.label(), fmt::format("wrong data ({} wrong elements in the baseline, {} in the "
                                  "current run): its timing cannot be trusted",
                                  wa, wb)});
      continue;
    }
    bool busbw = true;
    for (const auto& [run, p] : x) busbw = busbw && p->busBw > 0;
    for (const auto& [run, p] : y) busbw = busbw && p->busBw > 0;
    c.metric = busbw ? "busbw" : "time";
    c.unit = busbw ? "GB/s" : "us";
    c.higherIsBetter = busbw;
    measureItem(c, sweepSide(x, busbw), sweepSide(y, busbw), r.options);
    r.items.push_back(std::move(c));
  }
  std::set<SweepKey> counted;
  for (const auto& side : ib) {
    for (const auto& [k, ref] : side) {
      if (!inA.count(k) && counted.insert(k).second) ++onlyB[groupName(k)];
    }
  }
  for (const auto& [name, n] : onlyA)
    r.notCompared.push_back({fmt::format("{} ({} row(s))", name, n), "only in the baseline"});
  for (const auto& [name, n] : onlyB)
    r.notCompared.push_back({fmt::format("{} ({} row(s))", name, n), "only in the current run"});
}

// ---- train ----

std::string trainConfig(const TrainRunRecord& t) {
  // f32 (every file before --dtype) keeps the key it always had; a bf16 run is another configuration.
  return fmt::format("{} ws={} {} batch={} cap={:g}MB overlap={} hook={} {}{}{}", t.model, t.worldSize,
                     t.backend, t.perRankBatch, t.bucketCapMb, t.overlap ? "on" : "off", t.commHook,
                     t.optimizer, t.gradientAsBucketView ? " grad-as-bucket-view" : "",
                     t.dtype == "f32" ? "" : " dtype=" + t.dtype);
}

// The samples of one side for a configuration: one per run that has it, the median of its repeats'
// median step times or its one.
Side trainSide(const std::vector<std::pair<int, const TrainRunRecord*>>& recs) {
  Side s;
  for (const auto& [run, t] : recs) {
    std::vector<double> v;
    if (t->repeats.empty()) v.push_back(t->stepMs.p50);
    for (const auto& x : t->repeats) v.push_back(x.stepMs.p50);
    s.addRun(run, v, v);
  }
  return s;
}

void compareTrain(const std::vector<const std::vector<TrainRunRecord>*>& a,
                  const std::vector<const std::vector<TrainRunRecord>*>& b, CompareResult& r) {
  // Per configuration, the first record of it in each run.
  auto index = [](const std::vector<const std::vector<TrainRunRecord>*>& side,
                  std::vector<std::string>* order) {
    std::map<std::string, std::vector<std::pair<int, const TrainRunRecord*>>> out;
    for (std::size_t j = 0; j < side.size(); ++j) {
      std::set<std::string> inRun;
      for (const auto& t : *side[j]) {
        std::string key = trainConfig(t);
        if (!inRun.insert(key).second) continue;
        auto& v = out[key];
        if (v.empty() && order) order->push_back(key);
        v.emplace_back(static_cast<int>(j), &t);
      }
    }
    return out;
  };
  std::vector<std::string> order;
  auto ia = index(a, &order);
  auto ib = index(b, nullptr);
  for (const auto& key : order) {
    auto it = ib.find(key);
    if (it == ib.end()) {
      r.notCompared.push_back({key, "only in the baseline"});
      continue;
    }
    ComparedItem c;
    c.config = key;
    c.backend = ia.at(key).front().second->backend;
    c.metric = "step";
    c.unit = "ms";
    c.higherIsBetter = false;
    measureItem(c, trainSide(ia.at(key)), trainSide(it->second), r.options);
    r.items.push_back(std::move(c));
  }
  for (const auto& [key, t] : ib) {
    if (!ia.count(key)) r.notCompared.push_back({key, "only in the current run"});
  }
}

RunBrief brief(const RunFile& f) {
  RunBrief b;
  b.path = f.path;
  b.paths = {f.path};
  b.label = f.label;
  b.runId = f.runId;
  b.kind = runKindName(f.kind);
  if (f.sweep) {
    b.worldSize = f.sweep->metadata.worldSize;
    b.hosts = f.sweep->metadata.hosts;
    b.startTime = f.sweep->metadata.startTime;
    b.source = f.sweep->metadata.source;
    std::set<std::string> bk;
    for (const auto& m : f.sweep->results) {
      if (bk.insert(m.backend).second) b.backends.push_back(m.backend);
      if (b.worldSize == 0) b.worldSize = m.worldSize;
    }
  } else if (f.train) {
    const auto& md = f.trainMetadata;
    if (md.is_object()) {
      b.worldSize = readIntOr(md, "world_size", 0);
      if (md.contains("hosts") && md["hosts"].is_array()) {
        for (const auto& h : md["hosts"]) {
          if (h.is_string() &&
              std::find(b.hosts.begin(), b.hosts.end(), h.get<std::string>()) == b.hosts.end())
            b.hosts.push_back(h.get<std::string>());
        }
      }
      b.startTime = textOr(md, "start_time", "");
    }
    std::set<std::string> bk;
    for (const auto& t : *f.train) {
      if (bk.insert(t.backend).second) b.backends.push_back(t.backend);
      b.worldSize = std::max(b.worldSize, t.worldSize);
    }
  }
  return b;
}

// A side of several runs: the first run's brief, with every path, the union of hosts and backends,
// and a note (in `notes`) for each later run whose kind, world size or hosts differ from the first.
RunBrief sideBrief(const std::vector<RunFile>& runs, const char* role, std::vector<std::string>& notes,
                   bool& comparable) {
  RunBrief b = brief(runs.front());
  for (std::size_t i = 1; i < runs.size(); ++i) {
    RunBrief x = brief(runs[i]);
    b.paths.push_back(x.path);
    if (x.kind != b.kind || x.worldSize != b.worldSize) {
      comparable = false;
      notes.push_back(
          fmt::format("The {} runs are not alike: {} is a {} result of {} rank(s), {} a {} result of {} "
                      "rank(s). The runs "
                      "of one side must repeat the same measurement.",
                      role, b.path, b.kind, b.worldSize, x.path, x.kind, x.worldSize));
    }
    for (const auto& h : x.hosts) {
      if (std::find(b.hosts.begin(), b.hosts.end(), h) == b.hosts.end()) b.hosts.push_back(h);
    }
    for (const auto& k : x.backends) {
      if (std::find(b.backends.begin(), b.backends.end(), k) == b.backends.end()) b.backends.push_back(k);
    }
  }
  return b;
}

}  // namespace

CompareResult compareRuns(const RunFile& base, const RunFile& cur, const CompareOptions& options) {
  return compareRuns(std::vector<RunFile>{base}, std::vector<RunFile>{cur}, options);
}

CompareResult compareRuns(const std::vector<RunFile>& base, const std::vector<RunFile>& cur,
                          const CompareOptions& options) {
  if (base.empty() || cur.empty()) {
    throw ConfigError(
        "dsreport compare needs at least one baseline run and one current run (BASE... -- CURRENT...).");
  }
  for (const auto* side : {&base, &cur}) {
    for (const RunFile& f : *side) {
      if (f.kind != RunKind::kSweep && f.kind != RunKind::kTrain) {
        throw ConfigError(fmt::format(
            "{} is a dsperf {} result; compare reads dsbench coll (sweep) and dsbench train results. Use "
            "dsreport html to view it.",
            f.path, runKindName(f.kind)));
      }
    }
  }
  CompareResult r;
  r.options = options;
  r.base = sideBrief(base, "baseline", r.mismatches, r.comparable);
  r.cur = sideBrief(cur, "current", r.mismatches, r.comparable);
  if (!r.comparable) return r;
  if (r.base.kind != r.cur.kind) {
    r.comparable = false;
    r.mismatches.push_back(
        fmt::format("The baseline is a {} result and the current run a {} result; only runs "
                    "of the same kind can be compared.",
                    r.base.kind, r.cur.kind));
    return r;
  }
  if (r.base.worldSize != r.cur.worldSize) {
    r.comparable = false;
    r.mismatches.push_back(fmt::format(
        "World size differs: {} rank(s) in the baseline, {} in the current run. Bus bandwidth and step time "
        "depend on the world size; compare runs of the same size.",
        r.base.worldSize, r.cur.worldSize));
  }
  std::vector<std::string> ha = r.base.hosts, hb = r.cur.hosts;
  std::sort(ha.begin(), ha.end());
  std::sort(hb.begin(), hb.end());
  if (ha.empty() != hb.empty()) {
    // A journal of a train run or a bare import does not record hosts: say so, do not block.
    r.mismatches.push_back(fmt::format("The {} does not record its hosts; compared without checking them.",
                                       ha.empty() ? "baseline" : "current run"));
  } else if (ha != hb) {
    std::string text = fmt::format("Hosts differ: baseline ran on {}, current on {}.", joinList(r.base.hosts),
                                   joinList(r.cur.hosts));
    if (options.ignoreHosts) {
      r.mismatches.push_back(text + " Compared anyway (--ignore-hosts).");
    } else {
      r.comparable = false;
      r.mismatches.push_back(text +
                             " Different machines are not the same system; pass --ignore-hosts to compare "
                             "them anyway (e.g. nightly runs that land on different nodes).");
    }
  }
  if (r.base.backends != r.cur.backends) {
    r.mismatches.push_back(
        fmt::format("Backends differ: baseline {}, current {}; only rows of a backend "
                    "present in both are compared.",
                    joinList(r.base.backends), joinList(r.cur.backends)));
  }
  if (r.base.label != r.cur.label) {
    r.mismatches.push_back(
        fmt::format("Labels differ: baseline '{}', current '{}'.", r.base.label, r.cur.label));
  }
  if (!r.comparable) return r;
  r.baseRunCount = static_cast<int>(base.size());
  r.curRunCount = static_cast<int>(cur.size());
  if (base.front().sweep) {
    std::vector<const SweepRun*> a, b;
    for (const auto& f : base) a.push_back(&*f.sweep);
    for (const auto& f : cur) b.push_back(&*f.sweep);
    compareSweeps(a, b, r);
  } else {
    std::vector<const std::vector<TrainRunRecord>*> a, b;
    for (const auto& f : base) a.push_back(&*f.train);
    for (const auto& f : cur) b.push_back(&*f.train);
    compareTrain(a, b, r);
  }
  measureOverall(r);
  settle(r);
  for (const auto& it : r.items) {
    switch (it.verdict) {
      case Verdict::kRegressed:
        ++r.regressions;
        break;
      case Verdict::kImproved:
        ++r.improvements;
        break;
      case Verdict::kUnchanged:
        ++r.unchanged;
        break;
      case Verdict::kNoise:
        ++r.noisy;
        break;
      case Verdict::kInconclusive:
        ++r.inconclusive;
        break;
    }
  }
  if (r.items.empty()) {
    r.mismatches.push_back(
        "No row of one run matches a row of the other (collective, backend, dtype, op, "
        "size and place for sweeps; the configuration for train runs).");
  }
  return r;
}

namespace {

std::string fmtValue(double v) {
  if (v != 0 && std::fabs(v) < 0.01) return fmt::format("{:.3g}", v);
  return fmt::format("{:.2f}", v);
}

std::string runLine(const char* role, const RunBrief& b) {
  std::string paths =
      b.paths.size() > 1 ? fmt::format("{} runs: {}", b.paths.size(), joinList(b.paths)) : b.path;
  std::string s =
      fmt::format("{:<9} {}  ({}, {} rank(s), hosts {}", role, paths, b.kind, b.worldSize, joinList(b.hosts));
  if (!b.label.empty()) s += ", label " + b.label;
  if (!b.startTime.empty()) s += ", " + b.startTime;
  if (!b.source.empty()) s += ", " + b.source;
  return s + fmt::format(", run {})\n", b.runId);
}

std::string samplesText(const ComparedItem& it) {
  return fmt::format("{}/{}", it.baseSamples.size(), it.curSamples.size());
}

}  // namespace

std::string formatCompareText(const CompareResult& r) {
  std::string out;
  out += runLine("baseline", r.base);
  out += runLine("current", r.cur);
  out += fmt::format(
      "threshold {:g}%, alpha {:g}: a change beyond the threshold counts when a Mann-Whitney U test of the "
      "two sides' runs finds it (one sample per run, the median of its repeats; false-discovery rate alpha "
      "over the items, and the whole run's own test at alpha); {} vs {}\n",
      r.options.thresholdPct, r.options.alpha, runsText(r.baseRunCount), runsText(r.curRunCount));
  if (!r.mismatches.empty()) {
    out += "\nRuns differ:\n";
    for (const auto& m : r.mismatches) out += "  - " + m + "\n";
  }
  auto table = [&](Verdict v, const char* title) {
    std::vector<const ComparedItem*> rows;
    for (const auto& it : r.items) {
      if (it.verdict == v) rows.push_back(&it);
    }
    if (rows.empty()) return;
    // Worst change first (best first for improvements).
    std::stable_sort(rows.begin(), rows.end(), [&](const ComparedItem* x, const ComparedItem* y) {
      return v == Verdict::kImproved ? x->changePct > y->changePct : x->changePct < y->changePct;
    });
    std::size_t w = 4;
    for (const auto* it : rows) w = std::max(w, it->label().size());
    out += fmt::format("\n{} ({}):\n", title, rows.size());
    out += fmt::format("  {:<{}}  {:>6}  {:>12}  {:>12}  {:>8}  {:>8}  {:>7}  {:>7}\n", "item", w, "metric",
                       "baseline", "current", "change", "noise", "runs b/c", "p");
    for (const auto* it : rows) {
      std::string noise = it->noiseKnown ? fmt::format("±{:.1f}%", it->noisePct) : std::string("unknown");
      out += fmt::format("  {:<{}}  {:>6}  {:>12}  {:>12}  {:>+7.1f}%  {:>8}  {:>7}  {:>7.2g}\n", it->label(),
                         w, it->metric, fmtValue(it->base) + " " + it->unit,
                         fmtValue(it->cur) + " " + it->unit, it->changePct, noise, samplesText(*it), it->p);
    }
  };
  table(Verdict::kRegressed, "Regressions");
  table(Verdict::kImproved, "Improvements");
  table(Verdict::kInconclusive, "Inconclusive (too few runs to call)");
  if (!r.items.empty()) {
    out += fmt::format(
        "\nUnchanged: {} item(s) within the {:g}% threshold; {} beyond it but not significant (run-to-run "
        "noise).\n",
        r.unchanged, r.options.thresholdPct, r.noisy);
    out += fmt::format("Overall ({} item(s), geometric mean): {}: {}.\n", r.items.size(),
                       verdictName(r.overall), r.overallReason);
  }
  if (!r.notCompared.empty()) {
    out += fmt::format("\nNot compared ({}):\n", r.notCompared.size());
    for (const auto& n : r.notCompared) out += fmt::format("  - {}: {}\n", n.what, n.reason);
  }
  out += "\n";
  switch (r.exitCode()) {
    case 0:
      out += fmt::format("Verdict: no regression ({} item(s) compared, {} improved).\n", r.items.size(),
                         r.improvements);
      break;
    case 1:
      out += r.regressions > 0 ? fmt::format("Verdict: REGRESSION in {} of {} item(s) compared.\n",
                                             r.regressions, r.items.size())
                               : fmt::format("Verdict: REGRESSION of the whole run ({}).\n", r.overallReason);
      break;
    case kCompareExitInconclusive:
      out += fmt::format(
          "Verdict: INCONCLUSIVE (exit {}): no regression shown, but {} changed beyond the {:g}% threshold "
          "and {} vs {} cannot tell that from run-to-run noise; compare {} runs a side (separate dsbench "
          "runs; --repeat inside one run does not see what moves between runs).\n",
          kCompareExitInconclusive,
          r.inconclusive > 0 ? fmt::format("{} item(s)", r.inconclusive) : std::string("the whole run"),
          r.options.thresholdPct, runsText(r.baseRunCount), runsText(r.curRunCount), runsNeeded(r.options.alpha));
      break;
    default:
      out += "Verdict: nothing could be compared; see above why.\n";
      break;
  }
  return out;
}

nlohmann::json compareToJson(const CompareResult& r) {
  auto briefJson = [](const RunBrief& b) {
    return nlohmann::json{
        {"path", b.path},   {"paths", b.paths},          {"label", b.label},   {"run_id", b.runId},
        {"kind", b.kind},   {"start_time", b.startTime}, {"source", b.source}, {"world_size", b.worldSize},
        {"hosts", b.hosts}, {"backends", b.backends}};
  };
  nlohmann::json items = nlohmann::json::array();
  for (const auto& it : r.items) {
    nlohmann::json j{{"item", it.label()},
                     {"metric", it.metric},
                     {"unit", it.unit},
                     {"higher_is_better", it.higherIsBetter},
                     {"base", it.base},
                     {"cur", it.cur},
                     {"change_pct", it.changePct},
                     {"base_time", it.baseTime},
                     {"cur_time", it.curTime},
                     {"base_samples", it.baseSamples},
                     {"cur_samples", it.curSamples},
                     {"base_repeats", it.baseRepeats},
                     {"cur_repeats", it.curRepeats},
                     {"noise_pct", it.noiseKnown ? nlohmann::json(it.noisePct) : nlohmann::json(nullptr)},
                     {"p_value", it.p},
                     {"verdict", verdictName(it.verdict)},
                     {"reason", it.reason}};
    if (it.config.empty()) {
      j["collective"] = it.collective;
      j["backend"] = it.backend;
      j["dtype"] = it.dtype;
      j["op"] = it.op;
      j["root"] = it.root;
      j["size"] = it.bytes;
      j["place"] = it.place;
    } else {
      j["config"] = it.config;
    }
    items.push_back(std::move(j));
  }
  nlohmann::json nc = nlohmann::json::array();
  for (const auto& n : r.notCompared) nc.push_back({{"what", n.what}, {"reason", n.reason}});
  nlohmann::json overall{{"verdict", verdictName(r.overall)},
                         {"change_pct", r.overallChangePct},
                         {"reason", r.overallReason},
                         {"p_value", r.overallP},
                         {"base_runs", r.baseRunCount},
                         {"cur_runs", r.curRunCount}};
  if (r.overallIntervalKnown) overall["interval_pct"] = {r.overallLoPct, r.overallHiPct};
  return {{"schema", "dsperf.compare"},
          {"schema_version", kSchemaVersion},
          {"threshold_pct", r.options.thresholdPct},
          {"alpha", r.options.alpha},
          {"baseline", briefJson(r.base)},
          {"current", briefJson(r.cur)},
          {"mismatches", r.mismatches},
          {"comparable", r.comparable},
          {"items", items},
          {"overall", overall},
          {"not_compared", nc},
          {"counts",
           {{"regressed", r.regressions},
            {"improved", r.improvements},
            {"unchanged", r.unchanged},
            {"noise", r.noisy},
            {"inconclusive", r.inconclusive}}},
          {"exit_code", r.exitCode()}};
}

}  // namespace ds::report
