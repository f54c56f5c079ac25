#pragma once

#include <string>
#include <vector>

#include "engine/env/init_plan.h"
#include "reports/schema/world.h"

namespace ds::report {

// The console table of `dsbench world`: a summary line, then one row per rank in rank order.
std::string formatWorldTable(const std::vector<RankRecord>& ranks);
// "# smoke allreduce on gloo: ok (sum of ranks+1 = 10) in 312.4 us"
std::string formatSmoke(const SmokeResult& smoke);
// `dsbench world --dry-run`: what init_distributed would conclude from this environment, every value
// with where it came from, and what rendezvous would then do. Nothing was contacted.
std::string formatInitPlan(const InitPlan& plan);

}  // namespace ds::report
