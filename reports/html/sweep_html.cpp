#include "reports/html/sweep_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "reports/html/join.h"
#include "reports/sweep/expected.h"

namespace ds::report::html {

using nlohmann::json;

namespace {

struct Variant {
  std::string dtype, op;
  bool operator<(const Variant& o) const { return std::tie(dtype, op) < std::tie(o.dtype, o.op); }
};

const PlaceResult& placeOf(const SweepMeasurement& m, int place) {
  return place == 0 ? m.outOfPlace : m.inPlace;
}
const char* placeName(int place) { return place == 0 ? "out-of-place" : "in-place"; }

// What a section (one collective on one backend) draws from: each run's rows of it, in size order, and
// the (dtype, op) variants among them.
struct SectionData {
  const std::vector<RunFile>& runs;
  const std::vector<std::string>& names;
  const std::string& collective;
  const std::string& backend;
  std::vector<std::vector<const SweepMeasurement*>> rowsOf;
  std::set<Variant> variants;
  bool several = false;  // several runs on the page: rows and series name their run
  bool manyVariants() const { return variants.size() > 1; }
};

SectionData sectionData(const std::vector<RunFile>& runs, const std::vector<std::string>& names,
                        const std::string& collective, const std::string& backend) {
  SectionData d{runs,
                names,
                collective,
                backend,
                std::vector<std::vector<const SweepMeasurement*>>(runs.size()),
                {},
                runs.size() > 1};
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].sweep) continue;
    for (const auto& m : runs[i].sweep->results) {
      if (m.collective != collective || m.backend != backend) continue;
      d.rowsOf[i].push_back(&m);
      d.variants.insert({m.dtype, m.op});
    }
    std::stable_sort(
        d.rowsOf[i].begin(), d.rowsOf[i].end(),
        [](const SweepMeasurement* a, const SweepMeasurement* b) { return a->bytes < b->bytes; });
  }
  return d;
}

// The section's title and how to read it: the bus factor and world size of the first run that has rows.
void sectionIntro(PageBuilder& page, const SectionData& d) {
  double busFactor = 0;
  int world = 0;
  for (const auto& rows : d.rowsOf) {
    if (!rows.empty()) {
      busFactor = rows.front()->busFactor;
      world = rows.front()->worldSize;
      break;
    }
  }
  page.section(fmt::format("{} on {}", d.collective, d.backend));
  page.paragraph(
      fmt::format("busbw = algbw x {} ({} ranks); GB/s with GB = 1e9 bytes. Time is per operation. Sizes "
                  "on a log-2 axis; in-place dashed.",
                  formatNumber(busFactor), world),
      "muted");
}

// The chart series against size: busbw, latency and the rank spread, one per run, variant and place
// (one colour per run and variant, in-place dashed).
struct SizeSeries {
  json bw = json::array(), lat = json::array(), spread = json::array();
};

SizeSeries sizeSeries(const SectionData& d) {
  SizeSeries out;
  int color = 0;
  for (std::size_t i = 0; i < d.runs.size(); ++i) {
    for (const auto& v : d.variants) {
      std::vector<const SweepMeasurement*> rows;
      for (const auto* m : d.rowsOf[i]) {
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
        if (d.manyVariants()) label = fmt::format("{} {} {}", v.dtype, v.op, label);
        if (d.several) label = fmt::format("{}: {}", d.names[i], label);
        for (auto [arr, pts] :
             {std::pair{&out.bw, &b}, std::pair{&out.lat, &l}, std::pair{&out.spread, &s}}) {
          if (pts->empty()) continue;
          arr->push_back({{"label", label}, {"points", *pts}, {"dashed", place == 1}, {"color", color}});
        }
      }
      ++color;
    }
  }
  return out;
}

// The hardware bound of the section (the same for every size of a run; expected.h), said once per run.
// Returns whether any run knows its hardware (then the raw table has a column for the bound).
bool boundParagraphs(PageBuilder& page, const SectionData& d) {
  bool anyHardware = false;
  for (std::size_t i = 0; i < d.runs.size(); ++i) {
    const RunFile& run = d.runs[i];
    if (!run.sweep || run.sweep->metadata.hardware.empty() || d.rowsOf[i].empty()) continue;
    anyHardware = true;
    RowBound b = rowBound(*d.rowsOf[i].back(), run.sweep->metadata);
    std::string who = d.several ? d.names[i] + ": " : "";
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
  return anyHardware;
}

// A row's fraction of its run's hardware bound; — when the run has no hardware or the bound is unknown.
Cell boundCell(const RunFile& run, const SweepMeasurement& m) {
  RowBound b =
      run.sweep && !run.sweep->metadata.hardware.empty() ? rowBound(m, run.sweep->metadata) : RowBound{};
  if (b.known() && b.busBw > 0)
    return Cell(fmt::format("{:.0f}% of {} GB/s", b.fraction * 100, formatNumber(b.gbps, 3)), "num");
  return Cell("—", "num");
}

// The raw table: one row per size and variant, out-of-place then in-place, as nccl-tests prints them.
void rawTable(PageBuilder& page, const SectionData& d, bool anyHardware) {
  std::vector<std::string> header;
  if (d.several) header.push_back("run");
  for (const char* h : {"size", "bytes", "count", "type", "op", "root"}) header.push_back(h);
  for (const char* p : {"oop", "ip"}) {
    for (const char* h : {"time (µs)", "algbw (GB/s)", "busbw (GB/s)", "#wrong"})
      header.push_back(fmt::format("{} {}", p, h));
  }
  if (anyHardware) header.push_back("busbw / bound");
  std::vector<Row> table;
  for (std::size_t i = 0; i < d.runs.size(); ++i) {
    for (const auto* m : d.rowsOf[i]) {
      Row row;
      if (d.several) row.emplace_back(d.names[i]);
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
      if (anyHardware) row.push_back(boundCell(d.runs[i], *m));
      table.push_back(std::move(row));
    }
  }
  page.table(header, table);
}

// The tails chart of a sweep section: time per op by size for the mean, p50, p99 and p99.9 of the
// per-iteration times (each iteration's slowest rank), log y: where the mean hides the stalls a step at
// scale waits for. One colour per statistic (per run and variant too when there are several), in-place
// dashed. Tails a file does not have (p99.9 before schema 1.2) are left out, and said so.
void tailsChart(PageBuilder& page, const SectionData& d) {
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
  json series = json::array();
  bool p999Missing = false;
  int group = 0;
  for (std::size_t i = 0; i < d.runs.size(); ++i) {
    for (const auto& v : d.variants) {
      bool any = false;
      for (int place = 0; place < 2; ++place) {
        for (std::size_t k = 0; k < std::size(kStats); ++k) {
          json pts = json::array();
          for (const auto* m : d.rowsOf[i]) {
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
          if (d.manyVariants()) label = fmt::format("{} {} {}", v.dtype, v.op, label);
          if (d.several) label = fmt::format("{}: {}", d.names[i], label);
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
       {"title", fmt::format("{} on {}: mean and tails of the per-iteration time", d.collective, d.backend)},
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

// One row per size, variant and place measured: the slowest rank, the spread and the per-iteration
// statistics, — where the data has none.
std::vector<Row> stragglerRows(const SectionData& d) {
  std::vector<Row> srows;
  for (std::size_t i = 0; i < d.runs.size(); ++i) {
    for (const auto* m : d.rowsOf[i]) {
      for (int place = 0; place < 2; ++place) {
        const PlaceResult& p = placeOf(*m, place);
        if (!p.measured) continue;
        Row row;
        if (d.several) row.emplace_back(d.names[i]);
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
  return srows;
}

// Stragglers: the spread between the slowest and fastest rank per size, the per-iteration tails, and
// their table. Data without per-rank times (nccl-tests text, one rank) or per-iteration statistics says
// so instead of drawing zeros.
void stragglers(PageBuilder& page, const SectionData& d, const json& spread) {
  page.heading("Stragglers");
  bool anyRanks = false, anyIter = false;
  for (const auto& rows : d.rowsOf) {
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
                {"title", fmt::format("{} on {}: slowest vs fastest rank", d.collective, d.backend)},
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
    tailsChart(page, d);
  }
  std::vector<std::string> sh;
  if (d.several) sh.push_back("run");
  for (const char* h :
       {"size", "type", "op", "place", "slowest rank", "spread (%)", "iter mean (µs)", "iter p50 (µs)",
        "iter p90 (µs)", "iter p99 (µs)", "iter p99.9 (µs)", "iter max (µs)", "iter cv (%)"}) {
    sh.push_back(h);
  }
  if (anyRanks || anyIter) page.table(sh, stragglerRows(d));
}

// Per-rank time at the largest size of each run (out-of-place when measured), as bars.
void largestSizeChart(PageBuilder& page, const SectionData& d) {
  int maxRanks = 0;
  json perRank = json::array();
  for (std::size_t i = 0; i < d.runs.size(); ++i) {
    if (d.rowsOf[i].empty()) continue;
    const SweepMeasurement* last = d.rowsOf[i].back();
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
    if (d.several) label = fmt::format("{}: {}", d.names[i], label);
    perRank.push_back({{"label", label}, {"values", values}, {"color", static_cast<int>(i)}});
  }
  if (perRank.empty()) return;
  json labels = json::array();
  for (int r = 0; r < maxRanks; ++r) labels.push_back(fmt::format("rank {}", r));
  for (auto& s : perRank) s["values"].get_ref<json::array_t&>().resize(maxRanks);
  page.chart({{"kind", "category"},
              {"bar", true},
              {"title", fmt::format("{} on {}: time per op of each rank at the largest size", d.collective,
                                    d.backend)},
              {"yTitle", "time per op (µs)"},
              {"labels", labels},
              {"series", perRank}});
}

// Every rank at every size of run `i` and `place`: ranks down, sizes across, folded; the slowest rank of
// each size highlighted. Nothing when no size of it has per-rank times.
void everyRankTable(PageBuilder& page, const SectionData& d, std::size_t i, int place) {
  std::vector<const SweepMeasurement*> cols;
  int n = 0;
  for (const auto* m : d.rowsOf[i]) {
    const PlaceResult& p = placeOf(*m, place);
    if (!p.measured || p.ranks.empty()) continue;
    cols.push_back(m);
    for (const auto& r : p.ranks) n = std::max(n, r.rank + 1);
  }
  if (cols.empty()) return;
  std::vector<std::string> h{"rank"};
  for (const auto* m : cols) {
    h.push_back(d.manyVariants() ? fmt::format("{} {}", formatBytes(static_cast<double>(m->bytes)), m->dtype)
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
                  placeName(place), d.several ? ", " + d.names[i] : std::string()),
      h, prow);
}

// One collective on one backend, every run that has it overlaid.
void sweepSection(PageBuilder& page, const std::vector<RunFile>& runs, const std::vector<std::string>& names,
                  const std::string& collective, const std::string& backend) {
  const SectionData d = sectionData(runs, names, collective, backend);
  sectionIntro(page, d);
  const SizeSeries series = sizeSeries(d);
  if (series.bw.empty()) {
    page.paragraph("No size was measured for this collective.", "warn");
    return;
  }
  page.chart({{"kind", "size"},
              {"title", fmt::format("{} busbw on {}", collective, backend)},
              {"xTitle", "size"},
              {"yTitle", "busbw (GB/s)"},
              {"series", series.bw}});
  page.chart({{"kind", "size"},
              {"title", fmt::format("{} latency on {}", collective, backend)},
              {"xTitle", "size"},
              {"yTitle", "time per op (µs)"},
              {"yLog", true},
              {"series", series.lat}});
  const bool anyHardware = boundParagraphs(page, d);
  rawTable(page, d, anyHardware);
  stragglers(page, d, series.spread);
  largestSizeChart(page, d);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    for (int place = 0; place < 2; ++place) everyRankTable(page, d, i, place);
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

}  // namespace

void sweepSections(PageBuilder& page, const std::vector<RunFile>& runs,
                   const std::vector<std::string>& names) {
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
}

}  // namespace ds::report::html
