// The cross-rank checks of world mode. Each is a pure function from the facts rank 0 collected to
// one finding, listed with its id in worldChecks() (diag/registry.cpp); runWorld (world_mode.cpp)
// only collects the facts and calls runWorldChecks. Unit-tested with crafted facts.
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "diag/registry.h"
#include "diag/world/cross_checks.h"
#include "reports/diag/fleet_schema.h"

namespace ds::diag {

// The smoke allreduce as rank 0 saw it, every rank's result gathered.
struct SmokeOutcome {
  double expected = 0;              // the sum every element should hold
  double timeUs = 0;                // rank 0's allreduce
  std::vector<std::string> errors;  // "rank R: got X" or "rank R: <error>", per rank that went wrong
  std::vector<int> silent;          // ranks that posted no result
};

// The clock exchange on rank 0: one sample per peer, or the error that stopped it.
struct ClockOutcome {
  std::vector<ClockSample> samples;
  std::string error;
  std::string notRun;  // why the exchange did not run (the smoke left the group unusable)
};

// What the world checks read, filled by runWorld on rank 0 step by step (WorldStep): a check reads
// only the fields of its own step and the ones above it.
struct WorldFacts {
  int worldSize = 0;  // the size rank 0 expects
  // kGather
  const report::FleetReport* fleet = nullptr;  // also kFleet: the ranks' join state and the judgement
  double joinSeconds = 0;
  std::vector<int> missing;  // ranks whose local report never reached rank 0
  std::chrono::milliseconds timeout{0};
  // kRecords
  std::span<const RankReport> reports;
  // kSmoke, kClock: only when the process group ran (processGroupSkipped empty)
  std::string processGroupSkipped;  // why it did not run
  std::string jobBackend;           // the job's backend
  std::string transport;            // the one dsdiag's process group used
  std::string transportWhy;         // why it is not the job's (diag/world/transport.h)
  SmokeOutcome smoke;
  ClockOutcome clock;
};

// world.<id> as a record (rank -1, no host: it speaks for the job).
DiagRecord worldRecord(const char* id, Finding f);

// Runs the selected checks of worldChecks() whose step is `step`, in table order. A step that needs
// the process group yields "Not run" skips when facts.processGroupSkipped is set.
std::vector<DiagRecord> runWorldStep(const WorldFacts& facts, const Selection& sel, WorldStep step);
// Every step in WorldStep's order: the world findings of a run, in report order.
std::vector<DiagRecord> runWorldChecks(const WorldFacts& facts, const Selection& sel);

namespace world {

// One per row of worldChecks(), named after the id.
Finding rendezvous(const WorldFacts& f);         // world_checks.cpp
Finding gather(const WorldFacts& f);             // world_checks.cpp
Finding ranksUnique(const WorldFacts& f);        // cross_checks.cpp
Finding localRankUnique(const WorldFacts& f);    // cross_checks.cpp
Finding gpuUnique(const WorldFacts& f);          // cross_checks.cpp
Finding versionsEqual(const WorldFacts& f);      // cross_checks.cpp
Finding ncclSettingsEqual(const WorldFacts& f);  // cross_checks.cpp
Finding coresDisjoint(const WorldFacts& f);      // cross_checks.cpp
Finding hostnames(const WorldFacts& f);          // cross_checks.cpp
Finding clockSkew(const WorldFacts& f);          // world_checks.cpp
Finding smokeAllreduce(const WorldFacts& f);     // world_checks.cpp
Finding reachability(const WorldFacts& f);       // world_checks.cpp
Finding linkMatrix(const WorldFacts& f);         // world_checks.cpp
Finding hosts(const WorldFacts& f);              // world_checks.cpp

// The two world findings a rank makes on its own, outside the table: it could not join the store
// (any rank), or it never got rank 0's verdict (ranks other than 0).
Finding rendezvousFailed(int rank, double seconds, const std::string& error);  // world.rendezvous
Finding noVerdict(const std::string& error);                                   // world.gather

}  // namespace world
}  // namespace ds::diag
