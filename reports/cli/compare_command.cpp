// dsreport compare (placeholder until its module lands; replaced by the owner of reports/compare).
#include "reports/cli/command.h"

#include <cstdio>

namespace ds::report::cli {

Command addCompareCommand(CLI::App& parent) {
  Command c;
  c.app = parent.add_subcommand("compare", "(not built yet)");
  c.run = [] {
    std::fprintf(stderr, "dsreport compare: not built yet\n");
    return kExitInternal;
  };
  return c;
}

}  // namespace ds::report::cli
