#include "reports/history/host_history.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "engine/common/error.h"
#include "reports/history/history_schema.h"

namespace ds::report::history {

namespace {

// "YYYY-MM-DD" with digits, optionally followed by a time ("THH:MM:SS...Z").
bool isIsoTime(const std::string& t) {
  if (t.size() < 10 || t[4] != '-' || t[7] != '-') return false;
  for (int i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (!std::isdigit(static_cast<unsigned char>(t[static_cast<std::size_t>(i)]))) return false;
  return t.size() == 10 || t[10] == 'T';
}

// A WHERE clause built of conditions with positional parameters, bound in order.
class Where {
 public:
  void in(const std::string& column, const std::vector<std::string>& values) {
    if (values.empty()) return;
    std::string marks;
    for (const auto& v : values) {
      marks += fmt::format("{}?{}", marks.empty() ? "" : ", ", next());
      binds_.push_back(v);
    }
    add(fmt::format("{} IN ({})", column, marks));
  }
  void compare(const std::string& column, const char* op, const std::string& value) {
    add(fmt::format("{} {} ?{}", column, op, next()));
    binds_.push_back(value);
  }
  std::string sql() const { return conditions_.empty() ? "" : " WHERE " + conditions_; }
  int count() const { return static_cast<int>(binds_.size()); }
  void bind(Statement& st) const {
    for (std::size_t i = 0; i < binds_.size(); ++i) st.bind(static_cast<int>(i) + 1, binds_[i]);
  }

 private:
  int next() const { return static_cast<int>(binds_.size()) + 1; }
  void add(const std::string& c) { conditions_ += (conditions_.empty() ? "" : " AND ") + c; }
  std::string conditions_;
  std::vector<std::string> binds_;
};

}  // namespace

std::vector<Sample> loadSamples(Database& db, const SampleFilter& f) {
  for (const auto* t : {&f.since, &f.until}) {
    if (!t->empty() && !isIsoTime(*t))
      throw ConfigError(
          fmt::format("the time '{}' of a sample filter is not ISO 8601 (\"2026-03-01\" or "
                      "\"2026-03-01T02:00:00Z\", UTC)",
                      *t));
  }
  if (f.lastRuns < 0) throw ConfigError(fmt::format("the last {} runs: give 0 (all) or more", f.lastRuns));
  Where w;
  w.in("r.label", f.labels);
  w.in("p.metric", f.metrics);
  w.in("s.scope", f.scopes);
  w.in("s.host", f.hosts);
  w.in("p.pattern_key", f.patterns);
  w.in("k.sku", f.skus);
  if (!f.since.empty()) w.compare("s.time", ">=", f.since);
  // Times compare as text in their stored form; a date alone means the end of that day.
  if (!f.until.empty()) w.compare("s.time", "<=", f.until.size() == 10 ? f.until + "\x7f" : f.until);
  const std::string columns =
      "s.run_id, s.seq, s.time, r.label, s.scope, s.host, s.peer, s.rank, p.metric, p.collective, p.backend, "
      "p.dtype, p.op, p.bytes, p.place, p.world_size, s.value, p.unit, p.higher_is_better, k.sku, s.stack, "
      "s.bound_gbps, s.bound_name";
  const std::string from =
      " FROM samples s JOIN runs r ON r.run_id = s.run_id JOIN patterns p ON p.pattern_id = s.pattern_id "
      "JOIN "
      "skus k ON k.sku_id = s.sku_id";
  std::string sql;
  if (f.lastRuns > 0) {
    sql = fmt::format(
        "WITH f AS (SELECT {}, DENSE_RANK() OVER (PARTITION BY s.host ORDER BY s.time DESC, s.run_id DESC) "
        "AS nth "
        "{}{}) SELECT * FROM f WHERE nth <= ?{} ORDER BY time, run_id, seq",
        columns, from, w.sql(), w.count() + 1);
  } else {
    sql = fmt::format("SELECT {}{}{} ORDER BY s.time, s.run_id, s.seq", columns, from, w.sql());
  }
  Statement st(db, sql);
  w.bind(st);
  if (f.lastRuns > 0) st.bind(w.count() + 1, f.lastRuns);
  std::vector<Sample> out;
  while (st.step()) {
    Sample s;
    s.runId = st.text(0);
    s.time = st.text(2);
    s.label = st.text(3);
    s.scope = st.text(4);
    s.host = st.text(5);
    s.peer = st.text(6);
    s.rank = static_cast<int>(st.integer(7));
    s.metric = st.text(8);
    s.collective = st.text(9);
    s.backend = st.text(10);
    s.dtype = st.text(11);
    s.op = st.text(12);
    s.bytes = static_cast<std::size_t>(st.integer(13));
    s.place = st.text(14);
    s.worldSize = static_cast<int>(st.integer(15));
    s.value = st.real(16);
    s.unit = st.text(17);
    s.higherIsBetter = st.integer(18) != 0;
    s.sku = st.text(19);
    s.stack = st.text(20);
    s.boundGBps = st.real(21);
    s.boundName = st.text(22);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Sample> loadSamples(const std::string& dbPath, const SampleFilter& filter) {
  Database db(dbPath, Database::Mode::kExisting, 30000);
  prepareForRead(db);
  return loadSamples(db, filter);
}

std::vector<PatternInfo> listPatterns(Database& db) {
  std::map<std::int64_t, PatternInfo> byId;
  {
    Statement st(
        db,
        "SELECT pattern_id, pattern_key, metric, collective, backend, dtype, op, bytes, place, world_size, "
        "unit, higher_is_better FROM patterns");
    while (st.step()) {
      PatternInfo& p = byId[st.integer(0)];
      p.key = st.text(1);
      p.metric = st.text(2);
      p.collective = st.text(3);
      p.backend = st.text(4);
      p.dtype = st.text(5);
      p.op = st.text(6);
      p.bytes = static_cast<std::size_t>(st.integer(7));
      p.place = st.text(8);
      p.worldSize = static_cast<int>(st.integer(9));
      p.unit = st.text(10);
      p.higherIsBetter = st.integer(11) != 0;
    }
  }
  {
    // One pass over the (pattern, scope, ...) index each.
    Statement st(db, "SELECT pattern_id, scope, count(*) FROM samples GROUP BY pattern_id, scope");
    while (st.step()) {
      auto it = byId.find(st.integer(0));
      if (it == byId.end()) continue;
      auto n = static_cast<std::size_t>(st.integer(2));
      it->second.allSamples += n;
      if (st.text(1) == "host") it->second.samples = n;
    }
    Statement hosts(
        db,
        "SELECT pattern_id, count(*) FROM (SELECT DISTINCT host, pattern_id FROM samples WHERE scope = "
        "'host') GROUP BY pattern_id");
    while (hosts.step()) {
      auto it = byId.find(hosts.integer(0));
      if (it != byId.end()) it->second.hosts = static_cast<std::size_t>(hosts.integer(1));
    }
  }
  std::vector<PatternInfo> out;
  for (auto& [id, p] : byId) out.push_back(std::move(p));
  std::sort(out.begin(), out.end(), [](const PatternInfo& a, const PatternInfo& b) {
    return std::tie(a.metric, a.collective, a.backend, a.dtype, a.op, a.bytes, a.place, a.worldSize) <
           std::tie(b.metric, b.collective, b.backend, b.dtype, b.op, b.bytes, b.place, b.worldSize);
  });
  return out;
}

bool checkFailed(const std::string& state) { return state == "unhealthy" || state == "no_result"; }

std::vector<HostCheckRecord> loadHostChecks(Database& db, const std::vector<std::string>& hosts, int last) {
  if (last < 0) throw ConfigError(fmt::format("the last {} checks: give 0 (all) or more", last));
  Where w;
  w.in("host", hosts);
  std::string sql = fmt::format(
      "WITH c AS (SELECT check_id, time, host, sku, state, summary, rule, pattern, measured, expected, "
      "ROW_NUMBER() OVER (PARTITION BY host ORDER BY time DESC, check_id DESC) AS nth FROM host_checks{}) "
      "SELECT * FROM c{} ORDER BY host, nth",
      w.sql(), last > 0 ? fmt::format(" WHERE nth <= ?{}", w.count() + 1) : "");
  Statement st(db, sql);
  w.bind(st);
  if (last > 0) st.bind(w.count() + 1, last);
  std::vector<HostCheckRecord> out;
  while (st.step()) {
    HostCheckRecord r;
    r.checkId = st.text(0);
    r.time = st.text(1);
    r.host = st.text(2);
    r.sku = st.text(3);
    r.state = st.text(4);
    r.summary = st.text(5);
    r.rule = st.text(6);
    r.pattern = st.text(7);
    r.measured = st.real(8);
    r.expected = st.real(9);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<QuarantinedHost> quarantine(Database& db, int k, int n) {
  if (k < 1 || n < 1 || k > n)
    throw ConfigError(fmt::format(
        "quarantine: {} failed of the last {} checks does not fit; give 1 <= k <= n (e.g. k 2 of n 3)", k,
        n));
  std::vector<QuarantinedHost> out;
  std::vector<HostCheckRecord> checks = loadHostChecks(db, {}, n);
  for (std::size_t i = 0; i < checks.size();) {
    std::size_t j = i;
    QuarantinedHost q;
    q.host = checks[i].host;
    q.latest = checks[i];  // newest first
    for (; j < checks.size() && checks[j].host == q.host; ++j) {
      ++q.checks;
      if (!checkFailed(checks[j].state)) continue;
      if (q.failed++ == 0) q.lastFailure = checks[j];
    }
    if (q.failed >= k) out.push_back(std::move(q));
    i = j;
  }
  return out;
}

}  // namespace ds::report::history
