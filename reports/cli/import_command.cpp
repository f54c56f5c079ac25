// dsreport import NCCL_TESTS_OUTPUT -o run.json [--label X] [--backend nccl] [--collective NAME]: an
// nccl-tests result (console text of any recent version, or its -J JSON) as a dsperf sweep JSON, which
// every other subcommand (html, compare, ingest) reads.
#include <cstdio>
#include <memory>
#include <string>

#include "reports/cli/command.h"
#include "reports/import/nccl_tests_import.h"
#include "reports/json_io.h"
#include "reports/schema/label.h"

namespace ds::report::cli {

namespace {

struct ImportCliOptions {
  std::string input;
  std::string output;
  NcclImportOptions import;
};

}  // namespace

Command addImportCommand(CLI::App& parent) {
  auto o = std::make_shared<ImportCliOptions>();
  Command c;
  c.app = parent.add_subcommand(
      "import",
      "Convert nccl-tests output (the text table of any recent version, or its -J JSON) into a dsperf sweep "
      "JSON, so existing nccl-tests history can be compared, reported and ingested like dsbench runs.");
  c.app->add_option("input", o->input, "nccl-tests console output (.txt/.log) or its -J JSON file")
      ->required()
      ->check(ds::cli::inputFile());
  c.app->add_option("-o,--output", o->output, "the dsperf sweep JSON to write (atomically)")
      ->required()
      ->check(ds::cli::outputFile())
      ->envname("DSREPORT_IMPORT_OUTPUT");
  CLI::Option* labelOpt =
      c.app
          ->add_option("--label", o->import.label, "the cluster or system the run describes (metadata.label)")
          ->check(ds::cli::checkedBy([](const std::string& t) { checkLabel(t, "--label"); }))
          ->envname("DSREPORT_LABEL");
  c.app->add_option("--backend", o->import.backend, "the backend column of the imported rows")
      ->capture_default_str()
      ->envname("DSREPORT_IMPORT_BACKEND");
  c.app
      ->add_option("--collective", o->import.collective,
                   "the collective, when the output does not name it (older versions): allreduce, allgather, "
                   "reduce_scatter, alltoall, broadcast, reduce, sendrecv or nccl-tests' binary name")
      ->envname("DSREPORT_IMPORT_COLLECTIVE");
  addMaxInputFlag(c.app);
  c.run = [o, labelOpt]() -> int {
    if (labelOpt->count() > 0) checkLabel(o->import.label, "--label");
    SweepRun run = importNcclTestsFile(o->input, o->import);
    writeJsonAtomic(o->output, sweepToJson(run));
    std::string hosts;
    for (const auto& h : run.metadata.hosts) hosts += (hosts.empty() ? "" : ",") + h;
    std::printf("dsreport import: %s -> %s: %zu row(s) of %s on %d rank(s), hosts %s\n", o->input.c_str(),
                o->output.c_str(), run.results.size(), run.args.collectives.at(0).c_str(),
                run.metadata.worldSize, hosts.empty() ? "(not recorded)" : hosts.c_str());
    return kExitOk;
  };
  return c;
}

}  // namespace ds::report::cli
