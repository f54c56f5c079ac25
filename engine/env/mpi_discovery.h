// The part of discovery that only the MPI launcher can settle: rank 0's address when MASTER_ADDR
// is unset, and local ranks when the launcher exports none (DeepSpeed's mpi_discovery).
#pragma once

#include "engine/env/world_info.h"

namespace ds::env {

// If w.needsMpiMasterAddr or w.needsMpiLocalRanks, initialises MPI (once per process) and fills
// those fields: rank 0's first address broadcast to all; local rank = number of lower ranks on the
// same host. Collective: every rank of the job must call it. Throws ConfigError when MPI's rank or
// size differ from w's, or when MASTER_ADDR is needed and this build has no MPI.
void resolveThroughMpi(WorldInfo& w);

}  // namespace ds::env
