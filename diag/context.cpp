#include <algorithm>

#include "diag/check.h"
#include "diag/probes.h"
#include "diag/util.h"
#include "engine/common/backends.h"
#include "engine/common/error.h"
#include "engine/init.h"

extern char** environ;

namespace ds::diag {
namespace {

std::vector<std::string> libOverride(const env::EnvSource& env, const char* var, std::vector<std::string> dflt) {
  auto v = env.get(var);
  if (v && !v->empty()) return {*v};
  return dflt;
}

}  // namespace

Context::Context(const env::EnvSource& env, DiagOptions options, std::vector<std::string> variableNames)
    : env_(env), options_(std::move(options)), names_(std::move(variableNames)) {
  if (names_.empty()) {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      std::string kv = *e;
      names_.push_back(kv.substr(0, kv.find('=')));
    }
  }
  try {
    world_ = discoverWorldFor({}, env_);  // the rules init_distributed uses (DS_DISCOVERY included)
  } catch (const std::exception& e) {
    worldError_ = e.what();
  }
  libs_.cuda = libOverride(env_, "DSDIAG_LIBCUDA", libs_.cuda);
  libs_.nvml = libOverride(env_, "DSDIAG_LIBNVML", libs_.nvml);
  libs_.nccl = libOverride(env_, "DSDIAG_LIBNCCL", libs_.nccl);
  libs_.mpi = libOverride(env_, "DSDIAG_LIBMPI", libs_.mpi);
  if (auto v = env_.get("DSDIAG_SHM_PATH"); v && !v->empty()) paths_.shm = *v;
  if (auto v = env_.get("DSDIAG_NCCL_CONF"); v && !v->empty()) paths_.ncclConf = *v;
  if (auto v = env_.get("DSDIAG_SYSFS"); v && !v->empty()) paths_.sysfs = *v;
  if (auto v = env_.get("DSDIAG_PROCFS"); v && !v->empty()) paths_.procfs = *v;
}

Context::~Context() = default;

std::vector<std::string> Context::namesWithPrefix(const std::string& prefix) const {
  std::vector<std::string> out;
  for (const auto& n : names_) {
    if (n.rfind(prefix, 0) == 0 && env_.get(n)) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::optional<std::pair<int, std::string>> Context::nodeCount() const {
  // The step's node count first: an srun step may use fewer nodes than its allocation.
  for (const char* v : {"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES", "CROSS_SIZE", "GROUP_WORLD_SIZE"}) {
    if (auto s = env_.get(v)) {
      auto n = parseInteger(*s);
      if (n && *n >= 1 && *n < (1 << 24)) return std::make_pair(static_cast<int>(*n), std::string(v));
    }
  }
  return std::nullopt;
}

bool Context::multiNode() const {
  if (auto n = nodeCount(); n && n->first > 1) return true;
  return world_ && world_->localWorldSize.value < world_->worldSize.value;
}

bool Context::wantsGpu() const {
  auto acc = env_.get("DS_ACCELERATOR");
  if (acc && trim(*acc) == "cuda") return true;
  return options_.backend == "nccl";
}

std::string Context::jobBackend() {
  if (!options_.backend.empty()) return options_.backend;
  auto acc = env_.get("DS_ACCELERATOR");
  if (acc && (trim(*acc) == "cuda" || trim(*acc) == "cpu")) return defaultBackendFor(trim(*acc));
  return defaultBackendFor(gpu().devices.empty() ? "cpu" : "cuda");
}

GpuProbe& Context::gpu() {
  if (!gpu_) gpu_ = std::make_unique<GpuProbe>(probeGpu(libs_));
  return *gpu_;
}
NcclProbe& Context::nccl() {
  if (!nccl_) nccl_ = std::make_unique<NcclProbe>(probeNccl(libs_));
  return *nccl_;
}
MpiProbe& Context::mpi() {
  if (!mpi_) mpi_ = std::make_unique<MpiProbe>(probeMpi(libs_));
  return *mpi_;
}
void Context::probeAll() {
  gpu();
  nccl();
  mpi();
}

}  // namespace ds::diag
