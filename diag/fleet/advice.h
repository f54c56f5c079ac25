// Localisation's advice (see localise.h and docs/dev/fleet-mode.md, "Localisation"): what to set
// rather than whom to blame. NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME values that select no working
// interface, the value to use per host and for the whole job, MTUs that differ on a subnet, and a
// cgroup CPU limit far below the fleet's. judge() calls these after the link stage and bisection and
// before confirmation, in this order; each adds evidence to the units it concerns.
#pragma once

#include "diag/fleet/localise_detail.h"

namespace ds::diag::fleet::detail {

// Interface settings and the values to use: evidence "ifname" on a rank's unit, the value for each
// host (Unit::ncclSocketIfname) and for the job (FleetJudgement::jobSocketIfname), and a note. Reads
// Fleet::badIfaces, so it runs after reachability.
void adviseInterfaces(Fleet& fleet, report::FleetJudgement& out);

// Evidence "mtu" on a host whose interface's MTU differs from the majority of its subnet's.
void adviseMtus(Fleet& fleet);

// Evidence "cpu" on a host whose cgroup CPU limit leaves each rank less than
// JudgeThresholds::kCpuPerRankFloor CPUs and less than kCpuRatio x the fleet's median share.
void adviseCpus(Fleet& fleet);

}  // namespace ds::diag::fleet::detail
