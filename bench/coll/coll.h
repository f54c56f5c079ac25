// `dsbench coll`: collective sweeps with nccl-tests' flags and output (REFERENCE.md §5).
//
// Several backends in one run (--backend gloo,mpi): the process has one World, on the first backend
// listed. Each further backend gets its own process group on the world's store
// (comm::createProcessGroup with groupName "dsbench-coll-<backend>", so its keys live under
// "pg/dsbench-coll-<backend>/"), created when its turn comes and destroyed after its sweep. Backends
// therefore run one after another, never at the same time, and every backend sees the same ranks,
// sizes and harness.
#pragma once

#include "bench/coll/coll_options.h"

namespace ds::bench::coll {

// Runs the sweep on every rank; rank 0 prints the table and writes -J and the journal. Returns the
// exit code (bench/exit_codes.h): 0, or 7 for wrong data / bandwidth below NCCL_TESTS_MIN_BW. A
// timeout (4), a backend failure (3) or an I/O error (6) during the sweep ends the process here,
// after rank 0 wrote what was measured (the table's footer, the final JSON, the journal's end).
// Bad flags throw ConfigError before anything starts.
int runColl(const CollFlags& flags);

}  // namespace ds::bench::coll
