#include "reports/diag/fleet_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/common/ranges.h"
#include "reports/diag/diag_text.h"
#include "reports/diag/fleet_json.h"
#include "reports/diag/hostlist.h"
#include "reports/json_io.h"

namespace ds::report {
namespace {

constexpr std::size_t kEvidenceShown = 4;  // per host or link without --verbose

std::string ranksOf(const std::vector<int>& ranks) {
  if (ranks.empty()) return "no rank";
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", formatRanges(ranks));
}

// "1.885", "0.031", "1234": enough digits to compare with the median.
std::string figure(double v) {
  if (!std::isfinite(v)) return "-";
  return fmt::format("{:.4g}", v);
}

class Painter {
 public:
  explicit Painter(bool color) : color_(color) {}
  std::string operator()(const char* code, const std::string& text) const {
    return color_ ? fmt::format("\033[{}m{}\033[0m", code, text) : text;
  }
  std::string state(HostState s) const {
    switch (s) {
      case HostState::kHealthy:
        return (*this)("32", "healthy");
      case HostState::kSuspect:
        return (*this)("1;31", "SUSPECT");
      case HostState::kNoResult:
        return (*this)("33", "NO RESULT");
    }
    return "?";
  }

 private:
  bool color_;
};

void addEvidence(std::string& out, const std::vector<Evidence>& evidence, bool verbose) {
  std::size_t shown = verbose ? evidence.size() : std::min(evidence.size(), kEvidenceShown);
  for (std::size_t i = 0; i < shown; ++i) {
    const Evidence& e = evidence[i];
    out += fmt::format("      - {} [{}{}]\n", e.text, e.kind, e.stage.empty() ? "" : ", " + e.stage);
  }
  if (shown < evidence.size()) {
    out += fmt::format("      ... and {} more (--verbose shows all)\n", evidence.size() - shown);
  }
}

void addInterfaces(std::string& out, const FleetJudgement& j) {
  if (!j.jobSocketIfname.empty()) {
    out += fmt::format(
        "Interfaces: export NCCL_SOCKET_IFNAME={0} GLOO_SOCKET_IFNAME={0} for the whole job "
        "(it reaches every peer on every host).\n",
        j.jobSocketIfname);
    return;
  }
  std::map<std::string, std::vector<std::string>> byValue;  // recommended value -> hosts
  for (const auto& h : j.hosts) byValue[h.ncclSocketIfname].push_back(h.host);
  if (byValue.empty() || (byValue.size() == 1 && byValue.begin()->first.empty())) {
    out += "Interfaces: " + interfacesFound(j) + "\n";
    return;
  }
  out += "Interfaces: no one NCCL_SOCKET_IFNAME reaches every peer from every host; set it per host:\n";
  for (const auto& [value, hosts] : byValue) {
    if (value.empty()) {
      out +=
          fmt::format("  leave unset on {} (no interface there reaches every peer)\n", slurmHostlist(hosts));
    } else {
      out += fmt::format("  NCCL_SOCKET_IFNAME={0} GLOO_SOCKET_IFNAME={0} on {1}\n", value,
                         slurmHostlist(hosts));
    }
  }
}

void addStats(std::string& out, const FleetReport& r) {
  int failed = 0, timedOut = 0, skipped = 0;
  for (const auto& p : r.input.pairs) {
    failed += p.outcome == PairOutcome::kFailed;
    timedOut += p.outcome == PairOutcome::kTimeout;
    skipped += p.outcome == PairOutcome::kSkipped;
  }
  const FleetJudgement& j = r.judgement;
  out +=
      fmt::format("Link tests: {} round(s), {} pair(s) ({} failed, {} timed out, {} skipped), {} message(s)",
                  r.stats.rounds, r.stats.pairs, failed, timedOut, skipped, r.stats.messages);
  if (std::isfinite(j.medianBandwidthGBps) && j.medianBandwidthGBps > 0) {
    out += fmt::format("; healthy pairs: median {} GB/s (MAD {}), latency {} us (MAD {})",
                       figure(j.medianBandwidthGBps), figure(j.madBandwidthGBps), figure(j.medianLatencyUs),
                       figure(j.madLatencyUs));
  }
  out += ".\n";
  if (r.stats.stageSeconds.empty()) return;
  std::string stages;
  double total = 0;
  auto add = [&](const std::string& stage, double s) {
    stages += fmt::format("{}{} {:.2f} s", stages.empty() ? "" : ", ", stage, s);
    if (std::isfinite(s)) total += s;
  };
  for (const char* stage : kFleetStages) {
    if (auto it = r.stats.stageSeconds.find(stage); it != r.stats.stageSeconds.end())
      add(it->first, it->second);
  }
  for (const auto& [stage, s] : r.stats.stageSeconds) {
    if (std::find(std::begin(kFleetStages), std::end(kFleetStages), stage) == std::end(kFleetStages))
      add(stage, s);
  }
  out += fmt::format("Time on rank 0: {} (total {:.2f} s).\n", stages, total);
}

}  // namespace

std::vector<std::string> excludedHosts(const FleetJudgement& judgement) {
  std::vector<std::string> hosts;
  for (const auto& h : judgement.hosts) {
    if (h.state != HostState::kHealthy) hosts.push_back(h.host);
  }
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  return hosts;
}

std::string interfacesFound(const FleetJudgement& j) {
  if (j.hosts.size() <= 1) return "one host, no peer to reach; nothing to set.";
  if (!j.reachingIfaces.empty()) {
    return fmt::format(
        "{} {} every peer from every host; nothing to set (NCCL and Gloo find {} by themselves).",
        fmt::join(j.reachingIfaces, ", "), j.reachingIfaces.size() == 1 ? "reaches" : "reach",
        j.reachingIfaces.size() == 1 ? "it" : "them");
  }
  return "no interface was judged to reach every peer from every host (see the evidence above); leave "
         "NCCL_SOCKET_IFNAME unset.";
}

void writeExcludeFile(const std::string& path, const FleetJudgement& judgement) {
  auto hosts = excludedHosts(judgement);
  writeTextAtomic(path, hosts.empty() ? std::string() : slurmHostlist(hosts) + "\n");
}

std::string formatFleetText(const FleetReport& r, const FleetTextOptions& options) {
  const Painter paint(options.color);
  const FleetJudgement& j = r.judgement;
  FleetCounts c = countFleet(j);
  std::string out;
  out += paint("1",
               r.input.standalone ? "fleet (standalone: each rank is its own unit, over loopback)" : "fleet");
  out += "\n";
  out += fmt::format(
      "Fleet: {} host(s), {} rank(s): {} healthy, {} suspect, {} with no result; {} suspect link(s).\n",
      c.hosts, r.input.worldSize, c.healthy, c.suspect, c.noResult, c.suspectLinks);
  auto hostLine = [&](const HostVerdict& h) {
    out += fmt::format("  {}  {} ({})\n", paint.state(h.state), h.host, ranksOf(h.ranks));
    addEvidence(out, h.evidence, options.verbose);
  };
  for (HostState state : {HostState::kSuspect, HostState::kNoResult}) {
    int n = state == HostState::kSuspect ? c.suspect : c.noResult;
    if (n == 0) continue;
    out += state == HostState::kSuspect ? "Suspect hosts:\n" : "Hosts with no result:\n";
    for (const auto& h : j.hosts) {
      if (h.state == state) hostLine(h);
    }
  }
  if (!j.links.empty()) {
    out += "Suspect links (both ends healthy with other peers; excluding either end avoids the link):\n";
    for (const auto& l : j.links) {
      out += fmt::format("  {}  {} (rank {}) <-> {} (rank {})\n", paint("1;31", "SUSPECT"), l.hostA, l.rankA,
                         l.hostB, l.rankB);
      addEvidence(out, l.evidence, options.verbose);
    }
  }
  if (options.verbose) {
    if (c.healthy > 0) out += "Healthy hosts:\n";
    for (const auto& h : j.hosts) {
      if (h.state == HostState::kHealthy) hostLine(h);
    }
  } else if (c.healthy > 0) {
    out += fmt::format("Healthy: {} host(s) ({}; --verbose lists each).\n", c.healthy,
                       c.healthy == c.hosts ? std::string("every host") : "all but the ones above");
  }
  addInterfaces(out, j);
  addStats(out, r);
  for (const auto& note : j.notes) out += fmt::format("Note: {}\n", note);
  auto excluded = excludedHosts(j);
  if (excluded.empty()) {
    out += "Exclude: nothing to exclude.\n";
  } else {
    out += fmt::format("Exclude (Slurm hostlist, for srun/sbatch --exclude): {}\n", slurmHostlist(excluded));
    out += fmt::format("Exclude (DeepSpeed launcher, deepspeed --exclude): {}\n", deepspeedExclude(excluded));
  }
  out += fmt::format("Fleet verdict: {} (exit {}).\n",
                     fleetExitCode(j) == 0 ? paint("32", "every host healthy")
                                           : paint("1;31", "suspects or hosts with no result"),
                     fleetExitCode(j));
  return out;
}

}  // namespace ds::report
