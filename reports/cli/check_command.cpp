// dsreport check RUN... [--baseline B.json] [--rules R.yaml] [--k K --n N] [--hosts LIST] [-o CHECK.json]:
// [--junit CHECK.xml]: one verdict per host (reports/baseline/check.h). Exit codes, for health-check gates,
// the first that applies: 3 the check could not run (bad flags, an unreadable run, baseline or rules file); 2
// a host is unhealthy or reported no result; 4 a host cannot be judged (its baseline is too noisy to tell a
// halving from noise); 1 some host has no baseline yet; 0 every host healthy.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/common/iso_time.h"
#include "engine/env/slurm.h"
#include "reports/baseline/check.h"
#include "reports/cli/command.h"
#include "reports/export/junit.h"
#include "reports/json_io.h"
#include "reports/run/run_file.h"

namespace ds::report::cli {

static_assert(kCheckExitCannotJudge == kExitInconclusive,
              "check's 'cannot judge' is compare's 'inconclusive'");

namespace {

struct CheckFlags {
  std::vector<std::string> runs;
  std::string baseline, rules, out, hosts, junit;
  CheckOptions options;
  bool quiet = false;
};

}  // namespace

Command addCheckCommand(CLI::App& parent) {
  auto f = std::make_shared<CheckFlags>();
  Command c;
  c.badInputExit = 3;
  c.app = parent.add_subcommand(
      "check",
      "Give every host a verdict from runs against a baseline and rules: healthy, unhealthy (with the rule, "
      "measured and expected), no_result, no_baseline, or cannot_judge (the baseline is too noisy there to "
      "tell a halving from noise; it says how many runs would). A rule must break in k of a host's last n "
      "runs. Exit 0: all healthy; 1: some host has no baseline yet; 2: a host is unhealthy or reported "
      "nothing; 3: the check could not run; 4: a host cannot be judged (and none is unhealthy).");
  c.app->add_option("runs", f->runs, "result files: single-host dsbench coll sweeps, fleet-mode dsdiag runs")
      ->required()
      ->check(resultFile());
  c.app
      ->add_option("--baseline", f->baseline,
                   "baseline file (dsreport baseline); without it only absolute rules apply")
      ->check(ds::cli::inputFile())
      ->envname("DSREPORT_BASELINE");
  c.app->add_option("--rules", f->rules, "rules file (YAML; docs/dsreport.md); default: the built-in rules")
      ->check(ds::cli::inputFile())
      ->envname("DSREPORT_RULES");
  c.app
      ->add_option("--k", f->options.k,
                   "a host is unhealthy when a rule broke in K of its last N runs (default: the rules')")
      ->transform(ds::cli::integer(1, 1000));
  c.app
      ->add_option("--n", f->options.n,
                   "how many of a host's latest runs are looked at (default: the rules')")
      ->transform(ds::cli::integer(1, 1000));
  c.app
      ->add_option(
          "--hosts", f->hosts,
          "hosts that must report, as a Slurm hostlist (node[01-16]); a host that did not is no_result")
      ->check(ds::cli::checkedBy([](const std::string& t) {
        if (t.empty())
          throw ConfigError("--hosts is empty; give a Slurm hostlist such as node[01-16], or leave it out");
        for (const auto& h : ds::env::expandNodelist(t, "--hosts"))
          for (unsigned char ch : h)
            if (ch <= ' ' || ch >= 0x7f)
              throw ConfigError(
                  fmt::format("--hosts: host name '{}' has a space, control or non-ASCII character; "
                              "host names are letters, digits, '-', '_' and '.'",
                              h));
      }));
  c.app->add_option("-o,--output", f->out, "write the verdicts as JSON (schema dsperf.check)")
      ->check(ds::cli::outputFile());
  c.app
      ->add_option("--junit", f->junit,
                   "also write the verdicts as JUnit XML (a test case per host and rule), for CI")
      ->check(ds::cli::outputFile())
      ->envname("DSREPORT_CHECK_JUNIT");
  c.app->add_flag("-q,--quiet", f->quiet, "print only hosts that are not healthy, and the counts");
  addMaxInputFlag(c.app);
  c.run = [f] {
    if (f->options.k > 0 && f->options.n > 0 && f->options.k > f->options.n)
      throw ConfigError(fmt::format(
          "--k {} is larger than --n {}: a host cannot break a rule in more runs than are looked at",
          f->options.k, f->options.n));
    RuleSet rules = f->rules.empty() ? defaultRules() : loadRules(f->rules);
    std::optional<Baseline> baseline;
    if (!f->baseline.empty()) baseline = loadBaseline(f->baseline);
    if (!f->hosts.empty()) f->options.expectedHosts = ds::env::expandNodelist(f->hosts, "--hosts");
    std::vector<RunFile> runs;
    for (const auto& path : f->runs) runs.push_back(loadRunFile(path));
    f->options.time = isoUtcNow();
    CheckReport r = checkRuns(runs, baseline ? &*baseline : nullptr, rules, f->options);
    if (!f->out.empty()) writeJsonAtomic(f->out, checkToJson(r));
    if (!f->junit.empty()) writeTextAtomic(f->junit, junitOfCheck(r));
    std::string text = checkText(r, !f->quiet);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return checkExitCode(r);
  };
  return c;
}

}  // namespace ds::report::cli
