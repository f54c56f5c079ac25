// A synthetic fleet for the localisation simulation (ds_fleet_sim) and the localisation tests: hosts
// with a NIC speed each, a lognormal spread on every pair, and injected faults. It produces the
// records the real probes would (FleetInput), runs a plan's rounds against the model, and drives
// judge() through the confirmation stage the way rank 0 does.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "diag/fleet/localise.h"
#include "diag/fleet/plan.h"

namespace ds::bench::fleet {

struct FleetModel {
  int hosts = 16;
  int ranksPerHost = 1;
  double baseGBps = 10;   // a healthy pair's median bandwidth
  double sigma = 0.1;     // lognormal spread of a pair's bandwidth (0.1: about 10 % CV)
  double latencyUs = 20;  // a healthy pair's one-way latency
  double minLinkGBps = 0;
  bool standalone = false;
  std::vector<double> speed;                   // per host, 1 = healthy (filled by makeInput when empty)
  std::map<std::uint64_t, double> linkFactor;  // pairKey(host, host) -> bandwidth factor of that link
  std::set<int> failing;                       // hosts whose link tests fail (pair times out)
  std::set<int> frozen;                        // hosts whose leader froze during the link stage
  std::set<int> unreachable;                   // hosts no one can connect to (and that reach no one)
  std::map<int, std::set<int>> cannotReach;    // host -> peers it cannot connect to (both directions)
  int mtuHost = -1;                            // a host whose eth0 MTU differs from the others'
  int affinityCpus = 16;                       // every rank's affinity width
  std::map<int, double> cpuQuota;              // host -> cgroup CPU limit its ranks share
  // Packet loss, as the share of a pair's bytes TCP sends again: per host (its pairs, both ends
  // summed) and per link; every healthy pair resends a tail-loss probe now and then.
  std::map<int, double> loss;
  std::map<std::uint64_t, double> linkLoss;
};

// Host h is "fleet<h>"; its leader is rank h * ranksPerHost; eth0 10.<h/65536>... on one /8.
report::FleetInput makeInput(FleetModel& m);
int leaderOf(const FleetModel& m, int host);
int hostOf(const FleetModel& m, int rank);

struct RunCost {
  int rounds = 0;      // link + confirmation rounds
  int linkRounds = 0;  // of which the link stage's plan
  int pairs = 0;
  long long messages = 0;   // link-test messages (reachability's connects not counted)
  double judgeSeconds = 0;  // both judge() calls
};

// Runs `rounds` against the model, appending PairResults of `stage` to in.pairs.
void runRounds(const FleetModel& m, const std::vector<diag::fleet::Round>& rounds, const std::string& stage,
               report::FleetInput& in, diag::fleet::SplitMix64& rng, RunCost& cost);

// The whole link stage as rank 0 runs it: the default plan, judge, the confirmation rounds judge asks
// for, judge again. `allPairs` uses the round-robin plan instead.
report::FleetJudgement simulate(FleetModel& m, std::uint64_t seed, RunCost& cost, bool allPairs = false);

// What a judgement names: suspect hosts (by host index) and suspect links (pairs of host indexes).
struct Named {
  std::set<int> hosts;
  std::set<std::pair<int, int>> links;
};
Named named(const FleetModel& m, const report::FleetJudgement& j);

}  // namespace ds::bench::fleet
