// Simulation of fleet localisation (issue 26): synthetic fleets of 1k-16k hosts with a lognormal spread
// on every pair and injected faults, run through the default plan, judge(), the confirmation round
// judge() asks for, and judge() again, over many seeds. Prints, per fleet size and fault: the link and
// confirmation rounds, pairs and messages, the detection power (trials in which exactly the injected
// hosts and links were named), the innocent hosts/links named, and judge()'s time.
//
//   build/bin/ds_fleet_sim [--hosts 1024,4096,16384] [--trials 100] [--sigma 0.1] [--seed 1]
//                          [--faults healthy,slow50,...] [--expect-power 0.95] [--verbose]
//
// Exit status: 0; 1 with --expect-power when a fault's power is below it or a healthy trial named
// anyone (the smoke test uses that); 2 on a bad flag.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "diag/fleet/sim/fleet_model.h"

using namespace ds::bench::fleet;
using ds::diag::fleet::pairKey;
using ds::diag::fleet::SplitMix64;

namespace {

struct Injected {
  std::set<int> hosts;
  std::set<std::pair<int, int>> links;
};

struct Fault {
  std::string name;
  std::string what;
  // Injects into the model (hosts and speed already set) and returns what should be named.
  std::function<Injected(FleetModel&, SplitMix64&)> inject;
};

int pick(SplitMix64& rng, int n, const std::set<int>& avoid = {}) {
  for (;;) {
    int h = static_cast<int>(rng.below(static_cast<std::uint64_t>(n)));
    if (!avoid.count(h)) return h;
  }
}

Injected slow(FleetModel& m, SplitMix64& rng, double f) {
  int h = pick(rng, m.hosts);
  m.speed[h] = f;
  return {{h}, {}};
}

// A link the plan is sure to test: ring neighbours (an untested link cannot be found by a sparse plan;
// that is what --all-pairs is for).
Injected badLink(FleetModel& m, SplitMix64& rng, std::set<int> avoid = {}) {
  int a = pick(rng, m.hosts - 1, avoid);
  while (avoid.count(a + 1)) a = pick(rng, m.hosts - 1, avoid);
  m.linkFactor[pairKey(a, a + 1)] = 0.1;
  return {{}, {{a, a + 1}}};
}

// Host h cannot reach 3 peers (none in `avoid`, which grows by them).
void cutFromThree(FleetModel& m, SplitMix64& rng, int h, std::set<int>& avoid) {
  for (int k = 0; k < 3; ++k) {
    int q = pick(rng, m.hosts, avoid);
    avoid.insert(q);
    m.cannotReach[h].insert(q);
  }
}

std::vector<Fault> faults() {
  return {
      {"healthy", "no fault", [](FleetModel&, SplitMix64&) { return Injected{}; }},
      {"slow50", "one NIC at 50%", [](FleetModel& m, SplitMix64& r) { return slow(m, r, 0.5); }},
      {"slow30", "one NIC at 30%", [](FleetModel& m, SplitMix64& r) { return slow(m, r, 0.3); }},
      {"slow10", "one NIC at 10%", [](FleetModel& m, SplitMix64& r) { return slow(m, r, 0.1); }},
      {"unreachable", "one host nobody can connect to",
       [](FleetModel& m, SplitMix64& r) {
         int h = pick(r, m.hosts);
         m.unreachable.insert(h);
         return Injected{{h}, {}};
       }},
      {"partial3", "one host cannot reach 3 peers",
       [](FleetModel& m, SplitMix64& r) {
         int h = pick(r, m.hosts);
         std::set<int> avoid{h};
         cutFromThree(m, r, h, avoid);
         return Injected{{h}, {}};
       }},
      {"link10", "one link at 10%", [](FleetModel& m, SplitMix64& r) { return badLink(m, r); }},
      {"frozen", "one host frozen in the link stage",
       [](FleetModel& m, SplitMix64& r) {
         int h = pick(r, m.hosts);
         m.frozen.insert(h);
         return Injected{{h}, {}};
       }},
      {"several", "NIC 30% + unreachable + 3-peer partial + frozen + link 10%",
       [](FleetModel& m, SplitMix64& r) {
         Injected in;
         std::set<int> used;
         int s = pick(r, m.hosts, used);
         used.insert(s);
         m.speed[s] = 0.3;
         int u = pick(r, m.hosts, used);
         used.insert(u);
         m.unreachable.insert(u);
         int p = pick(r, m.hosts, used);
         used.insert(p);
         std::set<int> avoid = used;
         cutFromThree(m, r, p, avoid);
         int f = pick(r, m.hosts, used);
         used.insert(f);
         avoid.insert(f);
         m.frozen.insert(f);
         // The link's ends are kept away from the other faults' hosts and from the partial host's peers.
         Injected l = badLink(m, r, avoid);
         in.hosts = {s, u, p, f};
         in.links = l.links;
         return in;
       }},
  };
}

std::vector<std::string> toText(const std::set<std::pair<int, int>>& links) {
  std::vector<std::string> v;
  for (auto [a, b] : links) v.push_back(fmt::format("{}-{}", a, b));
  return v;
}

std::vector<int> parseList(const std::string& s) {
  std::vector<int> v;
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    v.push_back(std::stoi(s.substr(i, j - i)));
    i = j + 1;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Simulation of fleet localisation over synthetic fleets (issue 26)"};
  std::string hostsText = "1024,4096,16384";
  std::string faultList;
  int trials = 100;
  double sigma = 0.1;
  std::uint64_t seed = 1;
  double expectPower = -1;
  bool verbose = false;
  app.add_option("--hosts", hostsText, "fleet sizes, comma-separated");
  app.add_option("--trials", trials, "trials (seeds) per size and fault")->check(CLI::PositiveNumber);
  app.add_option("--sigma", sigma, "lognormal spread of a healthy pair's bandwidth")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seed", seed, "first seed");
  app.add_option("--faults", faultList, "faults to run (default: all), comma-separated");
  app.add_option("--expect-power", expectPower,
                 "exit 1 when a fault's detection power is below this or a healthy trial names anyone");
  app.add_flag("--verbose", verbose, "print each trial that did not name exactly the injected faults");
  CLI11_PARSE(app, argc, argv);
  std::vector<int> sizes;
  try {
    sizes = parseList(hostsText);
  } catch (const std::exception&) {
    fmt::print(stderr, "ds_fleet_sim: --hosts {} is not a comma-separated list of numbers (e.g. 1024,4096)\n",
               hostsText);
    return 2;
  }
  for (int n : sizes)
    if (n < 4) {
      fmt::print(stderr, "ds_fleet_sim: --hosts {}: a fleet needs at least 4 hosts for these faults\n", n);
      return 2;
    }
  auto all = faults();
  std::vector<Fault> chosen;
  if (faultList.empty()) {
    chosen = all;
  } else {
    std::size_t i = 0;
    while (i <= faultList.size()) {
      std::size_t j = std::min(faultList.find(',', i), faultList.size());
      std::string name = faultList.substr(i, j - i);
      auto it = std::find_if(all.begin(), all.end(), [&](const Fault& f) { return f.name == name; });
      if (it == all.end()) {
        std::string names;
        for (const auto& f : all) names += (names.empty() ? "" : ", ") + f.name;
        fmt::print(stderr, "ds_fleet_sim: unknown fault '{}'; known: {}\n", name, names);
        return 2;
      }
      chosen.push_back(*it);
      i = j + 1;
    }
  }

  fmt::print(
      "Fleet localisation simulation: lognormal pair spread sigma {}, {} trials per row, seeds {}..{}\n",
      sigma, trials, seed, seed + static_cast<std::uint64_t>(trials) - 1);
  fmt::print(
      "rounds: link stage + confirmation (bound 2*ceil(log2 n)+4); pairs and messages per trial (messages: "
      "{} per pair; reachability adds n(n-1) TCP connects);\npower: trials naming exactly the injected hosts "
      "and links; innocent: hosts or links named that were not injected, over all trials\n\n",
      21);
  fmt::print("{:>6} {:<12} {:>9} {:>5} {:>8} {:>10} {:>7} {:>9} {:>9} {:>9}\n", "hosts", "fault", "rounds",
             "bound", "pairs", "messages", "power", "innocent", "judge ms", "trial ms");
  bool ok = true;
  for (int n : sizes) {
    int bound = 2 * ds::diag::fleet::defaultRandomMatchings(n) + 4;
    for (const auto& fault : chosen) {
      int hits = 0, innocent = 0, maxLinkRounds = 0, maxConfirmRounds = 0;
      double pairs = 0, messages = 0, judgeS = 0, trialS = 0;
      for (int t = 0; t < trials; ++t) {
        std::uint64_t s = seed + static_cast<std::uint64_t>(t);
        FleetModel m;
        m.hosts = n;
        m.sigma = sigma;
        m.speed.assign(n, 1.0);
        SplitMix64 rng(s * 0x9e3779b97f4a7c15ULL + 17);
        Injected want = fault.inject(m, rng);
        RunCost cost;
        auto t0 = std::chrono::steady_clock::now();
        auto j = simulate(m, s, cost);
        trialS += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        judgeS += cost.judgeSeconds;
        Named got = named(m, j);
        if (got.hosts == want.hosts && got.links == want.links)
          ++hits;
        else if (verbose)
          fmt::print("  miss: {} hosts, {}, seed {}: wanted hosts {} links {}, named hosts {} links {}\n", n,
                     fault.name, s, fmt::join(want.hosts, ","), fmt::join(toText(want.links), ","),
                     fmt::join(got.hosts, ","), fmt::join(toText(got.links), ","));
        for (int h : got.hosts) innocent += !want.hosts.count(h);
        for (const auto& l : got.links) innocent += !want.links.count(l);
        pairs += cost.pairs;
        messages += static_cast<double>(cost.messages);
        maxLinkRounds = std::max(maxLinkRounds, cost.linkRounds);
        maxConfirmRounds = std::max(maxConfirmRounds, cost.rounds - cost.linkRounds);
      }
      double power = static_cast<double>(hits) / trials;
      fmt::print("{:>6} {:<12} {:>9} {:>5} {:>8.0f} {:>10.3g} {:>6.1f}% {:>9} {:>9.1f} {:>9.1f}\n", n,
                 fault.name, fmt::format("{}+{}", maxLinkRounds, maxConfirmRounds), bound, pairs / trials,
                 messages / trials, 100 * power, innocent, 1000 * judgeS / trials, 1000 * trialS / trials);
      std::fflush(stdout);
      if (expectPower >= 0 && (innocent > 0 || (fault.name != "healthy" && power < expectPower))) ok = false;
      if (maxLinkRounds > bound) ok = false;
    }
  }
  return ok ? 0 : 1;
}
