// A dsdiag check: a stable id, a family, and a function that inspects this node (through a Context)
// and returns one finding. Checks never print and never throw on a broken node: what they find,
// including garbage in a variable or a missing library, is the finding. The runner still catches
// anything that escapes, so one faulty check cannot take the others down.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "diag/fleet/fleet_defaults.h"
#include "engine/env/deepspeed_runner.h"
#include "engine/env/env_source.h"
#include "engine/env/world_info.h"
#include "reports/diag/diag_schema.h"

namespace ds::diag {

using report::DiagRecord;
using report::DiagStatus;
using Json = nlohmann::json;

// fmt::join as a string, for building messages.
template <typename C>
std::string join(const C& items, std::string_view sep) {
  return fmt::format("{}", fmt::join(items, sep));
}

// What a check returns; the runner adds id, family, rank and host.
struct Finding {
  DiagStatus status = DiagStatus::kPass;
  std::string message;
  std::string remedy;
  Json data = Json::object();
};

inline Finding pass(std::string message, Json data = Json::object()) {
  return {DiagStatus::kPass, std::move(message), "", std::move(data)};
}
inline Finding warn(std::string message, std::string remedy, Json data = Json::object()) {
  return {DiagStatus::kWarn, std::move(message), std::move(remedy), std::move(data)};
}
inline Finding fail(std::string message, std::string remedy, Json data = Json::object()) {
  return {DiagStatus::kFail, std::move(message), std::move(remedy), std::move(data)};
}
inline Finding skip(std::string reason, Json data = Json::object()) {
  return {DiagStatus::kSkip, std::move(reason), "", std::move(data)};
}

struct DiagOptions {
  bool world = false;
  // Bounds rendezvous, the gather on rank 0 and every collective of world mode.
  std::chrono::milliseconds timeout = std::chrono::seconds(30);
  // The TCP connect test to MASTER_ADDR:MASTER_PORT and DNS lookups.
  std::chrono::milliseconds connectTimeout = std::chrono::seconds(3);
  // The job's communication backend (nccl, gloo, mpi); empty: the accelerator's.
  std::string backend;
  // Link matrix: bytes of the large message, and the one-way latency above which a link is slow.
  std::size_t linkLargeBytes = 4u << 20;
  double slowLinkMs = 10.0;
  // Fleet stages (diag/fleet): each link pair's deadline, every pair instead of the planned rounds,
  // the random matchings of the plan (-1: ceil(log2 hosts)), and an absolute bandwidth floor (GB/s;
  // 0: judged against the fleet's own median only).
  std::chrono::milliseconds pairTimeout = fleet::kDefaultPairTimeout;
  bool allPairs = false;
  int linkRounds = -1;
  double minLinkGBps = 0;
  // DeepSpeed's runner inputs (--hostfile, --include, --exclude, --num_nodes, --num_gpus, --ssh_port)
  // for the runner.* checks; nullopt when none was given (the checks skip).
  std::optional<env::RunnerFlags> runner;
  // Arguments dsdiag did not recognise: launcher flags placed after the program name land here.
  std::vector<std::string> extraArgs;
};

// Library names dsdiag dlopens; overridable (DSDIAG_LIBCUDA, DSDIAG_LIBNVML, DSDIAG_LIBNCCL,
// DSDIAG_LIBMPI) to test a specific build or to point at one outside the loader's path.
struct LibraryNames {
  std::vector<std::string> cuda{"libcuda.so.1", "libcuda.so"};
  std::vector<std::string> nvml{"libnvidia-ml.so.1", "libnvidia-ml.so"};
  std::vector<std::string> nccl{"libnccl.so.2", "libnccl.so"};
  std::vector<std::string> mpi{"libmpi.so.40", "libmpi.so.12", "libmpi.so"};
};

// Paths the checks read; overridable (DSDIAG_SHM_PATH, DSDIAG_NCCL_CONF, DSDIAG_SYSFS, DSDIAG_PROCFS)
// so that tests can craft them.
struct SystemPaths {
  std::string shm = "/dev/shm";
  std::string ncclConf = "/etc/nccl.conf";
  std::string sysfs = "/sys";
  std::string procfs = "/proc";
};

struct GpuProbe;   // probes.h
struct NcclProbe;  // probes.h
struct MpiProbe;   // probes.h

// Everything a check may look at. Built once per run; probes of libraries run lazily, once.
class Context {
 public:
  // `variableNames`: the names `env` holds (EnvSource cannot enumerate); empty: the process
  // environment's names.
  Context(const env::EnvSource& env, DiagOptions options, std::vector<std::string> variableNames = {});
  ~Context();

  const env::EnvSource& env() const { return env_; }
  const DiagOptions& options() const { return options_; }
  std::optional<std::string> get(const std::string& name) const { return env_.get(name); }
  // The names of the variables the environment holds, in environ's order.
  const std::vector<std::string>& variableNames() const { return names_; }
  // Every variable name with this prefix that is set.
  std::vector<std::string> namesWithPrefix(const std::string& prefix) const;

  // Discovery's result, or why it failed (the ConfigError's text).
  const std::optional<env::WorldInfo>& world() const { return world_; }
  const std::string& worldError() const { return worldError_; }
  int rank() const { return world_ ? world_->rank.value : -1; }
  int worldSize() const { return world_ ? world_->worldSize.value : 1; }
  int localWorldSize() const { return world_ ? world_->localWorldSize.value : 1; }
  // Several nodes (knowably): LOCAL_WORLD_SIZE < WORLD_SIZE, or a node count above 1 from the launcher.
  bool multiNode() const;
  // The node count from the launcher (SLURM_STEP_NUM_NODES, SLURM_NNODES, SLURM_JOB_NUM_NODES, CROSS_SIZE,
  // GROUP_WORLD_SIZE),
  // with the variable it came from; nullopt when unknown or garbage.
  std::optional<std::pair<int, std::string>> nodeCount() const;

  // The job's backend (flag, DS_ACCELERATOR=cuda -> nccl, a usable GPU -> nccl, else gloo), and
  // whether the job explicitly asked for GPUs (DS_ACCELERATOR=cuda or backend nccl).
  std::string jobBackend();
  bool wantsGpu() const;

  const LibraryNames& libs() const { return libs_; }
  const SystemPaths& paths() const { return paths_; }

  // Each forks a child on first use (probes.h). probeAll() runs them all now: call it while the
  // process has no other threads (before rendezvous).
  GpuProbe& gpu();
  NcclProbe& nccl();
  MpiProbe& mpi();
  void probeAll();

  // World mode: the job's store is up and this process hosts it on rank 0 (the port check then
  // expects to find itself as the owner).
  bool storeUp = false;

 private:
  const env::EnvSource& env_;
  DiagOptions options_;
  std::optional<env::WorldInfo> world_;
  std::string worldError_;
  std::vector<std::string> names_;
  LibraryNames libs_;
  SystemPaths paths_;
  std::unique_ptr<GpuProbe> gpu_;
  std::unique_ptr<NcclProbe> nccl_;
  std::unique_ptr<MpiProbe> mpi_;
};

struct CheckDef {
  std::string id;
  std::string family;
  std::string title;  // one line for --list
  std::function<Finding(Context&)> run;
};

// Each family file contributes its checks (diag/checks/*.cpp).
std::vector<CheckDef> envChecks();
std::vector<CheckDef> netChecks();
std::vector<CheckDef> gpuChecks();
std::vector<CheckDef> gpuHealthChecks();  // NVML: ECC, PCIe, clocks, processes, modes, NVLink
std::vector<CheckDef> gpuTopologyChecks();  // NVML + sysfs: the topo -m matrix, NICs across sockets
std::vector<CheckDef> ncclChecks();
std::vector<CheckDef> mpiChecks();
std::vector<CheckDef> systemChecks();
std::vector<CheckDef> runnerChecks();  // DeepSpeed's runner inputs: hostfile, include/exclude, ssh, exports

}  // namespace ds::diag
