// dsreport: HTML reports, run comparison with a regression verdict, a SQLite history and its
// dashboard, and import of nccl-tests results. Thin: each subcommand binds flags and calls reports/.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "engine/common/version.h"
#include "reports/cli/command.h"

int main(int argc, char** argv) {
  namespace cli = ds::report::cli;
  CLI::App app{"dsreport: reports, comparisons and history of dsbench / dsdiag results."};
  app.set_version_flag("--version", ds::versionLine("dsreport"));
  app.require_subcommand(1);
  std::vector<cli::Command> commands{cli::addHtmlCommand(app),   cli::addCompareCommand(app),
                                     cli::addIngestCommand(app), cli::addDashboardCommand(app),
                                     cli::addImportCommand(app), cli::addBaselineCommand(app),
                                     cli::addCheckCommand(app),  cli::addExportCommand(app)};
  try {
    if (argc > 0) app.name(argv[0]);  // as parse(argc, argv) would
    std::vector<std::string> args(argv + 1, argv + argc);
    cli::markRunSeparator(args);
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
    ds::cli::parse(app, std::move(args));
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    if (rc == 0) return cli::kExitOk;
    for (auto& c : commands)
      if (c.app->parsed()) return c.badInputExit;
    return cli::kExitBadInput;
  }
  for (auto& c : commands) {
    if (!c.app->parsed()) continue;
    try {
      return c.run();
    } catch (const ds::ConfigError& e) {
      std::fprintf(stderr, "dsreport: error: %s\n", e.what());
      return c.badInputExit;
    } catch (const ds::IoError& e) {
      std::fprintf(stderr, "dsreport: error: %s\n", e.what());
      return c.badInputExit;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dsreport: internal error: %s\n", e.what());
      return cli::kExitInternal;
    }
  }
  return cli::kExitInternal;
}
