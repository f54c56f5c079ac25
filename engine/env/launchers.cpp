#include "engine/env/launchers.h"

#include <fmt/format.h>

#include <array>
#include <climits>

#include "engine/env/slurm.h"

namespace ds::env {
namespace {

constexpr std::array<LauncherVars, 6> kLaunchers{{
    {Launcher::kOpenMpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    // Cray's mpiexec (PALS) exports its own rank beside Cray PMI's PMI_RANK/PMI_SIZE.
    {Launcher::kPals, "PALS_RANKID", "PMI_SIZE", "PALS_LOCAL_RANKID", "PMI_LOCAL_SIZE"},
    {Launcher::kMpich, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", nullptr,
     "PALS_LOCAL_RANKID"},
    {Launcher::kMvapich, "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK",
     "MV2_COMM_WORLD_LOCAL_SIZE"},
    {Launcher::kPmix, "PMIX_RANK", nullptr, nullptr, nullptr},
    // srun exports the step's task count as SLURM_STEP_NUM_TASKS (and SLURM_NTASKS, which a batch
    // script also has, for the allocation).
    {Launcher::kSlurm, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", nullptr, "SLURM_NTASKS"},
}};

bool isPmiOfSrun(const EnvSource& env, const LauncherVars& l) {
  return (l.id == Launcher::kMpich || l.id == Launcher::kPmix) && slurmPlace(env) == SlurmPlace::kStep &&
         env.get("SLURM_PROCID") == env.get(l.rank);
}

bool isPythonSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

}  // namespace

std::span<const LauncherVars> mpiLaunchers() { return kLaunchers; }
const LauncherVars& slurmLauncherVars() { return kLaunchers.back(); }

std::optional<LocalLauncher> localLauncher(const EnvSource& env) {
  if (auto v = env.get("TORCHELASTIC_RUN_ID"))
    return LocalLauncher{"torchrun/dsrun", "TORCHELASTIC_RUN_ID=" + *v};
  if (env.get("CROSS_RANK") && env.get("CROSS_SIZE") && env.get("LOCAL_SIZE") && env.get("RANK") &&
      env.get("WORLD_SIZE")) {
    return LocalLauncher{"DeepSpeed's launcher",
                         "CROSS_RANK, CROSS_SIZE and LOCAL_SIZE set beside RANK and WORLD_SIZE"};
  }
  return std::nullopt;
}

std::string launcherLabel(const EnvSource& env, const LauncherVars& l) {
  if (isPmiOfSrun(env, l))
    return l.id == Launcher::kPmix ? "Slurm (srun --mpi=pmix)" : "Slurm (srun --mpi=pmi2)";
  return launcherName(l.id);
}

LauncherDetection detectLaunchers(const EnvSource& env, bool autoMpiDiscovery) {
  LauncherDetection d;
  d.local = localLauncher(env);
  const SlurmPlace slurm = slurmPlace(env);
  for (const auto& l : kLaunchers) {
    if (!env.get(l.rank)) continue;
    // A batch script (or salloc shell) sees SLURM_PROCID=0 and the allocation's SLURM_NTASKS, but
    // no srun started ranks: taking them would make rank 0 of N wait for N-1 ranks that never come.
    if (l.id == Launcher::kSlurm && slurm == SlurmPlace::kAllocation) {
      d.slurmAllocationOnly = true;
      continue;
    }
    if (d.local) continue;
    // PALS exports PMI_RANK too: one launcher, not two.
    if (l.id == Launcher::kMpich && !d.present.empty() && d.present.back().first->id == Launcher::kPals)
      continue;
    // srun --mpi=pmi2/pmix: the plugin's rank is the task's SLURM_PROCID, and the step's variables
    // give the size, local ranks and nodes, so MPI is never needed to settle them.
    const LauncherVars& used = isPmiOfSrun(env, l) ? slurmLauncherVars() : l;
    std::string label = launcherLabel(env, l);
    if (&used == &slurmLauncherVars() && !d.present.empty() && d.present.back().first == &used) continue;
    d.present.emplace_back(&used, label);
  }
  if (autoMpiDiscovery && !d.present.empty()) {
    d.launcher = d.present.front().first;
    d.label = d.present.front().second;
  }
  return d;
}

std::optional<long long> pythonInt(std::string_view text) {
  while (!text.empty() && isPythonSpace(text.front())) text.remove_prefix(1);
  while (!text.empty() && isPythonSpace(text.back())) text.remove_suffix(1);
  bool negative = false;
  if (!text.empty() && (text.front() == '+' || text.front() == '-')) {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  if (text.empty() || text.front() == '_' || text.back() == '_') return std::nullopt;
  long long value = 0;
  bool saturated = false;
  char prev = 0;
  for (char c : text) {
    if (c == '_') {
      if (prev == '_') return std::nullopt;
    } else if (c >= '0' && c <= '9') {
      if (!saturated && value > (LLONG_MAX - (c - '0')) / 10) saturated = true;
      if (!saturated) value = value * 10 + (c - '0');
    } else {
      return std::nullopt;
    }
    prev = c;
  }
  if (saturated) return negative ? LLONG_MIN : LLONG_MAX;
  return negative ? -value : value;
}

}  // namespace ds::env
