// `dsreport html RUN.json [RUN2.json ...]`: one self-contained page for one run, or several runs
// overlaid (backends or clusters side by side): metadata, the pre-flight table, busbw and latency
// against size per collective and backend (log-2 size axis, in-place and out-of-place), per-rank
// straggler data, the training step split and overlap efficiency, and the raw table under each chart.
#pragma once

#include <string>
#include <vector>

#include "reports/run/run_file.h"

namespace ds::report::html {

// The page as text. Pure: reads only the runs. Throws ConfigError when `runs` is empty.
std::string renderRunReport(const std::vector<RunFile>& runs);

// Renders and writes atomically to `path`. Throws IoError naming the path when it cannot be written.
void writeRunReport(const std::vector<RunFile>& runs, const std::string& path);

// The names the report gives the runs: the label when set, else the file name without ".json";
// repeated names get " #N" (N = position, from 1). Exposed for the compare view and tests.
std::vector<std::string> runDisplayNames(const std::vector<RunFile>& runs);

}  // namespace ds::report::html
