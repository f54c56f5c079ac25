// dsreport html (placeholder until its module lands; replaced by the owner of reports/html).
#include "reports/cli/command.h"

#include <cstdio>

namespace ds::report::cli {

Command addHtmlCommand(CLI::App& parent) {
  Command c;
  c.app = parent.add_subcommand("html", "(not built yet)");
  c.run = [] {
    std::fprintf(stderr, "dsreport html: not built yet\n");
    return kExitInternal;
  };
  return c;
}

}  // namespace ds::report::cli
