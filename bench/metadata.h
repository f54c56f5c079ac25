// What a sweep records about the run so that two runs can be compared honestly: versions, the
// launcher, the relevant environment, the command line and the time. Rank-local; pure reads.
#pragma once

#include <map>
#include <string>

#include "reports/schema/placement.h"

namespace ds::bench::coll {

// dsperf and its git sha (from CMake at configure time), NCCL (header, when this binary links the
// nccl backend; the runtime's too when withNccl, which opens libnccl, or when this process already
// did), Open MPI (MPI_Get_library_version) and Gloo (its config.h), each when built in.
std::map<std::string, std::string> libraryVersions(bool withNccl = false);
// DS_*, DSBENCH_*, DEEPSPEED_*, NCCL_*, OMPI_*, GLOO_*, MASTER_ADDR/PORT and a few launcher ids.
std::map<std::string, std::string> relevantEnv();
// "dsrun/torchrun", "mpirun (Open MPI)", "mpirun (Hydra)", "srun" or "none".
std::string launcherName();
// This process's command line from /proc/self/cmdline, arguments with spaces quoted.
std::string commandLine();
// This process's CPU affinity (sched_getaffinity), the online CPUs and the node's load
// (/proc/loadavg) now. Fields that cannot be read stay at their "unknown" values.
report::Placement currentPlacement();

}  // namespace ds::bench::coll
