// Synthetic dsbench results for the history tests, written with the real writers (sweepToJson,
// trainToJson, writeJsonAtomic), so the files are what dsbench writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "reports/baseline/check_schema.h"
#include "reports/diag/diag_schema.h"
#include "reports/sweep/sweep_schema.h"
#include "reports/train/train_schema.h"

namespace ds::report::history::testing {

inline constexpr std::size_t kMiB = std::size_t{1} << 20;

// The integer `sql` (a SELECT count(*) ...) answers in the history database at `db`.
std::int64_t countRows(const std::string& db, const std::string& sql);

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
  // The run's hosts (one: a single-host run, whose rows are that host's samples).
  std::vector<std::string> hosts{"node-a", "node-b"};
  // When set: every host's hardware is recorded with this GPU name (the SKU key names it).
  std::string gpuName;
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

// A fleet-mode dsdiag report of `hosts` (one rank each): a ring of link pairs and a second round of
// neighbours two apart, every pair at `bandwidth` GB/s and 40 us, except those of `slowHost` (0.1 of
// it) and the pair of hosts 0 and 1, which failed.
DiagReport makeFleetDiag(const std::vector<std::string>& hosts, const std::string& slowHost = "",
                         double bandwidth = 2.0);
std::string writeFleetDiag(const std::string& path, const std::vector<std::string>& hosts,
                           const std::string& slowHost = "");

// A dsperf.check record at `time`: each host's state as given, with a fired variance finding for the
// unhealthy ones.
CheckReport makeCheck(const std::string& time, const std::vector<std::pair<std::string, CheckState>>& hosts);
std::string writeCheck(const std::string& path, const CheckReport& check);

// Rows a SweepSpec stores (out- and in-place of every size and collective).
inline std::size_t sweepRows(const SweepSpec& s) { return 2 * s.sizes.size() * s.collectives.size(); }

}  // namespace ds::report::history::testing
