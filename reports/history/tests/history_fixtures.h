// Synthetic dsbench results for the history tests, written with the real writers (sweepToJson,
// trainToJson, writeJsonAtomic), so the files are what dsbench writes.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "reports/sweep/sweep_schema.h"
#include "reports/train/train_schema.h"

namespace ds::report::history::testing {

inline constexpr std::size_t kMiB = std::size_t{1} << 20;

// "2026-01-01T00:00:00Z" plus `hours` hours.
std::string isoTime(int hours);

struct SweepSpec {
  std::string startTime = "2026-01-01T00:00:00Z";
  std::string label;
  std::string backend = "gloo";
  int worldSize = 4;
  std::vector<std::string> collectives{"allreduce"};
  std::vector<std::size_t> sizes{kMiB, 256 * kMiB};
  // Out-of-place busbw of every row, GB/s; in-place is 0.9 of it.
  double busBw = 10.0;
};

SweepRun makeSweep(const SweepSpec& spec);
// Writes the sweep's JSON to `path` and returns `path`.
std::string writeSweep(const std::string& path, const SweepSpec& spec);

struct TrainSpec {
  std::string startTime = "2026-01-01T00:00:00Z";
  std::string label;
  std::string backend = "gloo";
  double stepMs = 100.0;                   // step p50
  std::vector<double> bucketCapsMb{25.0};  // one configuration per cap
};

std::string writeTrain(const std::string& path, const TrainSpec& spec);

// Rows a SweepSpec stores (out- and in-place of every size and collective).
inline std::size_t sweepRows(const SweepSpec& s) { return 2 * s.sizes.size() * s.collectives.size(); }

}  // namespace ds::report::history::testing
