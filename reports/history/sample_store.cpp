#include "reports/history/sample_store.h"

#include <fmt/format.h>

#include <map>

#include "engine/common/error.h"
#include "reports/json_io.h"

namespace ds::report::history {

SampleWriter::SampleWriter(Database& db)
    : db_(db),
      findPattern_(db, "SELECT pattern_id FROM patterns WHERE pattern_key = ?1"),
      findSku_(db, "SELECT sku_id FROM skus WHERE sku = ?1"),
      insertPattern_(db, "INSERT", "patterns"),
      insertSku_(db, "INSERT", "skus"),
      insertSample_(db, "INSERT", "samples") {}

std::int64_t SampleWriter::patternId(const Sample& s) {
  const std::string key = patternKey(s);
  if (auto it = patterns_.find(key); it != patterns_.end()) return it->second;
  std::int64_t id = 0;
  findPattern_.bind(1, key);
  if (findPattern_.step()) {
    id = findPattern_.integer(0);
  } else {
    insertPattern_.insert({{"pattern_key", key},
                           {"metric", s.metric},
                           {"collective", s.collective},
                           {"backend", s.backend},
                           {"dtype", s.dtype},
                           {"op", s.op},
                           {"bytes", static_cast<std::int64_t>(s.bytes)},
                           {"place", s.place},
                           {"world_size", static_cast<std::int64_t>(s.worldSize)},
                           {"unit", s.unit},
                           {"higher_is_better", static_cast<std::int64_t>(s.higherIsBetter ? 1 : 0)}});
    id = db_.queryInt("SELECT last_insert_rowid()");
  }
  findPattern_.reset();
  patterns_.emplace(key, id);
  return id;
}

std::int64_t SampleWriter::skuId(const std::string& sku) {
  if (auto it = skus_.find(sku); it != skus_.end()) return it->second;
  std::int64_t id = 0;
  findSku_.bind(1, sku);
  if (findSku_.step()) {
    id = findSku_.integer(0);
  } else {
    insertSku_.insert({{"sku", sku}});
    id = db_.queryInt("SELECT last_insert_rowid()");
  }
  findSku_.reset();
  skus_.emplace(sku, id);
  return id;
}

std::size_t SampleWriter::add(const std::string& runId, const std::string& time, const std::string& label,
                              const std::vector<Sample>& samples) {
  std::int64_t seq = 0;
  for (const auto& s : samples) {
    insertSample_.insert({{"run_id", runId},
                          {"seq", seq++},
                          {"time", time},
                          {"label", label},
                          {"scope", s.scope},
                          {"host", s.host},
                          {"peer", s.peer},
                          {"rank", static_cast<std::int64_t>(s.rank)},
                          {"pattern_id", patternId(s)},
                          {"value", s.value},
                          {"sku_id", skuId(s.sku.empty() ? std::string("unknown") : s.sku)},
                          {"stack", s.stack},
                          {"bound_gbps", s.boundGBps},
                          {"bound_name", s.boundName}});
  }
  return samples.size();
}

SweepRun storedSweep(Database& db, const std::string& runId, const std::string& metadataJson) {
  SweepRun run;
  try {
    from_json(nlohmann::json::parse(metadataJson), run.metadata);
  } catch (const std::exception& e) {  // not JSON, or fields missing or of the wrong type
    throw ConfigError(
        fmt::format("history database '{}': the stored metadata of run {} cannot be read back ({})",
                    db.path(), runId, e.what()));
  }
  Statement st(
      db,
      "SELECT seq, place, backend, collective, dtype, op, root, world_size, bytes, count, iters, time_us, "
      "algbw, busbw, wrong, slowest_rank, spread_pct FROM sweep_rows WHERE run_id = ?1 ORDER BY seq, "
      "place DESC");  // 'out' before 'in'
  st.bind(1, runId);
  std::map<std::int64_t, SweepMeasurement> rows;
  while (st.step()) {
    SweepMeasurement& m = rows[st.integer(0)];
    m.backend = st.text(2);
    m.collective = st.text(3);
    m.dtype = st.text(4);
    m.op = st.text(5);
    m.root = static_cast<int>(st.integer(6));
    m.worldSize = static_cast<int>(st.integer(7));
    m.requestedBytes = m.bytes = static_cast<std::size_t>(st.integer(8));
    m.count = static_cast<std::size_t>(st.integer(9));
    PlaceResult& p = st.text(1) == "out" ? m.outOfPlace : m.inPlace;
    p.measured = true;
    p.iters = static_cast<int>(st.integer(10));
    p.timeUs = st.real(11);
    p.algBw = st.real(12);
    p.busBw = st.real(13);
    p.wrong = st.integer(14);
    p.slowestRank = st.isNull(15) ? 0 : static_cast<int>(st.integer(15));
    p.spreadPct = st.isNull(16) ? 0 : st.real(16);
  }
  for (auto& [seq, m] : rows) run.results.push_back(std::move(m));
  return run;
}

int rederiveSweepSamples(Database& db) {
  // One run at a time (a year of nightly runs of 1,000 hosts is 365,000 of them); the inserts go to
  // other tables than the one being read, which SQLite allows on one connection.
  Statement st(db,
               "SELECT run_id, label, start_time, metadata FROM runs WHERE kind = 'sweep' ORDER BY rowid");
  SampleWriter writer(db);
  int unreadable = 0;
  while (st.step()) {
    RunFile f;
    f.kind = RunKind::kSweep;
    f.runId = st.text(0);
    f.label = st.text(1);
    try {
      f.sweep = storedSweep(db, f.runId, st.text(3));
    } catch (const ConfigError&) {
      ++unreadable;
      continue;
    }
    writer.add(f.runId, st.text(2), f.label, samplesOf(f));
  }
  return unreadable;
}

}  // namespace ds::report::history
