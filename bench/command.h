// One dsbench subcommand: its CLI11 options bound straight into a typed options struct, and the one
// library call that runs it (STYLE.md: CLIs are thin).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace ds::bench {

struct Command {
  CLI::App* app = nullptr;
  // Runs the command; returns the exit code (bench/exit_codes.h). ds::Error escapes to runMain.
  std::function<int()> run;
};

// Each subcommand module provides one of these (bench/world, bench/coll, bench/train).
Command addWorldCommand(CLI::App& parent);

}  // namespace ds::bench
