// Writing per-host samples (reports/baseline/sample.h) into the history's `samples` table, for
// ingest and for the migration that gives runs stored before layout 2 their samples. Internal to
// reports/history: readers use host_history.h.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "reports/history/sqlite_db.h"
#include "reports/sample/sample.h"

namespace ds::report::history {

// The prepared statements of one write transaction, with the pattern and SKU ids it has seen.
class SampleWriter {
 public:
  explicit SampleWriter(Database& db);
  // Stores the samples of one run (its runs row must exist) under `time` and `label`, the run's
  // start_time and label as stored; returns how many were stored.
  std::size_t add(const std::string& runId, const std::string& time, const std::string& label,
                  const std::vector<Sample>& samples);

 private:
  std::int64_t patternId(const Sample& s);
  std::int64_t skuId(const std::string& sku);
  Database& db_;
  Statement findPattern_, findSku_;
  RowInserter insertPattern_, insertSku_, insertSample_;
  std::unordered_map<std::string, std::int64_t> patterns_, skus_;
};

// The sweep run a runs row and its sweep_rows describe, as far as they keep it (metadata, every
// measured row with its busbw, times and checks; not the args, notes or per-rank times). Throws
// ConfigError when the stored metadata cannot be read back.
SweepRun storedSweep(Database& db, const std::string& runId, const std::string& metadataJson);

// Migration 1 -> 2: the samples of every sweep run in the database, from its stored rows (so the same
// samplesOf decides, as on ingest). A run whose metadata cannot be read back gets none now (it gets
// them when its file is ingested again: ingest fills the samples of a stored run that has none) and is
// counted in the result.
int rederiveSweepSamples(Database& db);

}  // namespace ds::report::history
