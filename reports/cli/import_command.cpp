// dsreport import (placeholder until its module lands; replaced by the owner of reports/import).
#include "reports/cli/command.h"

#include <cstdio>

namespace ds::report::cli {

Command addImportCommand(CLI::App& parent) {
  Command c;
  c.app = parent.add_subcommand("import", "(not built yet)");
  c.run = [] {
    std::fprintf(stderr, "dsreport import: not built yet\n");
    return kExitInternal;
  };
  return c;
}

}  // namespace ds::report::cli
