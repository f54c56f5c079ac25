// `dsbench train`: the subcommand's flags (each with a DSBENCH_* environment twin), bound into
// TrainOptions (bench/train/train.h).
#pragma once

#include "bench/command.h"

namespace ds::bench {

Command addTrainCommand(CLI::App& parent);

}  // namespace ds::bench
