// The median every floor uses (sample values, fleet bandwidths, history levels, benchmark runs).
#pragma once

#include <vector>

namespace ds {

// The middle value, or the mean of the two middle values for an even count; 0 when empty.
// O(n) (nth_element on the copy it takes).
double median(std::vector<double> v);

}  // namespace ds
