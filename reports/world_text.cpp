#include "reports/world_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace ds::report {

std::string formatWorldTable(const std::vector<RankRecord>& ranks) {
  if (ranks.empty()) return "# no ranks\n";
  std::set<std::string> hosts;
  size_t hostWidth = 4;
  for (const auto& r : ranks) {
    hosts.insert(r.host);
    hostWidth = std::max(hostWidth, r.host.size());
  }
  const auto& first = ranks.front();
  std::string out =
      fmt::format("# dsperf world: {} rank(s) on {} host(s), backend {}, accelerator {}, job {}\n",
                  ranks.size(), hosts.size(), first.backend, first.accelerator, first.jobId);
  out += fmt::format("# {:>5} {:>5} {:>5} {:>5}  {:<{}}  {:>8}  {}\n", "rank", "local", "lsize", "node",
                     "host", hostWidth, "pid", "device");
  for (const auto& r : ranks) {
    out += fmt::format("  {:>5} {:>5} {:>5} {:>5}  {:<{}}  {:>8}  {}\n", r.rank, r.localRank,
                       r.localWorldSize, r.nodeRank, r.host, hostWidth, r.pid, r.device);
  }
  std::vector<PlacedRank> placed;
  for (const auto& r : ranks) placed.push_back({r.rank, r.host, r.placement});
  return out + formatPlacementLines(placed);
}

std::string formatSmoke(const SmokeResult& s) {
  if (!s.ran) return "";
  if (s.ok) {
    return fmt::format("# smoke allreduce on {}: ok (sum of rank+1 = {}) in {:.1f} us\n", s.backend,
                       s.expected, s.micros);
  }
  return fmt::format("# smoke allreduce on {}: WRONG: got {}, expected {} (sum of rank+1 over all ranks)\n",
                     s.backend, s.got, s.expected);
}

std::string formatInitPlan(const InitPlan& p) {
  const auto& w = p.info;
  std::string out = "# dsbench world --dry-run: what init_distributed would conclude here (nothing was contacted)\n";
  out +=
      fmt::format("#   discovery    {}'s rules (--discovery / DS_DISCOVERY)\n", discoveryName(p.discovery));
  out += fmt::format("#   launcher     {}\n", env::launcherName(w.launcher));
  for (const auto& line : w.describe()) out += fmt::format("#   {}\n", line);
  for (const auto& note : w.notes) out += fmt::format("#   note         {}\n", note);
  if (w.needsMpiMasterAddr)
    out += "#   MASTER_ADDR is settled by MPI at start-up: rank 0's address, broadcast to all ranks\n";
  if (w.needsMpiLocalRanks)
    out += "#   LOCAL_RANK and LOCAL_WORLD_SIZE are settled by MPI at start-up: ranks on the same host\n";
  std::string why = p.acceleratorOverridden ? "DS_ACCELERATOR" : "auto detect";
  if (!p.acceleratorOverridden && !p.acceleratorReason.empty()) why += ": " + p.acceleratorReason;
  out += fmt::format("#   accelerator  {} ({})\n", p.accelerator, why);
  out += fmt::format("#   backend      {}\n", p.backend);
  out += fmt::format("#   init_method  {}, timeout {} s\n", p.initMethod, p.timeout.count() / 1000);
  if (w.worldSize.value == 1) {
    out += "#   rendezvous   a single process: its own store, nobody to wait for\n";
  } else if (p.initMethod.rfind("file://", 0) == 0) {
    out += fmt::format("#   rendezvous   every rank uses the file store {}\n", p.initMethod.substr(7));
  } else if (w.rank.value == 0) {
    out += fmt::format("#   rendezvous   this is rank 0: it would host the store on port {} and wait for {} other rank(s)\n",
                       w.masterPort.value, w.worldSize.value - 1);
  } else {
    out += fmt::format("#   rendezvous   this is rank {}: it would connect to the store at {}:{}\n", w.rank.value,
                       w.masterAddr.value, w.masterPort.value);
  }
  return out;
}

}  // namespace ds::report
