// Which launcher started this process, read one way for everyone: discoverWorld (init_distributed,
// dsbench world --dry-run) and dsdiag's env checks call detectLaunchers, so they cannot disagree.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/env/env_source.h"
#include "engine/env/world_info.h"

namespace ds::env {

// One MPI-style launcher's variables (REFERENCE.md §1). nullptr: the launcher has no such variable.
struct LauncherVars {
  Launcher id;
  const char* rank;
  const char* size;
  const char* localRank;
  const char* localSize;
  // Read when `size` is unset: the allocation's spelling after the step's.
  const char* sizeFallback = nullptr;
  // Read when `localRank` is unset (Cray PALS beside MPICH's PMI, as DeepSpeed's launcher helper).
  const char* localRankFallback = nullptr;
};

// In precedence order: under `mpirun` inside a Slurm allocation both sets exist and mpirun's
// describes this process; Open MPI also exports PMIX_RANK; Cray's PALS also exports PMI_RANK.
std::span<const LauncherVars> mpiLaunchers();
const LauncherVars& slurmLauncherVars();

// A per-node launcher whose env:// variables describe this worker, while an outer srun's or
// mpirun's describe the per-node agent that started it (and must be neither read nor compared).
struct LocalLauncher {
  std::string name;      // "torchrun/dsrun" or "DeepSpeed's launcher"
  std::string evidence;  // "TORCHELASTIC_RUN_ID=..." or "CROSS_RANK, CROSS_SIZE and LOCAL_SIZE"
};
// torchrun and dsrun export TORCHELASTIC_RUN_ID; DeepSpeed's launch.py exports CROSS_RANK,
// CROSS_SIZE and LOCAL_SIZE beside RANK and WORLD_SIZE.
std::optional<LocalLauncher> localLauncher(const EnvSource& env);

struct LauncherDetection {
  // The launcher whose variables discovery reads (nullptr: none, or auto discovery is off, or a
  // local launcher hides it).
  const LauncherVars* launcher = nullptr;
  std::string label;  // "Open MPI", "Slurm (srun --mpi=pmi2)", ...; empty when launcher is nullptr
  std::optional<LocalLauncher> local;
  // SLURM_PROCID/SLURM_NTASKS are set but describe an allocation (batch script, salloc shell),
  // not ranks that srun started.
  bool slurmAllocationOnly = false;
  // Every launcher whose rank variable is set and describes this process, in precedence order,
  // with its label (srun's PMI plugins are folded into Slurm). Empty under a local launcher.
  std::vector<std::pair<const LauncherVars*, std::string>> present;
};
LauncherDetection detectLaunchers(const EnvSource& env, bool autoMpiDiscovery = true);

// "Slurm (srun --mpi=pmix)" for srun's PMI plugins, else the launcher's name.
std::string launcherLabel(const EnvSource& env, const LauncherVars& l);

// Python's int() on a str, as DeepSpeed and torch read variables: surrounding whitespace, a sign,
// and single underscores between digits ("1_0") are accepted. nullopt where int() raises
// ValueError. Values beyond 64 bits saturate (Python's int has no limit).
std::optional<long long> pythonInt(std::string_view text);

}  // namespace ds::env
