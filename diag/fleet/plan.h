// Link-test scheduling for fleet mode: which pairs of units (host leaders) test their link, in
// rounds of disjoint pairs so that every pair of a round runs at once. Pure and deterministic: every
// rank computes the same plan from the same member list and seed, without talking to the others.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace ds::diag::fleet {

// A pair of units (ranks), a < b; the pairs of a round share no unit.
using Pair = std::pair<int, int>;
using Round = std::vector<Pair>;

// ceil(log2 n) for n >= 2, else 0: the random matchings of the default plan.
int defaultRandomMatchings(int n);

// The default plan: ring neighbours (units[i], units[i+1 mod n]) in 2 rounds (3 when n is odd), then
// `randomMatchings` random perfect matchings (one unit sits out each when n is odd) drawn from
// `seed`, each avoiding pairs planned before where it can. Every unit gets about 2 + randomMatchings
// distinct peers in 2 + (n odd) + randomMatchings rounds; O(n * randomMatchings). `units` are
// distinct ranks, in the order every rank sees them (the member list). Throws ConfigError on a
// duplicate unit or a negative count.
std::vector<Round> planLinkRounds(const std::vector<int>& units, int randomMatchings, std::uint64_t seed);

// Every pair exactly once (round-robin tournament, circle method): n-1 rounds when n is even, n when
// odd. O(n^2) pairs: for small fleets or on request (--all-pairs).
std::vector<Round> planAllPairs(const std::vector<int>& units);

// Greedy first-fit packing of arbitrary pairs (confirmation pairs, re-tests) into rounds of
// disjoint pairs. Pairs are normalised to a < b; duplicates and self-pairs are dropped.
std::vector<Round> packIntoRounds(const std::vector<Pair>& pairs);

// Confirmation pairs: for each suspect, `perSuspect` healthy peers it has not been paired with in
// `alreadyRun` (either order), falling back to healthy peers it was paired with when no fresh one is
// left. Peers are taken in turn from a rotating start drawn from `seed`, so each healthy peer serves
// few suspects and the pairs pack into few rounds. Returns (suspect, peer) pairs: first is the
// suspect (not normalised); a suspect with no healthy peer at all gets none.
std::vector<Pair> confirmationPairs(const std::vector<int>& suspects, const std::vector<int>& healthy,
                                    const std::vector<Pair>& alreadyRun, std::uint64_t seed,
                                    int perSuspect = 2);

// The key of an unordered pair, for hash sets of pairs.
inline std::uint64_t pairKey(int a, int b) {
  if (a > b) std::swap(a, b);
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

// A small deterministic generator (splitmix64): the same sequence on every build and platform, which
// std::shuffle and the standard distributions do not promise.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (n > 0), by rejection so that there is no modulo bias.
  std::uint64_t below(std::uint64_t n);
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t state_;
};

}  // namespace ds::diag::fleet
