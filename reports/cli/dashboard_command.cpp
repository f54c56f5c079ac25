// dsreport dashboard --db results.sqlite [-o dashboard.html]: the history's trends per metric with
// regressions flagged against a rolling baseline, as one self-contained HTML page with filters. The
// flags below narrow what the page holds; the page's own filters narrow what it shows.
// dsreport dashboard --fleet --db results.sqlite [-o fleet-dashboard.html]: the per-host view (a
// second page: hosts x time heatmap, drift per host, a host's series, the quarantine list), for the
// operator of a fleet; --exclude-file writes the quarantine list for srun/sbatch --exclude.
// Exit codes: 0 written (regressions and quarantined hosts are shown, not an error: use `dsreport
// compare` or `dsreport check` for a CI verdict); 2 the database is missing, not a dsreport history,
// or newer than this dsreport, or a flag is bad; 3 a dsperf bug.
#include <fmt/format.h>

#include <cctype>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "reports/cli/command.h"
#include "reports/history/dashboard_data.h"
#include "reports/history/fleet_data.h"
#include "reports/html/dashboard_html.h"
#include "reports/html/fleet_dashboard_html.h"

namespace ds::report::cli {

namespace {

struct DashboardFlags {
  std::string db;
  std::string output = "dashboard.html";
  history::DashboardOptions options;
  bool fleet = false;
  history::FleetOptions fleetOptions;
  std::string excludeFile;
};

// A pattern key as patternKey() makes it: words of printable ASCII joined by single spaces, the last
// "w<ranks>" ("busbw allreduce nccl f32 sum 1073741824 out w8", "link_bw pair tcp w16").
void checkPatternKey(const std::string& key) {
  bool ok = key.size() >= 4 && key.front() != ' ' && key.find("  ") == std::string::npos;
  for (char c : key) ok = ok && c >= ' ' && c <= '~';
  auto last = key.rfind(' ');
  if (ok && last != std::string::npos && last + 2 < key.size() && key[last + 1] == 'w') {
    for (std::size_t i = last + 2; i < key.size(); ++i) ok = ok && key[i] >= '0' && key[i] <= '9';
  } else {
    ok = false;
  }
  if (!ok)
    throw ConfigError(
        fmt::format("{} is not a pattern key (such as \"busbw allreduce nccl f32 sum 1073741824 out "
                    "w8\"; the fleet page and `dsreport baseline` name the patterns there are)",
                    ds::cli::shown(key)));
}

void checkIsoTime(const std::string& t) {
  bool ok = t.size() >= 10 && t[4] == '-' && t[7] == '-' && (t.size() == 10 || t[10] == 'T');
  for (int i : {0, 1, 2, 3, 5, 6, 8, 9})
    ok = ok && t.size() >= 10 && std::isdigit(static_cast<unsigned char>(t[i]));
  for (char c : t) ok = ok && c > ' ' && c <= '~';
  if (!ok)
    throw ConfigError(fmt::format(
        "{} is not an ISO 8601 UTC time (\"2026-03-01\" or \"2026-03-01T02:00:00Z\")", ds::cli::shown(t)));
}

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
  auto* output =
      c.app->add_option("-o,--output", f->output,
                        "the HTML file to write (replaced atomically; fleet-dashboard.html with --fleet)");
  output->capture_default_str()->check(ds::cli::outputFile())->envname("DSREPORT_DASHBOARD_OUTPUT");
  c.app->add_option("--label", f->options.labels, "keep only these cluster labels (repeatable)");
  c.app->add_option("--backend", f->options.backends, "keep only these backends (repeatable)");
  c.app->add_option("--collective", f->options.collectives,
                    "keep only these collectives (repeatable; \"train\" for the train step series)");
  c.app->add_option("--size", f->options.sizes, "keep only these message sizes of the busbw series, in bytes")
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
  auto* fleet = c.app->add_flag("--fleet", f->fleet,
                                "write the fleet page instead: every host's figures over time (a hosts x "
                                "time heatmap relative to the fleet "
                                "median of its SKU), drift per host, a host's series, and the hosts that "
                                "failed k of their last n checks");
  for (const char* series : {"--backend", "--collective", "--size", "--window", "--recent", "--min-history",
                             "--threshold", "--alpha"})
    c.app->get_option(series)->excludes(fleet);
  c.app
      ->add_option(
          "--pattern", f->fleetOptions.patterns,
          "with --fleet: show these patterns (repeatable; keys such as \"busbw allreduce nccl f32 sum "
          "1073741824 out w8\"); default: the largest sizes first, up to --max-patterns")
      ->check(ds::cli::checkedBy(checkPatternKey))
      ->needs(fleet);
  c.app
      ->add_option("--metric", f->fleetOptions.metrics,
                   "with --fleet: choose patterns of these metrics only (repeatable)")
      ->check(ds::cli::oneOf({"busbw", "link_bw", "link_latency"}))
      ->needs(fleet);
  c.app
      ->add_option("--max-patterns", f->fleetOptions.maxPatterns,
                   "with --fleet: at most this many patterns when choosing (each adds hosts x columns bytes)")
      ->capture_default_str()
      ->transform(ds::cli::integer(1, 64))
      ->needs(fleet);
  c.app
      ->add_option("--max-columns", f->fleetOptions.maxColumns,
                   "with --fleet: at most this many time columns (older history is put in wider buckets)")
      ->capture_default_str()
      ->transform(ds::cli::integer(2, 5000))
      ->needs(fleet);
  c.app->add_option("--since", f->fleetOptions.since, "with --fleet: only runs from this UTC time (ISO 8601)")
      ->check(ds::cli::checkedBy(checkIsoTime))
      ->needs(fleet);
  c.app
      ->add_option("--until", f->fleetOptions.until,
                   "with --fleet: only runs up to this UTC time (a date: its end)")
      ->check(ds::cli::checkedBy(checkIsoTime))
      ->needs(fleet);
  c.app
      ->add_option(
          "--quarantine-k", f->fleetOptions.k,
          "with --fleet: a host that failed at least this many of its last --quarantine-n dsreport check "
          "verdicts is quarantined")
      ->capture_default_str()
      ->transform(ds::cli::integer(1, 1000))
      ->needs(fleet);
  c.app
      ->add_option("--quarantine-n", f->fleetOptions.n,
                   "with --fleet: how many of each host's newest check verdicts the quarantine rule reads")
      ->capture_default_str()
      ->transform(ds::cli::integer(1, 1000))
      ->needs(fleet);
  c.app
      ->add_option("--exclude-file", f->excludeFile,
                   "with --fleet: also write the quarantine list there, in fleet mode's exclude-file format "
                   "(one Slurm "
                   "hostlist line, empty when none; srun --exclude=./FILE)")
      ->check(ds::cli::outputFile())
      ->needs(fleet);
  c.run = [f, output] {
    if (f->fleet) {
      f->fleetOptions.labels = f->options.labels;
      if (output->count() == 0) f->output = "fleet-dashboard.html";
      history::FleetData data = history::queryFleet(f->db, f->fleetOptions);
      html::writeFleetDashboard(data, f->output);
      std::vector<std::string> unlisted;
      const std::string exclude = history::quarantineExcludeFile(data, &unlisted);
      if (!f->excludeFile.empty()) writeTextAtomic(f->excludeFile, exclude);
      std::printf(
          "dsreport dashboard: wrote %s (fleet: %zu host(s), %d run(s), %zu pattern(s); %zu host(s) failed "
          "%d of "
          "their last %d checks%s%s)\n",
          f->output.c_str(), data.hosts.size(), data.runs, data.patterns.size(), data.quarantine.size(),
          f->fleetOptions.k, f->fleetOptions.n, exclude.empty() ? "" : ": ",
          exclude.empty() ? "" : exclude.substr(0, exclude.size() - 1).c_str());
      if (!unlisted.empty())
        std::fprintf(stderr,
                     "dsreport dashboard: %zu quarantined host name(s) cannot stand in a Slurm hostlist and "
                     "are not in "
                     "the exclude list; the page names them\n",
                     unlisted.size());
      return kExitOk;
    }
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
