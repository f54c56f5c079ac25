#include <fmt/format.h>

#include <map>
#include <mutex>

#include "engine/comm/backends/shm/shm_process_group.h"
#include "engine/comm/process_group.h"
#include "engine/common/backends.h"
#include "engine/common/error.h"
#if DS_WITH_GLOO
#include "engine/comm/backends/gloo/gloo_process_group.h"
#endif
#if DS_WITH_MPI
#include "engine/comm/backends/mpi/mpi_process_group.h"
#endif

namespace ds::comm {
namespace {

// Backends that live outside libdsengine (nccl, whose library a CPU-only node may lack) register
// here when their object library is linked into a tool; see BackendRegistrar.
std::mutex& registryMutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, BackendFactory>& registry() {
  static std::map<std::string, BackendFactory> r;
  return r;
}

}  // namespace

BackendRegistrar::BackendRegistrar(const char* name, BackendFactory factory) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry()[name] = factory;
}

std::vector<std::string> availableBackends() {
  std::vector<std::string> v;
  {
    std::lock_guard<std::mutex> lock(registryMutex());
    if (registry().count("nccl") != 0) v.emplace_back("nccl");
  }
  if (DS_WITH_GLOO) v.emplace_back("gloo");
  if (DS_WITH_MPI) v.emplace_back("mpi");
  v.emplace_back("shm");
  return v;
}

bool backendTakesDeviceBuffers(const std::string& backend) {
  if (backend == "nccl") return true;
#if DS_WITH_MPI
  if (backend == "mpi") return mpiCudaAware();
#endif
  return false;
}

Device groupDevice(const std::string& backend, const std::string& accelerator, int localRank) {
  if (accelerator == "cuda" && backendTakesDeviceBuffers(backend)) return Device{DeviceType::kCuda, localRank};
  return Device{};
}

namespace {

std::unique_ptr<ProcessGroup> makeProcessGroup(const std::string& backend,
                                               const ProcessGroupOptions& options) {
  if (backend == "shm") return makeShmProcessGroup(options);
#if DS_WITH_GLOO
  if (backend == "gloo") return makeGlooProcessGroup(options);
#endif
#if DS_WITH_MPI
  if (backend == "mpi") return makeMpiProcessGroup(options);
#endif
  {
    std::lock_guard<std::mutex> lock(registryMutex());
    auto it = registry().find(backend);
    if (it != registry().end()) return it->second(options);
  }
  if (backend == "nccl" && DS_WITH_NCCL) {
    throw ConfigError(
        "the nccl backend is not linked into this tool; use dsbench or dsdiag, or choose gloo or mpi.");
  }
  if (backend == "mpi") {
    throw ConfigError(
        "the mpi backend is not in this build of dsperf. The relocatable bundle (scripts/bundle.sh) leaves it out "
        "because Open MPI's plugins do not work when copied to another machine: use --backend nccl or gloo, or "
        "build dsperf on that machine with Open MPI installed (scripts/setup.sh, scripts/build.sh).");
  }
  if (backend == "gloo" || backend == "nccl" || backend == "shm") {
    throw ConfigError(
        fmt::format("the {} backend is not available in this build of dsperf. Install its library "
                    "(scripts/setup.sh) and rebuild, or choose another backend.",
                    backend));
  }
  throw ConfigError(fmt::format("'{}' is not a backend; valid names are {}.", backend, backendNamesText()));
}

}  // namespace

std::unique_ptr<ProcessGroup> createProcessGroup(const std::string& backend,
                                                 const ProcessGroupOptions& options) {
  auto pg = makeProcessGroup(backend, options);
  pg->registerFlightRecorder();  // in pg_config from now on, ops or not (as torch's groups)
  return pg;
}

}  // namespace ds::comm
