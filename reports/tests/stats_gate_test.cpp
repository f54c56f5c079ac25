// The regression gate's statistics against known answers: the Mann-Whitney U test against the
// textbook critical-value tables and scipy's documented example, and the bootstrap interval of a
// geometric-mean ratio on seeded inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "reports/stats.h"

using namespace ds::report;

namespace {

// Samples of sizes nx, ny without ties whose U (pairs with x > y) is exactly u: y = 0..ny-1 and
// each x placed between two y values so that it beats a chosen number of them.
std::pair<std::vector<double>, std::vector<double>> samplesWithU(int nx, int ny, int u) {
  std::vector<double> x, y;
  for (int j = 0; j < ny; ++j) y.push_back(j);
  for (int i = 0; i < nx; ++i) {
    int beats = std::min(u, ny);
    u -= beats;
    x.push_back(beats - 0.5 + i * 1e-3);
  }
  return {x, y};
}

double exactP(int nx, int ny, int u) {
  auto [x, y] = samplesWithU(nx, ny, u);
  UTest t = mannWhitneyU(x, y);
  EXPECT_TRUE(t.exact);
  EXPECT_DOUBLE_EQ(t.u, u);
  return t.p;
}

}  // namespace

TEST(UTest, ScipyDocumentedExampleExactAndAsymptotic) {
  // scipy.stats.mannwhitneyu's example (Conover): U = 17, exact p = 0.1111 (= 2 * 7 / 126).
  std::vector<double> males{19, 22, 16, 29, 24}, females{20, 11, 17, 12};
  UTest t = mannWhitneyU(males, females);
  EXPECT_DOUBLE_EQ(t.u, 17);
  EXPECT_TRUE(t.exact);
  EXPECT_NEAR(t.p, 14.0 / 126.0, 1e-12);
  // The same samples through the normal approximation (a tie forces it): the continuity-corrected
  // z = (7 - 0.5) / sqrt(20 * 10 / 12) gives scipy's asymptotic p = 0.11134688653314041 without the
  // tie; with one tied pair U becomes 17.5 and the variance shrinks by the tie term.
  std::vector<double> tied = females;
  tied[0] = 19;  // ties the 19 in males: 19 vs 19 counts half
  UTest a = mannWhitneyU(males, tied);
  EXPECT_FALSE(a.exact);
  EXPECT_DOUBLE_EQ(a.u, 17.5);
  const double var = 20.0 / 12.0 * (10 - 6.0 / 72.0);
  EXPECT_NEAR(a.p, std::erfc((7.5 - 0.5) / std::sqrt(var) / std::sqrt(2.0)), 1e-12);
}

TEST(UTest, MatchesTheTextbookCriticalValuesAtFivePercentTwoSided) {
  // Critical U for alpha = 0.05, two-sided (tables in Mann & Whitney 1947 and every statistics
  // textbook): the critical value is significant, one above is not.
  struct Row {
    int n1, n2, critical;
  };
  for (Row r : {Row{5, 5, 2}, Row{6, 6, 5}, Row{8, 8, 13}, Row{10, 10, 23}, Row{4, 6, 2}, Row{5, 10, 8}}) {
    EXPECT_LE(exactP(r.n1, r.n2, r.critical), 0.05) << r.n1 << "x" << r.n2;
    EXPECT_GT(exactP(r.n1, r.n2, r.critical + 1), 0.05) << r.n1 << "x" << r.n2;
  }
  // 5 vs 5: P(U <= 2) = 4 / 252.
  EXPECT_NEAR(exactP(5, 5, 2), 8.0 / 252.0, 1e-12);
  // Symmetric: U and nx*ny - U give the same p; the middle gives 1.
  EXPECT_DOUBLE_EQ(exactP(5, 5, 3), exactP(5, 5, 22));
  EXPECT_DOUBLE_EQ(exactP(4, 4, 8), 1.0);
}

TEST(UTest, TiesUseTheCorrectedNormalApproximation) {
  // x = {1,1,1,2,2}, y = {2,2,3,3,3,4}: U = 2 (four tied pairs at 2); tie term 3*(27-3)/... gives
  // var = 27.5454..., z = 2.3817, p = 0.017233 (worked by hand, and by scipy's formula).
  UTest t = mannWhitneyU({1, 1, 1, 2, 2}, {2, 2, 3, 3, 3, 4});
  EXPECT_FALSE(t.exact);
  EXPECT_DOUBLE_EQ(t.u, 2);
  EXPECT_NEAR(t.p, 0.01723344725922052, 1e-9);
  // Every value equal: nothing to tell apart.
  EXPECT_DOUBLE_EQ(mannWhitneyU({3, 3, 3}, {3, 3, 3, 3}).p, 1.0);
  EXPECT_DOUBLE_EQ(mannWhitneyU({}, {1, 2}).p, 1.0);
}

TEST(UTest, LargeSamplesFallBackToTheNormalApproximation) {
  auto [x, y] = samplesWithU(30, 30, 300);
  UTest t = mannWhitneyU(x, y);
  EXPECT_FALSE(t.exact);
  const double z = (450.0 - 300.0 - 0.5) / std::sqrt(900.0 * 61.0 / 12.0);
  EXPECT_NEAR(t.p, std::erfc(z / std::sqrt(2.0)), 1e-12);
}

TEST(UTest, SmallestReachablePTellsWhenMoreRepeatsAreNeeded) {
  EXPECT_DOUBLE_EQ(minUTestP(1, 1), 1.0);
  EXPECT_NEAR(minUTestP(3, 3), 0.1, 1e-12);       // 2 / 20: three repeats a side can never reach 5%
  EXPECT_NEAR(minUTestP(4, 4), 2.0 / 70, 1e-12);  // four can
  EXPECT_NEAR(minUTestP(5, 5), 2.0 / 252, 1e-12);
  // Complete separation reaches it.
  EXPECT_NEAR(mannWhitneyU({1, 2, 3, 4}, {5, 6, 7, 8}).p, minUTestP(4, 4), 1e-12);
}

TEST(Bootstrap, SeededIntervalIsReproducibleAndCoversTheTrueRatio) {
  // 12 sizes; the current run is 10% slower at every size, each side with 5 repeats of 3% noise.
  std::mt19937_64 gen(42);
  std::normal_distribution<double> noise(0.0, 0.03);
  std::vector<SamplePair> items;
  for (int s = 0; s < 12; ++s) {
    SamplePair p;
    const double t = 10.0 * (s + 1);
    for (int r = 0; r < 5; ++r) {
      p.base.push_back(t * (1 + noise(gen)));
      p.cur.push_back(t * 1.10 * (1 + noise(gen)));
    }
    items.push_back(p);
  }
  RatioInterval a = bootstrapGeomeanRatio(items, 2000, 0.95, 7);
  RatioInterval b = bootstrapGeomeanRatio(items, 2000, 0.95, 7);
  EXPECT_EQ(a.items, 12);
  EXPECT_DOUBLE_EQ(a.lo, b.lo);  // same seed, same interval
  EXPECT_DOUBLE_EQ(a.hi, b.hi);
  EXPECT_LE(a.lo, a.ratio);
  EXPECT_GE(a.hi, a.ratio);
  EXPECT_LT(a.lo, 1.10);
  EXPECT_GT(a.hi, 1.10);
  EXPECT_GT(a.lo, 1.05);  // 5 repeats of 3% noise over 12 sizes pin 10% well away from 1
  EXPECT_LT(a.hi - a.lo, 0.05);
  RatioInterval c = bootstrapGeomeanRatio(items, 2000, 0.95, 8);
  EXPECT_NE(a.lo, c.lo);  // the seed matters
  EXPECT_NEAR(a.lo, c.lo, 0.01);
}

TEST(Bootstrap, ExactShiftAndSingleSamplesGiveAPointAndEmptyItemsAreSkipped) {
  std::vector<SamplePair> items{{{100, 100, 100}, {125, 125, 125}}, {{4, 4}, {5, 5}}, {{}, {3}}, {{0}, {2}}};
  RatioInterval r = bootstrapGeomeanRatio(items, 500, 0.95, 1);
  EXPECT_EQ(r.items, 2);
  EXPECT_NEAR(r.ratio, 1.25, 1e-12);
  EXPECT_NEAR(r.lo, 1.25, 1e-12);
  EXPECT_NEAR(r.hi, 1.25, 1e-12);
  EXPECT_EQ(bootstrapGeomeanRatio({}, 100).items, 0);
}
