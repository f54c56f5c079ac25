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
inline constexpr const char* kCheckSchemaVersion = "1.0";

// The states a host can end in. "no_baseline" is its own state: nothing to judge against is neither
// healthy nor unhealthy. "no_result": the host is expected (in the baseline or the host list) but no
// run reported a figure for it (Azure's "ERROR: No results reported").
enum class CheckState { kHealthy, kUnhealthy, kNoBaseline, kNoResult };
const char* checkStateName(CheckState s);          // "healthy", "unhealthy", "no_baseline", "no_result"
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
  bool passed = true;  // the host passes this rule (fewer than k of n runs broke it)
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
//  "summary": {"healthy", "unhealthy", "no_baseline", "no_result", "exit_code"}}
nlohmann::json checkToJson(const CheckReport& r);
// Checks schema name and major version; throws ConfigError naming `origin` otherwise.
CheckReport checkFromJson(const nlohmann::json& j, const std::string& origin);

// The exit code of a check, for health-check gates: 0 every host healthy, 1 some host has no
// baseline yet (and none unhealthy), 2 a host is unhealthy or reported no result, 3 the check could
// not run (decided by the caller).
int checkExitCode(const CheckReport& r);

}  // namespace ds::report
