// `dsdiag hang`'s human output: the verdict sentence first, then the evidence per claim with the file
// that shows it, the ranks without a dump, the ranks found waiting, what the dumps could not decide,
// the problems with the input, and what to do next.
#pragma once

#include <string>
#include <vector>

#include "reports/diag/hang_schema.h"

namespace ds::report {

struct HangTextOptions {
  // Lines listed per section (waiting groups, ranks without a dump) before "... N more (see --json)".
  int maxLines = 20;
};

std::string formatHangText(const HangReport& report, const HangTextOptions& options = {});

// "What to do": concrete next steps per kind of fault found (the text's last section, and the page's).
std::vector<std::string> hangAdvice(const HangReport& report);

}  // namespace ds::report
