// Every check dsdiag knows, with stable ids, and the runner that applies --only/--skip.
#pragma once

#include <string>
#include <vector>

#include "diag/check.h"

namespace ds::diag {

// Local checks in display order (families: env, net, gpu, nccl, mpi, system, runner).
const std::vector<CheckDef>& localChecks();

// The cross-rank checks of world mode, for --list and selection (they run in world.cpp).
struct WorldCheckInfo {
  const char* id;
  const char* title;
};
const std::vector<WorldCheckInfo>& worldChecks();

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
