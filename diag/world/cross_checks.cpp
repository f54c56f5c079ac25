#include "diag/world/cross_checks.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <span>

#include "diag/world/world_checks.h"
#include "engine/common/ranges.h"
#include "reports/diag/diag_text.h"
#include "reports/schema/placement.h"

namespace ds::diag {
namespace {

// Groups ranks by a value; "" values (unknown) are left out.
std::map<std::string, std::vector<int>> groupBy(std::span<const RankReport> reports,
                                                const std::function<std::string(const RankReport&)>& key) {
  std::map<std::string, std::vector<int>> g;
  for (const auto& r : reports) {
    auto k = key(r);
    if (!k.empty()) g[k].push_back(r.rank);
  }
  return g;
}

std::string describeGroups(const std::map<std::string, std::vector<int>>& g) {
  std::vector<std::string> parts;
  for (const auto& [k, ranks] : g)
    parts.push_back(fmt::format("{} on rank(s) {}", k, formatRanges(ranks)));
  return join(parts, "; ");
}

std::string str(const Json* d, const char* key) {
  if (d == nullptr || !d->contains(key)) return "";
  const auto& v = (*d)[key];
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// Hosts are told apart by hostname + boot id (two containers can share a hostname).
std::string hostKey(const RankReport& r) {
  return r.host + "/" + str(findData(r, "system.host_identity"), "boot_id");
}

}  // namespace

const Json* findData(const RankReport& r, const std::string& id) {
  for (const auto& rec : r.records) {
    if (rec.id == id) return &rec.data;
  }
  return nullptr;
}

std::vector<DiagRecord> crossRankChecks(const std::vector<RankReport>& reports, int worldSize) {
  WorldFacts facts;
  facts.worldSize = worldSize;
  facts.reports = reports;
  return runWorldStep(facts, Selection{}, WorldStep::kRecords);
}

namespace world {

// Ranks unique and complete.
Finding ranksUnique(const WorldFacts& f) {
  std::map<int, std::vector<std::string>> claimed;  // rank -> "host pid"
  std::set<int> sizes;
  for (const auto& r : f.reports) {
    const Json* d = findData(r, "env.world_info");
    int rank = d && d->contains("rank") ? (*d)["rank"].get<int>() : r.rank;
    claimed[rank].push_back(r.host);
    if (d && d->contains("world_size")) sizes.insert((*d)["world_size"].get<int>());
  }
  std::vector<int> dup, missing;
  for (const auto& [rank, hosts] : claimed) {
    if (hosts.size() > 1) dup.push_back(rank);
  }
  for (int i = 0; i < f.worldSize; ++i) {
    if (!claimed.count(i)) missing.push_back(i);
  }
  Json data{{"duplicates", dup}, {"missing", missing}, {"world_sizes", sizes}};
  if (!dup.empty() || !missing.empty() || sizes.size() > 1) {
    return fail(
        fmt::format(
            "Ranks are not unique and complete:{}{}{}",
            dup.empty() ? "" : " rank(s) " + formatRanges(dup) + " claimed twice;",
            missing.empty() ? "" : " rank(s) " + formatRanges(missing) + " missing;",
            sizes.size() > 1 ? fmt::format(" ranks disagree on WORLD_SIZE ({})", join(sizes, ", ")) : ""),
        "Every process needs its own RANK in 0..WORLD_SIZE-1 and the same WORLD_SIZE; check the "
        "launcher command on every node.",
        data);
  }
  return pass(
      fmt::format("Ranks 0-{} each reported once, all with WORLD_SIZE={}", f.worldSize - 1, f.worldSize),
      data);
}

// LOCAL_RANK unique per host.
Finding localRankUnique(const WorldFacts& f) {
  std::map<std::string, std::map<int, std::vector<int>>> perHost;
  for (const auto& r : f.reports) {
    const Json* d = findData(r, "env.world_info");
    if (d && d->contains("local_rank")) perHost[hostKey(r)][(*d)["local_rank"].get<int>()].push_back(r.rank);
  }
  std::vector<std::string> clashes;
  for (const auto& [host, byLocal] : perHost) {
    for (const auto& [lr, ranks] : byLocal) {
      if (ranks.size() > 1) {
        clashes.push_back(fmt::format("LOCAL_RANK={} on {} for ranks {}", lr, host.substr(0, host.find('/')),
                                      formatRanges(ranks)));
      }
    }
  }
  if (perHost.empty()) {
    return skip("env.world_info did not run (or failed) on the ranks");
  }
  if (!clashes.empty()) {
    return fail(
        fmt::format("{}: those ranks pick the same GPU and the same local resources", join(clashes, "; ")),
        "Let the launcher set LOCAL_RANK (dsrun/torchrun/mpirun do); do not export it in the job "
        "script.",
        {{"clashes", clashes}});
  }
  return pass(fmt::format("LOCAL_RANK unique on each of {} host(s)", perHost.size()));
}

// No two ranks on one GPU.
Finding gpuUnique(const WorldFacts& f) {
  std::map<std::string, std::vector<int>> byGpu;
  std::map<std::string, std::string> gpuName;  // the GPU as a message names it: bus id, then UUID
  int known = 0;
  for (const auto& r : f.reports) {
    const Json* d = findData(r, "gpu.local_rank_device");
    if (d == nullptr || !d->contains("device")) continue;
    ++known;
    std::string uuid = str(&(*d)["device"], "uuid"), bus = str(&(*d)["device"], "bus_id");
    std::string key = hostKey(r) + " " + (uuid.empty() ? bus : uuid);
    byGpu[key].push_back(r.rank);
    gpuName[key] = bus.empty() ? uuid : uuid.empty() ? bus : bus + " (" + uuid + ")";
  }
  std::vector<std::string> dups;
  for (const auto& [gpu, ranks] : byGpu) {
    if (ranks.size() > 1)
      dups.push_back(fmt::format("ranks {} share GPU {}", formatRanges(ranks), gpuName[gpu]));
  }
  if (known == 0) {
    return skip("No rank has a GPU (see the gpu family): nothing to compare");
  }
  if (!dups.empty()) {
    return fail(
        fmt::format("Duplicate GPU detected: {}. NCCL refuses two ranks on one GPU", join(dups, "; ")),
        "Give each rank its own device: LOCAL_RANK must differ per host and CUDA_VISIBLE_DEVICES "
        "must not pin every rank to the same GPU.",
        {{"duplicates", dups}});
  }
  return pass(fmt::format("{} rank(s) on distinct GPUs", known));
}

// Versions equal.
Finding versionsEqual(const WorldFacts& f) {
  struct V {
    const char* what;
    std::function<std::string(const RankReport&)> get;
  };
  std::vector<V> vs = {
      {"dsperf", [](const RankReport& r) { return r.toolVersion; }},
      {"NCCL", [](const RankReport& r) { return str(findData(r, "nccl.version"), "runtime"); }},
      {"CUDA driver",
       [](const RankReport& r) {
         const Json* d = findData(r, "gpu.driver_version");
         std::string v = str(d, "nvml_driver_version");
         return v.empty() ? (str(d, "driver_cuda_version") == "unknown" ? "" : str(d, "driver_cuda_version"))
                          : v;
       }},
      {"MPI", [](const RankReport& r) { return str(findData(r, "mpi.version"), "version"); }},
  };
  std::vector<std::string> diffs, same;
  Json data = Json::object();
  for (const auto& v : vs) {
    auto g = groupBy(f.reports, v.get);
    Json gj = Json::object();
    for (const auto& [k, ranks] : g) gj[k] = ranks;
    data[v.what] = gj;
    if (g.size() > 1)
      diffs.push_back(fmt::format("{}: {}", v.what, describeGroups(g)));
    else if (g.size() == 1)
      same.push_back(fmt::format("{} {}", v.what, g.begin()->first));
  }
  if (!diffs.empty()) {
    return fail(fmt::format("Versions differ across ranks: {}. Mixed NCCL/driver versions hang or corrupt "
                            "collectives; mixed dsperf builds disagree on protocols",
                            join(diffs, " | ")),
                "Install the same NCCL, driver, MPI and dsperf on every node (one container image).", data);
  }
  return pass(same.empty() ? "No versions to compare" : "Same on every rank: " + join(same, ", "), data);
}

// NCCL settings equal.
Finding ncclSettingsEqual(const WorldFacts& f) {
  std::map<std::string, std::map<std::string, std::vector<int>>> byVar;  // var -> value -> ranks
  int known = 0;
  for (const auto& r : f.reports) {
    const Json* d = findData(r, "nccl.env");
    if (d == nullptr || !d->contains("settings")) continue;
    ++known;
    for (auto& [k, v] : (*d)["settings"].items()) byVar[k][v.get<std::string>()].push_back(r.rank);
  }
  std::vector<std::string> diffs;
  for (const auto& [var, values] : byVar) {
    int covered = 0;
    for (const auto& [_, ranks] : values) covered += static_cast<int>(ranks.size());
    if (values.size() > 1 || covered != known) {
      std::vector<std::string> parts;
      for (const auto& [val, ranks] : values)
        parts.push_back(fmt::format("'{}' on {}", val, formatRanges(ranks)));
      if (covered != known) parts.push_back("unset elsewhere");
      diffs.push_back(fmt::format("{}: {}", var, join(parts, ", ")));
    }
  }
  if (known == 0) {
    return skip("nccl.env did not run on the ranks");
  }
  if (!diffs.empty()) {
    return warn(fmt::format("NCCL settings differ across ranks: {}. Ranks that choose different "
                            "transports or algorithms can hang or crawl",
                            join(diffs, "; ")),
                "Set NCCL_* the same way on every node (job environment or one nccl.conf).",
                {{"differences", diffs}});
  }
  return pass(fmt::format("{} NCCL setting(s), identical on every rank", byVar.size()));
}

// Bound ranks on one host do not share cores.
Finding coresDisjoint(const WorldFacts& f) {
  std::vector<report::PlacedRank> placed;
  for (const auto& r : f.reports) {
    const Json* d = findData(r, "system.cpu_affinity");
    if (d == nullptr || !d->contains("cpus") || !(*d)["cpus"].is_array()) continue;
    report::Placement p;
    std::vector<int> cpus;
    for (const auto& c : (*d)["cpus"]) {
      if (c.is_number_integer()) cpus.push_back(c.get<int>());
    }
    p.cpus = formatRanges(cpus);
    p.cpuCount = static_cast<int>(cpus.size());
    p.onlineCpus =
        d->contains("online") && (*d)["online"].is_number_integer() ? (*d)["online"].get<int>() : 0;
    placed.push_back({r.rank, hostKey(r), p});
  }
  auto shared = report::sharedCores(placed);
  for (auto& s : shared) {  // the host key carries the boot id after a '/': show the hostname
    auto slash = s.rfind('/');
    if (slash != std::string::npos) s.erase(slash);
  }
  if (placed.empty()) {
    return skip("system.cpu_affinity did not run on the ranks");
  }
  if (!shared.empty()) {
    return warn(
        fmt::format("{}: ranks bound to the same cores take turns on them, and every collective waits for "
                    "the slowest turn (30x on small messages)",
                    join(shared, "; ")),
        "Bind each rank to its own cores (mpirun --map-by slot:PE=N --bind-to core, srun "
        "--cpus-per-task=N "
        "--cpu-bind=cores), or leave the ranks unbound (mpirun --bind-to none, srun --cpu-bind=none).",
        {{"shared", shared}});
  }
  return pass(fmt::format("{} rank(s): bound ranks on each host have cores of their own", placed.size()));
}

// Hostnames.
Finding hostnames(const WorldFacts& f) {
  std::map<std::string, std::set<std::string>> boots;
  for (const auto& r : f.reports) {
    const Json* d = findData(r, "system.host_identity");
    if (d != nullptr) boots[str(d, "hostname")].insert(str(d, "boot_id"));
  }
  std::vector<std::string> clash;
  for (const auto& [h, ids] : boots) {
    if (ids.size() > 1) clash.push_back(h);
  }
  if (boots.empty()) {
    return skip("system.host_identity did not run on the ranks");
  }
  if (!clash.empty()) {
    return warn(fmt::format("Different machines share the hostname(s) {}: tools that group ranks by "
                            "hostname (local ranks, MPI discovery) put them on one node",
                            join(clash, ", ")),
                "Give every node a unique hostname (containers: --hostname).", {{"hostnames", clash}});
  }
  return pass(fmt::format("{} host(s), each with a unique hostname", boots.size()));
}

}  // namespace world

Finding judgeClockSkew(const std::vector<ClockSample>& samples) {
  Json arr = Json::array();
  double worst = 0;
  int worstRank = -1;
  for (const auto& s : samples) {
    arr.push_back({{"rank", s.rank}, {"offset_ms", s.offsetMs}, {"rtt_ms", s.rttMs}});
    if (worstRank < 0 || std::fabs(s.offsetMs) > std::fabs(worst)) {
      worst = s.offsetMs;
      worstRank = s.rank;
    }
  }
  Json data{{"samples", arr}};
  if (samples.empty()) return skip("One rank: no clocks to compare", data);
  if (std::fabs(worst) > 1000.0) {
    return warn(
        fmt::format("Rank {}'s clock is {:+.0f} ms off rank 0's: timestamps in logs and traces of different "
                    "nodes cannot be lined up, and time-based timeouts/certificates misbehave",
                    worstRank, worst),
        "Run NTP/chrony on every node (chronyc tracking shows the offset).", data);
  }
  return pass(fmt::format("Largest clock offset from rank 0: {:+.3f} ms (rank {})", worst, worstRank), data);
}

}  // namespace ds::diag
