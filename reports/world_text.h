#pragma once

#include <string>
#include <vector>

#include "reports/schema/world.h"

namespace ds::report {

// The console table of `dsbench world`: a summary line, then one row per rank in rank order.
std::string formatWorldTable(const std::vector<RankRecord>& ranks);

}  // namespace ds::report
