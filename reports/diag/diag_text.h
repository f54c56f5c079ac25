// dsdiag's human output: a compact table grouped by family (status, id, message, then the remedy on
// its own line). Colour only when asked (main asks on a TTY).
#pragma once

#include <string>

#include "reports/diag/diag_schema.h"

namespace ds::report {

struct DiagTextOptions {
  bool color = false;
  // Also print each finding's data (compact JSON) and every rank's PASS rows separately.
  bool verbose = false;
  // dsdiag --fail-on fail: warnings exit 0, and the summary line says so.
  bool warningsPass = false;
};

// The whole report. In world mode rows of the same check that pass on several ranks are merged into
// one row naming the ranks ("ranks 0-3"); differing findings keep one row per rank.
std::string formatDiagText(const DiagReport& report, const DiagTextOptions& options = {});

// The one line a non-zero rank prints in world mode.
std::string formatDiagRankLine(int rank, const std::string& host, const std::vector<DiagRecord>& records,
                               int exitCode);

}  // namespace ds::report
