// system.thread_affinity: is a rank's CPU affinity mask wide enough for the threads it runs? A pure
// judgement over facts the check reads from the live process, so that tests can hand it fake masks.
#pragma once

#include <string>
#include <vector>

#include "diag/check.h"

namespace ds::diag {

struct AffinityFacts {
  std::vector<int> cpus;  // the rank's affinity mask
  int onlineCpus = 0;
  int blasThreads = 1;   // OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS; 1 when unset or unreadable
  std::string blasFrom;  // "OMP_NUM_THREADS=4", or "" when unset
  std::string launcher;  // "mpirun", "srun" or "" (another launcher, or none)
};

// Busy threads at once: the caller (which also runs BLAS thread 0), the other BLAS/OMP threads and
// the process group's worker; the heartbeat sleeps between beats and needs no core of its own. WARN
// when the mask has fewer CPUs than that, with the mpirun (--bind-to none, --map-by slot:PE=N) or
// srun (--cpus-per-task=N) flags that widen it.
Finding judgeThreadAffinity(const AffinityFacts& f);

}  // namespace ds::diag
