// dsreport ingest (placeholder until its module lands; replaced by the owner of reports/ingest).
#include "reports/cli/command.h"

#include <cstdio>

namespace ds::report::cli {

Command addIngestCommand(CLI::App& parent) {
  Command c;
  c.app = parent.add_subcommand("ingest", "(not built yet)");
  c.run = [] {
    std::fprintf(stderr, "dsreport ingest: not built yet\n");
    return kExitInternal;
  };
  return c;
}

}  // namespace ds::report::cli
