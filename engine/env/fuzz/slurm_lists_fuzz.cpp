// Fuzz target: Slurm's compressed lists, SLURM_JOB_NODELIST ("node[01-04,07]", cartesian products)
// and SLURM_TASKS_PER_NODE ("2(x3),1"). Both parsers get every input. Oracle: a result or a
// ConfigError; the expansion must be non-empty, and a list without brackets or commas must expand
// to itself.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "engine/common/error.h"
#include "engine/env/slurm.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    auto hosts = ds::env::expandNodelist(text);
    if (hosts.empty()) {
      std::fprintf(stderr, "expandNodelist accepted a list and returned no hosts\n");
      std::abort();
    }
    if (text.find_first_of("[],") == std::string_view::npos && (hosts.size() != 1 || hosts[0] != text)) {
      std::fprintf(stderr, "expandNodelist changed a plain host name\n");
      std::abort();
    }
  } catch (const ds::ConfigError&) {
  }
  try {
    auto counts = ds::env::expandTasksPerNode(text);
    if (counts.empty()) {
      std::fprintf(stderr, "expandTasksPerNode accepted a list and returned no counts\n");
      std::abort();
    }
    for (int c : counts) {
      if (c < 0) std::abort();
    }
  } catch (const ds::ConfigError&) {
  }
  return 0;
}
