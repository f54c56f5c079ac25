// `dsbench gpu`: the subcommand's flags (each with a DSBENCH_* environment twin), bound into GpuFlags
// (bench/gpu/gpu.h).
#pragma once

#include "bench/command.h"

namespace ds::bench {

Command addGpuCommand(CLI::App& parent);

}  // namespace ds::bench
