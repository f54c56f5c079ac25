// What init_distributed would conclude, as a plain record (InitPlan), and whose discovery rules it
// follows. Apart from engine/init.h so that reports/ can format a plan without the process group.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "engine/env/world_info.h"

namespace ds {

// Whose rules discovery follows. dsperf's: field by field (explicit arguments, env://, then the
// launcher's variables), refusing env:// values that contradict the launcher. DeepSpeed's: exactly
// what deepspeed.init_distributed() does (engine/env/deepspeed_view.h): if any of RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT, LOCAL_RANK is missing, all five come from MPI (or AzureML/SageMaker).
enum class Discovery { kDsperf, kDeepSpeed };
// "dsperf" or "deepspeed"; throws ConfigError naming `from` (the flag or variable) otherwise.
Discovery parseDiscovery(std::string_view text, std::string_view from);
const char* discoveryName(Discovery d);

struct InitPlan {
  env::WorldInfo info;  // as discovered; needsMpi* say what only MPI itself would settle
  std::string accelerator;
  bool acceleratorOverridden = false;  // DS_ACCELERATOR chose it
  std::string acceleratorReason;       // why cuda was not chosen on auto detect
  std::string backend;
  std::chrono::milliseconds timeout{0};
  std::string initMethod;  // "env://" when none was given
  Discovery discovery = Discovery::kDsperf;
};

}  // namespace ds
