#include "reports/stats.h"

#include <algorithm>
#include <cmath>

namespace ds::report {

double quantileSorted(const std::vector<double>& sorted, double q) {
  double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  auto lo = static_cast<std::size_t>(std::floor(pos));
  std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return quantileSorted(v, 0.5);
}

}  // namespace ds::report
