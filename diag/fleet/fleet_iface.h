// The interfaces a fleet rank offers its peers, and which of two peers' addresses share a subnet:
// what fleet mode needs of the host (engine/host/interfaces.h), apart from its stages.
#pragma once

#include <vector>

#include "reports/diag/fleet_schema.h"

namespace ds::diag::fleet {

// Up, not loopback, with an IPv4 address, sorted by name; with `loopbackOnly` (every rank on this
// host) 127.0.0.1 alone. MTU from sysfs.
std::vector<report::FleetIface> candidateInterfaces(bool loopbackOnly);

// Both addresses in the narrower of the two prefixes; false when either prefix is unknown.
bool sameSubnet(const report::FleetIface& a, const report::FleetIface& b);

}  // namespace ds::diag::fleet
