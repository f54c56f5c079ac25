#include "reports/stats.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/common/median.h"

namespace ds::report {

double quantileSorted(const std::vector<double>& sorted, double q) {
  double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  auto lo = static_cast<std::size_t>(std::floor(pos));
  std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

namespace {

// Number of arrangements of nx x-values and ny y-values with U = u, for every u in 0..nx*ny
// (Mann and Whitney's recurrence, built up by sample sizes). Doubles: the counts reach C(50, 25).
std::vector<double> uCounts(int nx, int ny) {
  // f[m][u] for the current n, over m = 0..nx; start with n = 0: U is 0 with one arrangement.
  const int umax = nx * ny;
  std::vector<std::vector<double>> prev(static_cast<std::size_t>(nx) + 1,
                                        std::vector<double>(static_cast<std::size_t>(umax) + 1, 0.0));
  for (int m = 0; m <= nx; ++m) prev[static_cast<std::size_t>(m)][0] = 1;
  for (int n = 1; n <= ny; ++n) {
    auto cur = prev;
    for (int m = 0; m <= nx; ++m) {
      for (int u = 0; u <= umax; ++u) {
        // The largest value is a y (U unchanged) or an x (it beats all n y-values).
        double a = prev[static_cast<std::size_t>(m)][static_cast<std::size_t>(u)];
        double b =
            (m > 0 && u >= n) ? cur[static_cast<std::size_t>(m - 1)][static_cast<std::size_t>(u - n)] : 0;
        cur[static_cast<std::size_t>(m)][static_cast<std::size_t>(u)] = a + b;
      }
    }
    prev = std::move(cur);
  }
  return prev[static_cast<std::size_t>(nx)];
}

double normalSf(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

}  // namespace

double minUTestP(int nx, int ny) {
  if (nx <= 0 || ny <= 0) return 1;
  double c = 1;  // C(nx + ny, nx)
  for (int k = 1; k <= nx; ++k) c = c * (ny + k) / k;
  return std::min(1.0, 2.0 / c);
}

UTest mannWhitneyU(const std::vector<double>& x, const std::vector<double>& y) {
  UTest t;
  const int nx = static_cast<int>(x.size()), ny = static_cast<int>(y.size());
  if (nx == 0 || ny == 0) return t;
  // Ranks of the pooled sample, ties sharing their mean rank.
  std::vector<std::pair<double, int>> all;
  for (double v : x) all.emplace_back(v, 0);
  for (double v : y) all.emplace_back(v, 1);
  std::sort(all.begin(), all.end());
  const std::size_t n = all.size();
  double rankSumX = 0, tieTerm = 0;
  bool ties = false;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && all[j].first == all[i].first) ++j;
    const double rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    const auto tcount = static_cast<double>(j - i);
    if (j - i > 1) {
      ties = true;
      tieTerm += tcount * tcount * tcount - tcount;
    }
    for (std::size_t k = i; k < j; ++k) {
      if (all[k].second == 0) rankSumX += rank;
    }
    i = j;
  }
  t.u = rankSumX - nx * (nx + 1) / 2.0;
  const double mean = nx * static_cast<double>(ny) / 2.0;
  if (!ties && nx <= kUTestExactMax && ny <= kUTestExactMax) {
    // Two-sided: twice the smaller tail, at most 1. The distribution is symmetric around nx*ny/2.
    std::vector<double> counts = uCounts(nx, ny);
    double total = 0;
    for (double c : counts) total += c;
    const double umin = std::min(t.u, nx * static_cast<double>(ny) - t.u);
    double tail = 0;
    for (int u = 0; u <= static_cast<int>(std::floor(umin + 1e-9)); ++u)
      tail += counts[static_cast<std::size_t>(u)];
    t.p = std::min(1.0, 2.0 * tail / total);
    t.exact = true;
    return t;
  }
  const double nn = static_cast<double>(n);
  const double var = nx * static_cast<double>(ny) / 12.0 * ((nn + 1) - tieTerm / (nn * (nn - 1)));
  if (var <= 0) {  // every value equal: nothing tells the samples apart
    t.p = 1;
    return t;
  }
  const double z = std::max(0.0, std::fabs(t.u - mean) - 0.5) / std::sqrt(var);
  t.p = std::min(1.0, 2.0 * normalSf(z));
  return t;
}

RatioInterval bootstrapGeomeanRatio(const std::vector<SamplePair>& items, int resamples, double confidence,
                                    std::uint64_t seed) {
  RatioInterval r;
  std::vector<const SamplePair*> used;
  double sumLog = 0;
  for (const auto& it : items) {
    if (it.base.empty() || it.cur.empty()) continue;
    double mb = median(it.base), mc = median(it.cur);
    if (!(mb > 0) || !(mc > 0)) continue;
    used.push_back(&it);
    sumLog += std::log(mc / mb);
  }
  r.items = static_cast<int>(used.size());
  if (used.empty()) return r;
  r.ratio = r.lo = r.hi = std::exp(sumLog / static_cast<double>(used.size()));
  if (resamples <= 0) return r;
  std::mt19937_64 gen(seed);
  // A draw with replacement; the modulo's bias is below 1e-17 for these sample sizes.
  auto medianOfResample = [&gen](const std::vector<double>& v, std::vector<double>& scratch) {
    scratch.resize(v.size());
    for (auto& s : scratch) s = v[gen() % v.size()];
    std::sort(scratch.begin(), scratch.end());
    return quantileSorted(scratch, 0.5);
  };
  std::vector<double> stats;
  stats.reserve(static_cast<std::size_t>(resamples));
  std::vector<double> scratch;
  for (int b = 0; b < resamples; ++b) {
    double s = 0;
    for (const SamplePair* it : used) {
      double mb = medianOfResample(it->base, scratch);
      double mc = medianOfResample(it->cur, scratch);
      s += std::log(std::max(mc, 1e-300) / std::max(mb, 1e-300));
    }
    stats.push_back(std::exp(s / static_cast<double>(used.size())));
  }
  std::sort(stats.begin(), stats.end());
  const double a = (1 - std::clamp(confidence, 0.0, 1.0)) / 2;
  r.lo = quantileSorted(stats, a);
  r.hi = quantileSorted(stats, 1 - a);
  return r;
}

}  // namespace ds::report
