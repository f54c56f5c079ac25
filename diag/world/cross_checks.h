// The cross-rank checks of world mode that need only what every rank reported (WorldStep::kRecords):
// what a rank sends, and the clock samples' judgement. The checks themselves are declared in
// world_checks.h and listed in worldChecks() (diag/registry.cpp). Unit-tested with crafted reports.
#pragma once

#include <vector>

#include "diag/check.h"

namespace ds::diag {

// What one rank sent to rank 0.
struct RankReport {
  int rank = 0;
  std::string host;
  std::string toolVersion;
  std::vector<DiagRecord> records;
  // The backend this rank could run dsdiag's process group on (diag/world/transport.h), and why it
  // is not the job's own ("" when it is).
  std::string transport;
  std::string transportWhy;
};

// The data of check `id` in this rank's records, or nullptr when it did not run.
const Json* findData(const RankReport& r, const std::string& id);

// Every kRecords check of worldChecks() (world.ranks_unique ... world.hostnames), unselected ones too,
// in table order. `worldSize` is the size rank 0 expects.
std::vector<DiagRecord> crossRankChecks(const std::vector<RankReport>& reports, int worldSize);

// world.clock_skew: offsets of each rank's clock from rank 0's (ms), with their uncertainty.
struct ClockSample {
  int rank = 0;
  double offsetMs = 0;
  double rttMs = 0;
};
Finding judgeClockSkew(const std::vector<ClockSample>& samples);

}  // namespace ds::diag
