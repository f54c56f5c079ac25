// dsdiag --world: every rank runs its local checks after joining the job's store; rank 0 gathers
// them (bounded by --timeout, naming ranks that never report), runs the collective checks (smoke
// allreduce, clock skew, pairwise link matrix) with every rank, and adds the cross-rank checks.
#pragma once

#include "diag/registry.h"

namespace ds::diag {

struct WorldOutcome {
  bool root = false;           // rank 0 (prints the merged report), or rendezvous failed (prints its own)
  report::DiagReport report;   // merged on rank 0; this rank's local records (+ rendezvous) elsewhere
  int exitCode = 0;            // agreed by rank 0 when rendezvous succeeded
  int rank = -1;
};

// Collective: every rank of the job calls it. Never throws for problems of the job (those are
// findings); throws ConfigError only for dsdiag's own misuse.
WorldOutcome runWorld(Context& ctx, const Selection& sel, const std::string& toolVersion);

}  // namespace ds::diag

namespace ds::diag {
// After the outcome was printed: rank 0 publishes the exit code the other ranks wait for, then every
// rank leaves the world (bounded). No-op when rendezvous failed.
void finishWorld(const WorldOutcome& outcome);
}  // namespace ds::diag
