// The sweep sections of a report page (dsreport html on dsbench coll results or nccl-tests outputs): per
// collective, its backends side by side when it ran on several, then one section per collective and
// backend: busbw and latency against size (log-2 size axis, in-place dashed), the hardware bound, the
// raw table, and the stragglers (spread, per-iteration tails, every rank's time).
#pragma once

#include <string>
#include <vector>

#include "reports/html/html_page.h"
#include "reports/run/run_file.h"

namespace ds::report::html {

// Adds the sections of every sweep in `runs` (runs of other kinds are passed over; nothing when none has
// a sweep), collectives and their backends in first-seen order. `names` are runDisplayNames(runs).
void sweepSections(PageBuilder& page, const std::vector<RunFile>& runs,
                   const std::vector<std::string>& names);

}  // namespace ds::report::html
