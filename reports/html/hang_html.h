// `dsreport html hang.json`: the page of a `dsdiag hang` report (reports/diag/hang_schema.h). The
// verdict first; the culprits with their evidence; the ranks that left no dump and the ranks found
// waiting; then each group's last collectives as a table (seq ids as columns, kinds of ranks as rows,
// each cell completed / started / scheduled / not entered / no dump, the divergent seq marked).
//
// Sized for 16,384 ranks: ranks that look alike share a row ("ranks 0-11,13-15: completed up to
// #20536, waiting in #20537"), waiting ranks of alike groups share a line, groups whose tables are
// alike but for their members are drawn once ("and 2047 more groups like it"), and long lists are
// cut with a count (the JSON has them all). A 1.0 report, which has no group timelines, gets them
// from its per-rank timelines.
#pragma once

#include <string>

#include "reports/diag/hang_schema.h"

namespace ds::report::html {

// The page as text. `name` titles it (the report's file name). Pure: reads only the report. Every
// string from the report (hosts, files, reasons) is escaped.
std::string renderHangReport(const HangReport& report, const std::string& name);

// Renders and writes atomically to `path`. Throws IoError naming the path when it cannot be written.
void writeHangReport(const HangReport& report, const std::string& name, const std::string& path);

}  // namespace ds::report::html
