#include <array>
#include <optional>

#include "engine/common/error.h"
#include "engine/env/launchers.h"
#include "engine/env/slurm.h"
#include "engine/env/world_info.h"

namespace ds::env {
namespace {

constexpr long long kMaxWorld = 1LL << 24;
constexpr int kDefaultPort = 29500;  // DeepSpeed's distributed_port

struct Reader {
  const EnvSource& env;
  const LauncherVars* launcher;  // nullptr when none was detected or discovery is off

  std::optional<Sourced<int>> intVar(const char* name, long long min, long long max,
                                     std::string_view valid) const {
    if (name == nullptr) return std::nullopt;
    auto v = env.get(name);
    if (!v) return std::nullopt;
    return Sourced<int>{static_cast<int>(parseIntVar(name, *v, min, max, valid)), name};
  }

  // The first of several accepted spellings that is set.
  std::optional<Sourced<int>> firstIntVar(std::initializer_list<const char*> names, long long min,
                                          long long max, std::string_view valid) const {
    for (const char* n : names) {
      if (auto v = intVar(n, min, max, valid)) return v;
    }
    return std::nullopt;
  }

  std::optional<Sourced<int>> launcherVar(const char* LauncherVars::*field, long long min, long long max,
                                          std::string_view valid) const {
    if (launcher == nullptr) return std::nullopt;
    return intVar(launcher->*field, min, max, valid);
  }
};

// env:// and the launcher must describe the same process; a mix-up (a stale RANK exported in a
// job script run under mpirun) would otherwise pair ranks wrongly and hang.
void checkAgree(const std::optional<Sourced<int>>& envVal, const std::optional<Sourced<int>>& launcherVal,
                Launcher launcher) {
  if (!envVal || !launcherVal || envVal->value == launcherVal->value) return;
  throw ConfigError(fmt::format(
      "{}={} disagrees with {}={}: the env:// variables and the {} launcher describe different processes. "
      "Unset {} (and the other env:// variables exported by your job script) to let the launcher decide, "
      "or start the job without {}.",
      envVal->source, envVal->value, launcherVal->source, launcherVal->value, launcherName(launcher),
      envVal->source, launcherName(launcher)));
}

// AzureML (AZUREML_EXPERIMENT_ID, and not a DLTS cluster) names rank 0's node in its own variables:
// AZ_BATCHAI_MPI_MASTER_NODE on one node, AZ_BATCH_MASTER_NODE ("host:port") on several. Read only
// under Open MPI, whose variables AzureML's ranks come from, and only when MASTER_ADDR is unset.
std::optional<Sourced<std::string>> azureMlMaster(const EnvSource& env, const LauncherVars* launcher,
                                                  const WorldInfo& w) {
  if (!env.get("AZUREML_EXPERIMENT_ID") || env.get("DLTS_JOB_ID") || launcher == nullptr ||
      launcher->id != Launcher::kOpenMpi) {
    return std::nullopt;
  }
  auto localSize = env.get("OMPI_COMM_WORLD_LOCAL_SIZE");
  bool single = localSize && pythonInt(*localSize) == w.worldSize.value;
  if (single) {
    if (auto v = env.get("AZ_BATCHAI_MPI_MASTER_NODE"); v && !v->empty()) {
      return Sourced<std::string>{*v, "AZ_BATCHAI_MPI_MASTER_NODE (AzureML, one node)"};
    }
  } else if (auto v = env.get("AZ_BATCH_MASTER_NODE"); v && !v->empty()) {
    return Sourced<std::string>{v->substr(0, v->find(':')), "AZ_BATCH_MASTER_NODE (AzureML: its host part)"};
  }
  return std::nullopt;
}

}  // namespace

Sourced<std::string> discoverJobId(const EnvSource& env) {
  if (auto v = env.get("DS_JOB_ID"); v && !v->empty()) return {*v, "DS_JOB_ID"};
  if (auto v = env.get("SLURM_JOB_ID"); v && !v->empty()) {
    if (auto step = env.get("SLURM_STEP_ID"); step && !step->empty()) {
      return {*v + "." + *step, "SLURM_JOB_ID.SLURM_STEP_ID"};
    }
    return {*v, "SLURM_JOB_ID"};
  }
  for (const char* name : {"TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"}) {
    if (auto v = env.get(name); v && !v->empty()) return {*v, name};
  }
  return {"default", "default (no DS_JOB_ID, SLURM_JOB_ID or launcher job id)"};
}

const char* launcherName(Launcher l) {
  switch (l) {
    case Launcher::kNone:
      return "none";
    case Launcher::kEnv:
      return "env://";
    case Launcher::kOpenMpi:
      return "Open MPI";
    case Launcher::kMpich:
      return "MPICH/Hydra";
    case Launcher::kPmix:
      return "PMIx";
    case Launcher::kMvapich:
      return "MVAPICH";
    case Launcher::kSlurm:
      return "Slurm";
    case Launcher::kPals:
      return "Cray PALS";
  }
  return "unknown";
}

WorldInfo discoverWorld(const DiscoveryOptions& opts, const EnvSource& env) {
  WorldInfo w;
  // Under a local launcher (dsrun, torchrun, DeepSpeed's launcher) started by srun or mpirun once per
  // node, the env:// variables describe this worker and the outer launcher's describe the per-node
  // agent, so detectLaunchers neither uses nor compares the outer ones.
  const LauncherDetection detected = detectLaunchers(env, opts.autoMpiDiscovery);
  const LauncherVars* launcher = detected.launcher;
  const SlurmPlace slurm = slurmPlace(env);
  const bool ignoredAllocation = opts.autoMpiDiscovery && detected.slurmAllocationOnly && !detected.local;
  Reader r{env, launcher};
  constexpr std::string_view kRankValid = "0 to WORLD_SIZE-1";
  constexpr std::string_view kSizeValid = "at least 1 (the number of processes in the job)";

  if (opts.rank < -1) {
    throw ConfigError(
        fmt::format("the rank argument is {}; it must be -1 (take it from the launcher) or "
                    "0 to world_size-1.",
                    opts.rank));
  }
  if (opts.worldSize < -1 || opts.worldSize == 0) {
    throw ConfigError(
        fmt::format("the world_size argument is {}; it must be -1 (take it from the "
                    "launcher) or at least 1.",
                    opts.worldSize));
  }
  if (opts.distributedPort < 1 || opts.distributedPort > 65535) {
    throw ConfigError(
        fmt::format("distributed_port={} is not a TCP port; it must be 1 to 65535.", opts.distributedPort));
  }

  // --- rank and world size ---
  auto envRank = r.intVar("RANK", 0, kMaxWorld, kRankValid);
  auto envSize = r.intVar("WORLD_SIZE", 1, kMaxWorld, kSizeValid);
  auto lRank = r.launcherVar(&LauncherVars::rank, 0, kMaxWorld, kRankValid);
  auto lSize = r.launcherVar(&LauncherVars::size, 1, kMaxWorld, kSizeValid);
  if (!lSize) lSize = r.launcherVar(&LauncherVars::sizeFallback, 1, kMaxWorld, kSizeValid);
  if (launcher != nullptr) {
    checkAgree(envRank, lRank, launcher->id);
    checkAgree(envSize, lSize, launcher->id);
  }
  w.launcher = launcher != nullptr ? launcher->id : (envRank || envSize ? Launcher::kEnv : Launcher::kNone);

  std::optional<Sourced<int>> rank = opts.rank >= 0 ? Sourced<int>{opts.rank, "argument rank"}
                                     : envRank      ? envRank
                                                    : lRank;
  std::optional<Sourced<int>> size = opts.worldSize >= 1 ? Sourced<int>{opts.worldSize, "argument world_size"}
                                     : envSize           ? envSize
                                                         : lSize;
  if (rank && !size && launcher != nullptr && launcher->id == Launcher::kPmix) {
    throw ConfigError(
        fmt::format("PMIX_RANK={} is set but PMIx exports no world size, and neither WORLD_SIZE nor a Slurm "
                    "step (SLURM_STEP_NUM_TASKS) gives one. Export WORLD_SIZE (and MASTER_ADDR), or start the "
                    "job with srun (any --mpi plugin) or mpirun, which set the size.",
                    rank->value));
  }
  if (rank && !size) {
    throw ConfigError(
        fmt::format("environment variable WORLD_SIZE expected, but not set ({}={} is set). "
                    "Export WORLD_SIZE with the total number of processes, or start the job "
                    "with dsrun, torchrun, mpirun or srun, which set it.",
                    rank->source, rank->value));
  }
  if (size && !rank) {
    if (size->value > 1) {
      throw ConfigError(
          fmt::format("environment variable RANK expected, but not set ({}={} is set). "
                      "Export RANK for each process (0 to {}), or start the job with dsrun, "
                      "torchrun, mpirun or srun, which set it.",
                      size->source, size->value, size->value - 1));
    }
    rank = Sourced<int>{0, "default (WORLD_SIZE=1)"};
  }
  w.rank = rank.value_or(Sourced<int>{0, "default (single process)"});
  w.worldSize = size.value_or(Sourced<int>{1, "default (single process)"});
  if (ignoredAllocation && !size) {
    auto tasks = firstSet(env, {"SLURM_NTASKS", "SLURM_NPROCS"});
    if (tasks && tasks->second != "1") {
      w.notes.push_back(fmt::format(
          "this process runs inside Slurm job {} but not in an srun step (a batch script or an salloc shell: "
          "SLURM_STEP_ID is {}), so SLURM_PROCID and {}={} describe the allocation, not ranks that were "
          "started. It runs as a single process. To run {} ranks, start the command with `srun` inside the "
          "script (or with `dsrun --nproc-per-node N` on one node).",
          env.get("SLURM_JOB_ID").value_or("?"),
          env.get("SLURM_STEP_ID") ? fmt::format("'{}' (not a task step)", *env.get("SLURM_STEP_ID")) : "unset",
          tasks->first, tasks->second, tasks->second));
    }
  }

  // --- local rank and local world size ---
  auto envLocalRank = r.intVar("LOCAL_RANK", 0, kMaxWorld, "0 to LOCAL_WORLD_SIZE-1");
  auto envLocalSize = r.firstIntVar({"LOCAL_WORLD_SIZE", "LOCAL_SIZE"}, 1, kMaxWorld,
                                    "at least 1 (the processes on this node)");
  auto lLocalRank = r.launcherVar(&LauncherVars::localRank, 0, kMaxWorld, "0 to the local size - 1");
  if (!lLocalRank)
    lLocalRank = r.launcherVar(&LauncherVars::localRankFallback, 0, kMaxWorld, "0 to the local size - 1");
  auto lLocalSize = r.launcherVar(&LauncherVars::localSize, 1, kMaxWorld, "at least 1");
  auto slurmNode = launcher != nullptr && launcher->id == Launcher::kSlurm
                       ? r.intVar("SLURM_NODEID", 0, kMaxWorld, "0 to the number of nodes - 1")
                       : std::nullopt;
  if (!lLocalSize && slurmNode) {
    // The step's layout, not the allocation's: `srun -n 2` inside `sbatch --ntasks-per-node=4`.
    if (auto tpn = firstSet(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})) {
      auto counts = expandTasksPerNode(tpn->second, tpn->first);
      if (static_cast<size_t>(slurmNode->value) < counts.size()) {
        lLocalSize = Sourced<int>{counts[slurmNode->value], tpn->first + "[SLURM_NODEID]"};
      }
    }
  }
  if (launcher != nullptr) {
    checkAgree(envLocalRank, lLocalRank, launcher->id);
    checkAgree(envLocalSize, lLocalSize, launcher->id);
  }
  auto localSize = envLocalSize ? envLocalSize : lLocalSize;
  auto localRank = envLocalRank ? envLocalRank : lLocalRank;
  bool mpiStyle = launcher != nullptr && launcher->id != Launcher::kSlurm;
  if ((!localSize || !localRank) && mpiStyle && w.worldSize.value > 1) w.needsMpiLocalRanks = true;
  if (localSize) {
    w.localWorldSize = *localSize;
  } else if (!localRank || w.worldSize.value == 1) {
    w.localWorldSize = {w.worldSize.value, "default: WORLD_SIZE (LOCAL_WORLD_SIZE unset; assumes one node)"};
  } else {
    // A local rank without a local size: assume one node, but never smaller than what the rank implies.
    w.localWorldSize = {std::max(w.worldSize.value, localRank->value + 1),
                        "default: WORLD_SIZE (LOCAL_WORLD_SIZE unset; assumes one node)"};
  }
  if (localRank) {
    w.localRank = *localRank;
  } else if (localSize && w.worldSize.value % w.localWorldSize.value == 0) {
    w.localRank = {w.rank.value % w.localWorldSize.value, "derived: RANK % LOCAL_WORLD_SIZE"};
  } else {
    w.localRank = {w.rank.value, "default: RANK (LOCAL_RANK unset; assumes one node)"};
  }

  // --- node rank ---
  if (auto v = r.firstIntVar({"GROUP_RANK", "NODE_RANK", "CROSS_RANK"}, 0, kMaxWorld,
                             "0 to the number of nodes - 1")) {
    w.nodeRank = *v;
  } else if (slurmNode) {
    w.nodeRank = *slurmNode;
  } else if (w.localWorldSize.value > 0 && w.worldSize.value % w.localWorldSize.value == 0) {
    w.nodeRank = {w.rank.value / w.localWorldSize.value, "derived: RANK / LOCAL_WORLD_SIZE"};
  } else {
    w.nodeRank = {0, "default (one node)"};
  }

  // --- master address and port ---
  if (opts.masterAddr) {
    w.masterAddr = {*opts.masterAddr, "argument init_method"};
  } else if (auto v = env.get("MASTER_ADDR")) {
    w.masterAddr = {*v, "MASTER_ADDR"};
  } else if (auto nodes = launcher != nullptr && launcher->id == Launcher::kSlurm
                             ? firstSet(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
                             : std::nullopt) {
    // The step's first node hosts its task 0 (srun's default block distribution); the allocation's
    // first node may not be in the step at all.
    auto hosts = expandNodelist(nodes->second, nodes->first);
    w.masterAddr = {hosts.front(), nodes->first + " (first host)"};
  } else if (auto aml = azureMlMaster(env, launcher, w)) {
    w.masterAddr = *aml;
  } else if (mpiStyle && w.worldSize.value > 1) {
    w.needsMpiMasterAddr = true;
    w.masterAddr = {"", "pending: rank 0's address, to be agreed through MPI"};
  } else if (w.worldSize.value == 1) {
    w.masterAddr = {"127.0.0.1", "default (single process)"};
  } else {
    throw ConfigError(fmt::format(
        "environment variable MASTER_ADDR expected, but not set (WORLD_SIZE={} from {}). Export MASTER_ADDR "
        "with the address of rank 0's host that every node can reach, or start the job with dsrun, torchrun, "
        "mpirun or srun.",
        w.worldSize.value, w.worldSize.source));
  }
  if (!w.needsMpiMasterAddr && w.masterAddr.value.empty()) {
    throw ConfigError(
        fmt::format("{} is empty; it must be the host name or IP address of rank 0's node, "
                    "reachable from every node.",
                    w.masterAddr.source == "MASTER_ADDR" ? "MASTER_ADDR" : "the master address"));
  }
  if (opts.masterPort) {
    if (*opts.masterPort < 1 || *opts.masterPort > 65535) {
      throw ConfigError(
          fmt::format("the init_method port {} is not a TCP port; it must be 1 to 65535.", *opts.masterPort));
    }
    w.masterPort = {*opts.masterPort, "argument init_method"};
  } else if (auto v = r.intVar("MASTER_PORT", 1, 65535, "a TCP port, 1 to 65535")) {
    w.masterPort = *v;
  } else if (w.masterAddr.source.rfind("AZ_BATCH", 0) == 0) {
    // AzureML's ports, as DeepSpeed's patch_aml_env_for_torch_nccl_backend.
    bool single = w.masterAddr.source.rfind("AZ_BATCHAI_MPI_MASTER_NODE", 0) == 0;
    w.masterPort = {single ? 54965 : 6105, single
                                               ? "default under AzureML on one node (DeepSpeed's 54965)"
                                               : "default under AzureML on several nodes (DeepSpeed's 6105)"};
  } else if (auto port = slurm != SlurmPlace::kNone && opts.distributedPort == kDefaultPort
                             ? slurmDefaultPort(env.get("SLURM_JOB_ID").value_or(""))
                             : std::nullopt) {
    // Two jobs sharing a node must not both take 29500; Lightning users know this rule.
    w.masterPort = {*port, fmt::format("default under Slurm: 15000 + last 4 digits of SLURM_JOB_ID={}",
                                       env.get("SLURM_JOB_ID").value_or(""))};
  } else {
    w.masterPort = {opts.distributedPort, "distributed_port (default 29500)"};
  }

  w.jobId = discoverJobId(env);
  validateWorld(w);
  return w;
}

void validateWorld(const WorldInfo& w) {
  if (w.worldSize.value < 1) {
    throw ConfigError(
        fmt::format("WORLD_SIZE={} (from {}) must be at least 1.", w.worldSize.value, w.worldSize.source));
  }
  if (w.rank.value >= w.worldSize.value) {
    throw ConfigError(fmt::format(
        "RANK={} (from {}) is not below WORLD_SIZE={} (from {}): ranks run from 0 to {}. Check that the "
        "launcher's process count matches WORLD_SIZE.",
        w.rank.value, w.rank.source, w.worldSize.value, w.worldSize.source, w.worldSize.value - 1));
  }
  if (w.localRank.value >= w.localWorldSize.value) {
    throw ConfigError(fmt::format(
        "LOCAL_RANK={} (from {}) is not below LOCAL_WORLD_SIZE={} (from {}): local ranks run from 0 to {}.",
        w.localRank.value, w.localRank.source, w.localWorldSize.value, w.localWorldSize.source,
        w.localWorldSize.value - 1));
  }
  if (w.localWorldSize.value > w.worldSize.value) {
    throw ConfigError(
        fmt::format("LOCAL_WORLD_SIZE={} (from {}) is larger than WORLD_SIZE={} (from {}): a node "
                    "cannot hold more processes than the whole job.",
                    w.localWorldSize.value, w.localWorldSize.source, w.worldSize.value, w.worldSize.source));
  }
  if (w.nodeRank.value >= w.worldSize.value) {
    throw ConfigError(
        fmt::format("the node rank {} (from {}) is not below WORLD_SIZE={}: there cannot be more "
                    "nodes than processes.",
                    w.nodeRank.value, w.nodeRank.source, w.worldSize.value));
  }
}

std::vector<std::string> WorldInfo::describe() const {
  auto line = [](const char* name, const auto& f) {
    return fmt::format("{}={} (from {})", name, f.value, f.source);
  };
  return {line("RANK", rank),
          line("WORLD_SIZE", worldSize),
          line("LOCAL_RANK", localRank),
          line("LOCAL_WORLD_SIZE", localWorldSize),
          line("NODE_RANK", nodeRank),
          line("MASTER_ADDR", masterAddr),
          line("MASTER_PORT", masterPort),
          line("JOB_ID", jobId)};
}

}  // namespace ds::env
