#pragma once

#include <string>
#include <vector>

#include "reports/train/train_schema.h"

namespace ds::report {

// The console table of `dsbench train`: a header naming model, ranks and backend, then one row per
// configuration with the per-step split (median ms; p90 in the second table), samples/s, how much
// comm the overlap hid and the loss.
std::string formatTrainTable(const std::vector<TrainRunRecord>& runs);
// "# scaling: 1 rank 4613 samples/s; 2 ranks 7171 samples/s (77.7% of 2 x 1 rank); ..." for the runs
// of --scaling (the records whose world sizes run 1..N), or "" when there are none.
std::string formatScaling(const std::vector<TrainRunRecord>& scalingRuns);

}  // namespace ds::report
