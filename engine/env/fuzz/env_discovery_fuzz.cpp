// Fuzz target: launcher-variable discovery (ranks, sizes, local ranks, node rank, master address and
// port, job id) from any environment: torchrun/dsrun env://, Open MPI, MPICH, MVAPICH, PMIx, Slurm
// (SLURM_TASKS_PER_NODE and SLURM_JOB_NODELIST expansion included).
//
// Input: lines "NAME=VALUE" (the first '=' splits; a line without one sets NAME to ""), the whole
// environment of one process. Oracle: discoverWorld either returns a WorldInfo that passes
// validateWorld and describes itself, or throws ConfigError; any other exception, crash, UB or leak
// is a bug.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/common/error.h"
#include "engine/env/env_source.h"
#include "engine/env/world_info.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ds::env::MapEnv env;
  ds::env::DiscoveryOptions opts;
  // The first line may carry explicit arguments: "#args rank world_size [noauto]".
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    if (line.rfind("#args", 0) == 0) {
      int r = -1, w = -1;
      char flag[8] = "";
      std::string l(line);
      if (std::sscanf(l.c_str(), "#args %d %d %7s", &r, &w, flag) >= 2) {
        opts.rank = r;
        opts.worldSize = w;
        opts.autoMpiDiscovery = std::string_view(flag) != "noauto";
      }
    } else if (!line.empty()) {
      size_t eq = line.find('=');
      env.set(std::string(line.substr(0, eq)), eq == std::string_view::npos ? "" : std::string(line.substr(eq + 1)));
    }
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  try {
    ds::env::WorldInfo w = ds::env::discoverWorld(opts, env);
    ds::env::validateWorld(w);
    auto lines = w.describe();
    if (lines.empty()) std::abort();
    if (w.rank.value < 0 || w.rank.value >= w.worldSize.value) {
      std::fprintf(stderr, "discoverWorld accepted rank %d of world size %d\n", w.rank.value, w.worldSize.value);
      std::abort();
    }
  } catch (const ds::ConfigError&) {
    // Bad input, reported as such: expected.
  }
  return 0;
}
