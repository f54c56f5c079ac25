// The flags the peer benchmarks share (ds_mpi_allreduce_raw, ds_membw_probe): a size sweep in
// nccl-tests' terms (-b -e -f -n -w) and how long to time each size (--min-time), plus the JSON file.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "reports/sweep/sweep_schema.h"

namespace ds::bench::micro {

struct SweepFlags {
  std::size_t minBytes = 8;                       // -b
  std::size_t maxBytes = std::size_t{256} << 20;  // -e
  int stepFactor = 2;                             // -f
  int iters = 20;                                 // -n: timed iterations per size (at least)
  int warmupIters = 5;                            // -w
  double minTimeS = 0;   // --min-time: more iterations until the loop lasts this long
  std::string jsonPath;  // -J
};

// Adds the shared flags to `app`, each checked as typed (a bad value is refused naming its flag).
// A program adds its own flags to the same app.
void addSweepFlags(CLI::App& app, SweepFlags& flags);

// Parses argv (ds::cli::parse) and checks how the values relate (-b not above -e). Returns the exit
// code when the program should stop at once: 0 after --help, kExitConfig after a bad flag or value
// (CLI11 printed the message); std::nullopt to go on. Throws ConfigError for -b above -e.
std::optional<int> parseFlags(CLI::App& app, const SweepFlags& flags, int argc, char** argv);

// The sweep's sizes as dsbench coll steps them (coll::sweepSizes), each rounded down to a
// multiple of `elem` (at least one element). Sizes that round to one already listed are dropped.
std::vector<std::size_t> sweepSizes(const SweepFlags& flags, std::size_t elem);

// A result row of an f32 sum allreduce of `bytes` over `worldSize` ranks (busbw factor 2(n-1)/n),
// as the peers (raw MPI, the bandwidth limit) report it; the places are left for the caller.
report::SweepMeasurement allreduceRow(const std::string& backend, int worldSize, std::size_t bytes);

}  // namespace ds::bench::micro
