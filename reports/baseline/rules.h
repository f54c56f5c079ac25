// The rules file of `dsreport baseline` and `dsreport check`: what operators edit to say what is
// normal. YAML (yaml-cpp, Debian's libyaml-cpp-dev), as superbench's rules files are: operators write
// them by hand, with comments, and yaml-cpp gives every node's line and column for our errors. A
// small example (docs/dsreport.md has the reference):
//
//   version: 1
//   k: 2                  # a host is unhealthy when a rule broke in 2 ...
//   n: 3                  # ... of its last 3 runs (Azure's repeat count)
//   sizes: [largest]      # verdict sizes: "largest" measured, or sizes (1G, 256M, 16G)
//   baseline:
//     statistic: mean     # mean or median of the hosts kept
//     max_iterations: 20  # outlier rejection rounds (superbench's)
//   rules:
//     busbw_variance:     { kind: variance, metric: busbw, threshold: 0.05 }
//     busbw_floor:        { kind: floor, metric: busbw, fraction: 0.5 }
//     h100_allreduce:     { kind: value, sku: "*8xNVIDIA H100*", collective: allreduce,
//                           bytes: 16G, min: 460 }
//     wrong_or_missing:   { kind: failure_check }
//     both:               { kind: multi_rules, rules: [busbw_variance, busbw_floor], fail_when: all }
//
// Rule kinds (superbench's names where they exist):
// - variance: the figure against the baseline; breaks when it is worse by more than `threshold`
//   (a fraction: 0.05 = 5%) in the metric's bad direction (lower bandwidth, higher latency). With
//   `sigmas` too, the limit is the looser of the two: `sigmas` times the baseline's run-to-run spread
//   (the standard deviation of the kept hosts' single-run figures) keeps a noisy fabric from
//   flagging its own noise, and `threshold` still holds where the fleet is steady. The widening
//   stops at half the baseline for bandwidth and twice it for latency. Where that noise is too wide
//   to tell a halving (a doubling of latency) from it, the rule cannot call the figure healthy
//   (judgeVariance below): `dsreport check` says cannot_judge, or judges the mean of the host's runs.
// - value: the figure against a fixed expectation, `min` and/or `max` (Azure's per-SKU conf values).
// - floor: the figure against `fraction` of the hardware bound of the row (reports/baseline/
//   expected.h); also the baseline's absolute floor, so that an all-slow fleet is not normal.
// - failure_check: a row that measured wrong data, or a host that reported no result.
// - multi_rules: breaks when `fail_when` (any, all, or a number) of the named rules break; rules
//   with `standalone: false` only feed such combinations and give no verdict of their own.
// Every rule but failure_check and multi_rules may be narrowed with filters: metric, collective,
// backend, dtype, op, sku (a glob on the SKU key), bytes (one size or a list; else the verdict sizes).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "reports/sample/sample.h"

namespace ds::report {

enum class RuleKind { kVariance, kValue, kFloor, kFailureCheck, kMultiRules };
const char* ruleKindName(RuleKind k);  // "variance", "value", "floor", "failure_check", "multi_rules"

struct Rule {
  std::string name;
  RuleKind kind = RuleKind::kVariance;
  std::string where;  // "rules.yaml:12:5", for messages
  // Filters (empty: any).
  std::string metric, collective, backend, dtype, op, sku;
  std::vector<std::size_t> bytes;
  // variance
  double threshold = 0.05;
  double sigmas = 0;  // 0: threshold alone
  // value
  std::optional<double> min, max;
  // floor
  double fraction = 0.5;
  // multi_rules
  std::vector<std::string> rules;
  int failWhen = 0;  // 0 = all, else at least this many of `rules` (any = 1)
  bool standalone = true;
};

struct BaselineOptions {
  std::string statistic = "mean";  // "mean" or "median"
  int maxIterations = 20;
};

struct RuleSet {
  std::string path;  // "" for the built-in rules
  int k = 1, n = 1;
  // Verdict sizes: the largest size each pattern was measured at (when `largest`), and `sizes`.
  bool largest = true;
  std::vector<std::size_t> sizes;
  BaselineOptions baseline;
  std::vector<Rule> rules;  // in file order
};

// The rules when no file is given: busbw and link bandwidth within 10% of the baseline, link
// latency within 50% (each widened to 4 run-to-run standard deviations where the fleet is noisier), at least
// 50% of the hardware bound where it is known, no wrong data and no missing host; k = n = 1; the largest
// size.
RuleSet defaultRules();
// Parses a rules file. Throws ConfigError naming the file, line and column and what to write
// instead: unknown keys or kinds, a threshold outside (0, 1), a multi rule naming an unknown rule,
// k > n, bad sizes. IoError when unreadable.
RuleSet loadRules(const std::string& path);
RuleSet parseRules(const std::string& text, const std::string& origin);

// Whether a rule's filters let it judge this sample (sizes: the rule's bytes, else `verdictSize`).
bool ruleApplies(const Rule& r, const Sample& s, bool verdictSize);
// Whether `bytes` is a verdict size of the rule set for a pattern whose largest size is `largest`.
bool isVerdictSize(const RuleSet& rs, std::size_t bytes, std::size_t largest);

// The limit a variance rule sets around an expectation: expected x (1 - threshold) for a figure
// where higher is better, x (1 + threshold) otherwise; with sigmas, the looser of that and
// expected -/+ sigmas x spread. And whether a figure is worse than a limit.
double varianceLimit(const Rule& r, double expected, double spread, bool higherIsBetter);
bool worseThan(double value, double limit, bool higherIsBetter);

// What a variance rule with `sigmas` must be able to tell from noise before it calls a figure
// healthy: a slowdown of this factor (half the bandwidth, twice the latency). varianceLimit's cap
// stands at the same factor.
inline constexpr double kSlowdownToTell = 2;

// What a rule says of one figure. kBlind: within the limit, but the rule cannot tell the figure from
// a halved one (a doubled one, for latency), so it is neither healthy nor unhealthy.
enum class RuleVerdict { kHolds, kBreaks, kBlind };

// How far above a spread measured from `figures` values the true one may be: the factor of its
// one-sided 95% upper confidence bound, sqrt((n - 1) / chi2_0.05(n - 1)) for n figures (15.9 from 2,
// 4.4 from 3, 2.4 from 5, 1.6 from 10, 1.4 from 20, 1.2 from 50; 1 for fewer than 2, where there is
// no spread). A baseline of few runs does not know its own noise: on the 2-core VM of issue 41, 3 runs
// put it at 11% where runs moved by 60% (docs/dev/verdict-calibration.md).
double spreadUpperFactor(int figures);

// A variance rule around an expectation, for a figure whose noise (a standard deviation: the
// baseline's run-to-run spread for one run, meanNoise for the mean of several) is `noise` as
// measured, and at most `noiseUpper` (spreadUpperFactor). The limit is the rule's, from `noise`, as it
// always was: what breaks did not change. What may hold is decided with `noiseUpper`: a figure is
// healthy only where even that much noise could not have made a halved host look like it.
struct VarianceBounds {
  bool higherIsBetter = true;
  double limit = 0;  // varianceLimit with `noise`: worse than this breaks
  // The rule promises to catch a halving at all: its threshold alone would (threshold < 0.5 for
  // bandwidth, < 1 for latency). A looser threshold is the rules file's own choice, and no figure
  // is blind under it.
  bool catchesHalving = false;
  // The sigmas widening with `noise` reached the cap: the limit is the cap, a halving sits on it, and
  // the rule as written cannot be applied.
  bool capped = false;
  // The widening with `noiseUpper` reaches the halving (capped or not): every figure within the limit
  // is blind.
  bool blindAll = false;
  // The halving (the doubling) and the edge of its noise: `sigmas` x the halved figure's noise at most
  // (noiseUpper / 2 for bandwidth, x 2 for latency: a slower run's noise scales with its times). A
  // figure within the limit but on the halving's side of the edge could be a halved host's: blind. 0
  // without sigmas or noise.
  double halving = 0, halvingEdge = 0;
  bool tellsHalving() const;  // no figure within the limit can be blind: not blindAll, limit beyond the edge
};
VarianceBounds varianceBounds(const Rule& r, double expected, double noise, double noiseUpper,
                              bool higherIsBetter);
RuleVerdict judgeVariance(const VarianceBounds& b, double value);

// The noise of the mean of `runs` runs of one host: sqrt(hostStdev^2 + spread^2 / runs). The mean
// averages the run-to-run noise away but not how far hosts differ: the baseline's stdev of its hosts'
// figures stands in for that (an upper bound: it holds some run-to-run noise too).
double meanNoise(double spread, double hostStdev, int runs);
// The fewest runs (2 to 1000) of one host whose mean the rule can always judge (tellsHalving with
// meanNoise of `spreadUpper` for both limit and edge, as check judges a mean), or 0 when no number
// would (the hosts' own stdev is too wide, or the threshold alone is looser than the halving).
int runsToTell(const Rule& r, double expected, double spreadUpper, double hostStdev, bool higherIsBetter);
// The fewest figures (up to 1000) a baseline needs before one run can always be judged against it
// with this spread (tellsHalving with spread x spreadUpperFactor), or 0 when no number would (the
// spread itself is too wide).
int baselineFiguresToTell(const Rule& r, double expected, double spread, bool higherIsBetter);

// Shell glob match (fnmatch(3): *, ?, [...]), case-sensitive: the sku filter.
bool globMatch(const std::string& pattern, const std::string& text);

}  // namespace ds::report
