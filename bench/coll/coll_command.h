// `dsbench coll`: binds nccl-tests' flags into CollFlags and calls runColl (bench/coll/coll.h).
#pragma once

#include "bench/command.h"

namespace ds::bench {

Command addCollCommand(CLI::App& parent);

}  // namespace ds::bench
