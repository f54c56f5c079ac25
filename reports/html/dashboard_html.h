// `dsreport dashboard`: the history's trends as one self-contained page. One card per series (a metric
// of one label, backend, collective and size or train configuration): the values over time, the rolling
// baseline dashed, regressed points marked in red, and the points as a table; filters for label,
// backend and collective, and for series whose latest run regressed. The verdicts come from
// reports/history (DashboardData); this renderer only draws them.
#pragma once

#include <string>

#include "reports/history/dashboard_data.h"

namespace ds::report::html {

// The page as text. Pure.
std::string renderDashboard(const history::DashboardData& data);

// Renders and writes atomically to `path`. Throws IoError naming the path.
void writeDashboard(const history::DashboardData& data, const std::string& path);

}  // namespace ds::report::html
