// The flags every dsbench subcommand shares, defined once so that a concept has one spelling and one
// environment twin everywhere (`dsbench coll -J x` and `dsbench train -J x` both work). Each function
// adds the option to a subcommand and returns it, for a check of the subcommand's own.
// bench/tests/cli_flags_test.cpp holds every subcommand to this.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <type_traits>

#include "engine/common/cli.h"

namespace ds::bench::flags {

// -J,--json FILE (DSBENCH_JSON): where rank 0 writes the result as JSON; checked as an output file
// before any work (a directory, a device or a missing folder is refused before the run, not after).
CLI::Option* json(CLI::App* app, std::string& path, const std::string& help);

// -T,--timeout SECONDS (DSBENCH_TIMEOUT): 0 (the default timeout) to 1e6 s; whole seconds where the
// subcommand keeps an integer. NaN and inf are refused as typed (NaN turned the sweep's timeout off).
template <typename T>
CLI::Option* timeout(CLI::App* app, T& seconds, const std::string& help) {
  return app->add_option("-T,--timeout", seconds, help)
      ->transform(std::is_integral_v<T> ? cli::integer(0, 1000000) : cli::number(0, 1e6))
      ->envname("DSBENCH_TIMEOUT");
}

// The backends dsbench knows (engine/comm/factory.cpp).
CLI::Validator backendNames(bool commaList);

// --backend NAME (DSBENCH_BACKEND): one name, or (commaList) a comma list where the subcommand compares
// backends.
template <typename T>
CLI::Option* backend(CLI::App* app, T& target, const std::string& help, bool commaList = false) {
  return app->add_option("--backend", target, help)->check(backendNames(commaList))->envname("DSBENCH_BACKEND");
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
