// `dsreport html gpu.json`: the page of a `dsbench gpu` result (reports/gpu/gpu_copy.h): the GPUs with
// the facts their bounds come from, then one table row per copy (median, fastest and slowest GB/s,
// the bound and the fraction reached, "-" and why where a bound is unknown), and a bar chart of each
// measured row's fraction of its bound.
#pragma once

#include <string>

#include "reports/gpu/gpu_copy.h"

namespace ds::report::html {

// The page as text. `name` titles it (the result's file name). Pure; every string from the result
// (host, GPU names, notes) is escaped.
std::string renderGpuCopyReport(const GpuCopyRun& run, const std::string& name);

// Renders and writes atomically to `path`. Throws IoError naming the path when it cannot be written.
void writeGpuCopyReport(const GpuCopyRun& run, const std::string& name, const std::string& path);

}  // namespace ds::report::html
