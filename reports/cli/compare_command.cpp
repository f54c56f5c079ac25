// dsreport compare BASELINE CURRENT, or BASE... -- CURRENT... [--threshold PCT] [--alpha A]
// [--ignore-hosts] [--json PATH] [--html PATH]: the regression verdict between two sides of one or
// more runs each, for people (the table) and CI (the exit code: 0 no regression, 1 regression, 2 bad
// or incomparable input, 4 inconclusive).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "reports/cli/command.h"
#include "reports/compare/compare.h"
#include "reports/json_io.h"
#include "reports/run/run_file.h"
// The HTML view is engineer B's (reports/html/compare_html.h); until it lands, --html says so.
#if __has_include("reports/html/compare_html.h")
#include "reports/html/compare_html.h"
#define DS_HAVE_COMPARE_HTML 1
#endif

namespace ds::report::cli {

namespace {

struct CompareCliOptions {
  std::vector<std::string> runs;  // every run, baseline first
  std::size_t split = 0;          // runs[0..split) are the baseline; 0: no "--" (then exactly two runs)
  bool separatorSeen = false;
  CompareOptions compare;
  std::string jsonPath, htmlPath;
};

// CLI11 swallows a "--" before positional arguments; markRunSeparator turns compare's into this
// hidden flag, which records how many runs came before it.
constexpr const char* kSeparatorFlag = "--dsreport-runs-separator";

}  // namespace

void markRunSeparator(std::vector<std::string>& args) {
  auto sub = std::find(args.begin(), args.end(), "compare");
  if (sub == args.end()) return;
  auto sep = std::find(sub, args.end(), "--");
  if (sep != args.end()) *sep = kSeparatorFlag;
}

Command addCompareCommand(CLI::App& parent) {
  auto o = std::make_shared<CompareCliOptions>();
  Command c;
  c.app = parent.add_subcommand(
      "compare",
      "Compare runs (dsbench coll sweeps, dsbench train runs, journals or nccl-tests imports) and say "
      "which sizes or configurations regressed: BASELINE CURRENT, or BASE1 BASE2 ... -- CUR1 CUR2 .... "
      "Exit code: 0 no regression, 1 regression, 2 bad or incomparable input, 4 inconclusive (too few "
      "runs to tell a change from run-to-run noise: compare 5 runs a side).");
  CLI::Option* runs =
      c.app
          ->add_option("runs", o->runs,
                       "the baseline run(s), then '--' and the current run(s); or just two runs")
          ->required()
          ->check(resultFile());
  c.app
      ->add_flag_callback(
          kSeparatorFlag,
          [o, runs] {
            // o->runs is filled when parsing ends; the option's results so far are the runs before "--".
            o->split = runs->count();
            o->separatorSeen = true;
          },
          "")
      ->trigger_on_parse()
      ->group("");
  c.app
      ->add_option("--threshold", o->compare.thresholdPct,
                   "percent: smaller changes count as unchanged, whatever the noise")
      ->transform(ds::cli::number(0, 1000))
      ->capture_default_str()
      ->envname("DSREPORT_THRESHOLD");
  c.app
      ->add_option("--alpha", o->compare.alpha,
                   "significance of the Mann-Whitney U tests: the false-discovery rate over the items, and the level of the whole-run test")
      ->transform(ds::cli::number(1e-6, 0.5))
      ->capture_default_str()
      ->envname("DSREPORT_ALPHA");
  c.app
      ->add_flag("--ignore-hosts", o->compare.ignoreHosts,
                 "compare runs made on different hosts (the difference is still reported)")
      ->envname("DSREPORT_IGNORE_HOSTS");
  c.app->add_option("--json", o->jsonPath, "also write the comparison as JSON (schema dsperf.compare)")
      ->check(ds::cli::outputFile())
      ->envname("DSREPORT_COMPARE_JSON");
  c.app->add_option("--html", o->htmlPath, "also write the comparison as a self-contained HTML page")
      ->check(ds::cli::outputFile())
      ->envname("DSREPORT_COMPARE_HTML");
  addMaxInputFlag(c.app);
  c.run = [o]() -> int {
    std::size_t split = o->split;
    if (!o->separatorSeen) {
      if (o->runs.size() != 2) {
        throw ConfigError(fmt::format(
            "dsreport compare got {} run file(s) and no '--': give BASELINE CURRENT, or the baseline runs, "
            "'--', then the current runs (dsreport compare a1.json a2.json -- b1.json b2.json).",
            o->runs.size()));
      }
      split = 1;
    }
    if (split == 0 || split >= o->runs.size()) {
      throw ConfigError(fmt::format(
          "dsreport compare: '--' must have at least one run file on each side ({} before it, {} after); "
          "e.g. dsreport compare a1.json a2.json -- b1.json b2.json.",
          split, o->runs.size() - split));
    }
    std::vector<RunFile> base, cur;
    for (std::size_t i = 0; i < o->runs.size(); ++i)
      (i < split ? base : cur).push_back(loadRunFile(o->runs[i]));
    CompareResult r = compareRuns(base, cur, o->compare);
    std::string text = formatCompareText(r);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (!o->jsonPath.empty()) writeJsonAtomic(o->jsonPath, compareToJson(r));
    if (!o->htmlPath.empty()) {
#ifdef DS_HAVE_COMPARE_HTML
      writeCompareHtml(r, o->htmlPath);
#else
      std::fprintf(stderr,
                   "dsreport compare: --html is not available in this build yet (the HTML compare view has "
                   "not landed); use --json %s or the table above.\n",
                   o->htmlPath.c_str());
      return kExitBadInput;
#endif
    }
    if (!r.comparable || r.items.empty()) {
      std::fprintf(stderr,
                   "dsreport compare: %s and %s could not be compared (see 'Runs differ' above); exit 2.\n",
                   r.base.path.c_str(), r.cur.path.c_str());
      return kExitBadInput;
    }
    return r.exitCode();
  };
  return c;
}

}  // namespace ds::report::cli
