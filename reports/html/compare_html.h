// `dsreport compare BASE CUR --html PATH`: the comparison as a self-contained page: the verdict, the
// two runs side by side, what makes them differ, the change per size (sweeps, log-2 size axis) or per
// configuration (train) with regressions marked, every matched item and what could not be compared.
// The verdicts come from reports/compare (engineer A's compareRuns); this renderer only draws them.
#pragma once

#include <string>

#include "reports/compare/compare.h"

namespace ds::report {

// The page as text. Pure.
std::string renderCompareHtml(const CompareResult& result);

// Renders and writes atomically to `path`. Throws IoError naming the path.
void writeCompareHtml(const CompareResult& result, const std::string& path);

}  // namespace ds::report
