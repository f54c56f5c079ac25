// The training section of a report page (dsreport html on dsbench train results): the step time split
// per configuration, overlap efficiency and step time against the bucket cap, and the table of every
// configuration.
#pragma once

#include <string>
#include <vector>

#include "reports/html/html_page.h"
#include "reports/run/run_file.h"

namespace ds::report::html {

// Adds the "Training step" section for every train run in `runs` (runs of other kinds are passed over;
// nothing when none has one). `names` are runDisplayNames(runs).
void trainSection(PageBuilder& page, const std::vector<RunFile>& runs, const std::vector<std::string>& names);

}  // namespace ds::report::html
