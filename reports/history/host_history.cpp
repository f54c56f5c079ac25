#include "reports/history/host_history.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

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
  // Ids of our own tables: written into the SQL as numbers.
  void ids(const std::string& column, const std::vector<std::int64_t>& values) {
    std::string list;
    for (auto v : values) list += fmt::format("{}{}", list.empty() ? "" : ", ", v);
    add(fmt::format("{} IN ({})", column, list));
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

bool contains(const std::vector<std::string>& list, const std::string& v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

std::map<std::int64_t, PatternInfo> patternsById(Database& db) {
  std::map<std::int64_t, PatternInfo> byId;
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
  return byId;
}

// The distinct hosts of a table whose index leads with `host`, one seek each (SQLite does not
// skip-scan an index without statistics).
std::vector<std::string> distinctHosts(Database& db, const std::string& table) {
  std::vector<std::string> out;
  Statement first(db, fmt::format("SELECT host FROM {} ORDER BY host LIMIT 1", table));
  if (!first.step()) return out;
  out.push_back(first.text(0));
  Statement next(db, fmt::format("SELECT host FROM {} WHERE host > ?1 ORDER BY host LIMIT 1", table));
  for (;;) {
    next.bind(1, out.back());
    if (!next.step()) break;
    out.push_back(next.text(0));
    next.reset();
  }
  return out;
}

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
  // Patterns and SKUs are few: read once and decoded here, so the samples are read without a join.
  const auto patterns = patternsById(db);
  std::map<std::int64_t, std::string> skus;
  {
    Statement st(db, "SELECT sku_id, sku FROM skus");
    while (st.step()) skus.emplace(st.integer(0), st.text(1));
  }
  Where w;
  if (!f.patterns.empty() || !f.metrics.empty()) {
    std::vector<std::int64_t> ids;
    for (const auto& [id, p] : patterns)
      if ((f.patterns.empty() || contains(f.patterns, p.key)) &&
          (f.metrics.empty() || contains(f.metrics, p.metric)))
        ids.push_back(id);
    if (ids.empty()) return {};
    w.ids("s.pattern_id", ids);
  }
  if (!f.skus.empty()) {
    std::vector<std::int64_t> ids;
    for (const auto& [id, sku] : skus)
      if (contains(f.skus, sku)) ids.push_back(id);
    if (ids.empty()) return {};
    w.ids("s.sku_id", ids);
  }
  w.in("s.label", f.labels);
  // Every scope when none is asked for, said explicitly: the (pattern, scope, time) index then serves a
  // time range too.
  w.in("s.scope", f.scopes.empty() ? std::vector<std::string>{"host", "link", "job"} : f.scopes);
  w.in("s.host", f.hosts);
  if (!f.since.empty()) w.compare("s.time", ">=", f.since);
  // Times compare as text in their stored form; a date alone means the end of that day.
  if (!f.until.empty()) w.compare("s.time", "<=", f.until.size() == 10 ? f.until + "\x7f" : f.until);
  const std::string columns =
      "s.run_id, s.seq, s.time, s.label, s.scope, s.host, s.peer, s.rank, s.pattern_id, s.value, s.sku_id, "
      "s.stack, "
      "s.bound_gbps, s.bound_name";
  std::string sql;
  if (f.lastRuns > 0) {
    // The newest runs per host are chosen on the index's columns alone; only those rows are read whole.
    sql = fmt::format(
        "WITH k AS (SELECT s.run_id, s.seq, DENSE_RANK() OVER (PARTITION BY s.host ORDER BY s.time DESC, "
        "s.run_id "
        "DESC) AS nth FROM samples s{}) SELECT {} FROM k JOIN samples s ON s.run_id = k.run_id AND s.seq = "
        "k.seq "
        "WHERE k.nth <= ?{} ORDER BY s.time, s.run_id, s.seq",
        w.sql(), columns, w.count() + 1);
  } else {
    sql = fmt::format("SELECT {} FROM samples s{} ORDER BY s.time, s.run_id, s.seq", columns, w.sql());
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
    if (auto p = patterns.find(st.integer(8)); p != patterns.end()) {
      const PatternInfo& pi = p->second;
      s.metric = pi.metric;
      s.collective = pi.collective;
      s.backend = pi.backend;
      s.dtype = pi.dtype;
      s.op = pi.op;
      s.bytes = pi.bytes;
      s.place = pi.place;
      s.worldSize = pi.worldSize;
      s.unit = pi.unit;
      s.higherIsBetter = pi.higherIsBetter;
    }
    s.value = st.real(9);
    auto k = skus.find(st.integer(10));
    s.sku = k == skus.end() ? std::string("unknown") : k->second;
    s.stack = st.text(11);
    s.boundGBps = st.real(12);
    s.boundName = st.text(13);
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
  std::map<std::int64_t, PatternInfo> byId = patternsById(db);
  {
    // A range count on the (pattern, scope, ...) index each.
    Statement st(db, "SELECT count(*) FROM samples WHERE pattern_id = ?1 AND scope = ?2");
    for (auto& [id, p] : byId) {
      for (const char* scope : {"host", "link", "job"}) {
        st.bind(1, id).bind(2, std::string(scope));
        auto n = st.step() ? static_cast<std::size_t>(st.integer(0)) : 0;
        st.reset();
        p.allSamples += n;
        if (std::string(scope) == "host") p.samples = n;
      }
    }
  }
  {
    // Hosts per pattern: each host's patterns of scope host, by seeks on the (host, scope, pattern) index.
    Statement next(
        db,
        "SELECT pattern_id FROM samples WHERE host = ?1 AND scope = 'host' AND pattern_id > ?2 ORDER BY "
        "host, scope, pattern_id LIMIT 1");
    for (const auto& host : distinctHosts(db, "samples")) {
      std::int64_t last = -1;
      for (;;) {
        next.bind(1, host).bind(2, last);
        if (!next.step()) break;
        last = next.integer(0);
        next.reset();
        if (auto it = byId.find(last); it != byId.end()) ++it->second.hosts;
      }
      next.reset();
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

char checkStateLetter(const std::string& state) {
  if (state == "healthy") return 'h';
  if (state == "unhealthy") return 'u';
  if (state == "no_baseline") return 'b';
  if (state == "no_result") return 'r';
  if (state == "cannot_judge") return 'j';
  return '?';
}

const char* checkStateWords(char letter) {
  switch (letter) {
    case 'h':
      return "healthy";
    case 'u':
      return "unhealthy";
    case 'b':
      return "no baseline";
    case 'r':
      return "no result";
    case 'j':
      return "cannot judge";
    default:
      return "unknown";
  }
}

std::vector<HostCheckRecord> loadHostChecks(Database& db, const std::vector<std::string>& hosts, int last) {
  if (last < 0) throw ConfigError(fmt::format("the last {} checks: give 0 (all) or more", last));
  const std::string columns = "check_id, time, host, sku, state, summary, rule, pattern, measured, expected";
  std::vector<HostCheckRecord> out;
  auto read = [&](Statement& st) {
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
  };
  if (last == 0) {
    Where w;
    w.in("host", hosts);
    Statement st(db, fmt::format("SELECT {} FROM host_checks{} ORDER BY host, time DESC, check_id DESC",
                                 columns, w.sql()));
    w.bind(st);
    read(st);
    return out;
  }
  // Each host's newest `last`: a backward scan of the (host, time, check_id) index, stopped early.
  std::vector<std::string> list = hosts;
  if (list.empty()) list = distinctHosts(db, "host_checks");
  std::sort(list.begin(), list.end());
  list.erase(std::unique(list.begin(), list.end()), list.end());
  Statement st(
      db, fmt::format("SELECT {} FROM host_checks WHERE host = ?1 ORDER BY time DESC, check_id DESC LIMIT ?2",
                      columns));
  for (const auto& h : list) {
    st.bind(1, h).bind(2, last);
    read(st);
    st.reset();
  }
  return out;
}

std::vector<QuarantinedHost> quarantineOf(const std::vector<HostCheckRecord>& checks, int k) {
  std::vector<QuarantinedHost> out;
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

std::vector<QuarantinedHost> quarantine(Database& db, int k, int n) {
  if (k < 1 || n < 1 || k > n)
    throw ConfigError(fmt::format(
        "quarantine: {} failed of the last {} checks does not fit; give 1 <= k <= n (e.g. k 2 of n 3)", k,
        n));
  return quarantineOf(loadHostChecks(db, {}, n), k);
}

}  // namespace ds::report::history
