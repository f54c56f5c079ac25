#include "reports/baseline/rules.h"

#include <fmt/format.h>
#include <fnmatch.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/common/error.h"
#include "engine/env/env_source.h"

namespace ds::report {

namespace {

std::string at(const std::string& origin, const YAML::Mark& m) {
  if (m.is_null()) return origin;
  return fmt::format("{}:{}:{}", origin, m.line + 1, m.column + 1);
}

[[noreturn]] void fail(const std::string& origin, const YAML::Node& n, const std::string& what) {
  throw ConfigError(fmt::format("{}: {}", at(origin, n.Mark()), what));
}

std::string scalar(const std::string& origin, const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar()) fail(origin, n, fmt::format("'{}' must be a single value (text or number)", key));
  return n.Scalar();
}

double number(const std::string& origin, const YAML::Node& n, const std::string& key) {
  const std::string s = scalar(origin, n, key);
  try {
    std::size_t pos = 0;
    double v = std::stod(s, &pos);
    if (pos == s.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
  fail(origin, n, fmt::format("'{}' must be a number, found '{}'", key, s));
}

int integer(const std::string& origin, const YAML::Node& n, const std::string& key, int lo, int hi) {
  double v = number(origin, n, key);
  if (v != std::floor(v) || v < lo || v > hi)
    fail(origin, n,
         fmt::format("'{}' must be a whole number from {} to {}, found {}", key, lo, hi, n.Scalar()));
  return static_cast<int>(v);
}

bool boolean(const std::string& origin, const YAML::Node& n, const std::string& key) {
  const std::string s = scalar(origin, n, key);
  if (s == "true" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "no" || s == "off") return false;
  fail(origin, n, fmt::format("'{}' must be true or false, found '{}'", key, s));
}

std::size_t size(const std::string& origin, const YAML::Node& n, const std::string& key) {
  const std::string s = scalar(origin, n, key);
  try {
    return ds::env::parseBytesVar(key, s);
  } catch (const ConfigError&) {
    fail(origin, n,
         fmt::format("'{}' must be a size in bytes with an optional K, M or G suffix, e.g. 1G, found '{}'",
                     key, s));
  }
}

// One size or a list of them; "largest" (where `largest` is given) sets *largest.
std::vector<std::size_t> sizes(const std::string& origin, const YAML::Node& n, const std::string& key,
                               bool* largest) {
  std::vector<std::size_t> out;
  auto one = [&](const YAML::Node& x) {
    if (largest && x.IsScalar() && x.Scalar() == "largest") {
      *largest = true;
      return;
    }
    out.push_back(size(origin, x, key));
  };
  if (n.IsSequence()) {
    for (const auto& x : n) one(x);
  } else {
    one(n);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void checkKeys(const std::string& origin, const YAML::Node& map, const std::set<std::string>& known,
               const std::string& what) {
  for (auto it = map.begin(); it != map.end(); ++it) {
    const std::string k = it->first.Scalar();
    if (!known.count(k)) {
      std::string list;
      for (const auto& x : known) list += (list.empty() ? "" : ", ") + x;
      fail(origin, it->first, fmt::format("unknown key '{}' in {}; the keys are: {}", k, what, list));
    }
  }
}

RuleKind parseKind(const std::string& origin, const YAML::Node& n) {
  const std::string s = scalar(origin, n, "kind");
  for (RuleKind k : {RuleKind::kVariance, RuleKind::kValue, RuleKind::kFloor, RuleKind::kFailureCheck,
                     RuleKind::kMultiRules})
    if (s == ruleKindName(k)) return k;
  fail(origin, n,
       fmt::format("rule kind '{}' is not one of variance, value, floor, failure_check, multi_rules", s));
}

const std::set<std::string> kMetrics = {"busbw", "link_bw", "link_latency"};

Rule parseRule(const std::string& origin, const std::string& name, const YAML::Node& n) {
  if (!n.IsMap()) fail(origin, n, fmt::format("rule '{}' must be a map of keys (kind: ..., ...)", name));
  if (!n["kind"])
    fail(origin, n,
         fmt::format("rule '{}' has no 'kind' (variance, value, floor, failure_check, multi_rules)", name));
  Rule r;
  r.name = name;
  r.where = at(origin, n.Mark());
  r.kind = parseKind(origin, n["kind"]);
  std::set<std::string> known = {"kind", "standalone"};
  const std::set<std::string> filters = {"metric", "collective", "backend", "dtype", "op", "sku", "bytes"};
  switch (r.kind) {
    case RuleKind::kVariance:
      known.insert(filters.begin(), filters.end());
      known.insert({"threshold", "sigmas"});
      break;
    case RuleKind::kValue:
      known.insert(filters.begin(), filters.end());
      known.insert({"min", "max"});
      break;
    case RuleKind::kFloor:
      known.insert(filters.begin(), filters.end());
      known.insert("fraction");
      break;
    case RuleKind::kFailureCheck:
      break;
    case RuleKind::kMultiRules:
      known.insert({"rules", "fail_when"});
      break;
  }
  checkKeys(origin, n, known, fmt::format("{} rule '{}'", ruleKindName(r.kind), name));
  auto text = [&](const char* key, std::string& out) {
    if (n[key]) out = scalar(origin, n[key], key);
  };
  text("metric", r.metric);
  if (!r.metric.empty() && !kMetrics.count(r.metric))
    fail(origin, n["metric"],
         fmt::format("metric '{}' is not one of busbw, link_bw, link_latency", r.metric));
  text("collective", r.collective);
  text("backend", r.backend);
  text("dtype", r.dtype);
  text("op", r.op);
  text("sku", r.sku);
  if (n["bytes"]) r.bytes = sizes(origin, n["bytes"], "bytes", nullptr);
  if (n["standalone"]) r.standalone = boolean(origin, n["standalone"], "standalone");
  if (r.kind == RuleKind::kVariance && n["threshold"]) {
    r.threshold = number(origin, n["threshold"], "threshold");
    const bool bandwidth = r.metric != "link_latency";
    if (!(r.threshold > 0 && r.threshold < (bandwidth ? 1 : 100)))
      fail(origin, n["threshold"],
           bandwidth
               ? fmt::format("threshold {} must be a fraction between 0 and 1 (0.05 = 5% worse than the "
                             "baseline){}",
                             r.threshold,
                             r.metric.empty() ? "; for latency alone, add metric: link_latency" : "")
               : fmt::format("threshold {} must be more than 0 and less than 100 (0.5 = 50% slower than the "
                             "baseline)",
                             r.threshold));
  }
  if (r.kind == RuleKind::kVariance && n["sigmas"]) {
    r.sigmas = number(origin, n["sigmas"], "sigmas");
    if (!(r.sigmas > 0 && r.sigmas <= 100))
      fail(origin, n["sigmas"],
           fmt::format("sigmas {} must be more than 0 and at most 100 (4 = four standard deviations of the "
                       "baseline's run-to-run spread)",
                       r.sigmas));
  }
  if (r.kind == RuleKind::kValue) {
    if (n["min"]) r.min = number(origin, n["min"], "min");
    if (n["max"]) r.max = number(origin, n["max"], "max");
    if (!r.min && !r.max)
      fail(origin, n, fmt::format("value rule '{}' needs 'min' or 'max' (or both)", name));
    if (r.min && r.max && *r.min > *r.max)
      fail(origin, n, fmt::format("value rule '{}' has min > max", name));
  }
  if (r.kind == RuleKind::kFloor && n["fraction"]) {
    r.fraction = number(origin, n["fraction"], "fraction");
    if (!(r.fraction > 0 && r.fraction <= 1))
      fail(origin, n["fraction"],
           fmt::format("fraction {} must be in (0, 1] (0.5 = half the hardware bound)", r.fraction));
  }
  if (r.kind == RuleKind::kMultiRules) {
    const YAML::Node list = n["rules"];
    if (!list || !list.IsSequence() || list.size() < 2)
      fail(origin, list ? list : n,
           fmt::format("multi_rules '{}' needs 'rules: [a, b, ...]' naming two or more rules", name));
    for (const auto& x : list) r.rules.push_back(scalar(origin, x, "rules"));
    r.failWhen = 0;
    if (n["fail_when"]) {
      const std::string w = scalar(origin, n["fail_when"], "fail_when");
      if (w == "all") {
        r.failWhen = 0;
      } else if (w == "any") {
        r.failWhen = 1;
      } else {
        r.failWhen = integer(origin, n["fail_when"], "fail_when", 1, static_cast<int>(r.rules.size()));
      }
    }
  }
  return r;
}

}  // namespace

const char* ruleKindName(RuleKind k) {
  switch (k) {
    case RuleKind::kVariance:
      return "variance";
    case RuleKind::kValue:
      return "value";
    case RuleKind::kFloor:
      return "floor";
    case RuleKind::kFailureCheck:
      return "failure_check";
    case RuleKind::kMultiRules:
      return "multi_rules";
  }
  return "?";
}

RuleSet defaultRules() {
  RuleSet rs;
  auto add = [&](std::string name, RuleKind kind, std::string metric, double value) {
    Rule r;
    r.name = std::move(name);
    r.kind = kind;
    r.where = "built-in rules";
    r.metric = std::move(metric);
    if (kind == RuleKind::kVariance) {
      r.threshold = value;
      r.sigmas = 4;
    }
    if (kind == RuleKind::kFloor) r.fraction = value;
    rs.rules.push_back(std::move(r));
  };
  add("busbw_variance", RuleKind::kVariance, "busbw", 0.10);
  add("link_bw_variance", RuleKind::kVariance, "link_bw", 0.10);
  add("link_latency_variance", RuleKind::kVariance, "link_latency", 0.50);
  add("busbw_floor", RuleKind::kFloor, "busbw", 0.5);
  add("wrong_or_missing", RuleKind::kFailureCheck, "", 0);
  return rs;
}

RuleSet parseRules(const std::string& text, const std::string& origin) {
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(
        fmt::format("{}: not valid YAML: {}; fix the file (a rules file is YAML, see docs/dsreport.md)",
                    at(origin, e.mark), e.msg));
  }
  if (!doc.IsMap())
    throw ConfigError(fmt::format(
        "{}: a rules file is a YAML map with 'version: 1' and 'rules:', see docs/dsreport.md", origin));
  checkKeys(origin, doc, {"version", "k", "n", "sizes", "baseline", "rules"}, "the rules file");
  if (!doc["version"]) fail(origin, doc, "the rules file has no 'version: 1' line; add it at the top");
  if (integer(origin, doc["version"], "version", 1, 1000) != 1)
    fail(origin, doc["version"],
         "rules version " + doc["version"].Scalar() +
             " is newer than this dsreport reads (1); upgrade dsreport");
  RuleSet rs;
  rs.path = origin;
  if (doc["k"]) rs.k = integer(origin, doc["k"], "k", 1, 1000);
  if (doc["n"]) rs.n = integer(origin, doc["n"], "n", 1, 1000);
  if (rs.k > rs.n)
    fail(origin, doc["k"] ? doc["k"] : doc,
         fmt::format(
             "k = {} is larger than n = {}: a host cannot break a rule in more runs than are looked at", rs.k,
             rs.n));
  if (doc["sizes"]) {
    rs.largest = false;
    rs.sizes = sizes(origin, doc["sizes"], "sizes", &rs.largest);
    if (!rs.largest && rs.sizes.empty())
      fail(origin, doc["sizes"], "'sizes' is empty; write [largest] or sizes such as [1G]");
  }
  if (const YAML::Node b = doc["baseline"]) {
    if (!b.IsMap()) fail(origin, b, "'baseline' must be a map (statistic: mean, max_iterations: 20)");
    checkKeys(origin, b, {"statistic", "max_iterations"}, "'baseline'");
    if (b["statistic"]) {
      rs.baseline.statistic = scalar(origin, b["statistic"], "statistic");
      if (rs.baseline.statistic != "mean" && rs.baseline.statistic != "median")
        fail(origin, b["statistic"],
             fmt::format("statistic '{}' is not mean or median", rs.baseline.statistic));
    }
    if (b["max_iterations"])
      rs.baseline.maxIterations = integer(origin, b["max_iterations"], "max_iterations", 1, 1000);
  }
  const YAML::Node rules = doc["rules"];
  if (!rules || !rules.IsMap() || rules.size() == 0)
    fail(origin, rules ? rules : doc,
         "the rules file needs 'rules:', a map of rule name to rule (see docs/dsreport.md)");
  for (auto it = rules.begin(); it != rules.end(); ++it)
    rs.rules.push_back(parseRule(origin, scalar(origin, it->first, "rule name"), it->second));
  for (const Rule& r : rs.rules) {
    for (const auto& name : r.rules) {
      auto found =
          std::find_if(rs.rules.begin(), rs.rules.end(), [&](const Rule& x) { return x.name == name; });
      if (found == rs.rules.end())
        throw ConfigError(fmt::format("{}: multi_rules '{}' names rule '{}', which the file does not define",
                                      r.where, r.name, name));
      if (found->kind == RuleKind::kMultiRules || found->kind == RuleKind::kFailureCheck)
        throw ConfigError(fmt::format(
            "{}: multi_rules '{}' can combine variance, value and floor rules, not the {} rule '{}'", r.where,
            r.name, ruleKindName(found->kind), name));
    }
  }
  return rs;
}

RuleSet loadRules(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw IoError(fmt::format("cannot read the rules file {}: it does not exist or is not readable", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (ss.str().size() > (1u << 20))
    throw ConfigError(
        fmt::format("{}: {} bytes is too large for a rules file (1 MiB at most)", path, ss.str().size()));
  return parseRules(ss.str(), path);
}

bool globMatch(const std::string& p, const std::string& t) { return ::fnmatch(p.c_str(), t.c_str(), 0) == 0; }

bool ruleApplies(const Rule& r, const Sample& s, bool verdictSize) {
  if (r.kind == RuleKind::kFailureCheck || r.kind == RuleKind::kMultiRules) return false;
  auto eq = [](const std::string& want, const std::string& have) { return want.empty() || want == have; };
  if (!eq(r.metric, s.metric) || !eq(r.collective, s.collective) || !eq(r.backend, s.backend) ||
      !eq(r.dtype, s.dtype) || !eq(r.op, s.op))
    return false;
  if (!r.sku.empty() && !globMatch(r.sku, s.sku)) return false;
  if (!r.bytes.empty()) return std::find(r.bytes.begin(), r.bytes.end(), s.bytes) != r.bytes.end();
  return verdictSize;
}

double varianceLimit(const Rule& r, double expected, double spread, bool higherIsBetter) {
  const double byFraction = higherIsBetter ? expected * (1 - r.threshold) : expected * (1 + r.threshold);
  if (r.sigmas <= 0 || spread <= 0) return byFraction;
  // The widening stops at half the baseline (twice it for latency): a fleet so noisy that its spread
  // would reach further would otherwise make the rule silently unbreakable. A figure within a capped
  // limit is blind, not healthy (judgeVariance).
  const double bySpread = higherIsBetter ? std::max(expected - r.sigmas * spread, expected / kSlowdownToTell)
                                         : std::min(expected + r.sigmas * spread, expected * kSlowdownToTell);
  return higherIsBetter ? std::min(byFraction, bySpread) : std::max(byFraction, bySpread);
}

bool worseThan(double value, double limit, bool higherIsBetter) {
  return higherIsBetter ? value < limit : value > limit;
}

double spreadUpperFactor(int figures) {
  if (figures < 2) return 1;
  // chi2 quantiles at 0.05 for 1..30 degrees of freedom; beyond, Wilson and Hilferty's cube-root
  // approximation (within 0.1% from 30 on).
  static constexpr double kChi2Low[] = {0.00393, 0.103,  0.352,  0.711,  1.145,  1.635,  2.167,  2.733,
                                        3.325,   3.940,  4.575,  5.226,  5.892,  6.571,  7.261,  7.962,
                                        8.672,   9.390,  10.117, 10.851, 11.591, 12.338, 13.091, 13.848,
                                        14.611,  15.379, 16.151, 16.928, 17.708, 18.493};
  const int df = figures - 1;
  double chi2 = 0;
  if (df <= 30) {
    chi2 = kChi2Low[df - 1];
  } else {
    const double k = df, z = -1.6448536269514722;
    chi2 = k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
  }
  return std::sqrt(df / chi2);
}

bool VarianceBounds::tellsHalving() const {
  if (!catchesHalving || halvingEdge == 0) return true;
  return !blindAll && !worseThan(limit, halvingEdge, higherIsBetter);
}

VarianceBounds varianceBounds(const Rule& r, double expected, double noise, double noiseUpper,
                              bool higherIsBetter) {
  VarianceBounds b;
  b.higherIsBetter = higherIsBetter;
  b.limit = varianceLimit(r, expected, noise, higherIsBetter);
  b.halving = higherIsBetter ? expected / kSlowdownToTell : expected * kSlowdownToTell;
  const double byFraction = higherIsBetter ? expected * (1 - r.threshold) : expected * (1 + r.threshold);
  b.catchesHalving = worseThan(b.halving, byFraction, higherIsBetter);
  noiseUpper = std::max(noiseUpper, noise);
  if (r.sigmas <= 0 || noise <= 0 || !b.catchesHalving) {
    b.halving = b.halvingEdge = 0;
    return b;
  }
  auto reaches = [&](double n) {  // the widening by n reaches the halving
    const double widened = higherIsBetter ? expected - r.sigmas * n : expected + r.sigmas * n;
    return !worseThan(b.halving, widened, higherIsBetter);
  };
  b.capped = reaches(noise);
  b.blindAll = reaches(noiseUpper);
  // A halved run's noise is the noise scaled with it: its times double, its bandwidth halves.
  const double halvedNoise = higherIsBetter ? noiseUpper / kSlowdownToTell : noiseUpper * kSlowdownToTell;
  b.halvingEdge = higherIsBetter ? b.halving + r.sigmas * halvedNoise : b.halving - r.sigmas * halvedNoise;
  return b;
}

RuleVerdict judgeVariance(const VarianceBounds& b, double value) {
  if (worseThan(value, b.limit, b.higherIsBetter)) return RuleVerdict::kBreaks;
  if (!b.catchesHalving || b.halvingEdge == 0) return RuleVerdict::kHolds;
  if (b.blindAll || worseThan(value, b.halvingEdge, b.higherIsBetter)) return RuleVerdict::kBlind;
  return RuleVerdict::kHolds;
}

double meanNoise(double spread, double hostStdev, int runs) {
  return std::sqrt(hostStdev * hostStdev + spread * spread / std::max(runs, 1));
}

int runsToTell(const Rule& r, double expected, double spreadUpper, double hostStdev, bool higherIsBetter) {
  for (int m = 2; m <= 1000; ++m) {
    const double noise = meanNoise(spreadUpper, hostStdev, m);
    VarianceBounds b = varianceBounds(r, expected, noise, noise, higherIsBetter);
    if (!b.catchesHalving) return 0;
    if (b.tellsHalving()) return m;
  }
  return 0;
}

int baselineFiguresToTell(const Rule& r, double expected, double spread, bool higherIsBetter) {
  for (int n = 2; n <= 1000; ++n) {
    VarianceBounds b = varianceBounds(r, expected, spread, spread * spreadUpperFactor(n), higherIsBetter);
    if (!b.catchesHalving) return 0;
    if (b.tellsHalving()) return n;
  }
  return 0;
}

bool isVerdictSize(const RuleSet& rs, std::size_t bytes, std::size_t largest) {
  if (rs.largest && bytes == largest) return true;
  return std::find(rs.sizes.begin(), rs.sizes.end(), bytes) != rs.sizes.end();
}

}  // namespace ds::report
