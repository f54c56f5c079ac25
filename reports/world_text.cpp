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
  return out;
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

}  // namespace ds::report
