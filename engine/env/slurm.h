// Slurm: compressed host and task lists, and where this process stands (srun/sbatch "OUTPUT
// ENVIRONMENT VARIABLES", Slurm 22.05-24.x).
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/env/env_source.h"

namespace ds::env {

// Expands a Slurm hostlist such as "node[01-04,07]", "a-[1,3-5]b", "gpu[1-2],cpu7" or
// "rack[1-2]-n[01-02]" (cartesian product, zero padding kept) into host names, in Slurm's order.
// Throws ConfigError naming `varName` and the text on malformed input.
std::vector<std::string> expandNodelist(std::string_view list,
                                        std::string_view varName = "SLURM_JOB_NODELIST");

// Expands SLURM_TASKS_PER_NODE ("2(x3),1") into one count per node. Throws ConfigError naming
// `varName` on malformed input.
std::vector<int> expandTasksPerNode(std::string_view list, std::string_view varName = "SLURM_TASKS_PER_NODE");

enum class SlurmPlace {
  kNone,        // not inside a Slurm job (no SLURM_JOB_ID)
  kAllocation,  // inside a job but not in a task step: a batch script or an salloc shell
  kStep,        // a task of an srun step (SLURM_STEP_ID is a real step number)
};

// Where this process stands. srun gives each task SLURM_STEP_ID=0,1,...; a batch script has no
// SLURM_STEP_ID or one of Slurm's special step ids (batch, extern, interactive: 0xfffffff0 and up),
// and its SLURM_PROCID/SLURM_NTASKS describe the allocation, not ranks that were started.
SlurmPlace slurmPlace(const EnvSource& env);

// The first of `names` that is set, with its name: the step's variable before the allocation's
// ({"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}).
std::optional<std::pair<std::string, std::string>> firstSet(const EnvSource& env,
                                                            std::initializer_list<const char*> names);

// The srun --mpi plugin this task was started with, judged from what it exports: "pmix"
// (PMIX_RANK), "pmi2" (PMI_FD or PMI_RANK), or "none".
std::string slurmMpiPlugin(const EnvSource& env);

// The default MASTER_PORT under Slurm when none is set: 15000 + the last four digits of
// SLURM_JOB_ID, PyTorch Lightning's rule (so a job's ranks agree without talking, and two jobs on
// one node rarely collide). nullopt when the job id has no digits at its end.
std::optional<int> slurmDefaultPort(std::string_view jobId);

// The sentence every "a rank is missing" message adds under srun.
inline constexpr const char* kSrunKillHint =
    "under srun, add -K (--kill-on-bad-exit=1) so that Slurm ends the whole step as soon as one task "
    "fails, instead of leaving the others waiting";

}  // namespace ds::env
