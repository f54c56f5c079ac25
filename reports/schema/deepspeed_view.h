// DeepSpeed's view of an environment (engine/env/deepspeed_view.h) as JSON, one shape for
// `dsbench world --dry-run --json` and dsdiag's env.deepspeed finding, so that the differential
// test reads both the same way.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "engine/env/deepspeed_view.h"

namespace ds::report {

// {"path", "why", "missing", "rank", "world_size", "local_rank", "master_addr", "master_port",
//  "master_addr_from_mpi_rank0", "mpi4py_needed", "mpi_world", "nccl_socket_ifname", "sources",
//  "accelerator", "accelerator_method", "backend", "timeout_s", "failure", "warnings", "differences"}
// Numbers are what torch's store would be created with; null where unknown or where DeepSpeed fails.
nlohmann::json deepspeedViewJson(const env::DeepSpeedView& v,
                                 const std::vector<env::DsDifference>& differences);

}  // namespace ds::report
