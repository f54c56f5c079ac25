// Reading a fleet report that sits inside another document (the "fleet" object of a dsperf.diag
// report), so that errors name the field from the top of the file ("diag.json: at /fleet/input/...").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "reports/diag/fleet_schema.h"

namespace ds::report {

// fleetFromJson of `j`, which is found at JSON pointer `at` ("/fleet"; "" for a document of its own)
// of the file `origin`.
FleetReport fleetFromJsonAt(const nlohmann::json& j, const std::string& origin, const std::string& at);

// Counts of the judgement, as written in the fleet object's "summary".
struct FleetCounts {
  int hosts = 0, healthy = 0, suspect = 0, noResult = 0, suspectLinks = 0;
};
FleetCounts countFleet(const FleetJudgement& j);

}  // namespace ds::report
