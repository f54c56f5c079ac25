// dsreport compare BASELINE CURRENT [--threshold PCT] [--noise-k K] [--ignore-hosts] [--json PATH]
// [--html PATH]: the regression verdict between two runs, for people (the table) and CI (the exit
// code: 0 no regression, 1 regression, 2 bad or incomparable input).
#include <cstdio>
#include <memory>
#include <string>

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
  std::string baseline, current;
  CompareOptions compare;
  std::string jsonPath, htmlPath;
};

}  // namespace

Command addCompareCommand(CLI::App& parent) {
  auto o = std::make_shared<CompareCliOptions>();
  Command c;
  c.app = parent.add_subcommand("compare",
                                "Compare two runs (dsbench coll sweeps, dsbench train runs, journals or "
                                "nccl-tests imports) and say which "
                                "sizes or configurations regressed. Exit code: 0 no regression, 1 "
                                "regression, 2 bad or incomparable input.");
  c.app->add_option("baseline", o->baseline, "the reference run")->required()->check(ds::cli::inputFile());
  c.app->add_option("current", o->current, "the run to judge")->required()->check(ds::cli::inputFile());
  c.app
      ->add_option("--threshold", o->compare.thresholdPct,
                   "percent: smaller changes count as unchanged, whatever the noise")
      ->transform(ds::cli::number(0, 1000))
      ->capture_default_str()
      ->envname("DSREPORT_THRESHOLD");
  c.app
      ->add_option("--noise-k", o->compare.noiseK,
                   "a change must also exceed this many combined standard errors of the two runs' "
                   "per-iteration times")
      ->transform(ds::cli::number(0, 1000))
      ->capture_default_str()
      ->envname("DSREPORT_NOISE_K");
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
    RunFile base = loadRunFile(o->baseline);
    RunFile cur = loadRunFile(o->current);
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
                   o->baseline.c_str(), o->current.c_str());
      return kExitBadInput;
    }
    return r.exitCode();
  };
  return c;
}

}  // namespace ds::report::cli
