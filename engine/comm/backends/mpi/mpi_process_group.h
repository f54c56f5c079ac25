// The mpi backend of ProcessGroup.
#pragma once

#include <memory>

#include "engine/comm/process_group.h"

namespace ds::comm {

// Creates the mpi process group for options.rank of options.size. Collective: every rank calls it.
// Throws ConfigError / BackendError / TimeoutError with a message naming what to fix.
std::unique_ptr<ProcessGroup> makeMpiProcessGroup(const ProcessGroupOptions& options);

}  // namespace ds::comm
