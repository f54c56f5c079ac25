// One dsreport subcommand: its CLI11 options bound into a typed options struct and the one library
// call that runs it (STYLE.md: CLIs are thin). Each subcommand lives in its own file here.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "engine/common/cli.h"
#include "reports/input_file.h"
#include "reports/json_io.h"

namespace ds::report::cli {

// dsreport's exit codes. compare's 0/1/2 are the CI contract; the others follow it.
enum ExitCode : int {
  kExitOk = 0,
  kExitRegression = 1,    // compare: at least one regression; dashboard/ingest never return it
  kExitBadInput = 2,      // unreadable, corrupt or mismatched input, bad flags
  kExitInternal = 3,      // a dsperf bug or an unexpected exception
  kExitInconclusive = 4,  // compare: no regression shown, but too few runs to tell (compare.h); check: a
                          // host whose figure is too noisy to judge (cannot_judge, check_schema.h)
};

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;  // returns an ExitCode; ds::Error escapes to main
  // The exit code of bad flags or input (ConfigError, IoError, a CLI parse error): kExitBadInput, but
  // check's health-gate codes give 2 to unhealthy hosts, so there it is 3 ("could not run").
  int badInputExit = kExitBadInput;
};

// --max-input-mb (DSREPORT_MAX_INPUT_MB) of the subcommands that read result files: the readers'
// size cap (reports/json_io.h), for the rare result file beyond 256 MiB.
inline void addMaxInputFlag(CLI::App* sub) {
  sub->add_option_function<long long>(
         "--max-input-mb", [](const long long& mb) { setMaxInputBytes(static_cast<std::size_t>(mb) << 20); },
         "largest input file read, MiB (default 256)")
      ->transform(ds::cli::integer(1, 1 << 20))
      ->envname("DSREPORT_MAX_INPUT_MB");
}

// The check of a result-file argument: ds::cli::inputFile, and where a sweep JSON is missing but its
// journal is there (a run cut off before it wrote the JSON), the message names the journal to pass.
// (result_file.cpp)
CLI::Validator resultFile();

Command addHtmlCommand(CLI::App& parent);       // html_command.cpp
Command addCompareCommand(CLI::App& parent);    // compare_command.cpp
Command addIngestCommand(CLI::App& parent);     // ingest_command.cpp
Command addDashboardCommand(CLI::App& parent);  // dashboard_command.cpp
Command addImportCommand(CLI::App& parent);     // import_command.cpp
Command addBaselineCommand(CLI::App& parent);   // baseline_command.cpp
Command addCheckCommand(CLI::App& parent);      // check_command.cpp
Command addExportCommand(CLI::App& parent);     // export_command.cpp

// CLI11 drops a "--" before positional arguments; compare's "--" (BASE... -- CURRENT...) is turned into
// a hidden flag here, before parsing, so that compare knows where it stood. Other commands' args are
// left alone. (compare_command.cpp)
void markRunSeparator(std::vector<std::string>& args);

}  // namespace ds::report::cli
