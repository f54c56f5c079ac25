#include "reports/html/run_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "engine/common/error.h"
#include "engine/common/ranges.h"
#include "reports/diag/diag_text.h"
#include "reports/html/fleet_html.h"
#include "reports/html/html_page.h"
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

std::string joinStrings(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += (s.empty() ? "" : ", ") + e;
  return s;
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

// Section: one column per run, one row per key (union, in first-seen order).
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

  for (std::size_t i = 0; i < runs.size(); ++i) {
    // rank, host, local rank, node rank, pid, device, and where it ran.
    struct RankRow {
      int rank, localRank, nodeRank;
      std::string host;
      long pid;
      std::string device;
      std::optional<Placement> placement;
    };
    std::vector<RankRow> rr;
    if (runs[i].sweep) {
      for (const auto& r : runs[i].sweep->metadata.ranks)
        rr.push_back({r.rank, r.localRank, r.nodeRank, r.host, r.pid, r.device, r.placement});
    } else if (runs[i].kind == RunKind::kWorld) {
      for (const auto& r : worldFromJson(runs[i].raw, runs[i].path))
        rr.push_back({r.rank, r.localRank, r.nodeRank, r.host, r.pid, r.device, r.placement});
    } else if (runs[i].train && runs[i].trainMetadata.is_object() &&
               runs[i].trainMetadata.contains("ranks")) {
      // dsbench train keeps rank, host and placement only (absent in files written before it).
      for (const auto& r : runs[i].trainMetadata["ranks"]) {
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
    if (rr.empty()) continue;
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
    std::string summary = fmt::format("Ranks of {} ({})", names[i], ranks.size());
    for (const auto& s : sharedCores(placed)) summary += "; " + s;
    std::vector<std::string> header2{"rank", "host", "local rank", "node rank", "pid", "device"};
    if (anyPlacement) {
      header2.emplace_back("CPU affinity");
      header2.emplace_back("node load at start");
    }
    if (runs[i].kind == RunKind::kWorld) {
      page.heading(summary);
      page.table(header2, ranks);
    } else {
      page.foldedTable(summary, header2, ranks);
    }
  }
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

// ---- sweeps ----

struct Variant {
  std::string dtype, op;
  bool operator<(const Variant& o) const { return std::tie(dtype, op) < std::tie(o.dtype, o.op); }
};

const PlaceResult& placeOf(const SweepMeasurement& m, int place) {
  return place == 0 ? m.outOfPlace : m.inPlace;
}
const char* placeName(int place) { return place == 0 ? "out-of-place" : "in-place"; }

// The tails chart of a sweep section: time per op by size for the mean, p50, p99 and p99.9 of the
// per-iteration times (each iteration's slowest rank), log y: where the mean hides the stalls a step at
// scale waits for. One colour per statistic (per run and variant too when there are several), in-place
// dashed. Tails a file does not have (p99.9 before schema 1.2) are left out, and said so.
void tailsChart(PageBuilder& page, const std::vector<RunFile>& runs, const std::vector<std::string>& names,
                const std::vector<std::vector<const SweepMeasurement*>>& rowsOf,
                const std::set<Variant>& variants, const std::string& collective,
                const std::string& backend) {
  struct Stat {
    const char* label;
    std::optional<double> (*value)(const IterStats&);
  };
  static const Stat kStats[] = {
      {"mean", [](const IterStats& s) -> std::optional<double> { return s.avgUs; }},
      {"p50", [](const IterStats& s) -> std::optional<double> { return s.p50Us; }},
      {"p99", [](const IterStats& s) -> std::optional<double> { return s.p99Us; }},
      {"p99.9", [](const IterStats& s) { return s.p999Us; }},
  };
  const bool several = runs.size() > 1, manyVariants = variants.size() > 1;
  json series = json::array();
  bool p999Missing = false;
  int group = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    for (const auto& v : variants) {
      bool any = false;
      for (int place = 0; place < 2; ++place) {
        for (std::size_t k = 0; k < std::size(kStats); ++k) {
          json pts = json::array();
          for (const auto* m : rowsOf[i]) {
            if (m->dtype != v.dtype || m->op != v.op) continue;
            const PlaceResult& p = placeOf(*m, place);
            if (!p.measured || p.iter.n <= 0) continue;
            if (auto y = kStats[k].value(p.iter)) {
              pts.push_back({m->bytes, *y});
            } else if (k == 3) {
              p999Missing = true;
            }
          }
          if (pts.empty()) continue;
          any = true;
          std::string label = fmt::format("{} {}", kStats[k].label, placeName(place));
          if (manyVariants) label = fmt::format("{} {} {}", v.dtype, v.op, label);
          if (several) label = fmt::format("{}: {}", names[i], label);
          series.push_back({{"label", label},
                            {"points", pts},
                            {"dashed", place == 1},
                            {"color", static_cast<int>(group * std::size(kStats) + k)}});
        }
      }
      if (any) ++group;
    }
  }
  if (series.empty()) return;
  page.chart(
      {{"kind", "size"},
       {"title", fmt::format("{} on {}: mean and tails of the per-iteration time", collective, backend)},
       {"xTitle", "size"},
       {"yTitle", "time per op (µs), each iteration's slowest rank"},
       {"yLog", true},
       {"series", series}});
  if (p999Missing) {
    page.paragraph(
        "p90 and p99.9: not in some of this data (files written before dsperf's sweep schema 1.2 keep "
        "p50, p95 and p99 only); their cells show —.",
        "muted nodata");
  }
}

void sweepSection(PageBuilder& page, const std::vector<RunFile>& runs, const std::vector<std::string>& names,
                  const std::string& collective, const std::string& backend) {
  bool several = runs.size() > 1;
  // Rows of this section per run, in size order.
  std::vector<std::vector<const SweepMeasurement*>> rowsOf(runs.size());
  std::set<Variant> variants;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].sweep) continue;
    for (const auto& m : runs[i].sweep->results) {
      if (m.collective != collective || m.backend != backend) continue;
      rowsOf[i].push_back(&m);
      variants.insert({m.dtype, m.op});
    }
    std::stable_sort(
        rowsOf[i].begin(), rowsOf[i].end(),
        [](const SweepMeasurement* a, const SweepMeasurement* b) { return a->bytes < b->bytes; });
  }
  bool manyVariants = variants.size() > 1;
  double busFactor = 0;
  int world = 0;
  for (const auto& rows : rowsOf) {
    if (!rows.empty()) {
      busFactor = rows.front()->busFactor;
      world = rows.front()->worldSize;
      break;
    }
  }
  page.section(fmt::format("{} on {}", collective, backend));
  page.paragraph(
      fmt::format("busbw = algbw x {} ({} ranks); GB/s with GB = 1e9 bytes. Time is per operation. Sizes "
                  "on a log-2 axis; in-place dashed.",
                  formatNumber(busFactor), world),
      "muted");

  json bw = json::array(), lat = json::array(), spread = json::array();
  int color = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    for (const auto& v : variants) {
      std::vector<const SweepMeasurement*> rows;
      for (const auto* m : rowsOf[i]) {
        if (m->dtype == v.dtype && m->op == v.op) rows.push_back(m);
      }
      if (rows.empty()) continue;
      for (int place = 0; place < 2; ++place) {
        json b = json::array(), l = json::array(), s = json::array();
        for (const auto* m : rows) {
          const PlaceResult& p = placeOf(*m, place);
          if (!p.measured) continue;
          b.push_back({m->bytes, p.busBw});
          l.push_back({m->bytes, p.timeUs});
          if (!p.ranks.empty()) s.push_back({m->bytes, p.spreadPct});  // no per-rank times: no spread
        }
        if (b.empty()) continue;
        std::string label = placeName(place);
        if (manyVariants) label = fmt::format("{} {} {}", v.dtype, v.op, label);
        if (several) label = fmt::format("{}: {}", names[i], label);
        for (auto [arr, pts] : {std::pair{&bw, &b}, std::pair{&lat, &l}, std::pair{&spread, &s}}) {
          if (pts->empty()) continue;
          arr->push_back({{"label", label}, {"points", *pts}, {"dashed", place == 1}, {"color", color}});
        }
      }
      ++color;
    }
  }
  if (bw.empty()) {
    page.paragraph("No size was measured for this collective.", "warn");
    return;
  }
  page.chart({{"kind", "size"},
              {"title", fmt::format("{} busbw on {}", collective, backend)},
              {"xTitle", "size"},
              {"yTitle", "busbw (GB/s)"},
              {"series", bw}});
  page.chart({{"kind", "size"},
              {"title", fmt::format("{} latency on {}", collective, backend)},
              {"xTitle", "size"},
              {"yTitle", "time per op (µs)"},
              {"yLog", true},
              {"series", lat}});

  // The hardware bound of the section (the same for every size of a run; expected.h), said once per
  // run, and each row's fraction of it in the table's last column.
  bool anyHardware = false;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].sweep || runs[i].sweep->metadata.hardware.empty() || rowsOf[i].empty()) continue;
    anyHardware = true;
    RowBound b = rowBound(*rowsOf[i].back(), runs[i].sweep->metadata);
    std::string who = several ? names[i] + ": " : "";
    if (!b.known()) {
      page.paragraph(fmt::format("{}Bound: unknown: {}.", who, b.why), "muted");
      continue;
    }
    page.paragraph(
        fmt::format("{}Bound: {} GB/s of busbw, the {}{}{}.", who, formatNumber(b.gbps, 3), b.name,
                    b.host.empty() ? "" : fmt::format(" of {}, the slowest host", b.host),
                    b.practicalGBps > 0 ? fmt::format(" (practical ~{} GB/s: ~24 GB/s per 200G NIC)",
                                                      formatNumber(b.practicalGBps, 3))
                                        : ""),
        "muted");
  }

  // The raw table.
  std::vector<std::string> header;
  if (several) header.push_back("run");
  for (const char* h : {"size", "bytes", "count", "type", "op", "root"}) header.push_back(h);
  for (const char* p : {"oop", "ip"}) {
    for (const char* h : {"time (µs)", "algbw (GB/s)", "busbw (GB/s)", "#wrong"})
      header.push_back(fmt::format("{} {}", p, h));
  }
  if (anyHardware) header.push_back("busbw / bound");
  std::vector<Row> table;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    for (const auto* m : rowsOf[i]) {
      Row row;
      if (several) row.emplace_back(names[i]);
      row.emplace_back(formatBytes(static_cast<double>(m->bytes)), "num");
      row.emplace_back(std::to_string(m->bytes), "num");
      row.emplace_back(std::to_string(m->count), "num");
      row.emplace_back(m->dtype);
      row.emplace_back(m->op);
      row.emplace_back(m->root < 0 ? std::string("—") : std::to_string(m->root), "num");
      for (int place = 0; place < 2; ++place) {
        const PlaceResult& p = placeOf(*m, place);
        if (!p.measured) {
          for (int k = 0; k < 4; ++k) row.emplace_back("—", "num");
          continue;
        }
        row.emplace_back(formatFixed(p.timeUs, 2), "num");
        row.emplace_back(formatFixed(p.algBw, 2), "num");  // nccl-tests' precision (%6.2f)
        row.emplace_back(formatFixed(p.busBw, 2), "num");
        row.emplace_back(p.wrong < 0 ? std::string("N/A") : std::to_string(p.wrong),
                         p.wrong > 0 ? "num fail" : "num");
      }
      if (anyHardware) {
        RowBound b = runs[i].sweep && !runs[i].sweep->metadata.hardware.empty()
                         ? rowBound(*m, runs[i].sweep->metadata)
                         : RowBound{};
        if (b.known() && b.busBw > 0)
          row.emplace_back(fmt::format("{:.0f}% of {} GB/s", b.fraction * 100, formatNumber(b.gbps, 3)),
                           "num");
        else
          row.emplace_back("—", "num");
      }
      table.push_back(std::move(row));
    }
  }
  page.table(header, table);

  // Stragglers: the spread between the slowest and fastest rank per size, the slowest rank, and
  // every rank's time at the largest size. Data without per-rank times (nccl-tests text, one rank) or
  // per-iteration statistics says so instead of drawing zeros.
  page.heading("Stragglers");
  bool anyRanks = false, anyIter = false;
  for (const auto& rows : rowsOf) {
    for (const auto* m : rows) {
      for (int place = 0; place < 2; ++place) {
        const PlaceResult& p = placeOf(*m, place);
        anyRanks = anyRanks || (p.measured && !p.ranks.empty());
        anyIter = anyIter || (p.measured && p.iter.n > 0);
      }
    }
  }
  if (!anyRanks) {
    page.paragraph(
        "Per-rank times: not in this data. These results carry one time per size (nccl-tests text "
        "output, or a run whose ranks were not recorded), so there is no slowest rank or spread to show.",
        "muted nodata");
  } else {
    page.chart({{"kind", "size"},
                {"title", fmt::format("{} on {}: slowest vs fastest rank", collective, backend)},
                {"xTitle", "size"},
                {"yTitle", "spread (%)"},
                {"yPercent", true},
                {"series", spread}});
  }
  if (!anyIter) {
    page.paragraph(
        "Per-iteration percentiles: not in this data. These results carry only the mean time per size "
        "(nccl-tests text output keeps no per-iteration times; its -J format 3 does).",
        "muted nodata");
  } else {
    page.heading("Per-iteration times: mean and tails");
    tailsChart(page, runs, names, rowsOf, variants, collective, backend);
  }
  std::vector<std::string> sh;
  if (several) sh.push_back("run");
  for (const char* h :
       {"size", "type", "op", "place", "slowest rank", "spread (%)", "iter mean (µs)", "iter p50 (µs)",
        "iter p90 (µs)", "iter p99 (µs)", "iter p99.9 (µs)", "iter max (µs)", "iter cv (%)"}) {
    sh.push_back(h);
  }
  std::vector<Row> srows;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    for (const auto* m : rowsOf[i]) {
      for (int place = 0; place < 2; ++place) {
        const PlaceResult& p = placeOf(*m, place);
        if (!p.measured) continue;
        Row row;
        if (several) row.emplace_back(names[i]);
        row.emplace_back(formatBytes(static_cast<double>(m->bytes)), "num");
        row.emplace_back(m->dtype);
        row.emplace_back(m->op);
        row.emplace_back(placeName(place));
        const bool ranks = !p.ranks.empty(), iter = p.iter.n > 0;
        auto orDash = [](bool known, std::optional<double> v, int decimals) {
          return Cell(known && v ? formatFixed(*v, decimals) : std::string("—"), "num");
        };
        row.emplace_back(ranks ? std::to_string(p.slowestRank) : std::string("—"), "num");
        row.push_back(orDash(ranks, p.spreadPct, 1));
        row.push_back(orDash(iter, p.iter.avgUs, 2));
        row.push_back(orDash(iter, p.iter.p50Us, 2));
        row.push_back(orDash(iter, p.iter.p90Us, 2));  // unknown (—) in files of schema 1.1 and older
        row.push_back(orDash(iter, p.iter.p99Us, 2));
        row.push_back(orDash(iter, p.iter.p999Us, 2));
        row.push_back(orDash(iter, p.iter.maxUs, 2));
        row.push_back(orDash(iter, p.iter.cvPct, 1));
        srows.push_back(std::move(row));
      }
    }
  }
  if (anyRanks || anyIter) page.table(sh, srows);

  // Per-rank time at the largest size of each run (out-of-place when measured), as bars.
  int maxRanks = 0;
  json perRank = json::array();
  std::string sizes;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (rowsOf[i].empty()) continue;
    const SweepMeasurement* last = rowsOf[i].back();
    int place = last->outOfPlace.measured ? 0 : 1;
    const PlaceResult& p = placeOf(*last, place);
    if (p.ranks.empty()) continue;
    json values = json::array();
    for (const auto& r : p.ranks) {
      if (r.rank >= static_cast<int>(values.size())) values.get_ref<json::array_t&>().resize(r.rank + 1);
      values[r.rank] = r.timeUs;
      maxRanks = std::max(maxRanks, r.rank + 1);
    }
    std::string label =
        fmt::format("{} {} {}", formatBytes(static_cast<double>(last->bytes)), last->dtype, placeName(place));
    if (several) label = fmt::format("{}: {}", names[i], label);
    perRank.push_back({{"label", label}, {"values", values}, {"color", static_cast<int>(i)}});
  }
  if (!perRank.empty()) {
    json labels = json::array();
    for (int r = 0; r < maxRanks; ++r) labels.push_back(fmt::format("rank {}", r));
    for (auto& s : perRank) s["values"].get_ref<json::array_t&>().resize(maxRanks);
    page.chart({{"kind", "category"},
                {"bar", true},
                {"title",
                 fmt::format("{} on {}: time per op of each rank at the largest size", collective, backend)},
                {"yTitle", "time per op (µs)"},
                {"labels", labels},
                {"series", perRank}});
  }
  // Every rank at every size: ranks down, sizes across, one folded table per run and place.
  for (std::size_t i = 0; i < runs.size(); ++i) {
    for (int place = 0; place < 2; ++place) {
      std::vector<const SweepMeasurement*> cols;
      int n = 0;
      for (const auto* m : rowsOf[i]) {
        const PlaceResult& p = placeOf(*m, place);
        if (!p.measured || p.ranks.empty()) continue;
        cols.push_back(m);
        for (const auto& r : p.ranks) n = std::max(n, r.rank + 1);
      }
      if (cols.empty()) continue;
      std::vector<std::string> h{"rank"};
      for (const auto* m : cols) {
        h.push_back(manyVariants ? fmt::format("{} {}", formatBytes(static_cast<double>(m->bytes)), m->dtype)
                                 : formatBytes(static_cast<double>(m->bytes)));
      }
      std::vector<Row> prow(n);
      for (int r = 0; r < n; ++r) {
        prow[r].emplace_back(std::to_string(r), "num");
        prow[r].resize(cols.size() + 1, Cell("—", "num"));
      }
      for (std::size_t c = 0; c < cols.size(); ++c) {
        const PlaceResult& p = placeOf(*cols[c], place);
        for (const auto& r : p.ranks) {
          if (r.rank < 0 || r.rank >= n) continue;
          bool slowest = r.rank == p.slowestRank && p.ranks.size() > 1;
          prow[r.rank][c + 1] = Cell(formatFixed(r.timeUs, 2), slowest ? "num warn" : "num");
        }
      }
      page.foldedTable(
          fmt::format("Time per op of every rank (µs), {}{}; the slowest rank of each size highlighted",
                      placeName(place), several ? ", " + names[i] : std::string()),
          h, prow);
    }
  }
}

// One collective on several backends (one run with --backend gloo,mpi, or runs of different backends):
// busbw and latency of every run and backend in the same two charts, so they can be read side by side.
void backendsSection(PageBuilder& page, const std::vector<RunFile>& runs,
                     const std::vector<std::string>& names, const std::string& collective,
                     const std::vector<std::string>& backends) {
  bool several = runs.size() > 1;
  page.section(fmt::format("{}: backends side by side", collective));
  page.paragraph(
      fmt::format("{} on {}; out-of-place solid, in-place dashed; one colour per run and backend. The "
                  "per-backend sections hold the tables.",
                  collective, joinStrings(backends)),
      "muted");
  json bw = json::array(), lat = json::array();
  int color = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].sweep) continue;
    for (const auto& backend : backends) {
      std::map<std::string, std::vector<const SweepMeasurement*>> byVariant;
      for (const auto& m : runs[i].sweep->results) {
        if (m.collective == collective && m.backend == backend) byVariant[m.dtype + " " + m.op].push_back(&m);
      }
      for (auto& [variant, rows] : byVariant) {
        std::stable_sort(rows.begin(), rows.end(), [](const SweepMeasurement* a, const SweepMeasurement* b) {
          return a->bytes < b->bytes;
        });
        for (int place = 0; place < 2; ++place) {
          json b = json::array(), l = json::array();
          for (const auto* m : rows) {
            const PlaceResult& p = placeOf(*m, place);
            if (!p.measured) continue;
            b.push_back({m->bytes, p.busBw});
            l.push_back({m->bytes, p.timeUs});
          }
          if (b.empty()) continue;
          std::string label =
              fmt::format("{}{} {}", backend, byVariant.size() > 1 ? " " + variant : "", placeName(place));
          if (several) label = names[i] + ": " + label;
          bw.push_back({{"label", label}, {"points", b}, {"dashed", place == 1}, {"color", color}});
          lat.push_back({{"label", label}, {"points", l}, {"dashed", place == 1}, {"color", color}});
        }
        ++color;
      }
    }
  }
  page.chart({{"kind", "size"},
              {"title", fmt::format("{} busbw by backend", collective)},
              {"xTitle", "size"},
              {"yTitle", "busbw (GB/s)"},
              {"series", bw}});
  page.chart({{"kind", "size"},
              {"title", fmt::format("{} latency by backend", collective)},
              {"xTitle", "size"},
              {"yTitle", "time per op (µs)"},
              {"yLog", true},
              {"series", lat}});
}

// ---- training ----

// The plain allreduce hook is DDP's default; only another hook is worth naming in a label.
bool defaultHook(const std::string& hook) { return hook.empty() || hook == "none" || hook == "allreduce"; }

std::string capText(double mb) { return fmt::format("{} MB", formatNumber(mb)); }

void trainSection(PageBuilder& page, const std::vector<RunFile>& runs,
                  const std::vector<std::string>& names) {
  struct Config {
    std::size_t run;
    const TrainRunRecord* rec;
  };
  std::vector<Config> configs;
  std::set<int> worlds;
  std::set<std::string> backends, models;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].train) continue;
    for (const auto& r : *runs[i].train) {
      configs.push_back({i, &r});
      worlds.insert(r.worldSize);
      backends.insert(r.backend);
      models.insert(r.model);
    }
  }
  if (configs.empty()) return;
  bool several = runs.size() > 1;
  int trainRuns = 0;
  for (const auto& r : runs) trainRuns += r.train ? 1 : 0;
  bool severalTrain = trainRuns > 1;
  auto configName = [&](const Config& c) {
    const auto& r = *c.rec;
    std::string s;
    if (severalTrain) s += names[c.run] + " · ";
    if (models.size() > 1) s += r.model + " · ";
    if (backends.size() > 1) s += r.backend + " · ";
    if (worlds.size() > 1) s += fmt::format("n={} · ", r.worldSize);
    s += fmt::format("{} · {}", capText(r.bucketCapMb), r.overlap ? "overlap" : "no overlap");
    if (!defaultHook(r.commHook)) s += " · " + r.commHook;
    if (r.dtype != "f32") s += " · " + r.dtype;
    return s;
  };

  page.section("Training step");
  page.paragraph(
      "Mean time per optimizer step, split into forward, backward compute, exposed communication (what "
      "the step waited for after backward), optimizer and the rest. Overlap efficiency = 1 - exposed / "
      "busy communication time: the share of communication hidden behind backward compute.",
      "muted");
  json labels = json::array();
  json parts[5] = {json::array(), json::array(), json::array(), json::array(), json::array()};
  for (const auto& c : configs) {
    const auto& r = *c.rec;
    labels.push_back(configName(c));
    double known = r.forwardMs.mean + r.backwardComputeMs.mean + r.exposedCommMs.mean + r.optimizerMs.mean;
    parts[0].push_back(r.forwardMs.mean);
    parts[1].push_back(r.backwardComputeMs.mean);
    parts[2].push_back(r.exposedCommMs.mean);
    parts[3].push_back(r.optimizerMs.mean);
    parts[4].push_back(std::max(0.0, r.stepMs.mean - known));
  }
  static const char* kParts[] = {"forward", "backward compute", "exposed comm", "optimizer", "other"};
  json stack = json::array();
  for (int k = 0; k < 5; ++k)
    stack.push_back({{"label", kParts[k]}, {"values", parts[k]}, {"color", k}, {"stack", "step"}});
  page.chart({{"kind", "category"},
              {"bar", true},
              {"stacked", true},
              {"title", "Step time split (mean per step)"},
              {"yTitle", "ms per step"},
              {"labels", labels},
              {"series", stack}});

  // Overlap efficiency and step time against the bucket cap, one line per (run, overlap, hook, world).
  std::set<double> caps;
  for (const auto& c : configs) caps.insert(c.rec->bucketCapMb);
  json capLabels = json::array();
  for (double cap : caps) capLabels.push_back(capText(cap));
  std::map<std::string, std::pair<json, json>> lines;  // name -> (efficiency %, step p50)
  std::vector<std::string> order;
  for (const auto& c : configs) {
    const auto& r = *c.rec;
    std::string name;
    if (severalTrain) name += names[c.run] + " · ";
    if (models.size() > 1) name += r.model + " · ";
    if (backends.size() > 1) name += r.backend + " · ";
    if (worlds.size() > 1) name += fmt::format("n={} · ", r.worldSize);
    name += r.overlap ? "overlap" : "no overlap";
    if (!defaultHook(r.commHook)) name += " · " + r.commHook;
    if (r.dtype != "f32") name += " · " + r.dtype;
    if (!lines.count(name)) {
      order.push_back(name);
      lines[name] = {json(std::vector<json>(caps.size())), json(std::vector<json>(caps.size()))};
    }
    std::size_t idx = std::distance(caps.begin(), caps.find(r.bucketCapMb));
    lines[name].first[idx] = r.overlapEfficiency * 100.0;
    lines[name].second[idx] = r.stepMs.p50;
  }
  json eff = json::array(), step = json::array();
  int color = 0;
  for (const auto& name : order) {
    eff.push_back({{"label", name}, {"values", lines[name].first}, {"color", color}});
    step.push_back({{"label", name}, {"values", lines[name].second}, {"color", color}});
    ++color;
  }
  page.chart({{"kind", "category"},
              {"title", "Overlap efficiency per bucket size"},
              {"xTitle", "bucket cap"},
              {"yTitle", "communication hidden (%)"},
              {"yPercent", true},
              {"labels", capLabels},
              {"series", eff}});
  page.chart({{"kind", "category"},
              {"title", "Step time (p50) per bucket size"},
              {"xTitle", "bucket cap"},
              {"yTitle", "ms per step"},
              {"labels", capLabels},
              {"series", step}});

  std::vector<Row> rows;
  for (const auto& c : configs) {
    const auto& r = *c.rec;
    Row row;
    if (several) row.emplace_back(names[c.run]);
    row.emplace_back(r.model);
    row.emplace_back(r.backend);
    row.emplace_back(std::to_string(r.worldSize), "num");
    row.emplace_back(capText(r.bucketCapMb), "num");
    row.emplace_back(r.overlap ? "yes" : "no");
    row.emplace_back(r.commHook);
    row.emplace_back(std::to_string(r.buckets), "num");
    for (const Percentiles* p : {&r.stepMs}) {
      row.emplace_back(formatFixed(p->p50, 3), "num");
      row.emplace_back(formatFixed(p->p90, 3), "num");
      row.emplace_back(formatFixed(p->p99, 3), "num");
    }
    for (const Percentiles* p :
         {&r.forwardMs, &r.backwardComputeMs, &r.backwardCommMs, &r.exposedCommMs, &r.optimizerMs}) {
      row.emplace_back(formatFixed(p->mean, 3), "num");
    }
    row.emplace_back(formatFixed(r.overlapEfficiency * 100.0, 1), "num");
    row.emplace_back(formatFixed(r.hiddenCommMs, 3), "num");
    row.emplace_back(formatNumber(r.samplesPerSec), "num");
    row.emplace_back(fmt::format("{} → {}", formatNumber(r.lossStart), formatNumber(r.lossEnd)), "num");
    rows.push_back(std::move(row));
  }
  std::vector<std::string> header;
  if (several) header.push_back("run");
  for (const char* h :
       {"model", "backend", "ranks", "bucket cap", "overlap", "hook", "buckets", "step p50 (ms)", "step p90",
        "step p99", "forward (mean)", "bwd compute", "bwd comm", "exposed comm", "optimizer",
        "overlap eff. (%)", "hidden comm (ms)", "samples/s", "loss"}) {
    header.push_back(h);
  }
  page.table(header, rows);
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
  PageBuilder page(title, "report");

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
  std::vector<std::pair<std::string, std::string>> keys;  // (collective, backend), first-seen order
  for (const auto& r : runs) {
    if (!r.sweep) continue;
    for (const auto& m : r.sweep->results) {
      std::pair<std::string, std::string> k{m.collective, m.backend};
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
  }
  std::vector<std::string> collectives;
  for (const auto& k : keys) {
    if (std::find(collectives.begin(), collectives.end(), k.first) == collectives.end())
      collectives.push_back(k.first);
  }
  for (const auto& coll : collectives) {
    std::vector<std::string> backends;
    for (const auto& k : keys) {
      if (k.first == coll) backends.push_back(k.second);
    }
    if (backends.size() > 1) backendsSection(page, runs, names, coll, backends);
    for (const auto& backend : backends) sweepSection(page, runs, names, coll, backend);
  }
  trainSection(page, runs, names);
  return page.render();
}

void writeRunReport(const std::vector<RunFile>& runs, const std::string& path) {
  writeTextAtomic(path, renderRunReport(runs));
}

}  // namespace ds::report::html
