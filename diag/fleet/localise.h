// Fleet localisation: from what the fleet measured (joins, heartbeats, TCP probes, link pairs,
// bisection) to a verdict per host and a short list of suspect hosts and links, each with evidence an
// operator can check. Pure: no I/O, no clock; rank 0 calls it after the link stage, runs the
// `retest` pairs it asks for (stage "confirm"), and calls it again. The rules are in
// docs/dev/fleet-mode.md, "Localisation". O(ranks + pairs + failures): 16k hosts judge in well under
// a second (bench/fleet/ds_fleet_sim prints the time).
#pragma once

#include "reports/diag/fleet_schema.h"

namespace ds::diag::fleet {

// The thresholds localisation applies (documented in docs/dev/fleet-mode.md; the simulation in
// bench/fleet measures them). Bandwidths are compared as log ratios to the fleet median, so a noise
// that multiplies a pair's bandwidth (lognormal spread) weighs the same on a fast and a slow fleet.
struct JudgeThresholds {
  // A pair is bad on its own below median / 2 and below median - kPairMads robust sigmas.
  static constexpr double kPairRatio = 0.5;
  static constexpr double kPairMads = 6;
  // A host is slow when the median of its pairs is below kHostRatio x the fleet median, and below the
  // hosts' median score - kHostMads robust sigmas of the hosts' scores.
  static constexpr double kHostRatio = 0.7;
  static constexpr double kHostMads = 6;
  // Confirmation: the mean of a suspect's re-test pairs below kHostRatio x the median and below the
  // median - kConfirmMads robust sigmas of a mean of that many pairs.
  static constexpr double kConfirmMads = 3;
  // The robust sigma of pair bandwidths is at least this fraction of the median: a very tight fleet
  // (loopback, one switch) would otherwise flag noise.
  static constexpr double kMinRelativeSpread = 0.03;
  // Latency: a pair is bad when its one-way latency exceeds kLatencyRatio x the median and the median
  // + kPairMads robust sigmas (and, when set, FleetInput::slowLinkMs).
  static constexpr double kLatencyRatio = 10;
  // ... and exceeds this one-way latency (us): below it, a pair's latency is the hosts' scheduling
  // (a busy host answers a ping tens of us late), not its network. Measured on the namespace fleet
  // of 16 hosts on 2 cores: healthy pairs of 49-99 us against a median of 4-5 us.
  static constexpr double kLatencyFloorUs = 1000;
  // Loss: a pair is bad when TCP sent again at least kLossFraction of the bytes it sent over its
  // connection (both ends' counters) and at least kLossFleetRatio x the fleet's median fraction, over
  // at least kLossMinSentBytes. 1 % resent is where TCP's throughput on a datacenter path collapses
  // (Mathis et al.: rate ~ MSS / (RTT sqrt(p))); a healthy path resends nothing or a few probes.
  static constexpr double kLossFraction = 0.01;
  static constexpr double kLossFleetRatio = 4;
  static constexpr double kLossMinSentBytes = 1 << 20;
  // Peers a suspect host is re-tested with before it is named.
  static constexpr int kConfirmPeers = 2;
  // CPU: a host is named when its ranks' cgroup CPU limit leaves each less than kCpuPerRankFloor CPUs
  // and less than kCpuRatio x the fleet's median share (hosts without a limit count as their
  // affinity width). A fleet that is all that tight is left to each host's system.cpu_quota check.
  static constexpr double kCpuPerRankFloor = 1;
  static constexpr double kCpuRatio = 0.5;
};

// The verdicts: every host (healthy, suspect or no_result), suspect links, the fleet's distribution,
// interface advice, notes, and the pairs to re-test before suspects from the link stage are named
// (`retest`, (suspect, peer) pairs; empty once pairs of stage "confirm" are in the input).
report::FleetJudgement judge(const report::FleetInput& in);

// "fleet3 (rank 3)": how a unit is named in evidence ("rank 7" for a rank that never said its host).
std::string rankLabel(const report::FleetInput& in, int rank);

}  // namespace ds::diag::fleet
