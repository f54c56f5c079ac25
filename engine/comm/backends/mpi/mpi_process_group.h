// The mpi backend of ProcessGroup.
#pragma once

#include <memory>

#include "engine/comm/process_group.h"

namespace ds::comm {

// Creates the mpi process group for options.rank of options.size. Collective: every rank calls it.
// Throws ConfigError / BackendError / TimeoutError with a message naming what to fix.
// Refuses device (CUDA) buffers unless the MPI reads them itself (mpiCudaAware).
std::unique_ptr<ProcessGroup> makeMpiProcessGroup(const ProcessGroupOptions& options);

// Whether this MPI reads device (CUDA) buffers itself: Open MPI's MPIX_Query_cuda_support() where
// the build has it (mpi-ext.h), else false. `why`, when given, gets the answer in words ("Open MPI
// built without CUDA support (MPIX_CUDA_AWARE_SUPPORT 0)").
bool mpiCudaAware(std::string* why = nullptr);

}  // namespace ds::comm
