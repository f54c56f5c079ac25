// Reporters of a sweep (google/benchmark's pattern): the harness produces records; each reporter
// turns them into one output. The text table, the final JSON, the journal and the TTY progress line
// are separate reporters behind one interface, and MultiReporter sends to several. Only rank 0
// reports. Not thread-safe.
#pragma once

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "reports/sweep/sweep_journal.h"
#include "reports/sweep/sweep_schema.h"

namespace ds::report {

struct SweepTable {
  std::string backend;
  std::string collective;
  std::string busFactor;  // "2(n-1)/n = 1.5"
};

struct SweepProgress {
  SweepTable table;
  std::string dtype, op;
  std::size_t bytes = 0;
  int done = 0;   // rows finished
  int total = 0;  // rows in the run
  double elapsedS = 0;
};

class SweepReporter {
 public:
  virtual ~SweepReporter() = default;
  // run.args and run.metadata are set; results empty.
  virtual void start(const SweepRun& run) {}
  virtual void tableStart(const SweepTable& t) {}
  // A row is about to be measured.
  virtual void progress(const SweepProgress& p) {}
  virtual void measurement(const SweepMeasurement& m) {}
  // A remark for the reader (also kept in SweepRun::notes).
  virtual void note(const std::string& text) {}
  virtual void tableEnd(const SweepTable& t, const std::vector<SweepMeasurement>& rows) {}
  // The whole run, summary and end time included; also called after a run stopped early.
  virtual void finish(const SweepRun& run) {}
};

// The nccl-tests text table, written (and flushed) as rows arrive.
class TextReporter : public SweepReporter {
 public:
  explicit TextReporter(std::FILE* out) : out_(out) {}
  void start(const SweepRun& run) override;
  void tableStart(const SweepTable& t) override;
  void measurement(const SweepMeasurement& m) override;
  void note(const std::string& text) override;
  void tableEnd(const SweepTable& t, const std::vector<SweepMeasurement>& rows) override;
  void finish(const SweepRun& run) override;

 private:
  void put(const std::string& s);
  std::FILE* out_;
  SweepMetadata meta_;     // from start(): the hardware the bound lines after each table need
  int perIterTiming_ = 0;  // from start(): -I, the per-iteration columns of the table
};

// The JSON, written atomically at finish(), and before that after each table as a checkpoint that
// holds every finished row, marked "incomplete" (status and error say where the run was): a run cut
// off in a later table (a killed process, a lost rank, a backend whose start ends the process, as
// Open MPI's singleton start without orted does) still leaves a JSON of what it measured. finish()
// replaces it with the run's own summary.
class JsonReporter : public SweepReporter {
 public:
  explicit JsonReporter(std::string path) : path_(std::move(path)) {}
  void start(const SweepRun& run) override;
  void tableStart(const SweepTable& t) override;
  void measurement(const SweepMeasurement& m) override;
  void note(const std::string& text) override;
  void tableEnd(const SweepTable& t, const std::vector<SweepMeasurement>& rows) override;
  void finish(const SweepRun& run) override;

 private:
  std::string path_;
  SweepRun sofar_;                // args, metadata, the rows and notes so far
  std::size_t tableFirst_ = 0;    // where the current table's rows start in sofar_.results
};

// The JSON-lines journal: opened at start(), a line per measurement, an end line at finish().
class JournalReporter : public SweepReporter {
 public:
  explicit JournalReporter(std::string path) : path_(std::move(path)) {}
  void start(const SweepRun& run) override;
  void measurement(const SweepMeasurement& m) override;
  void note(const std::string& text) override;
  void finish(const SweepRun& run) override;

 private:
  std::string path_;
  std::unique_ptr<SweepJournal> journal_;
};

// One self-rewriting line ("\r...\x1b[K") with the row being measured and an ETA. Construct it only
// for a terminal: it writes nothing a file or pipe should keep.
class ProgressReporter : public SweepReporter {
 public:
  explicit ProgressReporter(std::FILE* tty) : tty_(tty) {}
  void progress(const SweepProgress& p) override;
  void finish(const SweepRun& run) override;

 private:
  std::FILE* tty_;
  bool shown_ = false;
};

// "gloo allreduce f32 sum 1 MiB  [12/40]  ETA 3 s" (pure, for the progress line and tests).
std::string formatProgress(const SweepProgress& p);
// 1536 -> "1.5 KiB".
std::string humanBytes(std::size_t bytes);

class MultiReporter : public SweepReporter {
 public:
  void add(std::unique_ptr<SweepReporter> r) { reporters_.push_back(std::move(r)); }
  void start(const SweepRun& run) override;
  void tableStart(const SweepTable& t) override;
  void progress(const SweepProgress& p) override;
  void measurement(const SweepMeasurement& m) override;
  void note(const std::string& text) override;
  void tableEnd(const SweepTable& t, const std::vector<SweepMeasurement>& rows) override;
  void finish(const SweepRun& run) override;

 private:
  std::vector<std::unique_ptr<SweepReporter>> reporters_;
};

}  // namespace ds::report
