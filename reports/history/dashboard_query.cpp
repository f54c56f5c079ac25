// queryDashboard: the history database's rows grouped into series, each judged against its rolling
// baseline (the rule is documented in dashboard_data.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "engine/common/error.h"
#include "reports/history/dashboard_data.h"
#include "reports/history/history_schema.h"
#include "reports/history/sqlite_db.h"
#include "reports/stats.h"

namespace ds::report::history {

namespace {

bool allowed(const std::vector<std::string>& filter, const std::string& value) {
  return filter.empty() || std::find(filter.begin(), filter.end(), value) != filter.end();
}

std::vector<std::string> distinct(Database& db, const std::string& sql) {
  std::vector<std::string> out;
  Statement st(db, sql);
  while (st.step()) out.push_back(st.text(0));
  return out;
}

// "train" sorts after every collective.
std::string collectiveSortKey(const std::string& c) { return c == "train" ? std::string("\x7f") : c; }

}  // namespace

std::string sizeText(std::size_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return v == std::floor(v) ? fmt::format("{} {}", static_cast<long long>(v), units[u])
                            : fmt::format("{:.3g} {}", v, units[u]);
}

void checkDashboardOptions(const DashboardOptions& o) {
  if (o.window < 1 || o.recent < 1 || o.minHistory < 1 || o.minHistory > o.window) {
    throw ConfigError(fmt::format(
        "dashboard --window {}, --recent {} and --min-history {} do not fit: all must be at least 1 and the "
        "minimum history no larger than the window",
        o.window, o.recent, o.minHistory));
  }
  if (!(o.thresholdPct >= 0) || !(o.alpha > 0 && o.alpha < 1)) {
    throw ConfigError(
        fmt::format("dashboard --threshold {}% must be zero or more and --alpha {} between 0 and 1",
                    o.thresholdPct, o.alpha));
  }
  if (minUTestP(o.recent, o.window) > o.alpha) {
    throw ConfigError(fmt::format(
        "dashboard: with --recent {} and --window {} the U test can never reach p <= {:g} (its smallest p is "
        "{:.2g}), so nothing would ever be flagged; raise --recent or --window (e.g. --recent 3 --window 8)",
        o.recent, o.window, o.alpha, minUTestP(o.recent, o.window)));
  }
}

void judgeSeries(DashboardSeries& series, const DashboardOptions& options) {
  const auto window = static_cast<std::size_t>(std::max(1, options.window));
  const auto recent = static_cast<std::size_t>(std::max(1, options.recent));
  const auto minHistory = static_cast<std::size_t>(std::max(1, options.minHistory));
  series.regressions = series.improvements = 0;
  auto& pts = series.points;
  for (std::size_t i = 0; i < pts.size(); ++i) {
    DashboardPoint& p = pts[i];
    p.hasBaseline = false;
    p.baseline = p.noise = p.changePct = 0;
    p.p = 1;
    p.regressed = p.improved = false;
    if (i + 1 < recent) continue;
    const std::size_t levelFrom = i + 1 - recent;
    const std::size_t from = levelFrom > window ? levelFrom - window : 0;
    if (levelFrom - from < minHistory) continue;
    std::vector<double> history, level;
    for (std::size_t k = from; k < levelFrom; ++k) history.push_back(pts[k].value);
    for (std::size_t k = levelFrom; k <= i; ++k) level.push_back(pts[k].value);
    const double base = median(history);
    if (!(base > 0) || !std::isfinite(base)) continue;  // a zero or broken baseline has no percent change
    std::vector<double> dev;
    for (double v : history) dev.push_back(std::fabs(v - base));
    p.hasBaseline = true;
    p.baseline = base;
    p.noise = 1.4826 * median(dev);
    const double delta = median(level) - base;
    p.changePct = 100.0 * delta / base;
    p.p = mannWhitneyU(level, history).p;
    if (std::fabs(p.changePct) <= options.thresholdPct || p.p > options.alpha) continue;
    bool better = series.higherIsBetter ? delta > 0 : delta < 0;
    (better ? p.improved : p.regressed) = true;
    (better ? series.improvements : series.regressions) += 1;
  }
  // What needs attention now: a regression flagged within the current level (the newest `recent`
  // points), since a step is flagged once and then joins the history.
  series.latestRegressed = false;
  for (std::size_t k = pts.size() > recent ? pts.size() - recent : 0; k < pts.size(); ++k) {
    series.latestRegressed = series.latestRegressed || pts[k].regressed;
  }
}

DashboardData queryDashboard(const std::string& dbPath, const DashboardOptions& options) {
  checkDashboardOptions(options);
  Database db(dbPath, Database::Mode::kExisting, 30000);
  prepareForRead(db);
  // One read transaction, so a concurrent ingest does not show half its runs in some series.
  db.exec("BEGIN");
  DashboardData d;
  d.dbPath = dbPath;
  d.options = options;
  d.labels = distinct(db, "SELECT DISTINCT label FROM runs ORDER BY label");
  d.backends = distinct(db, "SELECT backend FROM sweep_rows UNION SELECT backend FROM train_rows ORDER BY 1");
  d.collectives = distinct(db, "SELECT DISTINCT collective FROM sweep_rows ORDER BY collective");
  if (db.queryInt("SELECT EXISTS (SELECT 1 FROM train_rows)")) d.collectives.push_back("train");

  using SweepKey =
      std::tuple<std::string, std::string, std::string, std::string, std::string, std::int64_t, int>;
  std::map<SweepKey, DashboardSeries> sweeps;
  std::set<std::string> usedRuns;
  {
    // Out-of-place busbw; two rows of one run with the same size (sizes rounded to one) are averaged.
    Statement st(
        db,
        "SELECT r.label, s.backend, s.collective, s.dtype, s.op, s.bytes, s.world_size, r.start_time, "
        "r.run_id, r.source_file, AVG(s.busbw) FROM sweep_rows s JOIN runs r ON r.run_id = s.run_id "
        "WHERE s.place = 'out' GROUP BY r.label, s.backend, s.collective, s.dtype, s.op, s.bytes, "
        "s.world_size, r.run_id ORDER BY r.start_time, r.run_id");
    while (st.step()) {
      std::string label = st.text(0), backend = st.text(1), collective = st.text(2);
      auto bytes = static_cast<std::size_t>(st.integer(5));
      if (!allowed(options.labels, label) || !allowed(options.backends, backend) ||
          !allowed(options.collectives, collective))
        continue;
      if (!options.sizes.empty() &&
          std::find(options.sizes.begin(), options.sizes.end(), bytes) == options.sizes.end())
        continue;
      int world = static_cast<int>(st.integer(6));
      SweepKey key{label,         backend, collectiveSortKey(collective), st.text(3), st.text(4),
                   st.integer(5), world};
      DashboardSeries& s = sweeps[key];
      if (s.id.empty()) {
        s.metric = "busbw";
        s.unit = "GB/s";
        s.higherIsBetter = true;
        s.label = label;
        s.backend = backend;
        s.collective = collective;
        s.dtype = st.text(3);
        s.op = st.text(4);
        s.bytes = bytes;
        s.worldSize = world;
        s.id = fmt::format("busbw|{}|{}|{}|{}|{}|{}|{}", label, backend, collective, s.dtype, s.op, bytes,
                           world);
        s.title = fmt::format("{} busbw, {}, {}{}, {} ranks", collective, sizeText(bytes), s.dtype,
                              s.op == "none" ? "" : " " + s.op, world);
      }
      DashboardPoint p;
      p.time = st.text(7);
      p.runId = st.text(8);
      p.sourceFile = st.text(9);
      p.value = st.real(10);
      s.points.push_back(std::move(p));
      usedRuns.insert(st.text(8));
    }
  }

  using TrainKey = std::tuple<std::string, std::string, std::string>;
  std::map<TrainKey, DashboardSeries> trains;
  if (allowed(options.collectives, "train")) {
    Statement st(
        db,
        "SELECT r.label, t.backend, t.model, t.world_size, t.device, t.per_rank_batch, t.bucket_cap_mb, "
        "t.overlap, t.comm_hook, t.gradient_as_bucket_view, t.optimizer, r.start_time, r.run_id, "
        "r.source_file, AVG(t.step_p50_ms) FROM train_rows t JOIN runs r ON r.run_id = t.run_id GROUP BY "
        "r.label, t.backend, t.model, t.world_size, t.device, t.per_rank_batch, t.bucket_cap_mb, "
        "t.overlap, t.comm_hook, t.gradient_as_bucket_view, t.optimizer, r.run_id ORDER BY r.start_time, "
        "r.run_id");
    while (st.step()) {
      std::string label = st.text(0), backend = st.text(1);
      if (!allowed(options.labels, label) || !allowed(options.backends, backend)) continue;
      int world = static_cast<int>(st.integer(3));
      std::string config =
          fmt::format("{}, world {}, {}, batch {}, bucket {:g} MB, {}, hook {}{}, {}", st.text(2), world,
                      st.text(4), st.integer(5), st.real(6), st.integer(7) ? "overlap" : "no overlap",
                      st.text(8), st.integer(9) ? ", bucket view" : "", st.text(10));
      DashboardSeries& s = trains[{label, backend, config}];
      if (s.id.empty()) {
        s.metric = "train_step_p50";
        s.unit = "ms";
        s.higherIsBetter = false;
        s.label = label;
        s.backend = backend;
        s.collective = "train";
        s.worldSize = world;
        s.config = config;
        s.id = fmt::format("train_step_p50|{}|{}|{}", label, backend, config);
        s.title = fmt::format("train step time p50, {}", config);
      }
      DashboardPoint p;
      p.time = st.text(11);
      p.runId = st.text(12);
      p.sourceFile = st.text(13);
      p.value = st.real(14);
      s.points.push_back(std::move(p));
      usedRuns.insert(st.text(12));
    }
  }

  for (auto& [key, s] : sweeps) d.series.push_back(std::move(s));
  for (auto& [key, s] : trains) d.series.push_back(std::move(s));
  for (auto& s : d.series) judgeSeries(s, options);
  // Train series after the busbw ones of the same label and backend.
  std::stable_sort(d.series.begin(), d.series.end(), [](const DashboardSeries& a, const DashboardSeries& b) {
    return std::tie(a.label, a.backend) < std::tie(b.label, b.backend);
  });

  d.runs = static_cast<int>(usedRuns.size());
  for (const auto& s : d.series) {
    for (const auto& p : s.points) {
      if (d.firstTime.empty() || p.time < d.firstTime) d.firstTime = p.time;
      if (p.time > d.lastTime) d.lastTime = p.time;
    }
  }
  db.exec("COMMIT");
  return d;
}

}  // namespace ds::report::history
