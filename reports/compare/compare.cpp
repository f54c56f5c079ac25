#include "reports/compare/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "engine/common/error.h"
#include "reports/json_io.h"

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
  return regressions > 0 ? 1 : 0;
}

namespace {

std::string joinList(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "(none)" : s;
}

// The time estimate and its standard error from per-iteration statistics; se < 0 when unknown.
struct TimeEstimate {
  double t = 0;
  double se = -1;
};

// Decides one item: metric values and times already filled.
void decide(ComparedItem& it, const TimeEstimate& a, const TimeEstimate& b, const CompareOptions& o) {
  it.baseTime = a.t;
  it.curTime = b.t;
  double change = it.base != 0 ? (it.cur - it.base) / it.base * 100.0 : 0.0;
  it.changePct = it.higherIsBetter ? change : -change;
  it.noiseKnown = a.se >= 0 && b.se >= 0;
  it.noise = it.noiseKnown ? o.noiseK * std::sqrt(a.se * a.se + b.se * b.se) : 0;
  const double diff = std::fabs(b.t - a.t);
  const std::string tunit = it.metric == "step" ? "ms" : "us";
  if (std::fabs(it.changePct) <= o.thresholdPct) {
    it.verdict = Verdict::kUnchanged;
    it.reason = fmt::format("{:+.1f}% is within the {:g}% threshold", it.changePct, o.thresholdPct);
    return;
  }
  if (it.noiseKnown && diff <= it.noise) {
    it.verdict = Verdict::kNoise;
    it.reason = fmt::format(
        "{:+.1f}% is beyond the {:g}% threshold, but the time difference {:.3g} {} is within what the runs' "
        "per-iteration spread explains ({:g} x combined standard error = {:.3g} {})",
        it.changePct, o.thresholdPct, diff, tunit, o.noiseK, it.noise, tunit);
    return;
  }
  it.verdict = it.changePct < 0 ? Verdict::kRegressed : Verdict::kImproved;
  if (it.noiseKnown) {
    it.reason = fmt::format(
        "{:+.1f}% is beyond the {:g}% threshold and the time difference {:.3g} {} exceeds "
        "the noise bound {:.3g} {}",
        it.changePct, o.thresholdPct, diff, tunit, it.noise, tunit);
  } else {
    it.reason = fmt::format(
        "{:+.1f}% is beyond the {:g}% threshold (no per-iteration statistics in a run, so the threshold "
        "alone decides)",
        it.changePct, o.thresholdPct);
  }
}

// ---- sweeps ----

using SweepKey =
    std::tuple<std::string, std::string, std::string, std::string, int, std::size_t, std::string>;

struct PlaceRef {
  const SweepMeasurement* m = nullptr;
  const PlaceResult* p = nullptr;
  std::string place;
};

std::map<SweepKey, PlaceRef> indexSweep(const SweepRun& run, std::vector<SweepKey>* order) {
  std::map<SweepKey, PlaceRef> out;
  for (const auto& m : run.results) {
    for (auto [p, name] : {std::pair{&m.outOfPlace, "out-of-place"}, std::pair{&m.inPlace, "in-place"}}) {
      if (!p->measured) continue;
      SweepKey k{m.collective, m.backend, m.dtype, m.op, m.root, m.bytes, name};
      if (out.emplace(k, PlaceRef{&m, p, name}).second && order) order->push_back(k);
    }
  }
  return out;
}

// The time per op (what busbw comes from) with a standard error from the per-iteration spread, taken
// as a relative figure: se = time * cv / sqrt(n). The per-iteration times and the time per op (the
// whole timed loop / iterations) are not always on the same scale (without -z the loop also waits for
// completions), so the relative spread is what carries over.
TimeEstimate sweepEstimate(const PlaceResult& p) {
  TimeEstimate e;
  e.t = p.timeUs;
  if (p.iter.n >= 2 && p.iter.avgUs > 0 && p.iter.stdevUs >= 0) {
    e.se = p.timeUs * (p.iter.stdevUs / p.iter.avgUs) / std::sqrt(static_cast<double>(p.iter.n));
  }
  return e;
}

// "allreduce gloo f32 sum" for a group of rows in the not-compared section.
std::string groupName(const SweepKey& k) {
  std::string s = fmt::format("{} {} {}", std::get<0>(k), std::get<1>(k), std::get<2>(k));
  if (std::get<3>(k) != "none") s += " " + std::get<3>(k);
  if (std::get<4>(k) >= 0) s += fmt::format(" root={}", std::get<4>(k));
  return s;
}

void compareSweeps(const SweepRun& a, const SweepRun& b, CompareResult& r) {
  std::vector<SweepKey> order;
  auto ia = indexSweep(a, &order);
  auto ib = indexSweep(b, nullptr);
  // Rows in only one run, grouped by (collective, backend, dtype, op, root) so that a missing
  // collective is one line, not one per size.
  std::map<std::string, std::pair<int, std::string>> onlyA, onlyB;
  for (const auto& k : order) {
    auto it = ib.find(k);
    const PlaceRef& x = ia.at(k);
    if (it == ib.end()) {
      auto& g = onlyA[groupName(k)];
      ++g.first;
      continue;
    }
    const PlaceRef& y = it->second;
    ComparedItem c;
    std::tie(c.collective, c.backend, c.dtype, c.op, c.root, c.bytes, c.place) = k;
    if (x.p->wrong > 0 || y.p->wrong > 0) {
      r.notCompared.push_back(
          {c.label(), fmt::format("wrong data ({} wrong elements in the baseline, {} in the "
                                  "current run): its timing cannot be trusted",
                                  std::max<long long>(x.p->wrong, 0), std::max<long long>(y.p->wrong, 0))});
      continue;
    }
    if (x.p->busBw > 0 && y.p->busBw > 0) {
      c.metric = "busbw";
      c.unit = "GB/s";
      c.higherIsBetter = true;
      c.base = x.p->busBw;
      c.cur = y.p->busBw;
    } else {
      c.metric = "time";
      c.unit = "us";
      c.higherIsBetter = false;
      c.base = x.p->timeUs;
      c.cur = y.p->timeUs;
    }
    decide(c, sweepEstimate(*x.p), sweepEstimate(*y.p), r.options);
    r.items.push_back(std::move(c));
  }
  for (const auto& [k, y] : ib) {
    if (!ia.count(k)) ++onlyB[groupName(k)].first;
  }
  for (const auto& [name, g] : onlyA)
    r.notCompared.push_back({fmt::format("{} ({} row(s))", name, g.first), "only in the baseline"});
  for (const auto& [name, g] : onlyB)
    r.notCompared.push_back({fmt::format("{} ({} row(s))", name, g.first), "only in the current run"});
}

// ---- train ----

std::string trainConfig(const TrainRunRecord& t) {
  return fmt::format("{} ws={} {} batch={} cap={:g}MB overlap={} hook={} {}{}", t.model, t.worldSize,
                     t.backend, t.perRankBatch, t.bucketCapMb, t.overlap ? "on" : "off", t.commHook,
                     t.optimizer, t.gradientAsBucketView ? " grad-as-bucket-view" : "");
}

TimeEstimate trainEstimate(const TrainRunRecord& t) {
  TimeEstimate e;
  e.t = t.stepMs.p50;
  int n = t.steps > 0 ? t.steps : static_cast<int>(t.stepMs.samples);
  if (n >= 2 && t.stepMs.p90 >= t.stepMs.p50) {
    double sd = (t.stepMs.p90 - t.stepMs.p50) / 1.2816;      // p90 of a normal is mean + 1.2816 sd
    e.se = 1.2533 * sd / std::sqrt(static_cast<double>(n));  // standard error of a median
  }
  return e;
}

void compareTrain(const std::vector<TrainRunRecord>& a, const std::vector<TrainRunRecord>& b,
                  CompareResult& r) {
  std::map<std::string, const TrainRunRecord*> ib;
  for (const auto& t : b) ib.emplace(trainConfig(t), &t);
  std::set<std::string> seen;
  for (const auto& x : a) {
    std::string key = trainConfig(x);
    if (!seen.insert(key).second) continue;
    auto it = ib.find(key);
    if (it == ib.end()) {
      r.notCompared.push_back({key, "only in the baseline"});
      continue;
    }
    ComparedItem c;
    c.config = key;
    c.backend = x.backend;
    c.metric = "step";
    c.unit = "ms";
    c.higherIsBetter = false;
    c.base = x.stepMs.p50;
    c.cur = it->second->stepMs.p50;
    decide(c, trainEstimate(x), trainEstimate(*it->second), r.options);
    r.items.push_back(std::move(c));
  }
  for (const auto& [key, t] : ib) {
    if (!seen.count(key)) r.notCompared.push_back({key, "only in the current run"});
  }
}

RunBrief brief(const RunFile& f) {
  RunBrief b;
  b.path = f.path;
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

}  // namespace

CompareResult compareRuns(const RunFile& base, const RunFile& cur, const CompareOptions& options) {
  for (const RunFile* f : {&base, &cur}) {
    if (f->kind != RunKind::kSweep && f->kind != RunKind::kTrain) {
      throw ConfigError(fmt::format(
          "{} is a dsperf {} result; compare reads dsbench coll (sweep) and dsbench train results. Use "
          "dsreport html to view it.",
          f->path, runKindName(f->kind)));
    }
  }
  CompareResult r;
  r.options = options;
  r.base = brief(base);
  r.cur = brief(cur);
  if (base.kind != cur.kind) {
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
  if (base.sweep) {
    compareSweeps(*base.sweep, *cur.sweep, r);
  } else {
    compareTrain(*base.train, *cur.train, r);
  }
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
  std::string s = fmt::format("{:<9} {}  ({}, {} rank(s), hosts {}", role, b.path, b.kind, b.worldSize,
                              joinList(b.hosts));
  if (!b.label.empty()) s += ", label " + b.label;
  if (!b.startTime.empty()) s += ", " + b.startTime;
  if (!b.source.empty()) s += ", " + b.source;
  return s + fmt::format(", run {})\n", b.runId);
}

}  // namespace

std::string formatCompareText(const CompareResult& r) {
  std::string out;
  out += runLine("baseline", r.base);
  out += runLine("current", r.cur);
  out +=
      fmt::format("threshold {:g}%, noise bound {:g} x combined standard error of the per-iteration times\n",
                  r.options.thresholdPct, r.options.noiseK);
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
    // Worst regression / best improvement first.
    std::stable_sort(rows.begin(), rows.end(), [&](const ComparedItem* x, const ComparedItem* y) {
      return v == Verdict::kRegressed ? x->changePct < y->changePct : x->changePct > y->changePct;
    });
    std::size_t w = 4;
    for (const auto* it : rows) w = std::max(w, it->label().size());
    out += fmt::format("\n{} ({}):\n", title, rows.size());
    out += fmt::format("  {:<{}}  {:>7}  {:>12}  {:>12}  {:>8}  {:>10}\n", "item", w, "metric", "baseline",
                       "current", "change", "noise");
    for (const auto* it : rows) {
      std::string noise = it->noiseKnown
                              ? fmt::format("{:.3g} {}", it->noise, it->metric == "step" ? "ms" : "us")
                              : std::string("unknown");
      out += fmt::format("  {:<{}}  {:>7}  {:>12}  {:>12}  {:>+7.1f}%  {:>10}\n", it->label(), w,
                         it->metric + (it->unit.empty() ? "" : ""), fmtValue(it->base) + " " + it->unit,
                         fmtValue(it->cur) + " " + it->unit, it->changePct, noise);
    }
  };
  table(Verdict::kRegressed, "Regressions");
  table(Verdict::kImproved, "Improvements");
  if (!r.items.empty()) {
    out += fmt::format("\nUnchanged: {} item(s) within the {:g}% threshold; {} beyond it but within noise.\n",
                       r.unchanged, r.options.thresholdPct, r.noisy);
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
      out +=
          fmt::format("Verdict: REGRESSION in {} of {} item(s) compared.\n", r.regressions, r.items.size());
      break;
    default:
      out += "Verdict: nothing could be compared; see above why.\n";
      break;
  }
  return out;
}

nlohmann::json compareToJson(const CompareResult& r) {
  auto briefJson = [](const RunBrief& b) {
    return nlohmann::json{{"path", b.path},
                          {"label", b.label},
                          {"run_id", b.runId},
                          {"kind", b.kind},
                          {"start_time", b.startTime},
                          {"source", b.source},
                          {"world_size", b.worldSize},
                          {"hosts", b.hosts},
                          {"backends", b.backends}};
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
                     {"noise", it.noiseKnown ? nlohmann::json(it.noise) : nlohmann::json(nullptr)},
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
  return {{"schema", "dsperf.compare"},
          {"schema_version", kSchemaVersion},
          {"threshold_pct", r.options.thresholdPct},
          {"noise_k", r.options.noiseK},
          {"baseline", briefJson(r.base)},
          {"current", briefJson(r.cur)},
          {"mismatches", r.mismatches},
          {"comparable", r.comparable},
          {"items", items},
          {"not_compared", nc},
          {"counts",
           {{"regressed", r.regressions},
            {"improved", r.improvements},
            {"unchanged", r.unchanged},
            {"noise", r.noisy}}},
          {"exit_code", r.exitCode()}};
}

}  // namespace ds::report
