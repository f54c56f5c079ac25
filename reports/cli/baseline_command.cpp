// dsreport baseline RUN... | --db H [--label L --since T --last N] -o BASELINE.json [--rules RULES.yaml]:
// what each figure normally is on each SKU, built from the fleet's runs (reports/baseline/baseline.h). Exit
// codes: 0 written, 2 bad input (a file unreadable or of the wrong kind, a bad rules file, nothing per host
// to build from).
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "engine/common/iso_time.h"
#include "reports/baseline/baseline.h"
#include "reports/baseline/rules.h"
#include "reports/cli/command.h"
#include "reports/history/host_history.h"
#include "reports/json_io.h"
#include "reports/run/run_file.h"
#include "reports/schema/label.h"

namespace ds::report::cli {

namespace {

struct BaselineFlags {
  std::vector<std::string> runs;
  std::string out;
  std::string rules;
  std::string db;
  history::SampleFilter filter;
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
      ->check(resultFile());
  c.app
      ->add_option("--db", f->db,
                   "build from the history (dsreport ingest) instead of, or besides, result files")
      ->check(ds::cli::inputFile())
      ->envname("DSREPORT_DB");
  c.app->add_option("--label", f->filter.labels, "with --db: only runs of this label (repeatable)")
      ->check(ds::cli::checkedBy([](const std::string& t) { checkLabel(t, "--label"); }));
  c.app
      ->add_option("--since", f->filter.since,
                   "with --db: only runs from this time on (ISO 8601, e.g. 2026-11-01)")
      ->check(ds::cli::checkedBy([](const std::string& t) {
        static const std::regex date(R"(\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?Z?)?)");
        if (!std::regex_match(t, date))
          throw ConfigError(
              fmt::format("--since '{}' is not a time; give an ISO 8601 date or time, e.g. 2026-11-01 or "
                          "2026-11-01T02:00:00Z",
                          t));
      }));
  c.app->add_option("--last", f->filter.lastRuns, "with --db: each host's newest N runs (default: all)")
      ->transform(ds::cli::integer(1, 100000));
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
    if (f->runs.empty() && f->db.empty())
      throw ConfigError(
          "nothing to build from: give result files (RUN...) or the history (--db results.sqlite)");
    if (f->db.empty() && (!f->filter.labels.empty() || !f->filter.since.empty() || f->filter.lastRuns > 0))
      throw ConfigError("--label, --since and --last choose runs of the history; give --db too");
    std::vector<Sample> samples;
    if (!f->db.empty()) samples = history::loadSamples(f->db, f->filter);
    for (const auto& path : f->runs) {
      auto s = samplesOf(loadRunFile(path));
      samples.insert(samples.end(), s.begin(), s.end());
    }
    Baseline b = buildBaseline(samples, rules, isoUtcNow());
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
