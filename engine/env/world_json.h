// The discovered world as JSON, one spelling for every report that shows it (dsdiag's env.world
// finding, dsbench world --dry-run's init plan): launcher, rank, world_size, local_rank,
// local_world_size, node_rank, master_addr, master_port, job_id and provenance (where each value
// came from). A report adds its own fields to the object.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/env/world_info.h"

namespace ds::env {

nlohmann::json worldInfoJson(const WorldInfo& w);

}  // namespace ds::env
