// Who am I? Discovery turns a launcher's environment (torchrun/dsrun/DeepSpeed env://, Open MPI,
// MPICH/Hydra, Cray PALS, PMIx, MVAPICH, Slurm; AzureML's and SageMaker's master variables) or explicit
// arguments into a WorldInfo. Every field remembers where it came from, so dsdiag can print "RANK=3 (from
// OMPI_COMM_WORLD_RANK)".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/env/env_source.h"

namespace ds::env {

template <typename T>
struct Sourced {
  T value{};
  // The variable or rule that gave the value: "RANK", "OMPI_COMM_WORLD_RANK", "argument rank",
  // "default (single process)", "MPI: rank 0's address", ...
  std::string source;
};

enum class Launcher { kNone, kEnv, kOpenMpi, kMpich, kPmix, kMvapich, kSlurm, kPals };
const char* launcherName(Launcher l);

struct WorldInfo {
  Sourced<int> rank;
  Sourced<int> worldSize;
  Sourced<int> localRank;
  Sourced<int> localWorldSize;
  Sourced<int> nodeRank;
  Sourced<std::string> masterAddr;
  Sourced<int> masterPort;
  Sourced<std::string> jobId;
  // The MPI-style launcher whose variables were seen (kEnv when only env:// variables were, kNone
  // for a lone process).
  Launcher launcher = Launcher::kNone;
  // Fields that only the MPI launcher itself can settle (rank 0's address; local ranks when the
  // launcher gives none). init_distributed resolves them through MPI, or fails saying what to set.
  bool needsMpiMasterAddr = false;
  bool needsMpiLocalRanks = false;
  // Sentences for the user about how the launcher's variables were read (e.g. a batch script
  // outside an srun step); init_distributed logs them as warnings and dsdiag shows them.
  std::vector<std::string> notes;

  // "RANK=3 (from OMPI_COMM_WORLD_RANK)", one line per field, in a fixed order.
  std::vector<std::string> describe() const;
};

struct DiscoveryOptions {
  // Explicit arguments (DeepSpeed's rank / world_size); -1 means not given.
  int rank = -1;
  int worldSize = -1;
  // From init_method tcp://host:port.
  std::optional<std::string> masterAddr;
  std::optional<int> masterPort;
  // DeepSpeed's distributed_port: MASTER_PORT when the launcher gives none.
  int distributedPort = 29500;
  // DeepSpeed's auto_mpi_discovery: read MPI/PMI/Slurm variables when env:// ones are missing.
  bool autoMpiDiscovery = true;
};

// Fills a WorldInfo. Precedence per field: explicit arguments, then env:// (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), then the launcher's variables, then a
// single process. Throws ConfigError naming the variable, its value and what is valid, including
// when env:// values disagree with the launcher's.
WorldInfo discoverWorld(const DiscoveryOptions& options, const EnvSource& env);

// The job id that keeps a stray process of another job out of the store: DS_JOB_ID, else Slurm's
// job (and step) id, else the launcher's run id, else "default".
Sourced<std::string> discoverJobId(const EnvSource& env);

// Checks the cross-field rules (RANK < WORLD_SIZE, LOCAL_RANK < LOCAL_WORLD_SIZE, ...). discoverWorld
// calls it; init calls it again after MPI fills the rest.
void validateWorld(const WorldInfo& w);

}  // namespace ds::env
