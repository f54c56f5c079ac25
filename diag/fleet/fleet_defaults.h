// Fleet mode's defaults that more than one place states: dsdiag's flag, DiagOptions, FleetOptions and
// ds_fleet_scale read them from here. A header of constants only, so that diag/check.h can include it.
#pragma once

#include <chrono>

namespace ds::diag::fleet {

// Each link pair's deadline once both ends are there (dsdiag --pair-timeout): a pair that hangs costs
// this much, never the run.
inline constexpr std::chrono::milliseconds kDefaultPairTimeout{5000};

}  // namespace ds::diag::fleet
