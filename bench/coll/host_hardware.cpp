#include "bench/coll/host_hardware.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>

#include "engine/host/hardware_reader.h"
#include "engine/host/net.h"
#include "engine/host/resources.h"

namespace ds::bench::coll {

hw::HostHardware readThisHost(const std::string& host) {
  std::vector<std::string> libs{"libnvidia-ml.so.1", "libnvidia-ml.so"};
  if (const char* v = std::getenv("DSBENCH_LIBNVML"); v != nullptr && *v) libs = {v};
  auto nvml = hw::nvmlGpuQuery(libs);
  return hw::readHostHardware(hw::hardwareRootsFromEnv("DSBENCH"), nvml.get(), host);
}

double measureCopyBandwidth(World& world, std::size_t bytes, int copies, int trials) {
  auto& store = world.store();
  const int n = world.worldSize();
  // Every rank decides alike whether the buffers fit (its own view of the same host's memory could
  // differ by a few pages, so the check leaves a wide margin and its verdict is rank 0's).
  const long long need = static_cast<long long>(bytes) * 2 * n;
  std::string verdict;
  if (world.rank() == 0) {
    const long long avail = sys::readMemoryInfo().available();
    verdict = avail >= 0 && avail < 4 * need ? "skip" : "go";
    store.set("ds/coll/membw/verdict", store::toBytes(verdict));
  } else {
    verdict = store::toString(store.get("ds/coll/membw/verdict"));
  }
  if (verdict != "go") return 0;
  std::vector<char> a(bytes, 1), b(bytes, 2);  // touched: no page faults inside the timed copies
  std::memcpy(b.data(), a.data(), bytes);
  using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC: one clock for every process of a host
  nlohmann::json spans = nlohmann::json::array();
  for (int t = 0; t < trials; ++t) {
    const std::string gate = fmt::format("ds/coll/membw/t{}", t);
    if (store.add(gate, 1) == n) store.set(gate + "/go", store::toBytes("1"));
    store.wait({gate + "/go"});
    const auto start = Clock::now();
    for (int c = 0; c < copies; ++c)
      std::memcpy(c % 2 ? a.data() : b.data(), c % 2 ? b.data() : a.data(), bytes);
    const auto end = Clock::now();
    spans.push_back({std::chrono::duration<double>(start.time_since_epoch()).count(),
                     std::chrono::duration<double>(end.time_since_epoch()).count()});
  }
  store.set(fmt::format("ds/coll/membw/r{}", world.rank()), store::toBytes(spans.dump()));
  if (world.rank() != 0) return 0;
  std::vector<std::string> keys;
  for (int r = 0; r < n; ++r) keys.push_back(fmt::format("ds/coll/membw/r{}", r));
  std::vector<nlohmann::json> all;
  for (const auto& v : store.multiGet(keys)) all.push_back(nlohmann::json::parse(store::toString(v)));
  double best = 0;
  for (int t = 0; t < trials; ++t) {
    double first = 0, last = 0;
    bool any = false;
    for (const auto& r : all) {
      if (!r.is_array() || static_cast<int>(r.size()) <= t) continue;
      const double s0 = r[t][0].get<double>(), s1 = r[t][1].get<double>();
      first = any ? std::min(first, s0) : s0;
      last = any ? std::max(last, s1) : s1;
      any = true;
    }
    if (any && last > first)
      best = std::max(
          best, static_cast<double>(bytes) * copies * static_cast<double>(all.size()) / (last - first) / 1e9);
  }
  return best;
}

std::vector<hw::HostHardware> gatherHardware(World& world, const std::vector<report::SweepRank>& ranks,
                                             const std::vector<std::string>& hosts) {
  auto& store = world.store();
  if (world.localRank() == 0) {
    nlohmann::json mine = readThisHost(net::hostName());
    store.set(fmt::format("ds/coll/hw/{}", world.rank()), store::toBytes(mine.dump()));
  }
  std::vector<hw::HostHardware> out;
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
      auto h = nlohmann::json::parse(store::toString(values[i])).get<hw::HostHardware>();
      h.host = named[i];  // the name the ranks table uses, whatever the publisher's resolver said
      out.push_back(std::move(h));
    } catch (const std::exception&) {
      // A record that does not parse is a host without hardware, not a failed run.
    }
  }
  return out;
}

}  // namespace ds::bench::coll
