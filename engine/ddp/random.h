// A small deterministic generator (mt19937_64 with our own uniform/normal transforms), so that
// weights, data and sampler permutations are identical on every rank, build and standard library.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

namespace ds::ddp {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  std::uint64_t next() { return gen_(); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(gen_() >> 11) * (1.0 / 9007199254740992.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n) without modulo bias.
  std::uint64_t below(std::uint64_t n) {
    std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    std::uint64_t x;
    do {
      x = gen_();
    } while (x >= limit);
    return x % n;
  }
  // Standard normal (Box-Muller; the second value is discarded for simplicity).
  double normal() {
    double u1 = uniform();
    double u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::mt19937_64 gen_;
};

}  // namespace ds::ddp
