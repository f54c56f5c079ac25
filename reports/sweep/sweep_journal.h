// The JSON-lines journal of a sweep: one line per event, appended as it happens, so that a run killed
// by a signal or a lost rank leaves what it measured. Lines:
//   {"schema": "dsperf.sweep.journal", "schema_version": "1.0", "type": "start", "args": ..., "metadata":
//   ...}
//   {"type": "measurement", "result": <one row, as in the final JSON's "results">}
//   {"type": "note", "text": "..."}
//   {"type": "end", "summary": ..., "end_time": "..."}
// A file may hold several runs (appended); readers take the last one.
#pragma once

#include <string>

#include "reports/sweep/sweep_schema.h"

namespace ds::report {

inline constexpr const char* kSweepJournalSchemaName = "dsperf.sweep.journal";

// "<path without .json>.journal.jsonl": the journal next to a JSON output.
std::string journalPathFor(const std::string& jsonPath);

// Appends lines with one write(2) each (O_APPEND), so a line is either whole or, if the process dies
// mid-write, a truncated last line that readers skip. No fsync per line: a killed process loses
// nothing the kernel already has; close() syncs. Not thread-safe.
class SweepJournal {
 public:
  // Opens (creating) `path` for appending and writes the start line. Throws IoError.
  SweepJournal(const std::string& path, const SweepArgs& args, const SweepMetadata& meta);
  ~SweepJournal();
  SweepJournal(const SweepJournal&) = delete;
  SweepJournal& operator=(const SweepJournal&) = delete;
  void append(const SweepMeasurement& m);
  // {"type": "note", "text": ...}
  void note(const std::string& text);
  void end(const SweepSummary& s, const std::string& endTime);
  const std::string& path() const { return path_; }

 private:
  void writeLine(const nlohmann::json& j);
  std::string path_;
  int fd_ = -1;
};

// The last run of a journal. A missing "end" line (a killed run) gives summary.status "incomplete"
// with the footer figures recomputed from the rows; a truncated last line is skipped. Throws
// IoError when unreadable, ConfigError when no start line of our schema is found.
SweepRun readSweepJournal(const std::string& path);
// The same, of a journal's text already read (`origin` names it in errors).
SweepRun parseSweepJournal(const std::string& text, const std::string& origin);

}  // namespace ds::report
