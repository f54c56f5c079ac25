// dsdiag --world: every rank joins the job's store (no process group yet) and runs its local checks;
// the fleet stages (diag/fleet) then probe reachability and test links between host leaders in
// rounds, and judge every host. Rank 0 gathers the local reports (bounded by --timeout, naming ranks
// that never report) and adds the cross-rank checks. Only when every host is healthy does it create
// the job's process group for the smoke allreduce and the clock skew.
#pragma once

#include <memory>

#include "diag/registry.h"

namespace ds::diag {
namespace fleet {
class FleetRun;
}

struct WorldOutcome {
  bool root = false;           // rank 0 (prints the merged report), or rendezvous failed (prints its own)
  report::DiagReport report;   // merged on rank 0; this rank's local records (+ rendezvous) elsewhere
  int exitCode = 0;            // agreed by rank 0 when rendezvous succeeded
  int rank = -1;
  std::shared_ptr<fleet::FleetRun> fleet;  // null when this rank could not join
  bool pgUp = false;                       // the process group of the smoke test was created
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
