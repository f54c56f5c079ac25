#include "engine/env/world_json.h"

namespace ds::env {

nlohmann::json worldInfoJson(const WorldInfo& w) {
  return {{"launcher", launcherName(w.launcher)},
          {"rank", w.rank.value},
          {"world_size", w.worldSize.value},
          {"local_rank", w.localRank.value},
          {"local_world_size", w.localWorldSize.value},
          {"node_rank", w.nodeRank.value},
          {"master_addr", w.masterAddr.value},
          {"master_port", w.masterPort.value},
          {"job_id", w.jobId.value},
          {"provenance", w.describe()}};
}

}  // namespace ds::env
