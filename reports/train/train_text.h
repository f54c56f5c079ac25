#pragma once

#include <string>
#include <vector>

#include "reports/train/train_schema.h"

namespace ds::report {

// The console table of `dsbench train`: a header naming model, ranks and backend, then one row per
// configuration with the per-step split (median ms; p90 in the second table), samples/s, how much
// comm the overlap hid and the loss.
std::string formatTrainTable(const std::vector<TrainRunRecord>& runs);

}  // namespace ds::report
