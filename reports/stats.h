// Order statistics shared by the result writers and readers: the sweep's per-iteration percentiles,
// the train run's step percentiles, the dashboard's rolling median. One definition, so a p99 in a
// sweep and a p99 in a train run mean the same.
#pragma once

#include <vector>

namespace ds::report {

// The q-quantile (0 <= q <= 1) of an ascending, non-empty vector, interpolated linearly between
// the two closest ranks (numpy's default, "type 7"): q = 0.5 of {1, 2, 3, 4} is 2.5.
double quantileSorted(const std::vector<double>& sorted, double q);
// quantileSorted(sort(v), 0.5); 0 for an empty v.
double median(std::vector<double> v);

}  // namespace ds::report
