#include "bench/world/world.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "engine/common/net.h"
#include "reports/json_io.h"
#include "reports/world_text.h"

namespace ds::bench {

report::RankRecord describeRank(World& world) {
  const auto& info = world.info();
  report::RankRecord r;
  r.rank = info.rank.value;
  r.worldSize = info.worldSize.value;
  r.localRank = info.localRank.value;
  r.localWorldSize = info.localWorldSize.value;
  r.nodeRank = info.nodeRank.value;
  r.host = net::hostName();
  r.pid = getpid();
  r.accelerator = world.accelerator().name();
  auto devices = world.accelerator().devices();
  int idx = world.accelerator().name() == "cpu" ? 0 : info.localRank.value;
  r.device = idx < static_cast<int>(devices.size()) ? fmt::format("{}:{} {}", r.accelerator, idx, devices[idx].name)
                                                    : fmt::format("{}:{}", r.accelerator, idx);
  r.backend = world.backend();
  r.jobId = info.jobId.value;
  r.provenance = info.describe();
  return r;
}

std::vector<report::RankRecord> gatherWorld(World& world) {
  auto& store = world.store();
  nlohmann::json mine = describeRank(world);
  store.set(fmt::format("ds/world/{}", world.rank()), store::toBytes(mine.dump()));
  std::vector<std::string> keys;
  for (int r = 0; r < world.worldSize(); ++r) keys.push_back(fmt::format("ds/world/{}", r));
  std::vector<report::RankRecord> out;
  for (const auto& bytes : store.multiGet(keys)) {
    out.push_back(nlohmann::json::parse(store::toString(bytes)).get<report::RankRecord>());
  }
  return out;
}

int runWorld(const WorldOptions& o) {
  InitOptions init;
  init.distBackend = o.backend;
  init.initMethod = o.initMethod;
  init.verbose = o.verbose;
  if (o.timeoutSeconds > 0) init.timeout = std::chrono::seconds(o.timeoutSeconds);
  auto world = initDistributed(init);
  world->barrier();
  auto ranks = gatherWorld(*world);
  if (world->rank() == 0) {
    std::string table = report::formatWorldTable(ranks);
    std::fwrite(table.data(), 1, table.size(), stdout);
    std::fflush(stdout);
    if (!o.jsonPath.empty()) report::writeJsonAtomic(o.jsonPath, report::worldToJson(ranks));
  }
  destroyProcessGroup();
  return 0;
}

}  // namespace ds::bench
