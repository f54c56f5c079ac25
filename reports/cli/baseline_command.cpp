// dsreport baseline RUN... -o BASELINE.json [--rules RULES.yaml]: what each figure normally is on each
// SKU, built from the fleet's runs (reports/baseline/baseline.h). Exit codes: 0 written, 2 bad input
// (a file unreadable or of the wrong kind, a bad rules file, nothing per host to build from).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "reports/baseline/baseline.h"
#include "reports/baseline/rules.h"
#include "reports/cli/command.h"
#include "reports/json_io.h"
#include "reports/run/run_file.h"

namespace ds::report::cli {

namespace {

struct BaselineFlags {
  std::vector<std::string> runs;
  std::string out;
  std::string rules;
  bool quiet = false;
};

}  // namespace

Command addBaselineCommand(CLI::App& parent) {
  auto f = std::make_shared<BaselineFlags>();
  Command c;
  c.app = parent.add_subcommand(
      "baseline",
      "Build a fleet baseline from runs of healthy hosts: for every SKU, software stack and pattern "
      "(collective, "
      "size, world size), the hosts' average after dropping the hosts that break the rules' variance and "
      "value "
      "rules (repeated until stable, as superbench does), floored at a fraction of the hardware bound. "
      "Exit 0: written; 2: bad input.");
  c.app->add_option("runs", f->runs, "result files: single-host dsbench coll sweeps, fleet-mode dsdiag runs")
      ->required()
      ->check(ds::cli::inputFile());
  c.app->add_option("-o,--output", f->out, "the baseline file to write (JSON, schema dsperf.baseline)")
      ->required()
      ->check(ds::cli::outputFile());
  c.app->add_option("--rules", f->rules, "rules file (YAML; docs/dsreport.md); default: the built-in rules")
      ->check(ds::cli::inputFile())
      ->envname("DSREPORT_RULES");
  c.app->add_flag("-q,--quiet", f->quiet, "print only the one-line summary");
  addMaxInputFlag(c.app);
  c.run = [f] {
    RuleSet rules = f->rules.empty() ? defaultRules() : loadRules(f->rules);
    std::vector<Sample> samples;
    for (const auto& path : f->runs) {
      auto s = samplesOf(loadRunFile(path));
      samples.insert(samples.end(), s.begin(), s.end());
    }
    Baseline b = buildBaseline(samples, rules, utcNowIso());
    writeJsonAtomic(f->out, baselineToJson(b));
    std::string text = baselineText(b);
    if (f->quiet) text = text.substr(0, text.find('\n') + 1);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::printf("dsreport baseline: wrote %s\n", f->out.c_str());
    return kExitOk;
  };
  return c;
}

}  // namespace ds::report::cli
