#include "bench/coll/host_hardware.h"

#include <fmt/format.h>

#include <cstdlib>
#include <map>

#include "diag/hardware/hardware_reader.h"
#include "engine/common/net.h"

namespace ds::bench::coll {

report::HostHardware readThisHost(const std::string& host) {
  std::vector<std::string> libs{"libnvidia-ml.so.1", "libnvidia-ml.so"};
  if (const char* v = std::getenv("DSBENCH_LIBNVML"); v != nullptr && *v) libs = {v};
  auto nvml = hw::nvmlGpuQuery(libs);
  return hw::readHostHardware(hw::hardwareRootsFromEnv("DSBENCH"), nvml.get(), host);
}

std::vector<report::HostHardware> gatherHardware(World& world, const std::vector<report::SweepRank>& ranks,
                                                 const std::vector<std::string>& hosts) {
  auto& store = world.store();
  if (world.localRank() == 0) {
    nlohmann::json mine = readThisHost(net::hostName());
    store.set(fmt::format("ds/coll/hw/{}", world.rank()), store::toBytes(mine.dump()));
  }
  std::vector<report::HostHardware> out;
  if (world.rank() != 0) return out;
  std::map<std::string, int> publisher;  // host -> its local rank 0
  for (const auto& r : ranks)
    if (r.localRank == 0) publisher.emplace(r.host, r.rank);
  std::vector<std::string> keys, named;
  for (const auto& h : hosts) {
    auto it = publisher.find(h);
    if (it == publisher.end()) continue;
    keys.push_back(fmt::format("ds/coll/hw/{}", it->second));
    named.push_back(h);
  }
  if (keys.empty()) return out;
  auto values = store.multiGet(keys);
  for (std::size_t i = 0; i < values.size() && i < named.size(); ++i) {
    try {
      auto h = nlohmann::json::parse(store::toString(values[i])).get<report::HostHardware>();
      h.host = named[i];  // the name the ranks table uses, whatever the publisher's resolver said
      out.push_back(std::move(h));
    } catch (const std::exception&) {
      // A record that does not parse is a host without hardware, not a failed run.
    }
  }
  return out;
}

}  // namespace ds::bench::coll
