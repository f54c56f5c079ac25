// dsreport dashboard --db results.sqlite [-o dashboard.html]: the history's trends per metric with
// regressions flagged against a rolling baseline, as one self-contained HTML page with filters. The
// flags below narrow what the page holds; the page's own filters narrow what it shows. Exit codes: 0
// written (regressions are shown, not an error: use `dsreport compare` for a CI verdict); 2 the
// database is missing, not a dsreport history, or newer than this dsreport; 3 a dsperf bug.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "reports/cli/command.h"
#include "reports/history/dashboard_data.h"
#include "reports/html/dashboard_html.h"

namespace ds::report::cli {

namespace {

struct DashboardFlags {
  std::string db;
  std::string output = "dashboard.html";
  history::DashboardOptions options;
};

}  // namespace

Command addDashboardCommand(CLI::App& parent) {
  auto f = std::make_shared<DashboardFlags>();
  Command c;
  c.app = parent.add_subcommand(
      "dashboard",
      "Write a self-contained HTML dashboard of the history database: busbw per collective and size and the "
      "train step time over time, each point judged against the median of the points before it; filters by "
      "label, backend and collective. Exit 0: written; 2: the database is missing or unusable.");
  c.app->add_option("--db", f->db, "the history database written by `dsreport ingest`")
      ->required()
      ->check(ds::cli::inputFile())
      ->envname("DSREPORT_DB");
  c.app->add_option("-o,--output", f->output, "the HTML file to write (replaced atomically)")
      ->capture_default_str()
      ->check(ds::cli::outputFile())
      ->envname("DSREPORT_DASHBOARD_OUTPUT");
  c.app->add_option("--label", f->options.labels, "keep only these cluster labels (repeatable)");
  c.app->add_option("--backend", f->options.backends, "keep only these backends (repeatable)");
  c.app->add_option("--collective", f->options.collectives,
                    "keep only these collectives (repeatable; \"train\" for the train step series)");
  c.app->add_option("--size", f->options.sizes,
                    "keep only these message sizes of the busbw series, in bytes")
      ->transform(ds::cli::integer(0, 1LL << 50));
  c.app
      ->add_option("--window", f->options.window,
                   "history points (before the current level) a point is tested against; their median is its "
                   "baseline")
      ->capture_default_str()
      ->transform(ds::cli::integer(1, 1000));
  c.app
      ->add_option("--recent", f->options.recent,
                   "points that make the current level: the judged point and those just before it")
      ->capture_default_str()
      ->transform(ds::cli::integer(1, 1000));
  c.app->add_option("--min-history", f->options.minHistory, "fewer history points than this: no verdict")
      ->capture_default_str()
      ->transform(ds::cli::integer(1, 1000));
  c.app
      ->add_option("--threshold", f->options.thresholdPct,
                   "smallest change flagged, in percent of the baseline")
      ->capture_default_str()
      ->transform(ds::cli::number(0, 1000));
  c.app
      ->add_option("--alpha", f->options.alpha,
                   "and a Mann-Whitney U test of the current level against the history must give p <= this")
      ->capture_default_str()
      ->transform(ds::cli::number(1e-6, 0.5));
  c.run = [f] {
    history::DashboardData data = history::queryDashboard(f->db, f->options);
    html::writeDashboard(data, f->output);
    int regressed = 0;
    for (const auto& s : data.series) regressed += s.latestRegressed ? 1 : 0;
    std::printf(
        "dsreport dashboard: wrote %s (%zu series from %d run(s); %d regressed at their latest run)\n",
        f->output.c_str(), data.series.size(), data.runs, regressed);
    return kExitOk;
  };
  return c;
}

}  // namespace ds::report::cli
