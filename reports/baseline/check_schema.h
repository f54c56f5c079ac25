// The records of `dsreport check` (schema "dsperf.check"): one verdict per host, with the measured
// value, the expected one and the rule that fired. The check logic (reports/baseline/check.h) fills
// them; the history ingests them (per-host check history, the quarantine list), the exports turn them
// into JUnit test cases and OpenMetrics gauges.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ds::report {

inline constexpr const char* kCheckSchemaName = "dsperf.check";
// 1.1: the host state "cannot_judge"; each finding's "cannot_judge", "spread", "spread_upper",
//      "runs_needed" and "pooled_runs" (absent in 1.0 files: read as false and 0); the summary's
//      "cannot_judge" count.
inline constexpr const char* kCheckSchemaVersion = "1.1";

// The states a host can end in. "no_baseline" is its own state: nothing to judge against is neither
// healthy nor unhealthy. "no_result": the host is expected (in the baseline or the host list) but no
// run reported a figure for it (Azure's "ERROR: No results reported"). "cannot_judge": a figure of it
// is within a variance rule's limit, but the baseline's run-to-run spread there is so wide that the
// rule could not tell it from a halved one (reports/baseline/rules.h, judgeVariance): not healthy,
// not shown unhealthy. The numbers are those of the JSON's summary counts' order.
enum class CheckState { kHealthy, kUnhealthy, kNoBaseline, kNoResult, kCannotJudge };
inline constexpr CheckState kCheckStates[] = {CheckState::kHealthy, CheckState::kUnhealthy,
                                              CheckState::kNoBaseline, CheckState::kNoResult,
                                              CheckState::kCannotJudge};
// "healthy", "unhealthy", "no_baseline", "no_result", "cannot_judge"
const char* checkStateName(CheckState s);
CheckState parseCheckState(const std::string& s);  // throws ConfigError on other text

// One rule applied to one figure of one host.
struct CheckFinding {
  std::string rule;     // the rule's name in the rules file ("allreduce_1g_variance")
  std::string kind;     // "value", "variance", "floor", "failure", "multi"
  std::string pattern;  // patternKey of the figure (reports/baseline/sample.h)
  std::string metric;   // "busbw", "link_bw", ...
  std::size_t bytes = 0;
  std::string unit;      // "GB/s", "us"
  double measured = 0;   // the host's figure (the median of its repeats in these runs)
  double expected = 0;   // what the rule expected (the baseline value, the rules file's value, the floor)
  double threshold = 0;  // the limit the rule compared against (e.g. expected * (1 - 0.05))
  int failedRuns = 0;    // runs of these in which this figure broke the rule (k of n)
  int runs = 0;
  bool passed = true;  // the host passes this rule (fewer than k of n runs broke it, and it could tell)
  // The rule could not decide: fewer than k runs broke it, but with the runs it could not tell from a
  // halved one there would be k (passed is false too; the host is cannot_judge unless another rule broke).
  bool cannotJudge = false;
  // Variance rules: the baseline's run-to-run spread, in `unit`, and the most it may be given how many
  // figures it came from (its 95% upper bound, spreadUpperFactor in rules.h).
  double spread = 0, spreadUpper = 0;
  // cannot_judge: the fewest runs of the host whose mean the rule could judge; 0 none would.
  int runsNeeded = 0;
  int pooledRuns = 0;  // >= 2: judged on the mean of this many runs (`measured` is that mean)
  std::string text;    // one sentence: "busbw 12.1 GB/s at 1 GiB, expected >= 22.8 GB/s (baseline 24.0 - 5%)"
  bool operator==(const CheckFinding&) const = default;
};

struct HostCheck {
  std::string host;
  std::string sku;
  CheckState state = CheckState::kHealthy;
  std::vector<CheckFinding> findings;  // every rule applied (passed ones too)
  std::string summary;                 // Azure-style line: "Healthy", "ERROR: <rule>: expected X, measured Y"
  bool operator==(const HostCheck&) const = default;
};

struct CheckReport {
  std::string time;                 // when the check ran, ISO 8601 UTC
  std::string baselineId;           // the baseline file's id ("" when none was given)
  std::string rulesFile;            // path of the rules file ("" built-in rules)
  int k = 1, n = 1;                 // a host is unhealthy when a rule broke in >= k of its last n runs
  std::vector<std::string> runIds;  // the runs judged
  std::vector<HostCheck> hosts;     // sorted by host
  bool operator==(const CheckReport&) const = default;
};

void to_json(nlohmann::json& j, const CheckFinding& v);
void from_json(const nlohmann::json& j, CheckFinding& v);
void to_json(nlohmann::json& j, const HostCheck& v);
void from_json(const nlohmann::json& j, HostCheck& v);
// {"schema": "dsperf.check", "schema_version": "1.0", "time", "baseline_id", "rules_file", "k", "n",
//  "run_ids": [...], "hosts": [{"host", "sku", "state", "summary", "findings": [{...}]}],
//  "summary": {"healthy", "unhealthy", "no_baseline", "no_result", "cannot_judge", "exit_code"}}
nlohmann::json checkToJson(const CheckReport& r);
// Checks schema name and major version; throws ConfigError naming `origin` otherwise.
CheckReport checkFromJson(const nlohmann::json& j, const std::string& origin);

// A finding that broke its rule (in k of n runs): not passed, and not merely undecided.
inline bool broke(const CheckFinding& f) { return !f.passed && !f.cannotJudge; }

// The exit code of a check, for health-check gates, the first that applies: 2 a host is unhealthy or
// reported no result; 4 a host cannot be judged (as compare's 4, inconclusive); 1 some host has no
// baseline yet; 0 every host healthy. 3 (the check could not run) is the caller's.
inline constexpr int kCheckExitCannotJudge = 4;
int checkExitCode(const CheckReport& r);

}  // namespace ds::report
