// The nccl backend of ProcessGroup.
#pragma once

#include <memory>

#include "engine/comm/process_group.h"

namespace ds::comm {

// Creates the nccl process group for options.rank of options.size. Collective: every rank calls it.
// Throws ConfigError / BackendError / TimeoutError with a message naming what to fix.
std::unique_ptr<ProcessGroup> makeNcclProcessGroup(const ProcessGroupOptions& options);

}  // namespace ds::comm
