#include "reports/html/fleet_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/common/ranges.h"
#include "reports/diag/diag_text.h"
#include "reports/diag/fleet_json.h"
#include "reports/diag/fleet_text.h"
#include "reports/diag/hostlist.h"

namespace ds::report::html {

namespace assets {
extern const char kFleetJs[];
}  // namespace assets

using nlohmann::json;

namespace {

std::string stateClass(HostState s) {
  switch (s) {
    case HostState::kHealthy:
      return "pass";
    case HostState::kSuspect:
      return "fail";
    case HostState::kNoResult:
      return "warn";
  }
  return "";
}

// "healthy", "suspect", "no result".
std::string stateText(HostState s) {
  std::string t = hostStateName(s);
  std::replace(t.begin(), t.end(), '_', ' ');
  return t;
}

std::string evidenceText(const std::vector<Evidence>& evidence) {
  std::string s;
  for (const auto& e : evidence) {
    s += (s.empty() ? "" : "\n") +
         fmt::format("{} [{}{}]", e.text, e.kind, e.stage.empty() ? "" : ", " + e.stage);
  }
  return s;
}

// Worse first: failed/timed out (by status), then measured, then skipped.
int badness(int status) { return status == 1 || status == 2 ? 3 : status == 0 ? 2 : 1; }

}  // namespace

json fleetHeatmapData(const FleetReport& r, const std::string& canvasId) {
  // Units on the axes: the judgement's hosts (sorted by name); a rank no host lists gets its own.
  std::vector<std::string> hosts;
  std::vector<int> suspect;
  std::map<int, int> unitOfRank;
  for (const auto& h : r.judgement.hosts) {
    for (int rank : h.ranks) unitOfRank[rank] = static_cast<int>(hosts.size());
    hosts.push_back(h.host);
    suspect.push_back(h.state == HostState::kHealthy ? 0 : 1);
  }
  auto unitOf = [&](int rank) {
    auto it = unitOfRank.find(rank);
    if (it != unitOfRank.end()) return it->second;
    std::string name =
        rank >= 0 && rank < static_cast<int>(r.input.ranks.size()) && r.input.ranks[rank].rank == rank
            ? r.input.ranks[rank].host
            : fmt::format("rank {}", rank);
    unitOfRank[rank] = static_cast<int>(hosts.size());
    hosts.push_back(name);
    suspect.push_back(0);
    return unitOfRank[rank];
  };
  const double median = r.judgement.medianBandwidthGBps;
  struct CellValue {
    int status = 3;
    double ratio = 0;
  };
  std::map<std::pair<int, int>, CellValue> cells;
  for (const auto& p : r.input.pairs) {
    int a = unitOf(p.a), b = unitOf(p.b);
    if (a == b) continue;  // two ranks of one host: not a link between hosts
    if (a > b) std::swap(a, b);
    CellValue v;
    v.status = static_cast<int>(p.outcome);  // kOk 0, kFailed 1, kTimeout 2, kSkipped 3
    v.ratio = std::isfinite(p.bandwidthGBps) && median > 0 ? p.bandwidthGBps / median : 0;
    auto [it, fresh] = cells.try_emplace({a, b}, v);
    if (fresh) continue;
    CellValue& old = it->second;
    if (badness(v.status) > badness(old.status) ||
        (badness(v.status) == badness(old.status) && v.status == 0 && v.ratio < old.ratio)) {
      old = v;
    }
  }
  json flat = json::array();
  for (const auto& [key, v] : cells) {
    flat.push_back(key.first);
    flat.push_back(key.second);
    flat.push_back(v.status);
    flat.push_back(static_cast<long long>(std::lround(std::min(v.ratio, 1e6) * 1000)));
  }
  return json{{"canvas", canvasId},
              {"tip", canvasId + "-tip"},
              {"hosts", hosts},
              {"suspect", suspect},
              {"median", std::isfinite(median) ? median : 0},
              {"cells", std::move(flat)}};
}

json fleetSection(PageBuilder& page, const FleetReport& r, const std::string& name, int index) {
  const FleetJudgement& j = r.judgement;
  FleetCounts c = countFleet(j);
  page.section(name.empty() ? "Fleet" : "Fleet: " + name);
  const int code = fleetExitCode(j);
  page.paragraph(fmt::format("{} host(s), {} rank(s): {} healthy, {} suspect, {} with no result; {} suspect "
                             "link(s). {} (exit {}).",
                             c.hosts, r.input.worldSize, c.healthy, c.suspect, c.noResult, c.suspectLinks,
                             code == 0 ? "Every host is healthy" : "Suspects or hosts with no result", code),
                 code == 0 ? "verdict pass" : "verdict fail");

  // Suspects first, then hosts with no result; the healthy ones folded below.
  std::vector<std::string> header{"verdict", "host", "ranks", "evidence", "NCCL_SOCKET_IFNAME"};
  std::vector<Row> problems, healthy;
  for (HostState state : {HostState::kSuspect, HostState::kNoResult, HostState::kHealthy}) {
    for (const auto& h : j.hosts) {
      if (h.state != state) continue;
      Row row{Cell(stateText(h.state), stateClass(h.state)), Cell(h.host, "mono"),
              Cell(formatRanges(h.ranks), "num"), Cell(evidenceText(h.evidence), "evidence"),
              Cell(h.ncclSocketIfname, "mono")};
      (state == HostState::kHealthy ? healthy : problems).push_back(std::move(row));
    }
  }
  if (!problems.empty()) {
    page.heading("Suspect hosts and hosts with no result");
    page.table(header, problems, "fleet-suspects");
  }
  if (!j.links.empty()) {
    page.heading("Suspect links (both ends healthy with other peers)");
    std::vector<Row> links;
    for (const auto& l : j.links) {
      links.push_back({Cell(l.hostA, "mono"), Cell(std::to_string(l.rankA), "num"), Cell(l.hostB, "mono"),
                       Cell(std::to_string(l.rankB), "num"), Cell(evidenceText(l.evidence), "evidence")});
    }
    page.table({"host", "rank", "host", "rank", "evidence"}, links, "fleet-links");
  }

  page.heading("What to do");
  auto excluded = excludedHosts(j);
  if (excluded.empty()) {
    page.paragraph("Nothing to exclude.");
  } else {
    page.paragraph("Exclude (Slurm hostlist, for srun/sbatch --exclude): " + slurmHostlist(excluded), "mono");
    page.paragraph("Exclude (DeepSpeed launcher, deepspeed --exclude): " + deepspeedExclude(excluded),
                   "mono");
  }
  if (!j.jobSocketIfname.empty()) {
    page.paragraph(fmt::format("Interfaces: NCCL_SOCKET_IFNAME={0} GLOO_SOCKET_IFNAME={0} for the whole job.",
                               j.jobSocketIfname),
                   "mono");
  } else {
    std::map<std::string, std::vector<std::string>> byValue;
    for (const auto& h : j.hosts) byValue[h.ncclSocketIfname].push_back(h.host);
    if (byValue.size() <= 1 && (byValue.empty() || byValue.begin()->first.empty())) {
      page.paragraph("Interfaces: " + interfacesFound(j), "mono");
      byValue.clear();
    }
    for (const auto& [value, hosts] : byValue) {
      page.paragraph(value.empty()
                         ? "Interfaces: leave NCCL_SOCKET_IFNAME unset on " + slurmHostlist(hosts)
                         : fmt::format("Interfaces: NCCL_SOCKET_IFNAME={0} GLOO_SOCKET_IFNAME={0} on {1}",
                                       value, slurmHostlist(hosts)),
                     "mono");
    }
  }
  for (const auto& note : j.notes) page.paragraph("Note: " + note);

  page.heading("Link tests");
  int bad = 0;
  for (const auto& p : r.input.pairs)
    bad += p.outcome == PairOutcome::kFailed || p.outcome == PairOutcome::kTimeout;
  page.paragraph(fmt::format(
      "{} round(s), {} pair(s) ({} failed or timed out), {} message(s); healthy pairs: "
      "median {} GB/s (MAD {}), latency {} us (MAD {}).",
      r.stats.rounds, r.stats.pairs, bad, r.stats.messages, formatNumber(j.medianBandwidthGBps),
      formatNumber(j.madBandwidthGBps), formatNumber(j.medianLatencyUs), formatNumber(j.madLatencyUs)));
  const std::string canvas = fmt::format("fleet-heatmap-{}", index);
  page.paragraph(
      "Host x host: each tested pair coloured by its bandwidth relative to the fleet median (green at or "
      "above "
      "it, yellow at half, red near zero); dark red with a cross: failed; purple with a cross: timed out; "
      "grey: "
      "skipped; white: not tested. Suspect hosts are marked red on the axes. Point at a cell for its hosts "
      "and value.");
  page.rawHtml(
      fmt::format("<div class=\"heatmap\"><canvas id=\"{0}\" data-fleet-heatmap=\"{1}\" role=\"img\" "
                  "aria-label=\"host by host link heatmap\"></canvas><div id=\"{0}-tip\" class=\"tip "
                  "mono\"></div></div>\n",
                  canvas, index));
  if (!r.stats.stageSeconds.empty()) {
    std::vector<Row> stages;
    for (const auto& [stage, s] : r.stats.stageSeconds)
      stages.push_back({Cell(stage), Cell(formatFixed(s, 2), "num")});
    page.foldedTable("Time per stage on rank 0", {"stage", "seconds"}, stages);
  }
  if (!healthy.empty()) page.foldedTable(fmt::format("{} healthy host(s)", healthy.size()), header, healthy);
  return fleetHeatmapData(r, canvas);
}

const char* fleetHeatmapScript() { return assets::kFleetJs; }

}  // namespace ds::report::html
