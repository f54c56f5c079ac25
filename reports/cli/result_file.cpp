#include <fmt/format.h>
#include <sys/stat.h>

#include "reports/cli/command.h"
#include "reports/sweep/sweep_journal.h"

namespace ds::report::cli {

CLI::Validator resultFile() {
  const CLI::Validator file = ds::cli::inputFile();
  return CLI::Validator(
      [file](std::string& path) -> std::string {
        std::string copy = path;
        std::string why = file(copy);
        if (why.empty()) return why;
        struct stat st {};
        const std::string journal = journalPathFor(path);
        if (journal != path && ::stat(path.c_str(), &st) != 0 && ::stat(journal.c_str(), &st) == 0 &&
            S_ISREG(st.st_mode)) {
          return fmt::format(
              "'{}' does not exist, but its journal '{}' does: the run was cut off before it wrote its JSON. "
              "Pass the journal instead (its finished rows, marked incomplete).",
              path, journal);
        }
        return why;
      },
      "FILE");
}

}  // namespace ds::report::cli
