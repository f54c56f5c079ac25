// `dsbench world`: init_distributed, a store barrier, and a record of who every rank is. The
// smallest end-to-end check that a launcher, the discovery and the store agree.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/init.h"
#include "reports/schema/world.h"

namespace ds::bench {

struct WorldOptions {
  std::string backend;     // --backend; empty = the accelerator's default
  std::string initMethod;  // --init-method
  int timeoutSeconds = 0;  // --timeout; 0 = DEEPSPEED_TIMEOUT or 10 min
  std::string jsonPath;    // --json (written by rank 0)
  bool verbose = true;
  bool dryRun = false;     // --dry-run: print what discovery concludes and exit, contacting nothing
  std::string discovery;   // --discovery dsperf|deepspeed; empty = DS_DISCOVERY, else dsperf
};

// --dry-run --json: dsperf's plan (or its error) beside DeepSpeed's view of the same environment and
// every difference (schema dsperf.init_plan v1).
nlohmann::json dryRunJson(const InitOptions& init);

// This rank's record.
report::RankRecord describeRank(World& world);
// Collective: every rank publishes its record through the store; all ranks get all records, in rank
// order. Bounded by the world's timeout.
std::vector<report::RankRecord> gatherWorld(World& world);

// Collective: a one-element allreduce of rank+1, checked against n(n+1)/2.
report::SmokeResult smokeAllreduce(World& world);

// What `dsbench world` does: init, barrier, gather; rank 0 prints the table and writes the JSON.
// Returns the exit code.
int runWorld(const WorldOptions& options);

}  // namespace ds::bench
