// Statistics shared by the result writers and readers: the sweep's per-iteration percentiles, the
// train run's step percentiles, and the regression gate of dsreport compare and the dashboard (a
// Mann-Whitney U test per item, a bootstrap interval for a whole sweep). One definition, so a p99 in
// a sweep and a p99 in a train run mean the same, and compare and the dashboard judge alike.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/common/median.h"

namespace ds::report {

// The q-quantile (0 <= q <= 1) of an ascending, non-empty vector, interpolated linearly between
// the two closest ranks (numpy's default, "type 7"): q = 0.5 of {1, 2, 3, 4} is 2.5.
double quantileSorted(const std::vector<double>& sorted, double q);
// The median itself: engine/common/median.h.

// Two-sided Mann-Whitney U test (Wilcoxon rank-sum) of samples x and y.
struct UTest {
  double u = 0;        // U of x: pairs with x > y, plus half the ties (scipy's statistic)
  double p = 1;        // two-sided p-value; 1 when a sample is empty
  bool exact = false;  // from the exact null distribution (else the normal approximation)
};
// Exact null distribution when there are no ties and both samples hold at most kUTestExactMax
// values (the counts of the textbook tables); otherwise the normal approximation with the tie
// correction of the variance and a continuity correction of 0.5 (scipy.stats.mannwhitneyu,
// method "asymptotic", use_continuity=True).
inline constexpr int kUTestExactMax = 25;
UTest mannWhitneyU(const std::vector<double>& x, const std::vector<double>& y);
// The smallest two-sided p-value the exact test can give for samples of sizes nx and ny: 2 /
// C(nx + ny, nx) (complete separation). Above alpha, no data can make the test significant: the
// caller then needs more samples, not a verdict. 1 when a sample is empty.
double minUTestP(int nx, int ny);

// Percentile bootstrap interval of a ratio of geometric means over several items (the sizes of a
// sweep): ratio = exp(mean over items of log(median(cur_i) / median(base_i))). Each resample draws
// every item's baseline and current samples with replacement, within the item (a stratified
// bootstrap of the repeats). Deterministic for a seed: indices come straight from mt19937_64, whose
// sequence the C++ standard fixes.
struct RatioInterval {
  double ratio = 1;  // the point estimate from the samples themselves
  double lo = 1, hi = 1;
  int items = 0;  // items used (both samples non-empty, medians positive)
};
struct SamplePair {
  std::vector<double> base, cur;
};
RatioInterval bootstrapGeomeanRatio(const std::vector<SamplePair>& items, int resamples = 2000,
                                    double confidence = 0.95, std::uint64_t seed = 1);

}  // namespace ds::report
