// `dsreport dashboard --fleet`: the per-host history as one self-contained page, for the operator of
// a fleet rather than the developer of a stack (whose page is the series dashboard, dashboard_html.h).
// A hosts x time heatmap on one canvas (each host's figure relative to its SKU's fleet median, for
// a chosen pattern), each host's drift sorted worst first, a host's panel with its series and its
// checks, and the quarantine list (hosts that failed k of their last n checks) in fleet mode's
// exclude-file format with copy and download buttons. The numbers come from reports/history
// (FleetData); this renderer only draws them.
#pragma once

#include <string>

#include "reports/history/fleet_data.h"

namespace ds::report::html {

// The page as text. Pure.
std::string renderFleetDashboard(const history::FleetData& data);

// Renders and writes atomically to `path`. Throws IoError naming the path.
void writeFleetDashboard(const history::FleetData& data, const std::string& path);

// The page script (assets/fleet_dashboard.js).
const char* fleetDashboardScript();

// Standard base64 (RFC 4648, with padding) of bytes: how the page carries each pattern's cells.
std::string base64(const std::uint8_t* data, std::size_t size);

}  // namespace ds::report::html
