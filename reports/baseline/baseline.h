// Fleet baselines (`dsreport baseline`, schema "dsperf.baseline"): what a figure normally is on a
// SKU, built from the fleet's own runs as superbench builds its golden set. For every key (SKU,
// software stack, pattern: collective, backend, dtype, op, size, world size) the hosts' figures are
// averaged, the hosts that break the rule set's variance rules against that average are dropped, and
// the average is taken again, until no host changes side. The floor rule's fraction of the hardware
// bound (reports/baseline/expected.h) is then an absolute floor: a fleet that is slow everywhere
// gets the floor, not its own slow average, as its expectation.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reports/baseline/rules.h"
#include "reports/sample/sample.h"

namespace ds::report {

inline constexpr const char* kBaselineSchemaName = "dsperf.baseline";
inline constexpr const char* kBaselineSchemaVersion = "1.0";

struct RejectedHost {
  std::string host;
  double value = 0;
  std::string rule;  // the rule it broke ("busbw_variance", "busbw_floor")
  bool operator==(const RejectedHost&) const = default;
};

struct BaselineEntry {
  // The key.
  std::string sku, stack, pattern;  // pattern = patternKey(sample)
  // The pattern's parts, for rules' filters and for people.
  std::string metric, collective, backend, dtype, op, place, unit;
  std::size_t bytes = 0;
  int worldSize = 0;
  bool higherIsBetter = true;
  // The expectation.
  double value = 0;      // what checks compare against: max(fleet, floor) (min for lower-is-better)
  double fleet = 0;      // the statistic over the hosts kept
  double stdev = 0;      // of the kept hosts' figures (their medians): how far hosts differ
  double spread = 0;     // of the kept hosts' single-run figures: the run-to-run noise checks see
  double floor = 0;      // fraction x bound; 0 when no floor applies (no bound known, no floor rule)
  bool floored = false;  // the fleet's figure was below the floor, so value = floor
  double boundGBps = 0;  // the hardware bound of the pattern (0 unknown)
  std::string boundName;
  int iterations = 0;                  // rejection rounds until stable
  std::vector<std::string> hosts;      // kept
  std::vector<RejectedHost> rejected;  // dropped, with the figure and the rule
  int samples = 0;                     // figures read (a host's repeats count once: their median)
  bool operator==(const BaselineEntry&) const = default;
};

struct Baseline {
  std::string id;       // a hash of the entries: the same inputs give the same id
  std::string created;  // ISO 8601 UTC
  std::string rulesFile;
  std::string statistic = "mean";
  std::vector<std::string> runIds;     // the runs it was built from
  std::vector<BaselineEntry> entries;  // sorted by (sku, stack, pattern)
  bool operator==(const Baseline&) const = default;
};

// The figures a rule set judges, per host: host-scope samples at the judged sizes (verdict sizes of
// their pattern, and the sizes rules name). Link and job samples are left out (a multi-host sweep row
// is the job's: compare judges it; fleet mode's links are judged through each host's link median).
std::vector<Sample> judgedSamples(const std::vector<Sample>& all, const RuleSet& rules);

// Builds a baseline from samples (of runs or of the history). A host's figure for a key is the median
// of its samples in these runs. Keys with no host left after rejection keep their fleet statistic
// over all hosts and say so in `rejected`. Throws ConfigError when there is nothing to build from.
Baseline buildBaseline(const std::vector<Sample>& samples, const RuleSet& rules, const std::string& created);

// The entry for a sample's key, or nullptr.
const BaselineEntry* findEntry(const Baseline& b, const Sample& s);

nlohmann::json baselineToJson(const Baseline& b);
// Checks schema name and major version; ConfigError naming `origin` otherwise.
Baseline baselineFromJson(const nlohmann::json& j, const std::string& origin);
Baseline loadBaseline(const std::string& path);

// The text summary `dsreport baseline` prints: one line per entry.
std::string baselineText(const Baseline& b);

}  // namespace ds::report
