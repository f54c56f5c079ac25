// `dsreport check`: one verdict per host from runs, a baseline and a rule set (reports/baseline/
// rules.h), as Azure's health checks give one: Healthy, "ERROR: <rule>: expected vs measured", or
// "ERROR: No results reported"; and, of our own, "no baseline yet" for a host whose SKU has none.
// A rule must break in k of a host's last n runs before the host is unhealthy, so that one bad run
// does not condemn a node. Verdicts are on the verdict sizes (the largest measured, or the rule
// set's sizes), never on a sweep-wide average.
#pragma once

#include <string>
#include <vector>

#include "reports/baseline/baseline.h"
#include "reports/baseline/check_schema.h"
#include "reports/baseline/rules.h"
#include "reports/run/run_file.h"
#include "reports/sample/sample.h"

namespace ds::report {

// Something a run says went wrong on a host besides its figures: a single-host sweep row that
// measured wrong data, a host that fleet mode named suspect or that reported nothing there.
struct RunFailure {
  std::string host;
  std::string runId;
  std::string time;
  std::string text;       // "allreduce 1 MiB f32 sum: 12 elements wrong"
  bool noResult = false;  // the run expected the host and got nothing from it
};
std::vector<RunFailure> failuresOf(const RunFile& run);

struct CheckOptions {
  int k = 0, n = 0;                        // 0: the rule set's
  std::vector<std::string> expectedHosts;  // hosts that must report (--hosts); none reporting = no_result
  std::string time;                        // when the check ran (ISO 8601 UTC)
};

// Judges every host seen in the samples or failures, and every expected host. `baseline` may be
// null (then variance rules cannot apply and hosts without any other rule are no_baseline).
CheckReport checkHosts(const std::vector<Sample>& samples, const std::vector<RunFailure>& failures,
                       const Baseline* baseline, const RuleSet& rules, const CheckOptions& options);
// The same from result files.
CheckReport checkRuns(const std::vector<RunFile>& runs, const Baseline* baseline, const RuleSet& rules,
                      const CheckOptions& options);

// The console view: one line per host (host, state, summary), unhealthy hosts first, then counts.
// healthyToo = false (check --quiet) leaves the healthy hosts' lines out; the counts stay.
std::string checkText(const CheckReport& r, bool healthyToo = true);

}  // namespace ds::report
