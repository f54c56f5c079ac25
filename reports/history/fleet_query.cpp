// queryFleet: the per-host samples of a few patterns as a hosts x time grid relative to the fleet,
// each host's drift and checks, and the quarantine list (the rules are in fleet_data.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "engine/common/error.h"
#include "engine/common/median.h"
#include "reports/diag/hostlist.h"
#include "reports/history/dashboard_data.h"
#include "reports/history/fleet_data.h"
#include "reports/history/history_schema.h"
#include "reports/history/sqlite_db.h"

namespace ds::report::history {

namespace {

constexpr double kMinute = 60e3, kHour = 60 * kMinute, kDay = 24 * kHour;
// Column widths: round spans, so a column is "a night" or "a week" to the reader.
const double kWidths[] = {kMinute,   5 * kMinute, 15 * kMinute, 30 * kMinute, kHour,     2 * kHour,
                          3 * kHour, 6 * kHour,   12 * kHour,   kDay,         2 * kDay,  7 * kDay,
                          14 * kDay, 28 * kDay,   91 * kDay,    182 * kDay,   364 * kDay};

struct PatternRow {
  std::int64_t id = 0;
  std::string key, metric, collective, backend, dtype, op, place, unit;
  std::int64_t bytes = 0;
  int world = 0;
  bool higherIsBetter = true;
};

std::string titleOf(const PatternRow& p) {
  if (p.metric == "busbw")
    return fmt::format("{} busbw, {}, {} {}{}{}, {} ranks", p.collective,
                       sizeText(static_cast<std::size_t>(p.bytes)), p.backend, p.dtype,
                       p.op.empty() || p.op == "none" ? "" : " " + p.op, p.place == "in" ? ", in place" : "",
                       p.world);
  if (p.metric == "link_bw")
    return fmt::format("link bandwidth (median of the host's fleet pairs), {}, {} ranks", p.backend, p.world);
  if (p.metric == "link_latency")
    return fmt::format("link latency (median of the host's fleet pairs), {}, {} ranks", p.backend, p.world);
  return p.key;
}

// One sample as read for the grid.
struct Point {
  int host;
  int run;
  int sku;
  double ms;
  double value;
};

// The first and last quarter's medians of a series (oldest first); false with too few points.
bool quarterMedians(const std::vector<double>& v, double& first, double& last) {
  if (v.size() < static_cast<std::size_t>(kMinDriftPoints)) return false;
  std::size_t q = std::max<std::size_t>(1, v.size() / 4);
  first = median({v.begin(), v.begin() + static_cast<std::ptrdiff_t>(q)});
  last = median({v.end() - static_cast<std::ptrdiff_t>(q), v.end()});
  return first > 0;
}

// The start of the buckets within the period: in the middle of the largest gap between the runs'
// times within it (circularly), so that the runs of one night share a bucket.
double phaseOf(const std::vector<double>& runTimes, double width) {
  std::vector<double> mod;
  mod.reserve(runTimes.size());
  for (double t : runTimes) mod.push_back(t - std::floor(t / width) * width);
  std::sort(mod.begin(), mod.end());
  if (mod.empty()) return 0;
  double bestGap = mod.front() + width - mod.back(), at = mod.back();
  for (std::size_t i = 1; i < mod.size(); ++i) {
    if (mod[i] - mod[i - 1] > bestGap) {
      bestGap = mod[i] - mod[i - 1];
      at = mod[i - 1];
    }
  }
  double phase = at + bestGap / 2;
  return phase - std::floor(phase / width) * width;
}

}  // namespace

std::uint8_t relativeCell(double value, double median) {
  if (!(median > 0) || !std::isfinite(value) || !std::isfinite(median)) return 255;
  double pct = std::round(value / median * 100);
  if (!(pct >= 0)) return 0;
  return static_cast<std::uint8_t>(std::min(254.0, pct));
}

void checkFleetOptions(const FleetOptions& o) {
  if (o.k < 1 || o.n < 1 || o.k > o.n)
    throw ConfigError(
        fmt::format("dashboard --fleet: --quarantine-k {} of --quarantine-n {} does not fit; give 1 <= k <= "
                    "n (e.g. 2 of 3)",
                    o.k, o.n));
  if (o.maxColumns < 2 || o.maxColumns > 5000)
    throw ConfigError(fmt::format("dashboard --fleet: --max-columns {} must be 2..5000", o.maxColumns));
  if (o.maxPatterns < 1 || o.maxPatterns > 64)
    throw ConfigError(
        fmt::format("dashboard --fleet: --max-patterns {} must be 1..64 (each pattern adds a grid of "
                    "hosts x columns to the page)",
                    o.maxPatterns));
  for (const auto* t : {&o.since, &o.until}) {
    if (t->empty()) continue;
    bool ok = t->size() >= 10 && (*t)[4] == '-' && (*t)[7] == '-' && (t->size() == 10 || (*t)[10] == 'T');
    if (!ok)
      throw ConfigError(
          fmt::format("dashboard --fleet: the time '{}' is not ISO 8601 (\"2026-03-01\" or "
                      "\"2026-03-01T02:00:00Z\", UTC)",
                      *t));
  }
}

std::string quarantineExcludeFile(const FleetData& data, std::vector<std::string>* unlisted) {
  std::vector<std::string> listable;
  for (const auto& q : data.quarantine) {
    if (q.host.empty() || q.host.find_first_of(",[] \t\r\n") != std::string::npos) {
      if (unlisted) unlisted->push_back(q.host);
    } else {
      listable.push_back(q.host);
    }
  }
  return listable.empty() ? std::string() : slurmHostlist(listable) + "\n";
}

FleetData queryFleet(const std::string& dbPath, const FleetOptions& options) {
  checkFleetOptions(options);
  Database db(dbPath, Database::Mode::kExisting, 30000);
  prepareForRead(db);
  db.exec("BEGIN");  // one snapshot, as a concurrent ingest commits
  FleetData d;
  d.dbPath = dbPath;
  d.options = options;
  {
    Statement st(db, "SELECT DISTINCT label FROM runs ORDER BY label");
    while (st.step()) d.labels.push_back(st.text(0));
  }

  // The patterns that have per-host samples (one index probe each).
  std::vector<PatternRow> candidates;
  {
    Statement st(
        db,
        "SELECT pattern_id, pattern_key, metric, collective, backend, dtype, op, bytes, place, world_size, "
        "unit, higher_is_better FROM patterns p WHERE EXISTS (SELECT 1 FROM samples s WHERE s.pattern_id = "
        "p.pattern_id AND s.scope = 'host')");
    while (st.step()) {
      PatternRow p;
      p.id = st.integer(0);
      p.key = st.text(1);
      p.metric = st.text(2);
      p.collective = st.text(3);
      p.backend = st.text(4);
      p.dtype = st.text(5);
      p.op = st.text(6);
      p.bytes = st.integer(7);
      p.place = st.text(8);
      p.world = static_cast<int>(st.integer(9));
      p.unit = st.text(10);
      p.higherIsBetter = st.integer(11) != 0;
      candidates.push_back(std::move(p));
    }
    Statement other(
        db,
        "SELECT scope, count(*) FROM samples WHERE pattern_id = ?1 AND scope IN ('job', 'link') GROUP "
        "BY scope");
    Statement ids(db, "SELECT pattern_id FROM patterns");
    while (ids.step()) {
      other.bind(1, ids.integer(0));
      while (other.step())
        (other.text(0) == "job" ? d.jobSamples : d.linkSamples) += static_cast<std::size_t>(other.integer(1));
      other.reset();
    }
  }
  // Largest sizes first: verdicts and the eye are on the large, fixed sizes.
  std::sort(candidates.begin(), candidates.end(), [](const PatternRow& a, const PatternRow& b) {
    return std::tie(b.bytes, a.metric, a.collective, a.backend, a.dtype, a.op, a.place, a.world, a.key) <
           std::tie(a.bytes, b.metric, b.collective, b.backend, b.dtype, b.op, b.place, b.world, b.key);
  });
  std::vector<PatternRow> shown;
  if (!options.patterns.empty()) {
    for (const auto& key : options.patterns) {
      auto it = std::find_if(candidates.begin(), candidates.end(),
                             [&](const PatternRow& p) { return p.key == key; });
      if (it == candidates.end()) {
        std::string known;
        for (std::size_t i = 0; i < candidates.size() && i < 20; ++i) known += "\n  " + candidates[i].key;
        throw ConfigError(
            fmt::format("dashboard --fleet --pattern '{}': the history '{}' has no per-host samples of "
                        "that pattern; the patterns it has{}:{}",
                        key, dbPath, candidates.size() > 20 ? " (the first 20)" : "",
                        known.empty() ? std::string(" none") : known));
      }
      if (std::none_of(shown.begin(), shown.end(), [&](const PatternRow& p) { return p.key == key; }))
        shown.push_back(*it);
    }
    for (const auto& p : candidates)
      if (std::none_of(shown.begin(), shown.end(), [&](const PatternRow& s) { return s.key == p.key; }))
        d.leftOut.push_back(p.key);
  } else {
    for (const auto& p : candidates) {
      bool metricOk = options.metrics.empty() || std::find(options.metrics.begin(), options.metrics.end(),
                                                           p.metric) != options.metrics.end();
      if (metricOk && shown.size() < options.maxPatterns)
        shown.push_back(p);
      else
        d.leftOut.push_back(p.key);
    }
  }

  // Every shown sample, with its run's time in ms.
  std::unordered_map<std::string, int> hostIndex, runIndex;
  std::vector<std::string> hostNames;
  std::vector<double> runMs;
  std::vector<std::string> runTime;
  std::map<std::int64_t, int> skuIndex;  // sku_id -> index in d.skus (after sorting)
  std::vector<std::vector<Point>> points(shown.size());
  {
    std::string where = "s.pattern_id = ?1 AND s.scope = 'host'";
    int next = 2;
    if (!options.since.empty()) where += fmt::format(" AND s.time >= ?{}", next++);
    if (!options.until.empty()) where += fmt::format(" AND s.time <= ?{}", next++);
    std::string labelMarks;
    for (std::size_t i = 0; i < options.labels.size(); ++i)
      labelMarks += fmt::format("{}?{}", i ? ", " : "", next++);
    std::string sql =
        fmt::format("SELECT s.host, s.run_id, s.time, s.value, s.sku_id FROM samples s{} WHERE {}{}",
                    options.labels.empty() ? "" : " JOIN runs r ON r.run_id = s.run_id", where,
                    options.labels.empty() ? "" : " AND r.label IN (" + labelMarks + ")");
    Statement st(db, sql);
    // A run's time in ms, once per run (its samples share it): SQLite's date functions read the stored
    // ISO 8601 times, offsets included.
    Statement toMs(db, "SELECT (julianday(?1) - 2440587.5) * 86400000.0");
    for (std::size_t pi = 0; pi < shown.size(); ++pi) {
      int b = 1;
      st.bind(b++, shown[pi].id);
      if (!options.since.empty()) st.bind(b++, options.since);
      if (!options.until.empty())
        st.bind(b++, options.until.size() == 10 ? options.until + "\x7f" : options.until);
      for (const auto& l : options.labels) st.bind(b++, l);
      while (st.step()) {
        std::string runId = st.text(1);
        int run;
        if (auto it = runIndex.find(runId); it != runIndex.end()) {
          run = it->second;
        } else {
          const std::string time = st.text(2);
          toMs.bind(1, time);
          const bool ok = toMs.step() && !toMs.isNull(0);
          const double ms = ok ? toMs.real(0) : 0;
          toMs.reset();
          run = ok ? static_cast<int>(runMs.size()) : -1;  // a time SQLite cannot read: not on the axis
          runIndex.emplace(std::move(runId), run);
          if (ok) {
            runMs.push_back(ms);
            runTime.push_back(time);
          }
        }
        if (run < 0) continue;
        std::string host = st.text(0);
        auto [h, newHost] = hostIndex.emplace(host, static_cast<int>(hostNames.size()));
        if (newHost) hostNames.push_back(host);
        std::int64_t skuId = st.integer(4);
        skuIndex.emplace(skuId, 0);
        points[pi].push_back(
            {h->second, run, static_cast<int>(skuId), runMs[static_cast<std::size_t>(run)], st.real(3)});
      }
      st.reset();
    }
  }
  // SKU names, sorted, and the points' SKU as an index into them.
  {
    Statement st(db, "SELECT sku_id, sku FROM skus");
    std::map<std::string, std::int64_t> byName;
    while (st.step())
      if (skuIndex.count(st.integer(0))) byName.emplace(st.text(1), st.integer(0));
    for (const auto& [name, id] : byName) {
      skuIndex[id] = static_cast<int>(d.skus.size());
      d.skus.push_back(name);
    }
    for (auto& ps : points)
      for (auto& p : ps) p.sku = skuIndex[p.sku];
  }

  // Hosts: those with samples and those with checks, sorted; points re-indexed.
  std::vector<HostCheckRecord> checks = loadHostChecks(db, {}, options.n);
  std::set<std::string> hostSet(hostNames.begin(), hostNames.end());
  for (const auto& c : checks) hostSet.insert(c.host);
  d.hosts.assign(hostSet.begin(), hostSet.end());
  {
    std::vector<int> remap(hostNames.size());
    for (std::size_t i = 0; i < hostNames.size(); ++i)
      remap[i] =
          static_cast<int>(std::lower_bound(d.hosts.begin(), d.hosts.end(), hostNames[i]) - d.hosts.begin());
    for (auto& ps : points)
      for (auto& p : ps) p.host = remap[static_cast<std::size_t>(p.host)];
  }
  const std::size_t hosts = d.hosts.size();

  // The column width: near the period at which a host is measured, wide enough for maxColumns.
  std::vector<double> hostPeriods;
  {
    std::vector<std::vector<double>> hostTimes(hosts);
    for (const auto& ps : points)
      for (const auto& p : ps) hostTimes[static_cast<std::size_t>(p.host)].push_back(p.ms);
    for (auto& t : hostTimes) {
      std::sort(t.begin(), t.end());
      t.erase(std::unique(t.begin(), t.end()), t.end());
      std::vector<double> gaps;
      for (std::size_t i = 1; i < t.size(); ++i) gaps.push_back(t[i] - t[i - 1]);
      if (!gaps.empty()) hostPeriods.push_back(median(gaps));
    }
  }
  const double period = median(hostPeriods);
  double lo = 0, hi = 0;
  if (!runMs.empty()) {
    lo = *std::min_element(runMs.begin(), runMs.end());
    hi = *std::max_element(runMs.begin(), runMs.end());
  }
  std::size_t wi = 0;
  const std::size_t kLast = std::size(kWidths) - 1;
  if (period > 0)
    while (wi < kLast && kWidths[wi + 1] <= 1.25 * period) ++wi;
  while (wi < kLast && (hi - lo) / kWidths[wi] > options.maxColumns) ++wi;
  std::vector<std::int64_t> runBucket(runMs.size());
  std::vector<std::int64_t> buckets;
  for (;; ++wi) {
    const double w = kWidths[wi], phase = phaseOf(runMs, w);
    for (std::size_t r = 0; r < runMs.size(); ++r)
      runBucket[r] = static_cast<std::int64_t>(std::floor((runMs[r] - phase) / w));
    buckets = runBucket;
    std::sort(buckets.begin(), buckets.end());
    buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
    d.columnWidthMs = w;
    if (buckets.size() <= static_cast<std::size_t>(options.maxColumns) || wi == kLast) break;
  }
  const std::size_t cols = buckets.size();
  std::vector<int> runColumn(runMs.size());
  d.columns.assign(cols, {});
  for (std::size_t r = 0; r < runMs.size(); ++r) {
    int c =
        static_cast<int>(std::lower_bound(buckets.begin(), buckets.end(), runBucket[r]) - buckets.begin());
    runColumn[r] = c;
    FleetColumn& col = d.columns[static_cast<std::size_t>(c)];
    if (col.runs == 0 || runMs[r] < col.firstMs) col.firstMs = runMs[r];
    if (col.runs == 0 || runMs[r] > col.lastMs) col.lastMs = runMs[r];
    ++col.runs;
  }
  d.runs = static_cast<int>(runMs.size());
  for (const auto& t : runTime) {
    if (d.firstTime.empty() || t < d.firstTime) d.firstTime = t;
    if (t > d.lastTime) d.lastTime = t;
  }

  // Per pattern: cells (median per host and column), the SKU medians per column, relative cells, drift.
  d.hostSku.assign(hosts, -1);
  std::vector<double> newestMs(hosts, -1e300);
  for (std::size_t pi = 0; pi < shown.size(); ++pi) {
    const PatternRow& pr = shown[pi];
    FleetPattern fp;
    fp.key = pr.key;
    fp.title = titleOf(pr);
    fp.metric = pr.metric;
    fp.unit = pr.unit;
    fp.higherIsBetter = pr.higherIsBetter;
    std::vector<Point>& ps = points[pi];
    fp.samples = ps.size();
    for (const auto& p : ps) {
      auto h = static_cast<std::size_t>(p.host);
      if (p.ms > newestMs[h]) {
        newestMs[h] = p.ms;
        d.hostSku[h] = p.sku;
      }
    }
    std::sort(ps.begin(), ps.end(), [&](const Point& a, const Point& b) {
      return std::tie(a.host, runColumn[static_cast<std::size_t>(a.run)], a.ms) <
             std::tie(b.host, runColumn[static_cast<std::size_t>(b.run)], b.ms);
    });
    struct Cell {
      int host, col, sku;
      double value;
    };
    std::vector<Cell> cells;
    for (std::size_t i = 0; i < ps.size();) {
      const int col = runColumn[static_cast<std::size_t>(ps[i].run)];
      std::vector<double> v;
      std::size_t j = i;
      for (;
           j < ps.size() && ps[j].host == ps[i].host && runColumn[static_cast<std::size_t>(ps[j].run)] == col;
           ++j)
        v.push_back(ps[j].value);
      cells.push_back({ps[i].host, col, ps[i].sku, median(v)});
      i = j;
    }
    std::vector<std::vector<std::vector<double>>> bySku(d.skus.size(),
                                                        std::vector<std::vector<double>>(cols));
    std::vector<std::vector<double>> all(cols);
    for (const auto& c : cells) {
      bySku[static_cast<std::size_t>(c.sku)][static_cast<std::size_t>(c.col)].push_back(c.value);
      all[static_cast<std::size_t>(c.col)].push_back(c.value);
    }
    fp.medians.assign(d.skus.size(), std::vector<double>(cols, 0));
    for (std::size_t k = 0; k < d.skus.size(); ++k)
      for (std::size_t c = 0; c < cols; ++c) fp.medians[k][c] = median(std::move(bySku[k][c]));
    fp.fleetMedian.assign(cols, 0);
    for (std::size_t c = 0; c < cols; ++c) fp.fleetMedian[c] = median(std::move(all[c]));
    fp.cells.assign(hosts * cols, 255);
    std::vector<double> values, ratios;
    auto finishHost = [&](int host) {
      double first = 0, last = 0, rFirst = 0, rLast = 0;
      if (quarterMedians(values, first, last) && quarterMedians(ratios, rFirst, rLast)) {
        HostDrift dr;
        dr.host = host;
        dr.points = static_cast<int>(values.size());
        dr.first = first;
        dr.last = last;
        dr.pct = 100 * (last - first) / first;
        dr.vsFleetPct = 100 * (rLast - rFirst) / rFirst;
        dr.worsePct = fp.higherIsBetter ? -dr.pct : dr.pct;
        fp.drift.push_back(dr);
      }
      if (!values.empty()) ++fp.hosts;
      values.clear();
      ratios.clear();
    };
    int current = -1;
    for (const auto& c : cells) {  // by host, then column
      if (c.host != current) {
        if (current >= 0) finishHost(current);
        current = c.host;
      }
      const double m = fp.medians[static_cast<std::size_t>(c.sku)][static_cast<std::size_t>(c.col)];
      fp.cells[static_cast<std::size_t>(c.host) * cols + static_cast<std::size_t>(c.col)] =
          relativeCell(c.value, m);
      values.push_back(c.value);
      if (m > 0) ratios.push_back(c.value / m);
    }
    if (current >= 0) finishHost(current);
    std::sort(fp.drift.begin(), fp.drift.end(), [](const HostDrift& a, const HostDrift& b) {
      return std::tie(b.worsePct, a.host) < std::tie(a.worsePct, b.host);
    });
    std::vector<double> fleetSeries;
    for (double m : fp.fleetMedian)
      if (m > 0) fleetSeries.push_back(m);
    double first = 0, last = 0;
    if (quarterMedians(fleetSeries, first, last)) {
      fp.fleetDriftKnown = true;
      fp.fleetDriftPct = 100 * (last - first) / first;
    }
    d.patterns.push_back(std::move(fp));
  }

  // Checks: each host's last n verdicts, and the quarantine list.
  d.checks = static_cast<int>(db.queryInt("SELECT count(*) FROM checks"));
  d.hostChecks.assign(hosts, {});
  for (auto it = checks.rbegin(); it != checks.rend(); ++it) {  // per host oldest first
    auto h = static_cast<std::size_t>(std::lower_bound(d.hosts.begin(), d.hosts.end(), it->host) -
                                      d.hosts.begin());
    FleetHostChecks& hc = d.hostChecks[h];
    const std::string& s = it->state;
    hc.states += checkStateLetter(s);
    hc.latest = *it;
    if (checkFailed(s)) {
      ++hc.failed;
      hc.lastFailure = *it;
    }
  }
  d.quarantine = quarantineOf(checks, options.k);
  db.exec("COMMIT");
  return d;
}

}  // namespace ds::report::history
