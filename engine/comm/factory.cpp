#include <fmt/format.h>

#include "engine/comm/process_group.h"
#include "engine/common/error.h"

#if DS_WITH_GLOO
#include "engine/comm/backends/gloo/gloo_process_group.h"
#endif
#if DS_WITH_MPI
#include "engine/comm/backends/mpi/mpi_process_group.h"
#endif
#if DS_WITH_NCCL
#include "engine/comm/backends/nccl/nccl_process_group.h"
#endif

namespace ds::comm {

const std::vector<std::string>& availableBackends() {
  static const std::vector<std::string> kBuilt = [] {
    std::vector<std::string> v;
    if (DS_WITH_NCCL) v.emplace_back("nccl");
    if (DS_WITH_GLOO) v.emplace_back("gloo");
    if (DS_WITH_MPI) v.emplace_back("mpi");
    return v;
  }();
  return kBuilt;
}

std::unique_ptr<ProcessGroup> createProcessGroup(const std::string& backend, const ProcessGroupOptions& options) {
#if DS_WITH_GLOO
  if (backend == "gloo") return makeGlooProcessGroup(options);
#endif
#if DS_WITH_MPI
  if (backend == "mpi") return makeMpiProcessGroup(options);
#endif
#if DS_WITH_NCCL
  if (backend == "nccl") return makeNcclProcessGroup(options);
#endif
  if (backend == "gloo" || backend == "mpi" || backend == "nccl" || backend == "shm") {
    throw ConfigError(fmt::format("the {} backend is not available in this build of dsperf. Install its library "
                                  "(scripts/setup.sh) and rebuild, or choose another backend.",
                                  backend));
  }
  throw ConfigError(fmt::format("'{}' is not a backend; valid names are nccl, gloo, mpi and shm.", backend));
}

}  // namespace ds::comm
