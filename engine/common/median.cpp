#include "engine/common/median.h"

#include <algorithm>

namespace ds {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  const double hi = *mid;
  if (v.size() % 2 == 1) return hi;
  return (*std::max_element(v.begin(), mid) + hi) / 2;
}

}  // namespace ds
