// The flags every dsbench subcommand shares, defined once so that a concept has one spelling and one
// environment twin everywhere (`dsbench coll -J x` and `dsbench train -J x` both work). Each function
// adds the option to a subcommand and returns it, for a check of the subcommand's own.
// bench/tests/cli_flags_test.cpp holds every subcommand to this.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace ds::bench::flags {

// -J,--json FILE (DSBENCH_JSON): where rank 0 writes the result as JSON.
CLI::Option* json(CLI::App* app, std::string& path, const std::string& help);

// -T,--timeout SECONDS (DSBENCH_TIMEOUT).
template <typename T>
CLI::Option* timeout(CLI::App* app, T& seconds, const std::string& help) {
  return app->add_option("-T,--timeout", seconds, help)->envname("DSBENCH_TIMEOUT");
}

// --backend NAME (DSBENCH_BACKEND): one name, or a comma list where the subcommand compares backends.
template <typename T>
CLI::Option* backend(CLI::App* app, T& target, const std::string& help) {
  return app->add_option("--backend", target, help)->envname("DSBENCH_BACKEND");
}

// --init-method URL (DSBENCH_INIT_METHOD).
CLI::Option* initMethod(CLI::App* app, std::string& url);

// --label NAME (DSBENCH_LABEL); `given` tells an explicit empty label from none.
CLI::Option* label(CLI::App* app, std::string& label, bool& given);

// --repeat R (DSBENCH_REPEAT): passes over the whole measurement, the order rotated each pass; every
// pass is kept in the JSON and dsreport compare tests them.
CLI::Option* repeat(CLI::App* app, int& passes, const std::string& what);

// --quiet: do not log what init_distributed discovered (clears `verbose`).
CLI::Option* quiet(CLI::App* app, bool& verbose);

}  // namespace ds::bench::flags
