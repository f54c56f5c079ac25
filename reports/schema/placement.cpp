#include "reports/schema/placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "engine/common/error.h"
#include "engine/common/ranges.h"
#include "reports/json_io.h"

namespace ds::report {

void to_json(nlohmann::json& j, const Placement& p) {
  j = {{"cpus", p.cpus}, {"cpu_count", p.cpuCount}, {"online_cpus", p.onlineCpus}};
  if (p.load1 >= 0) j["load1"] = p.load1;
  if (p.runnable >= 0) j["runnable"] = p.runnable;
}

void from_json(const nlohmann::json& j, Placement& p) {
  readTo(j.at("cpus"), p.cpus);
  readTo(j.at("cpu_count"), p.cpuCount);
  readTo(j.at("online_cpus"), p.onlineCpus);
  if (j.contains("load1")) readTo(j.at("load1"), p.load1);
  if (j.contains("runnable")) readTo(j.at("runnable"), p.runnable);
}

std::optional<LoadAvg> parseLoadavg(const std::string& text) {
  std::istringstream in(text);
  double l1 = 0, l5 = 0, l15 = 0;
  std::string tasks;
  if (!(in >> l1 >> l5 >> l15 >> tasks) || l1 < 0) return std::nullopt;
  auto slash = tasks.find('/');
  if (slash == 0 || slash == std::string::npos || tasks.find_first_not_of("0123456789/") != std::string::npos)
    return std::nullopt;
  return LoadAvg{l1, std::stoi(tasks.substr(0, slash))};
}

namespace {

struct Sharing {
  std::string host;
  std::vector<int> ranks;
  std::vector<int> cpus;
};

// Per host, CPU -> ranks whose mask holds it; ranks that hold the same shared CPUs form one group.
std::vector<Sharing> findSharing(const std::vector<PlacedRank>& ranks) {
  std::map<std::string, std::map<int, std::vector<int>>> byHost;
  for (const auto& r : ranks) {
    // An unbound rank (its mask is the whole node) shares cores only as the scheduler sees fit; two
    // of them are the normal dsrun/torchrun start, not a placement to flag.
    if (!r.placement || r.placement->cpus.empty()) continue;
    if (r.placement->onlineCpus > 0 && r.placement->cpuCount >= r.placement->onlineCpus) continue;
    std::vector<int> cpus;
    try {
      cpus = parseRanges(r.placement->cpus, "cpu list");
    } catch (const Error&) {
      continue;
    }
    for (int c : cpus) byHost[r.host][c].push_back(r.rank);
  }
  std::vector<Sharing> out;
  for (const auto& [host, byCpu] : byHost) {
    std::map<std::vector<int>, std::vector<int>> groups;  // ranks -> the CPUs they all share
    for (const auto& [cpu, rs] : byCpu) {
      if (rs.size() > 1) groups[rs].push_back(cpu);
    }
    for (const auto& [rs, cpus] : groups) out.push_back({host, rs, cpus});
  }
  return out;
}

}  // namespace

std::vector<std::string> sharedCores(const std::vector<PlacedRank>& ranks) {
  std::vector<std::string> out;
  for (const auto& s : findSharing(ranks)) {
    // Rank lists take the cpu list's range form too: "ranks 0-1,4".
    out.push_back(fmt::format("ranks {} share CPU{} {} on host {}", formatRanges(s.ranks),
                              s.cpus.size() > 1 ? "s" : "", formatRanges(s.cpus), s.host));
  }
  return out;
}

std::vector<int> ranksSharingCores(const std::vector<PlacedRank>& ranks) {
  std::set<int> out;
  for (const auto& s : findSharing(ranks)) out.insert(s.ranks.begin(), s.ranks.end());
  return {out.begin(), out.end()};
}

std::string formatCpus(const Placement& p) {
  return fmt::format("cpus {} ({} of {} online)", p.cpus.empty() ? "?" : p.cpus, p.cpuCount, p.onlineCpus);
}

std::string formatLoad(const Placement& p) {
  std::string load = p.load1 >= 0 ? fmt::format("load {:.2f} (1 min)", p.load1) : "load unknown";
  if (p.runnable >= 0) load += fmt::format(", {} runnable", p.runnable);
  return load + fmt::format(" on {} CPUs", p.onlineCpus);
}

std::string formatPlacementLines(const std::vector<PlacedRank>& ranks) {
  std::string out;
  std::set<std::string> hostsDone;
  std::string loads;
  for (const auto& r : ranks) {
    if (!r.placement) continue;
    out += fmt::format("# placement: rank {} on {}: {}\n", r.rank, r.host, formatCpus(*r.placement));
    if (hostsDone.insert(r.host).second)
      loads += fmt::format("# node load: {}: {}\n", r.host, formatLoad(*r.placement));
  }
  if (out.empty()) return "";
  out += loads;
  for (const auto& s : sharedCores(ranks)) {
    out +=
        fmt::format("# !! {}: their threads take turns on it, and collectives wait for the scheduler\n", s);
  }
  return out;
}

}  // namespace ds::report
