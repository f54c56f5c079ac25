// Localisation's shared state, between the judgement (localise.cpp) and the advice (advice.cpp): the
// units it names and the facts one stage leaves for the later ones. Internal to diag/fleet; callers
// use judge() (localise.h).
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "reports/diag/fleet_schema.h"

namespace ds::diag::fleet::detail {

// A host (in a standalone run, a rank): what a verdict is about.
struct Unit {
  std::string name;
  std::vector<int> ranks;  // ascending
  int leader = -1;         // lowest joined rank: the one that runs the network tests
  bool dead = false;       // a rank froze or exited
  bool leaderReported = false;
  bool reachSuspect = false;  // named by reachability (its pairs are explained by that)
  std::vector<report::Evidence> evidence;
  std::string ncclSocketIfname;  // recommended value ("" = leave unset)
};

// The fleet as the stages see it. The constructor groups ranks into units; judge() then settles the
// ranks' states (dead units), counts the network (countNet) and runs the stages, which add evidence
// to the units and fill badIfaces (reachability) for the advice.
struct Fleet {
  explicit Fleet(const report::FleetInput& input);

  const report::FleetInput& in;
  int world = 0;
  std::vector<Unit> units;
  std::vector<int> unitOf;  // rank -> unit
  // Interfaces (unit, iface name) with a reachability failure attributed to them.
  std::set<std::pair<int, std::string>> badIfaces;

  // Live units and units per subnet, once the ranks are settled (both are asked per host and per
  // evidence).
  void countNet();

  const report::FleetRank* rank(int r) const {
    return r >= 0 && r < static_cast<int>(in.ranks.size()) ? &in.ranks[r] : nullptr;
  }
  std::string label(int r) const;
  bool validRank(int r) const { return r >= 0 && r < world; }
  // A unit whose leader's network results can be trusted and which can vouch for its peers.
  bool netOk(int u) const { return !units[u].dead && units[u].leaderReported; }
  bool linkEligible(int u) const { return netOk(u) && !units[u].reachSuspect; }
  bool twoUnitFleet() const { return liveUnits_ == 2; }
  int subnetUnits(const std::string& subnet) const;
  // The address of rank r's interface `iface` ("" when it did not list it).
  std::string addrOf(int r, const std::string& iface) const;

 private:
  int liveUnits_ = 0;
  std::unordered_map<std::string, int> subnetCount_;
};

// "10.79.0.0/24" for an interface (IPv4 or IPv6, masked); "" when the address does not parse.
std::string subnetOf(const report::FleetIface& f);

// "a", "a and b", "a, b, c and 4 more".
std::string listOf(const std::vector<std::string>& items, std::size_t show = 4);

}  // namespace ds::diag::fleet::detail
