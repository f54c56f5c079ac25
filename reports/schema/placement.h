// Where a rank ran: its CPU affinity and the node's load when it started. Benchmarks record it for
// every rank (dsbench coll, train, world), because the same collective is 30x slower when a rank's
// threads share one core, or a busy process shares the node. Optional in every schema (files written
// before it have none). Pure functions; reading the live process is bench/coll/metadata.h's
// currentPlacement().
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ds::report {

struct Placement {
  std::string cpus;    // the affinity mask as a cpu list ("0", "0-1,4"), as taskset -c and /proc write it
  int cpuCount = 0;    // CPUs in the mask
  int onlineCpus = 0;  // CPUs online on the node
  double load1 = -1;   // 1-minute load average (/proc/loadavg); -1 unknown
  int runnable = -1;   // runnable scheduling entities right now (/proc/loadavg's 4th field); -1 unknown
};

// {"cpus", "cpu_count", "online_cpus", "load1", "runnable"}; load1/runnable left out when unknown.
void to_json(nlohmann::json& j, const Placement& p);
void from_json(const nlohmann::json& j, Placement& p);

// CPU lists ("0-2,5") are range lists: engine/common/ranges.h.
// "0.52 0.58 0.59 3/412 12345" -> load1 0.52, runnable 3; nullopt when it does not read so.
struct LoadAvg {
  double load1 = -1;
  int runnable = -1;
};
std::optional<LoadAvg> parseLoadavg(const std::string& text);

// One rank's placement as the reports show it.
struct PlacedRank {
  int rank = 0;
  std::string host;
  std::optional<Placement> placement;
};

// Bound ranks on one host whose masks overlap, one sentence per group: "ranks 0-1 share CPU 0 on host
// a". Unbound ranks (a mask of every online CPU), ranks without a placement and unreadable cpu lists
// are left out.
std::vector<std::string> sharedCores(const std::vector<PlacedRank>& ranks);
// The ranks that appear in sharedCores().
std::vector<int> ranksSharingCores(const std::vector<PlacedRank>& ranks);
// "cpus 0 (1 of 2 online)".
std::string formatCpus(const Placement& p);
// "load 0.52 (1 min), 3 runnable on 2 CPUs".
std::string formatLoad(const Placement& p);
// Lines for the text reports, each starting with "# ": one per rank ("rank 0 on a: cpus 0 (1 of 2
// online)"), one load line per host (its first rank's reading), then a "!! " line per shared core.
// "" when no rank has a placement (older files).
std::string formatPlacementLines(const std::vector<PlacedRank>& ranks);

}  // namespace ds::report
