// What the real `deepspeed.init_distributed()` (DeepSpeed 0.19.8) would conclude in an environment,
// following its code rather than dsperf's rules: deepspeed/comm/comm.py (init_deepspeed_backend,
// init_distributed, mpi_discovery, in_aml/in_aws_sm/in_dlts and their patch functions),
// deepspeed/constants.py (DEEPSPEED_TIMEOUT), accelerator/real_accelerator.py (DS_ACCELERATOR) and
// torch's env:// handler, which reads what DeepSpeed left in os.environ.
//
// A pure function of the environment: it contacts nothing. Where only the MPI library can answer
// (mpi4py's rank, size, rank 0's `hostname -I`), the view says what MPI is expected to report
// under the launcher whose variables are set, or leaves the value to MPI.
// engine/env/tests/deepspeed/ holds the differential test against DeepSpeed itself.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/env/env_source.h"
#include "engine/env/world_info.h"

namespace ds::env {

// DeepSpeed's DS_ACCELERATOR names (real_accelerator.py's SUPPORTED_ACCELERATOR_LIST), in its order.
std::span<const std::string_view> deepspeedAcceleratorNames();

// What DeepSpeed imports for a DS_ACCELERATOR name other than cpu and cuda ("torch_npu" for npu);
// nullopt for cpu, cuda and names DeepSpeed does not know.
std::optional<std::string> deepspeedAcceleratorModule(std::string_view name);

struct DeepSpeedOptions {
  // init_distributed's arguments.
  bool autoMpiDiscovery = true;
  int distributedPort = 29500;
  bool verbose = true;  // its logging reads variables that may be missing (a KeyError)
  // DeepSpeed's auto detect picks cuda when torch sees a device: dsperf's own cuda probe answers.
  bool cudaUsable = false;
};

// One variable as torch's env:// reads it after DeepSpeed patched os.environ.
struct DsVar {
  std::optional<std::string> text;  // nullopt: unset
  std::string source;               // "RANK", "MPI: mpi4py's rank (Open MPI)", "AZ_BATCH_MASTER_NODE", ...
};

struct DeepSpeedView {
  // env: all five variables set, used as they are. mpi_discovery, azureml, sagemaker: DeepSpeed
  // overwrote them. env_no_discovery: some are missing but auto_mpi_discovery is off.
  std::string path = "env";
  std::string why;                   // "LOCAL_RANK is not set", "all five are set", ...
  std::vector<std::string> missing;  // of RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK

  // os.environ after DeepSpeed's patching.
  DsVar rank, worldSize, localRank, masterAddr, masterPort, ncclSocketIfname;
  // MPI discovery: MASTER_ADDR is rank 0's first `hostname -I` address, broadcast by MPI; and
  // LOCAL_RANK counts lower ranks with this host's processor name (unknown here when the launcher
  // exports no local rank).
  bool masterAddrFromMpiRank0 = false;
  bool mpi4pyNeeded = false;
  std::string mpiWorld;  // how mpi4py's COMM_WORLD was modelled ("Open MPI", "a singleton: no MPI launcher")

  // What torch's store would be created with (set when no error).
  std::optional<long long> rankValue, worldSizeValue, masterPortValue;

  struct Failure {
    std::string stage;  // "import" or "init_distributed"
    std::string type;   // "ValueError", "KeyError", "ModuleNotFoundError"
    std::string message;
    // Where the outcome depends on what is installed (torch_npu, mpi4py): the condition.
    std::string unless;
  };
  std::optional<Failure> failure;

  std::string accelerator;        // "cpu", "cuda", "xpu", ... (empty when DS_ACCELERATOR fails import)
  std::string acceleratorMethod;  // "override" or "auto detect"
  std::string backend;            // the accelerator's communication backend
  std::optional<long long> timeoutSeconds;
  // Traps DeepSpeed accepts silently (0-minute timeout, cuda without a GPU, ...): sentences.
  std::vector<std::string> warnings;
};

DeepSpeedView deepspeedView(const EnvSource& env, const DeepSpeedOptions& options = {});

// One field where DeepSpeed concludes differently from dsperf (or from torch's plain env://).
struct DsDifference {
  std::string field;      // "RANK", "MASTER_PORT", "outcome", ...
  std::string deepspeed;  // DeepSpeed's value as text
  std::string other;      // dsperf's value as text
  std::string
      sentence;  // "DeepSpeed will replace MASTER_PORT=1234 with 29500, because LOCAL_RANK is not set. ..."
};
// `dsperf` is dsperf's own conclusion (nullptr when it failed with `dsperfError`).
std::vector<DsDifference> deepspeedDifferences(const DeepSpeedView& v, const WorldInfo* dsperf,
                                               const std::string& dsperfError, const EnvSource& env);

// --discovery deepspeed: DeepSpeed's conclusion as dsperf's WorldInfo, every field sourced. Throws
// ConfigError where DeepSpeed raises (the sentence says what DeepSpeed does and what to set); the
// master address from MPI discovery is left to MPI (needsMpiMasterAddr) unless this is a lone
// process, whose own first address is taken.
WorldInfo worldFromDeepSpeed(const DeepSpeedView& v, const EnvSource& env);

// Python's repr() of a str, as DeepSpeed's and torch's messages quote values ('abc').
std::string pythonRepr(std::string_view s);

}  // namespace ds::env
