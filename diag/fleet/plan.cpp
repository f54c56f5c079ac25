// Link-test scheduling (see plan.h). The default plan is what makes a fleet of thousands testable:
// O(log n) rounds of n/2 concurrent pairs, and every unit still meets 2 + ceil(log2 n) distinct
// peers, enough for localisation to ask "is it bad with two different healthy peers?".
#include "diag/fleet/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "engine/common/error.h"

namespace ds::diag::fleet {

namespace {

Pair ordered(int a, int b) { return a < b ? Pair{a, b} : Pair{b, a}; }

void checkUnits(const std::vector<int>& units) {
  std::unordered_set<int> seen;
  seen.reserve(units.size() * 2);
  for (int u : units)
    if (!seen.insert(u).second)
      throw ConfigError(
          fmt::format("fleet plan: rank {} appears twice in the member list; every unit must be "
                      "listed once (this is a bug in the caller)",
                      u));
}

// In-place Fisher-Yates with the portable generator.
void shuffle(std::vector<int>& v, SplitMix64& rng) {
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

// One random matching over `pool`, avoiding planned pairs: a unit whose drawn partner was planned
// before swaps in the first of the next kScan units that is new to it; with none, it sits out this
// round (a repeated pair adds no information to localisation).
Round randomMatching(std::vector<int> pool, SplitMix64& rng, std::unordered_set<std::uint64_t>& planned) {
  constexpr std::size_t kScan = 32;
  shuffle(pool, rng);
  Round round;
  round.reserve(pool.size() / 2 + 1);
  const std::size_t n = pool.size();
  for (std::size_t i = 0; i + 1 < n; i += 2) {
    int a = pool[i];
    if (planned.count(pairKey(a, pool[i + 1]))) {
      for (std::size_t j = i + 2; j < n && j < i + 2 + kScan; ++j) {
        if (!planned.count(pairKey(a, pool[j]))) {
          std::swap(pool[i + 1], pool[j]);
          break;
        }
      }
    }
    int b = pool[i + 1];
    if (planned.insert(pairKey(a, b)).second) round.push_back(ordered(a, b));
  }
  return round;
}

}  // namespace

std::uint64_t SplitMix64::below(std::uint64_t n) {
  const std::uint64_t threshold = (0 - n) % n;  // 2^64 mod n: values below it would bias the modulo
  for (;;) {
    std::uint64_t x = next();
    if (x >= threshold) return x % n;
  }
}

int defaultRandomMatchings(int n) {
  int k = 0;
  while (n > 1 && (1LL << k) < n) ++k;
  return k;
}

std::vector<Round> planLinkRounds(const std::vector<int>& units, int randomMatchings, std::uint64_t seed) {
  if (randomMatchings < 0)
    throw ConfigError(
        fmt::format("fleet plan: {} random matchings requested; give 0 or more", randomMatchings));
  checkUnits(units);
  const std::size_t n = units.size();
  std::vector<Round> rounds;
  if (n < 2) return rounds;
  std::unordered_set<std::uint64_t> planned;
  planned.reserve(n * (3 + static_cast<std::size_t>(randomMatchings)) * 2);
  auto add = [&](Round& r, int a, int b) {
    if (planned.insert(pairKey(a, b)).second) r.push_back(ordered(a, b));
  };
  // Ring: edges i -> i+1 alternate between two rounds; an odd ring's closing edge needs a third.
  Round even, odd;
  for (std::size_t i = 0; i + 1 < n; ++i) add(i % 2 == 0 ? even : odd, units[i], units[i + 1]);
  rounds.push_back(std::move(even));
  if (!odd.empty()) rounds.push_back(std::move(odd));
  SplitMix64 rng(seed);
  int matchingsLeft = randomMatchings;
  if (n % 2 == 0 && n > 2) {
    add(rounds[1], units[n - 1], units[0]);  // closes the even ring: units n-1 and 0 are free in round 1
  } else if (n % 2 == 1) {
    // The closing edge (n-1, 0) shares its round with the first random matching over the others.
    Round third;
    add(third, units[n - 1], units[0]);
    if (matchingsLeft > 0) {
      std::vector<int> rest(units.begin() + 1, units.end() - 1);
      Round m = randomMatching(std::move(rest), rng, planned);
      third.insert(third.end(), m.begin(), m.end());
      --matchingsLeft;
    }
    rounds.push_back(std::move(third));
  }
  for (int k = 0; k < matchingsLeft; ++k) {
    Round m = randomMatching(units, rng, planned);
    if (!m.empty()) rounds.push_back(std::move(m));
  }
  for (auto& r : rounds) std::sort(r.begin(), r.end());
  return rounds;
}

std::vector<Round> planAllPairs(const std::vector<int>& units) {
  checkUnits(units);
  std::vector<Round> rounds;
  if (units.size() < 2) return rounds;
  constexpr int kBye = -1;  // an odd fleet gets a dummy: its partner sits the round out
  std::vector<int> circle(units);
  bool hasBye = circle.size() % 2 == 1;
  if (hasBye) circle.push_back(kBye);
  const std::size_t m = circle.size();
  auto at = [&](std::size_t round, std::size_t k) {
    return k == 0 ? circle[0] : circle[1 + (k - 1 + round) % (m - 1)];
  };
  for (std::size_t r = 0; r + 1 < m; ++r) {
    Round round;
    round.reserve(m / 2);
    for (std::size_t i = 0; i < m / 2; ++i) {
      int a = at(r, i), b = at(r, m - 1 - i);
      if (hasBye && (a == kBye || b == kBye)) continue;
      round.push_back(ordered(a, b));
    }
    std::sort(round.begin(), round.end());
    rounds.push_back(std::move(round));
  }
  return rounds;
}

std::vector<Round> packIntoRounds(const std::vector<Pair>& pairs) {
  std::vector<Round> rounds;
  std::unordered_map<int, std::vector<char>> busy;  // unit -> rounds it is in
  std::unordered_set<std::uint64_t> seen;
  auto isBusy = [&](int u, std::size_t r) {
    auto it = busy.find(u);
    return it != busy.end() && r < it->second.size() && it->second[r];
  };
  auto mark = [&](int u, std::size_t r) {
    auto& v = busy[u];
    if (v.size() <= r) v.resize(r + 1, 0);
    v[r] = 1;
  };
  for (auto [a, b] : pairs) {
    if (a == b || !seen.insert(pairKey(a, b)).second) continue;
    std::size_t r = 0;
    while (r < rounds.size() && (isBusy(a, r) || isBusy(b, r))) ++r;
    if (r == rounds.size()) rounds.emplace_back();
    rounds[r].push_back(ordered(a, b));
    mark(a, r);
    mark(b, r);
  }
  for (auto& r : rounds) std::sort(r.begin(), r.end());
  return rounds;
}

std::vector<Pair> confirmationPairs(const std::vector<int>& suspects, const std::vector<int>& healthy,
                                    const std::vector<Pair>& alreadyRun, std::uint64_t seed, int perSuspect) {
  std::vector<Pair> out;
  if (healthy.empty() || perSuspect <= 0) return out;
  std::unordered_set<std::uint64_t> ran;
  ran.reserve(alreadyRun.size() * 2);
  for (auto [a, b] : alreadyRun) ran.insert(pairKey(a, b));
  const std::size_t h = healthy.size();
  SplitMix64 rng(seed);
  std::size_t cursor = static_cast<std::size_t>(rng.below(h));
  for (int s : suspects) {
    std::vector<int> chosen;
    // Fresh peers first, from the rotating cursor; the cursor moves past each peer taken, so the
    // next suspect starts with other peers.
    for (std::size_t k = 0; k < h && static_cast<int>(chosen.size()) < perSuspect; ++k) {
      std::size_t i = (cursor + k) % h;
      int p = healthy[i];
      if (p == s || ran.count(pairKey(s, p))) continue;
      chosen.push_back(p);
      if (static_cast<int>(chosen.size()) == perSuspect) cursor = (i + 1) % h;
    }
    // Then any healthy peer (a repeat measurement is better than none).
    for (std::size_t k = 0; k < h && static_cast<int>(chosen.size()) < perSuspect; ++k) {
      int p = healthy[(cursor + k) % h];
      if (p == s || std::find(chosen.begin(), chosen.end(), p) != chosen.end()) continue;
      chosen.push_back(p);
    }
    for (int p : chosen) {
      out.emplace_back(s, p);
      ran.insert(pairKey(s, p));
    }
  }
  return out;
}

}  // namespace ds::diag::fleet
