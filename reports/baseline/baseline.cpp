#include "reports/baseline/baseline.h"

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

using nlohmann::json;

namespace {

std::string keyOf(const std::string& sku, const std::string& stack, const std::string& pattern) {
  return sku + "\x1f" + stack + "\x1f" + pattern;
}

double statistic(const std::string& name, const std::vector<double>& v) {
  if (v.empty()) return 0;
  if (name == "median") return median(v);
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

// A robust standard deviation: 1.4826 x the median absolute deviation, so that the few slow hosts a
// baseline is meant to drop do not widen the noise band that would let them stay.
double robustSpread(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = median(v);
  std::vector<double> dev;
  dev.reserve(v.size());
  for (double x : v) dev.push_back(std::fabs(x - m));
  return 1.4826 * median(dev);
}

double stdevOf(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double mean = statistic("mean", v), ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

// The rule a host's figure breaks against a fleet statistic, or "" (variance and value rules; the
// floor is not a reason to drop a host from the baseline, or an all-slow fleet would drop everyone).
std::string brokenRule(const RuleSet& rs, const Sample& like, double value, double fleet, double spread) {
  for (const Rule& r : rs.rules) {
    if (!ruleApplies(r, like, true)) continue;
    if (r.kind == RuleKind::kVariance &&
        worseThan(value, varianceLimit(r, fleet, spread, like.higherIsBetter), like.higherIsBetter))
      return r.name;
    if (r.kind == RuleKind::kValue && ((r.min && value < *r.min) || (r.max && value > *r.max))) return r.name;
  }
  return "";
}

}  // namespace

std::vector<Sample> judgedSamples(const std::vector<Sample>& all, const RuleSet& rules) {
  // The largest size of each pattern-without-size, over all samples given.
  auto sizeless = [](const Sample& s) {
    return fmt::format("{} {} {} {} {} {} w{} {}", s.metric, s.collective, s.backend, s.dtype, s.op, s.place,
                       s.worldSize, s.sku);
  };
  std::map<std::string, std::size_t> largest;
  for (const auto& s : all)
    if (s.scope == "host") largest[sizeless(s)] = std::max(largest[sizeless(s)], s.bytes);
  std::vector<Sample> out;
  for (const auto& s : all) {
    if (s.scope != "host") continue;
    bool verdict = s.metric != "busbw" || isVerdictSize(rules, s.bytes, largest[sizeless(s)]);
    bool named = std::any_of(rules.rules.begin(), rules.rules.end(), [&](const Rule& r) {
      return std::find(r.bytes.begin(), r.bytes.end(), s.bytes) != r.bytes.end();
    });
    if (verdict || named) out.push_back(s);
  }
  return out;
}

Baseline buildBaseline(const std::vector<Sample>& samples, const RuleSet& rules, const std::string& created) {
  const std::vector<Sample> judged = judgedSamples(samples, rules);
  if (judged.empty())
    throw ConfigError(
        "nothing to build a baseline from: the runs have no per-host figures at the verdict sizes (give "
        "single-host "
        "sweep runs, e.g. the nightly `dsbench coll` of each node, or fleet-mode dsdiag runs; multi-host "
        "sweep rows "
        "are the job's, not a host's)");
  struct Group {
    Sample like;
    std::map<std::string, std::vector<double>> byHost;
    int samples = 0;
  };
  std::map<std::string, Group> groups;
  std::set<std::string> runIds;
  for (const auto& s : judged) {
    Group& g = groups[keyOf(s.sku, s.stack, patternKey(s))];
    if (g.samples == 0 || s.boundGBps > 0) {
      double bound = g.samples ? g.like.boundGBps : 0;
      std::string boundName = g.samples ? g.like.boundName : "";
      g.like = s;
      // Keep the smallest known bound: the slowest host's hardware is what the fleet can promise.
      if (bound > 0 && (s.boundGBps <= 0 || bound < s.boundGBps)) {
        g.like.boundGBps = bound;
        g.like.boundName = boundName;
      }
    }
    g.byHost[s.host].push_back(s.value);
    ++g.samples;
    runIds.insert(s.runId);
  }
  Baseline b;
  b.created = created;
  b.rulesFile = rules.path;
  b.statistic = rules.baseline.statistic;
  b.runIds.assign(runIds.begin(), runIds.end());
  for (auto& [key, g] : groups) {
    std::map<std::string, double> hostValue;
    for (auto& [host, v] : g.byHost) hostValue[host] = median(v);
    auto statOf = [&](const std::set<std::string>& kept) {
      std::vector<double> v;
      for (const auto& h : kept) v.push_back(hostValue[h]);
      return statistic(rules.baseline.statistic, v);
    };
    // The run-to-run noise of the hosts kept: every single-run figure of theirs.
    // Named, not the structured binding g: a lambda may not capture a binding before C++20's P1091,
    // which GCC 12 has and clang 14 (the sanitizer build's compiler) has not.
    auto& byHost = g.byHost;
    auto spreadOf = [&](const std::set<std::string>& kept) {
      std::vector<double> v;
      for (const auto& h : kept) v.insert(v.end(), byHost[h].begin(), byHost[h].end());
      return robustSpread(v);
    };
    std::set<std::string> kept;
    for (const auto& [h, v] : hostValue) kept.insert(h);
    double fleet = statOf(kept), spread = spreadOf(kept);
    int iterations = 0;
    std::map<std::string, std::string> why;
    for (; iterations < rules.baseline.maxIterations; ++iterations) {
      std::set<std::string> next;
      std::map<std::string, std::string> nextWhy;
      for (const auto& [h, v] : hostValue) {
        std::string rule = brokenRule(rules, g.like, v, fleet, spread);
        if (rule.empty()) {
          next.insert(h);
        } else {
          nextWhy[h] = rule;
        }
      }
      if (next.empty()) break;  // every host breaks a rule: keep the last set (the entry says who broke what)
      why = std::move(nextWhy);
      if (next == kept) break;
      kept = std::move(next);
      fleet = statOf(kept);
      spread = spreadOf(kept);
    }
    BaselineEntry e;
    const Sample& s = g.like;
    e.sku = s.sku;
    e.stack = s.stack;
    e.pattern = patternKey(s);
    e.metric = s.metric;
    e.collective = s.collective;
    e.backend = s.backend;
    e.dtype = s.dtype;
    e.op = s.op;
    e.place = s.place;
    e.unit = s.unit;
    e.bytes = s.bytes;
    e.worldSize = s.worldSize;
    e.higherIsBetter = s.higherIsBetter;
    e.fleet = fleet;
    e.value = fleet;
    std::vector<double> keptValues;
    for (const auto& h : kept) keptValues.push_back(hostValue[h]);
    e.stdev = stdevOf(keptValues);
    e.spread = spread;
    e.boundGBps = s.boundGBps;
    e.boundName = s.boundName;
    if (s.boundGBps > 0 && s.higherIsBetter) {
      for (const Rule& r : rules.rules)
        if (r.kind == RuleKind::kFloor && ruleApplies(r, s, true))
          e.floor = std::max(e.floor, r.fraction * s.boundGBps);
      if (e.floor > e.fleet) {
        e.floored = true;
        e.value = e.floor;
      }
    }
    e.iterations = iterations + 1;
    e.hosts.assign(kept.begin(), kept.end());
    for (const auto& [h, v] : hostValue)
      if (!kept.count(h)) e.rejected.push_back({h, v, why.count(h) ? why[h] : std::string("outlier")});
    e.samples = g.samples;
    b.entries.push_back(std::move(e));
  }
  std::sort(b.entries.begin(), b.entries.end(), [](const BaselineEntry& x, const BaselineEntry& y) {
    return std::tie(x.sku, x.stack, x.pattern) < std::tie(y.sku, y.stack, y.pattern);
  });
  json entries = baselineToJson(b).at("entries");
  b.id = fnv1a64Hex(dumpJson(entries));
  return b;
}

const BaselineEntry* findEntry(const Baseline& b, const Sample& s) {
  const std::string pattern = patternKey(s);
  auto it = std::lower_bound(
      b.entries.begin(), b.entries.end(), std::tie(s.sku, s.stack, pattern),
      [](const BaselineEntry& e, const auto& key) { return std::tie(e.sku, e.stack, e.pattern) < key; });
  if (it != b.entries.end() && it->sku == s.sku && it->stack == s.stack && it->pattern == pattern)
    return &*it;
  return nullptr;
}

json baselineToJson(const Baseline& b) {
  json entries = json::array();
  for (const auto& e : b.entries) {
    json rejected = json::array();
    for (const auto& r : e.rejected)
      rejected.push_back({{"host", r.host}, {"value", r.value}, {"rule", r.rule}});
    entries.push_back({{"sku", e.sku},
                       {"stack", e.stack},
                       {"pattern", e.pattern},
                       {"metric", e.metric},
                       {"collective", e.collective},
                       {"backend", e.backend},
                       {"dtype", e.dtype},
                       {"op", e.op},
                       {"place", e.place},
                       {"unit", e.unit},
                       {"bytes", e.bytes},
                       {"world_size", e.worldSize},
                       {"higher_is_better", e.higherIsBetter},
                       {"value", e.value},
                       {"fleet", e.fleet},
                       {"stdev", e.stdev},
                       {"spread", e.spread},
                       {"floor", e.floor},
                       {"floored", e.floored},
                       {"bound_gbps", e.boundGBps},
                       {"bound_name", e.boundName},
                       {"iterations", e.iterations},
                       {"hosts", e.hosts},
                       {"rejected", rejected},
                       {"samples", e.samples}});
  }
  return {{"schema", kBaselineSchemaName},
          {"schema_version", kBaselineSchemaVersion},
          {"id", b.id},
          {"created", b.created},
          {"rules_file", b.rulesFile},
          {"statistic", b.statistic},
          {"run_ids", b.runIds},
          {"entries", entries}};
}

Baseline baselineFromJson(const json& j, const std::string& origin) {
  if (!j.is_object() || j.value("schema", std::string{}) != kBaselineSchemaName)
    throw ConfigError(fmt::format(
        "{} is not a dsperf baseline (schema \"{}\"); make one with `dsreport baseline RUN... -o {}`", origin,
        kBaselineSchemaName, origin));
  const std::string version = j.value("schema_version", std::string{});
  if (version.substr(0, version.find('.')) != "1")
    throw ConfigError(
        fmt::format("{}: baseline schema {} is not one this dsreport reads (1.x); rebuild the baseline or "
                    "upgrade dsreport",
                    origin, version.empty() ? "(none)" : version));
  return readFields(j, origin, kBaselineSchemaName, [&] {
    Baseline b;
    readTo(j.at("id"), b.id);
    readTo(j.at("created"), b.created);
    b.rulesFile = textOr(j, "rules_file", "");
    b.statistic = textOr(j, "statistic", "mean");
    readTo(j.at("run_ids"), b.runIds);
    for (const auto& x : j.at("entries")) {
      BaselineEntry e;
      readTo(x.at("sku"), e.sku);
      readTo(x.at("stack"), e.stack);
      readTo(x.at("pattern"), e.pattern);
      readTo(x.at("metric"), e.metric);
      readTo(x.at("collective"), e.collective);
      readTo(x.at("backend"), e.backend);
      readTo(x.at("dtype"), e.dtype);
      readTo(x.at("op"), e.op);
      readTo(x.at("place"), e.place);
      readTo(x.at("unit"), e.unit);
      readTo(x.at("bytes"), e.bytes);
      readTo(x.at("world_size"), e.worldSize);
      readTo(x.at("higher_is_better"), e.higherIsBetter);
      readTo(x.at("value"), e.value);
      readTo(x.at("fleet"), e.fleet);
      readTo(x.at("stdev"), e.stdev);
      readTo(x.at("spread"), e.spread);
      readTo(x.at("floor"), e.floor);
      readTo(x.at("floored"), e.floored);
      readTo(x.at("bound_gbps"), e.boundGBps);
      readTo(x.at("bound_name"), e.boundName);
      readTo(x.at("iterations"), e.iterations);
      readTo(x.at("hosts"), e.hosts);
      for (const auto& r : x.at("rejected")) {
        RejectedHost rh;
        readTo(r.at("host"), rh.host);
        readTo(r.at("value"), rh.value);
        readTo(r.at("rule"), rh.rule);
        e.rejected.push_back(std::move(rh));
      }
      readTo(x.at("samples"), e.samples);
      b.entries.push_back(std::move(e));
    }
    std::sort(b.entries.begin(), b.entries.end(), [](const BaselineEntry& x, const BaselineEntry& y) {
      return std::tie(x.sku, x.stack, x.pattern) < std::tie(y.sku, y.stack, y.pattern);
    });
    return b;
  });
}

Baseline loadBaseline(const std::string& path) { return baselineFromJson(readJson(path), path); }

std::string baselineText(const Baseline& b) {
  std::string out =
      fmt::format("# baseline {} from {} run(s), {} entr{}, statistic {}\n", b.id, b.runIds.size(),
                  b.entries.size(), b.entries.size() == 1 ? "y" : "ies", b.statistic);
  for (const auto& e : b.entries) {
    out += fmt::format("{:<12.6g} {:<5} {}  [{}; {}]  hosts {} kept, {} rejected", e.value, e.unit, e.pattern,
                       e.sku, e.stack, e.hosts.size(), e.rejected.size());
    if (e.floored) out += fmt::format("  FLOORED: fleet {:.4g} < {:.4g} ({})", e.fleet, e.floor, e.boundName);
    out += "\n";
  }
  return out;
}

}  // namespace ds::report
