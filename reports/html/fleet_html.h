// The fleet section of a dsdiag report page (dsreport html diag.json, fleet mode): the verdict, the
// suspect hosts and links with their evidence, the interface advice, the exclude lines, a host x host
// heatmap of the pairs that ran (a canvas drawn by an embedded script, usable at thousands of hosts)
// and every host's verdict (healthy ones folded).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "reports/diag/fleet_schema.h"
#include "reports/html/html_page.h"

namespace ds::report::html {

// The heatmap's data for the page script: {"canvas", "tip", "hosts": [names], "suspect": [0/1 per
// host], "median", "cells": [i, j, status, ratio x 1000, ...]}: one cell per host pair that ran (the
// worst of its pairs: failed or timed out over measured over skipped, the lowest bandwidth), i < j,
// status 0 measured, 1 failed, 2 timed out, 3 skipped; ratio = bandwidth / the fleet median.
nlohmann::json fleetHeatmapData(const FleetReport& report, const std::string& canvasId);

// Adds the section (titled "Fleet", or "Fleet: <name>") and returns the heatmap's data; the caller
// puts every heatmap of the page in data["fleetHeatmaps"] and adds fleetHeatmapScript() once.
// `index` makes the element ids unique on a page of several reports.
nlohmann::json fleetSection(PageBuilder& page, const FleetReport& report, const std::string& name, int index);

// The page script that draws data["fleetHeatmaps"] and sets body data-heatmaps-drawn and each
// canvas's data-cells-drawn.
const char* fleetHeatmapScript();

}  // namespace ds::report::html
