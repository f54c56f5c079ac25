// The flags the peer benchmarks share (ds_mpi_allreduce_raw, ds_membw_probe): a size sweep in
// nccl-tests' terms (-b -e -f -n -w) and how long to time each size (--min-time), plus the JSON file.
#pragma once

#include <cstddef>
#include <functional>
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

// What a program adds to the shared flags: called with a flag the shared parser does not know;
// returns whether it knows it. A flag that takes a value calls `value()`, which consumes the next
// argument or throws ConfigError "<flag> needs a value" when there is none.
using ExtraFlag = std::function<bool(const std::string& flag, const std::function<const char*()>& value)>;

// Parses argv into `flags`. Returns false when -h/--help was given (after printing `usage`).
// Throws ConfigError for unknown flags, missing values and values out of range.
bool parseSweepFlags(int argc, char** argv, SweepFlags& flags, const std::string& usage,
                     const ExtraFlag& extra = {});

// The sweep's sizes as dsbench coll steps them (coll::sweepSizes), each rounded down to a
// multiple of `elem` (at least one element). Sizes that round to one already listed are dropped.
std::vector<std::size_t> sweepSizes(const SweepFlags& flags, std::size_t elem);

// A result row of an f32 sum allreduce of `bytes` over `worldSize` ranks (busbw factor 2(n-1)/n),
// as the peers (raw MPI, the bandwidth limit) report it; the places are left for the caller.
report::SweepMeasurement allreduceRow(const std::string& backend, int worldSize, std::size_t bytes);

}  // namespace ds::bench::micro
