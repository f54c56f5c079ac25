// The link-test plans: disjoint rounds, the round budget, coverage, determinism and packing.
#include "diag/fleet/plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "engine/common/error.h"

using namespace ds::diag::fleet;

namespace {

std::vector<int> iota(int n, int from = 0) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

// Every pair ordered, inside `units`, and the pairs of each round disjoint; returns the distinct pairs.
std::set<Pair> checkRounds(const std::vector<Round>& rounds, const std::vector<int>& units) {
  std::set<int> members(units.begin(), units.end());
  std::set<Pair> all;
  for (std::size_t r = 0; r < rounds.size(); ++r) {
    EXPECT_FALSE(rounds[r].empty()) << "round " << r << " is empty";
    std::set<int> busy;
    for (auto [a, b] : rounds[r]) {
      EXPECT_LT(a, b);
      EXPECT_TRUE(members.count(a) && members.count(b)) << a << "," << b;
      EXPECT_TRUE(busy.insert(a).second) << "unit " << a << " twice in round " << r;
      EXPECT_TRUE(busy.insert(b).second) << "unit " << b << " twice in round " << r;
      all.insert({a, b});
    }
  }
  return all;
}

int ceilLog2(int n) { return n < 2 ? 0 : static_cast<int>(std::ceil(std::log2(n))); }

}  // namespace

TEST(FleetPlan, DefaultRandomMatchingsIsCeilLog2) {
  EXPECT_EQ(defaultRandomMatchings(0), 0);
  EXPECT_EQ(defaultRandomMatchings(1), 0);
  EXPECT_EQ(defaultRandomMatchings(2), 1);
  EXPECT_EQ(defaultRandomMatchings(3), 2);
  EXPECT_EQ(defaultRandomMatchings(4), 2);
  EXPECT_EQ(defaultRandomMatchings(5), 3);
  EXPECT_EQ(defaultRandomMatchings(1024), 10);
  EXPECT_EQ(defaultRandomMatchings(1025), 11);
  EXPECT_EQ(defaultRandomMatchings(16384), 14);
}

TEST(FleetPlan, RingPlusMatchingsWithinTheRoundBudgetAndDisjoint) {
  for (int n : {2, 3, 4, 5, 7, 8, 9, 16, 17, 64, 100, 1000, 1001}) {
    auto units = iota(n, 10);  // ranks need not start at 0
    int k = defaultRandomMatchings(n);
    auto rounds = planLinkRounds(units, k, 42);
    SCOPED_TRACE(n);
    EXPECT_LE(static_cast<int>(rounds.size()), 2 * ceilLog2(n) + 4);
    auto pairs = checkRounds(rounds, units);
    // The ring is there: every unit meets both ring neighbours.
    for (int i = 0; i < n; ++i) {
      int a = units[i], b = units[(i + 1) % n];
      if (a == b) continue;
      EXPECT_TRUE(pairs.count({std::min(a, b), std::max(a, b)}))
          << "ring pair " << a << "-" << b << " missing";
    }
    // No pair is planned twice.
    std::size_t total = 0;
    for (auto& r : rounds) total += r.size();
    EXPECT_EQ(total, pairs.size());
    // Coverage: with enough units, every unit meets 2 + k distinct peers (at most one missing from a
    // sit-out or an unavoidable repeat).
    if (n >= 64) {
      std::map<int, std::set<int>> peers;
      for (auto [a, b] : pairs) peers[a].insert(b), peers[b].insert(a);
      for (int u : units) EXPECT_GE(static_cast<int>(peers[u].size()), 2 + k - 1) << "unit " << u;
    }
  }
}

TEST(FleetPlan, SmallFleetsDoNotRepeatPairs) {
  EXPECT_TRUE(planLinkRounds({}, 3, 1).empty());
  EXPECT_TRUE(planLinkRounds({5}, 3, 1).empty());
  auto two = planLinkRounds({3, 1}, 1, 1);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0], (Round{{1, 3}}));
  auto three = planLinkRounds(iota(3), 2, 1);
  EXPECT_EQ(three.size(), 3u);
  EXPECT_EQ(checkRounds(three, iota(3)).size(), 3u);  // every pair, once
  auto four = planLinkRounds(iota(4), 2, 1);
  EXPECT_EQ(checkRounds(four, iota(4)).size(), 6u);  // ring (4) + the one matching left (2)
  EXPECT_EQ(four.size(), 3u);
}

TEST(FleetPlan, DeterministicForASeedAndDifferentAcrossSeeds) {
  auto units = iota(257);
  auto a = planLinkRounds(units, 9, 7), b = planLinkRounds(units, 9, 7), c = planLinkRounds(units, 9, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // The ring rounds do not depend on the seed.
  EXPECT_EQ(a[0], c[0]);
  EXPECT_EQ(a[1], c[1]);
}

TEST(FleetPlan, RejectsDuplicateUnitsAndNegativeCounts) {
  try {
    planLinkRounds({1, 2, 1}, 1, 0);
    FAIL() << "expected ConfigError";
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 appears twice"), std::string::npos) << e.what();
  }
  EXPECT_THROW(planLinkRounds({1, 2}, -1, 0), ds::ConfigError);
  EXPECT_THROW(planAllPairs({4, 4}), ds::ConfigError);
}

TEST(FleetPlan, AllPairsIsARoundRobinTournament) {
  for (int n : {2, 3, 4, 5, 8, 9, 31}) {
    SCOPED_TRACE(n);
    auto units = iota(n, 1);
    auto rounds = planAllPairs(units);
    EXPECT_EQ(static_cast<int>(rounds.size()), n % 2 == 0 ? n - 1 : n);
    auto pairs = checkRounds(rounds, units);
    std::size_t total = 0;
    for (auto& r : rounds) total += r.size();
    EXPECT_EQ(total, static_cast<std::size_t>(n * (n - 1) / 2));  // every pair exactly once
    EXPECT_EQ(pairs.size(), total);
  }
  EXPECT_TRUE(planAllPairs({9}).empty());
}

TEST(FleetPlan, PackIntoRoundsIsFirstFitAndNormalises) {
  // A star (one unit in every pair) needs one round per pair; disjoint pairs share one.
  auto star = packIntoRounds({{0, 1}, {2, 0}, {0, 3}});
  ASSERT_EQ(star.size(), 3u);
  EXPECT_EQ(star[1], (Round{{0, 2}}));
  auto flat = packIntoRounds({{1, 0}, {3, 2}, {5, 4}, {1, 2}, {1, 0}, {7, 7}});
  ASSERT_EQ(flat.size(), 2u);
  EXPECT_EQ(flat[0], (Round{{0, 1}, {2, 3}, {4, 5}}));
  EXPECT_EQ(flat[1], (Round{{1, 2}}));
  EXPECT_TRUE(packIntoRounds({}).empty());
}

TEST(FleetPlan, ConfirmationPairsPreferFreshHealthyPeers) {
  std::vector<int> healthy = {1, 2, 3, 4, 5, 6};
  std::vector<Pair> ran = {{0, 1}, {0, 2}, {0, 3}, {4, 9}};
  auto c = confirmationPairs({0, 9}, healthy, ran, 3);
  ASSERT_EQ(c.size(), 4u);
  std::set<int> forZero, forNine;
  for (auto [s, p] : c) {
    EXPECT_TRUE(s == 0 || s == 9);
    (s == 0 ? forZero : forNine).insert(p);
  }
  EXPECT_EQ(forZero.size(), 2u);
  EXPECT_EQ(forNine.size(), 2u);
  for (int p : forZero) EXPECT_GE(p, 4) << "0 was paired with " << p << " before";
  EXPECT_FALSE(forNine.count(4));
  // Two suspects, plenty of peers: no peer serves both, so the pairs pack into two rounds.
  std::set<int> all(forZero);
  all.insert(forNine.begin(), forNine.end());
  EXPECT_EQ(all.size(), 4u);
  EXPECT_EQ(packIntoRounds(c).size(), 2u);
}

TEST(FleetPlan, ConfirmationFallsBackToPeersAlreadyTested) {
  auto c = confirmationPairs({0}, {1, 2}, {{0, 1}, {0, 2}}, 5);
  ASSERT_EQ(c.size(), 2u);
  auto one = confirmationPairs({0}, {1}, {}, 5);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], (Pair{0, 1}));
  EXPECT_TRUE(confirmationPairs({0}, {}, {}, 5).empty());
  EXPECT_TRUE(confirmationPairs({0}, {0}, {}, 5).empty());  // a suspect is never its own peer
}
