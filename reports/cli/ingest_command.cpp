// dsreport ingest RUN.json... --db results.sqlite [--label NAME]: stores dsbench results, fleet-mode
// dsdiag reports and dsreport check results in the SQLite history (with every run's per-host samples). Exit
// codes: 0 every file stored or already present; 2 at least one file rejected (named, with the reason, on
// stderr; the others were still stored) or the database unusable.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "reports/cli/command.h"
#include "reports/history/ingest.h"
#include "reports/schema/label.h"

namespace ds::report::cli {

namespace {

struct IngestFlags {
  std::vector<std::string> files;
  std::string db;
  history::IngestOptions options;
  bool quiet = false;
};

}  // namespace

Command addIngestCommand(CLI::App& parent) {
  auto f = std::make_shared<IngestFlags>();
  Command c;
  c.app = parent.add_subcommand(
      "ingest",
      "Store dsbench results (coll sweeps, train runs, their journals, nccl-tests "
      "output), fleet-mode dsdiag reports and dsreport check results in a SQLite history "
      "database, one transaction per call, with every run's figures per host and link. A "
      "run or check already stored is skipped. Exit "
      "0: all stored or already there; "
      "2: some file rejected (the others were stored) or the database unusable.");
  c.app
      ->add_option(
          "files", f->files,
          "result files (dsbench -J/--json output, .jsonl journals, dsdiag --json of fleet mode, dsreport "
          "check -o output)")
      ->required();
  c.app->add_option("--db", f->db, "the history database; created when missing")
      ->required()
      ->check(ds::cli::outputFile())
      ->envname("DSREPORT_DB");
  c.app
      ->add_option(
          "--label", f->options.label,
          "cluster or system name stored with every run of this call, overriding the files' own label "
          "(dsbench --label)")
      ->check(ds::cli::checkedBy([](const std::string& t) { checkLabel(t, "--label"); }))
      ->envname("DSREPORT_LABEL");
  c.app
      ->add_option("--busy-timeout-ms", f->options.busyTimeoutMs,
                   "how long to wait for another ingest holding the database's write lock (default 60000)")
      ->transform(ds::cli::integer(0, 3600000));
  c.app->add_flag("-q,--quiet", f->quiet, "print only rejected files and the summary");
  addMaxInputFlag(c.app);
  c.run = [f] {
    auto report = history::ingestRuns(f->db, f->files, f->options);
    // Rejections go to stderr, so a CI log shows them among the errors; the rest to stdout.
    for (const auto& o : report.files) {
      if (o.status == history::IngestStatus::kRejected)
        std::fprintf(stderr, "dsreport ingest: rejected %s: %s\n", o.path.c_str(), o.reason.c_str());
    }
    std::string text = history::formatIngestReport(report, f->db, !f->quiet, false);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return report.rejected > 0 ? kExitBadInput : kExitOk;
  };
  return c;
}

}  // namespace ds::report::cli
