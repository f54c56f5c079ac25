// Every check dsdiag knows, with stable ids, and the runner that applies --only/--skip.
#pragma once

#include <string>
#include <vector>

#include "diag/check.h"

namespace ds::diag {

// Local checks in display order (families: env, net, gpu, nccl, mpi, system, runner).
const std::vector<CheckDef>& localChecks();

// The step of world mode whose result a world check judges. Findings come out step by step, in
// this order; within a step, in the order of worldChecks().
enum class WorldStep {
  kGather,   // the store's join and rank 0's gather of the local reports
  kRecords,  // what every rank reported (its local records)
  kFleet,    // the fleet stages' judgement: reachability, links, hosts
  kSmoke,    // the smoke allreduce (needs the process group)
  kClock,    // the clock exchange (needs the process group)
};

// Checks of a step that needs the process group are skipped, with the reason, when rank 0 did not
// create it (the fleet has suspects, or none of them is selected).
constexpr bool needsProcessGroup(WorldStep s) { return s == WorldStep::kSmoke || s == WorldStep::kClock; }

struct WorldFacts;  // diag/world/world_checks.h

// A cross-rank check of world mode: a pure function of the facts rank 0 collected.
struct WorldCheckDef {
  const char* id;
  const char* title;  // one line for --list
  WorldStep step;
  Finding (*judge)(const WorldFacts&);
};
// In --list order; diag/world/world_checks.h declares the functions and runs them.
const std::vector<WorldCheckDef>& worldChecks();

// A selection pattern matches an id exactly, a whole family ("net"), or a prefix glob ("net.*").
bool patternMatches(const std::string& pattern, const std::string& id);

// Throws ConfigError naming patterns that match no check (a typo would silently run nothing).
struct Selection {
  std::vector<std::string> only;
  std::vector<std::string> skip;
  bool selected(const std::string& id) const;
};
void validateSelection(const Selection& s);

// Runs the selected local checks; a check that throws becomes a FAIL naming the exception.
std::vector<DiagRecord> runLocalChecks(Context& ctx, const Selection& sel, int rank, const std::string& host);

}  // namespace ds::diag
