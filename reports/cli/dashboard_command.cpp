// dsreport dashboard (placeholder until its module lands; replaced by the owner of reports/dashboard).
#include "reports/cli/command.h"

#include <cstdio>

namespace ds::report::cli {

Command addDashboardCommand(CLI::App& parent) {
  Command c;
  c.app = parent.add_subcommand("dashboard", "(not built yet)");
  c.run = [] {
    std::fprintf(stderr, "dsreport dashboard: not built yet\n");
    return kExitInternal;
  };
  return c;
}

}  // namespace ds::report::cli
