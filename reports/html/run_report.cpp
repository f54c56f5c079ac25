#include "reports/html/run_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "engine/common/error.h"
#include "engine/common/ranges.h"
#include "reports/diag/diag_text.h"
#include "reports/html/fleet_html.h"
#include "reports/html/html_page.h"
#include "reports/html/join.h"
#include "reports/html/sweep_html.h"
#include "reports/html/train_html.h"
#include "reports/json_io.h"
#include "reports/schema/world.h"
#include "reports/sweep/expected.h"

namespace ds::report::html {

using nlohmann::json;

namespace {

std::string baseName(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  for (const char* ext : {".jsonl", ".json"}) {
    std::string e(ext);
    if (name.size() > e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0) {
      return name.substr(0, name.size() - e.size());
    }
  }
  return name;
}

std::string scalarText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  if (v.is_array()) {
    std::string s;
    for (const auto& e : v) s += (s.empty() ? "" : ", ") + scalarText(e);
    return s;
  }
  if (v.is_number_float()) return formatNumber(v.get<double>(), 6);
  return dumpJson(v);
}

// Metadata rows (key, value) of one run, from the JSON metadata block the tools write (sweep and
// train share its keys), in a reading order: who ran what, where, with which versions and env.
using KeyValues = std::vector<std::pair<std::string, std::string>>;

void addMetadataBlock(KeyValues& rows, const json& meta) {
  if (!meta.is_object()) return;
  static const std::vector<std::pair<const char*, const char*>> kFirst = {
      {"label", "label"},           {"command_line", "command line"}, {"launcher", "launcher"},
      {"world_size", "world size"}, {"backend", "backend"},           {"hosts", "hosts"},
      {"start_time", "start time"}, {"end_time", "end time"}};
  std::set<std::string> done{"ranks", "versions", "env", "hardware"};
  for (const auto& [key, name] : kFirst) {
    done.insert(key);
    if (meta.contains(key)) rows.emplace_back(name, scalarText(meta[key]));
  }
  for (const auto& [key, v] : meta.items()) {
    if (!done.count(key) && !v.is_object()) rows.emplace_back(key, scalarText(v));
  }
  for (const char* block : {"versions", "env"}) {
    if (!meta.contains(block) || !meta[block].is_object()) continue;
    for (const auto& [key, v] : meta[block].items())
      rows.emplace_back(fmt::format("{}: {}", block, key), scalarText(v));
  }
  for (const auto& [key, v] : meta.items()) {
    if (!done.count(key) && v.is_object()) {
      for (const auto& [k2, v2] : v.items())
        rows.emplace_back(fmt::format("{}: {}", key, k2), scalarText(v2));
    }
  }
}

std::string sizeRange(const SweepArgs& a) {
  std::string step =
      a.stepFactor > 1 ? fmt::format("x{}", a.stepFactor) : fmt::format("+{}", formatBytes(a.stepBytes));
  return fmt::format("{} .. {}, {}", formatBytes(a.minBytes), formatBytes(a.maxBytes), step);
}

KeyValues runMetadata(const RunFile& run) {
  KeyValues rows;
  rows.emplace_back("kind", runKindName(run.kind));
  rows.emplace_back("file", run.path);
  if (!run.label.empty()) rows.emplace_back("label", run.label);
  if (!run.runId.empty()) rows.emplace_back("run id", run.runId);
  if (!run.schemaVersion.empty()) rows.emplace_back("schema version", run.schemaVersion);
  if (run.sweep) {
    const SweepRun& s = *run.sweep;
    json meta = s.metadata;
    if (run.raw.is_object() && run.raw.contains("metadata") && run.raw["metadata"].is_object()) {
      // Keys this dsreport's struct does not know (a newer dsbench's) are still shown.
      for (const auto& [k, v] : run.raw["metadata"].items()) {
        if (!meta.contains(k)) meta[k] = v;
      }
    }
    KeyValues block;
    addMetadataBlock(block, meta);
    for (auto& kv : block) {
      if (kv.first != "label" || run.label.empty()) rows.push_back(std::move(kv));
    }
    // What each host's hardware can move (the bounds of the tables below).
    for (const auto& h : s.metadata.hardware)
      rows.emplace_back(fmt::format("hardware: {}", h.host), describeHardware(h));
    rows.emplace_back("collectives", joinStrings(s.args.collectives));
    rows.emplace_back("backends", joinStrings(s.args.backends));
    rows.emplace_back("dtypes", joinStrings(s.args.dtypes));
    rows.emplace_back("ops", joinStrings(s.args.ops));
    rows.emplace_back("sizes", sizeRange(s.args));
    rows.emplace_back(
        "iterations / warm-up",
        fmt::format("{} / {}{}", s.args.iters, s.args.warmupIters,
                    s.args.minTimeS > 0 ? fmt::format(" (at least {} s per size)", s.args.minTimeS) : ""));
    rows.emplace_back("data check", s.args.check ? "on" : "off");
    static const char* kAverage[] = {"rank 0", "average over ranks", "minimum over ranks",
                                     "maximum over ranks"};
    rows.emplace_back("time combined as",
                      s.args.average >= 0 && s.args.average <= 3 ? kAverage[s.args.average] : "?");
    rows.emplace_back("status", s.summary.status);
    rows.emplace_back("exit code", std::to_string(s.summary.exitCode));
    rows.emplace_back("avg busbw (GB/s)", formatNumber(s.summary.avgBusBw, 6));  // nccl-tests' %g
    rows.emplace_back("wrong elements", std::to_string(s.summary.outOfBounds));
    if (!s.summary.error.empty()) rows.emplace_back("error", s.summary.error);
    for (std::size_t i = 0; i < s.notes.size(); ++i)
      rows.emplace_back(fmt::format("note {}", i + 1), s.notes[i]);
  }
  if (run.train) {
    KeyValues block;
    addMetadataBlock(block, run.trainMetadata);
    for (auto& kv : block) {
      if (kv.first != "label" || run.label.empty()) rows.push_back(std::move(kv));
    }
    rows.emplace_back("configurations", std::to_string(run.train->size()));
  }
  if (run.diag) {
    const DiagReport& d = *run.diag;
    rows.emplace_back("mode", d.mode);
    rows.emplace_back("world size", std::to_string(d.worldSize));
    rows.emplace_back("host", d.host);
    rows.emplace_back("tool version", d.toolVersion);
    DiagCounts c = countStatuses(d.checks);
    rows.emplace_back("result",
                      fmt::format("{} pass, {} warn, {} fail, {} skip", c.pass, c.warn, c.fail, c.skip));
    if (!d.missingRanks.empty()) {
      std::vector<std::string> m;
      for (int r : d.missingRanks) m.push_back(std::to_string(r));
      rows.emplace_back("missing ranks", joinStrings(m));
    }
  }
  return rows;
}

// One rank of a run as the metadata section lists it: rank, host, local rank, node rank, pid, device,
// and where it ran (-1 and empty where the file does not say).
struct RankRow {
  int rank, localRank, nodeRank;
  std::string host;
  long pid;
  std::string device;
  std::optional<Placement> placement;
};

// The ranks a run records: a sweep's and a world report's in full; dsbench train keeps rank, host and
// placement only (absent in files written before it).
std::vector<RankRow> rankRows(const RunFile& run) {
  std::vector<RankRow> rr;
  if (run.sweep) {
    for (const auto& r : run.sweep->metadata.ranks)
      rr.push_back({r.rank, r.localRank, r.nodeRank, r.host, r.pid, r.device, r.placement});
  } else if (run.kind == RunKind::kWorld) {
    for (const auto& r : worldFromJson(run.raw, run.path))
      rr.push_back({r.rank, r.localRank, r.nodeRank, r.host, r.pid, r.device, r.placement});
  } else if (run.train && run.trainMetadata.is_object() && run.trainMetadata.contains("ranks")) {
    for (const auto& r : run.trainMetadata["ranks"]) {
      // The train metadata is free-form in the schema: what does not read as a rank is left out.
      if (!r.is_object() || !r.contains("rank") || !r["rank"].is_number_integer()) continue;
      std::string host = r.contains("host") && r["host"].is_string() ? r["host"].get<std::string>() : "";
      RankRow x{r["rank"].get<int>(), -1, -1, host, -1, "", std::nullopt};
      try {
        if (r.contains("placement")) x.placement = r["placement"].get<Placement>();
      } catch (const nlohmann::json::exception&) {
        // a malformed placement: the row shows none
      }
      rr.push_back(std::move(x));
    }
  }
  return rr;
}

// The ranks of one run, with their CPU affinity and node load when any rank recorded a placement, and
// ranks that share a core flagged; open for a world report, folded otherwise. Nothing for no ranks.
void ranksTable(PageBuilder& page, const RunFile& run, const std::string& name) {
  std::vector<RankRow> rr = rankRows(run);
  if (rr.empty()) return;
  std::vector<PlacedRank> placed;
  bool anyPlacement = false;
  for (const auto& r : rr) {
    placed.push_back({r.rank, r.host, r.placement});
    anyPlacement = anyPlacement || r.placement.has_value();
  }
  auto shared = ranksSharingCores(placed);
  auto num = [](long v) { return v < 0 ? Cell("—", "num") : Cell(std::to_string(v), "num"); };
  std::vector<Row> ranks;
  for (const auto& r : rr) {
    Row row{Cell(std::to_string(r.rank), "num"),
            r.host,
            num(r.localRank),
            num(r.nodeRank),
            num(r.pid),
            r.device.empty() ? std::string("—") : r.device};
    if (anyPlacement) {
      bool sharing = std::find(shared.begin(), shared.end(), r.rank) != shared.end();
      row.emplace_back(r.placement ? formatCpus(*r.placement) + (sharing ? " — shares a core" : "") : "—",
                       sharing ? "warn" : "");
      row.emplace_back(r.placement ? formatLoad(*r.placement) : "—");
    }
    ranks.push_back(std::move(row));
  }
  std::string summary = fmt::format("Ranks of {} ({})", name, ranks.size());
  for (const auto& s : sharedCores(placed)) summary += "; " + s;
  std::vector<std::string> header{"rank", "host", "local rank", "node rank", "pid", "device"};
  if (anyPlacement) {
    header.emplace_back("CPU affinity");
    header.emplace_back("node load at start");
  }
  if (run.kind == RunKind::kWorld) {
    page.heading(summary);
    page.table(header, ranks);
  } else {
    page.foldedTable(summary, header, ranks);
  }
}

// Section: one column per run, one row per key (union, in first-seen order); then each run's ranks.
void metadataSection(PageBuilder& page, const std::vector<RunFile>& runs,
                     const std::vector<std::string>& names) {
  page.section("Metadata");
  std::vector<std::string> keys;
  std::vector<std::map<std::string, std::string>> values;
  std::set<std::string> seen;
  for (const auto& run : runs) {
    std::map<std::string, std::string> m;
    for (auto& [k, v] : runMetadata(run)) {
      if (seen.insert(k).second) keys.push_back(k);
      m[k] = v;
    }
    values.push_back(std::move(m));
  }
  std::vector<std::string> header{""};
  for (const auto& n : names) header.push_back(n);
  std::vector<Row> rows;
  for (const auto& k : keys) {
    Row row{Cell(k, "key")};
    for (const auto& m : values) {
      auto it = m.find(k);
      std::string cls = k == "command line" ? "mono" : "";
      if (k == "status" && it != m.end()) cls = it->second == "ok" ? "pass" : "fail";
      row.emplace_back(it == m.end() ? std::string("—") : it->second, cls);
    }
    rows.push_back(std::move(row));
  }
  page.table(header, rows, "meta");
  for (std::size_t i = 0; i < runs.size(); ++i) ranksTable(page, runs[i], names[i]);
}

std::string statusClass(DiagStatus s) {
  switch (s) {
    case DiagStatus::kPass:
      return "pass";
    case DiagStatus::kWarn:
      return "warn";
    case DiagStatus::kFail:
      return "fail";
    case DiagStatus::kSkip:
      return "skip";
  }
  return "";
}

void diagSection(PageBuilder& page, const RunFile& run, const std::string& name, bool several) {
  const DiagReport& d = *run.diag;
  page.section(several ? fmt::format("Pre-flight checks: {}", name) : "Pre-flight checks");
  DiagCounts c = countStatuses(d.checks);
  page.paragraph(fmt::format("{} pass, {} warn, {} fail, {} skip ({} mode, {} rank(s)). Failures first.",
                             c.pass, c.warn, c.fail, c.skip, d.mode, d.worldSize),
                 c.fail   ? "fail"
                 : c.warn ? "warn"
                          : "pass");
  if (!d.missingRanks.empty()) {
    std::vector<std::string> m;
    for (int r : d.missingRanks) m.push_back(std::to_string(r));
    page.paragraph(fmt::format("Ranks that never reported: {}.", joinStrings(m)), "fail");
  }
  // One row per identical finding (check, status, message, remedy), naming its ranks as ranges
  // ("0-3,5") and its hosts, as the text output does; a finding that differs keeps its own row.
  struct Group {
    const DiagRecord* rec;
    std::vector<int> ranks;
    std::vector<std::string> hosts;
  };
  std::vector<Group> groups;
  for (const auto& r : d.checks) {
    auto same = [&](const Group& g) {
      return r.rank >= 0 && !g.ranks.empty() && g.rec->id == r.id && g.rec->status == r.status &&
             g.rec->message == r.message && g.rec->remedy == r.remedy;
    };
    auto it = std::find_if(groups.begin(), groups.end(), same);
    if (it == groups.end()) {
      groups.push_back({&r, r.rank >= 0 ? std::vector<int>{r.rank} : std::vector<int>{}, {r.host}});
      continue;
    }
    it->ranks.push_back(r.rank);
    if (std::find(it->hosts.begin(), it->hosts.end(), r.host) == it->hosts.end()) it->hosts.push_back(r.host);
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Group& a, const Group& b) { return a.rec->status > b.rec->status; });
  // Problems in the open; what passed or was skipped folded below them.
  std::vector<Row> problems, rest;
  for (const Group& g : groups) {
    const DiagRecord* r = g.rec;
    bool problem = r->status == DiagStatus::kFail || r->status == DiagStatus::kWarn;
    (problem ? problems : rest)
        .push_back({Cell(diagStatusName(r->status), statusClass(r->status)), Cell(r->id, "mono nowrap"),
                    Cell(g.ranks.empty() ? std::string("all") : formatRanges(g.ranks), "num"),
                    joinStrings(g.hosts), r->message, r->remedy});
  }
  std::vector<std::string> header{"status", "check", "rank", "host", "finding", "what to do"};
  if (!problems.empty()) page.table(header, problems, "diag");
  if (!rest.empty())
    page.foldedTable(fmt::format("{} check(s) passed or skipped", rest.size()), header, rest);
}

// "dsperf report: a", "a vs b" for up to four runs of one kind ("a, b" for mixed kinds), else "N runs".
std::string pageTitle(const std::vector<RunFile>& runs, const std::vector<std::string>& names) {
  std::string title;
  if (runs.size() == 1) {
    title = fmt::format("dsperf report: {}", names[0]);
  } else if (runs.size() <= 4) {
    // "a vs b" only for runs of one kind; a sweep with its pre-flight run is not a comparison.
    bool oneKind = std::all_of(runs.begin(), runs.end(), [&](const RunFile& r) { return r.kind == runs[0].kind; });
    title = "dsperf report: ";
    for (std::size_t i = 0; i < names.size(); ++i) title += (i ? (oneKind ? " vs " : ", ") : "") + names[i];
  } else {
    title = fmt::format("dsperf report: {} runs", runs.size());
  }
  return title;
}

// Section: one row per run: its kind, file, status, hosts, ranks and start.
void runsSection(PageBuilder& page, const std::vector<RunFile>& runs, const std::vector<std::string>& names) {
  page.section("Runs");
  std::vector<Row> overview;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    std::string status = "—", hosts, start;
    int world = 0;
    if (r.sweep) {
      status = r.sweep->summary.status;
      hosts = joinStrings(r.sweep->metadata.hosts);
      start = r.sweep->metadata.startTime;
      world = r.sweep->metadata.worldSize;
    } else if (r.train) {
      status = fmt::format("{} configuration(s)", r.train->size());
      if (r.trainMetadata.is_object()) {
        hosts = scalarText(r.trainMetadata.value("hosts", json()));
        start = scalarText(r.trainMetadata.value("start_time", json()));
        world = readIntOr(r.trainMetadata, "world_size", 0);
      }
      if (world == 0 && !r.train->empty()) world = r.train->front().worldSize;
    } else if (r.diag) {
      DiagCounts c = countStatuses(r.diag->checks);
      status = c.fail ? "FAIL" : c.warn ? "WARN" : "PASS";
      hosts = r.diag->host;
      world = r.diag->worldSize;
    }
    std::string cls = status == "ok" || status == "PASS" ? "pass"
                      : status == "FAIL"                 ? "fail"
                      : status == "WARN"                 ? "warn"
                                                         : "";
    if (r.sweep && status != "ok") cls = "fail";
    overview.push_back({names[i], runKindName(r.kind), Cell(r.path, "mono"), Cell(status, cls), hosts,
                        Cell(world ? std::to_string(world) : std::string("—"), "num"), start});
  }
  page.table({"run", "kind", "file", "status", "hosts", "ranks", "start (UTC)"}, overview);
}

}  // namespace

std::vector<std::string> runDisplayNames(const std::vector<RunFile>& runs) {
  std::vector<std::string> names;
  std::map<std::string, int> count;
  for (const auto& r : runs) {
    names.push_back(r.label.empty() ? baseName(r.path) : r.label);
    if (names.back().empty()) names.back() = "run";
    ++count[names.back()];
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (count[names[i]] > 1) names[i] += fmt::format(" #{}", i + 1);
  }
  return names;
}

std::string renderRunReport(const std::vector<RunFile>& runs) {
  if (runs.empty()) throw ConfigError("dsreport html needs at least one result file");
  std::vector<std::string> names = runDisplayNames(runs);
  PageBuilder page(pageTitle(runs, names), "report");
  runsSection(page, runs, names);
  metadataSection(page, runs, names);
  int diags = 0;
  for (const auto& r : runs) diags += r.diag ? 1 : 0;
  json heatmaps = json::array();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].diag) diagSection(page, runs[i], names[i], diags > 1);
    if (runs[i].diag && runs[i].diag->fleet)
      heatmaps.push_back(
          fleetSection(page, *runs[i].diag->fleet, diags > 1 ? names[i] : "", static_cast<int>(i)));
  }
  if (!heatmaps.empty()) {
    page.data("fleetHeatmaps", std::move(heatmaps));
    page.script(fleetHeatmapScript());
  }
  sweepSections(page, runs, names);
  trainSection(page, runs, names);
  return page.render();
}

void writeRunReport(const std::vector<RunFile>& runs, const std::string& path) {
  writeTextAtomic(path, renderRunReport(runs));
}

}  // namespace ds::report::html
