// `dsreport ingest`: stores dsbench results (sweeps and train runs, also their journals and imported
// nccl-tests output), fleet-mode dsdiag reports and `dsreport check` results (schema dsperf.check) in
// the SQLite history database that the dashboards read.
//
// - Every run's judgeable figures also go in as per-host samples (reports/baseline/sample.h: a
//   single-host sweep's rows as that host's, a multi-host sweep's as the job's, a fleet run's pairs
//   as links of both ends and each host's median); a check's host verdicts as host_checks rows.
// - Every file is read and checked first, without the database lock. A file that cannot be read or
//   is not a sweep/train result is rejected with its name and the reason; the others still go in.
// - All accepted files of one call go in one write transaction (BEGIN IMMEDIATE): a killed ingest
//   leaves the database as before it, never half a run. Concurrent ingests queue on the lock.
// - A run already in the database (same run id: a hash of its content, label excluded) is skipped,
//   so ingesting a file twice stores it once; when it has no samples yet (stored by a dsreport before
//   layout 2 whose rows could not be read back on migration), its samples are added. A check is
//   likewise identified by a hash of its record.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "reports/baseline/check_schema.h"
#include "reports/run/run_file.h"

namespace ds::report::history {

struct IngestOptions {
  // The cluster / system label for every run of this call; overrides the label the files carry
  // (dsbench --label). Empty: keep each file's own label.
  std::string label;
  // How long to wait for another process's write lock before giving up.
  int busyTimeoutMs = 60000;
};

enum class IngestStatus { kAdded, kAlreadyPresent, kRejected };

struct IngestOutcome {
  std::string path;
  IngestStatus status = IngestStatus::kRejected;
  std::string kind;         // sweep, train, diag, check (when classified)
  std::string runId;        // when classified; a check's id for a check
  std::string label;        // the label it was stored under (kAdded) or is stored under (kAlreadyPresent)
  std::size_t rows = 0;     // measured rows stored (kAdded); diag: samples; check: host verdicts
  std::size_t samples = 0;  // per-host samples stored (kAdded, or added to a run already present)
  std::string reason;       // kRejected: why, as a sentence
};

struct IngestReport {
  std::vector<IngestOutcome> files;  // in the order given
  int added = 0, alreadyPresent = 0, rejected = 0;
};

// Ingests `paths` into the database at `dbPath`, creating it (and its folder's -wal/-shm files)
// when missing. Rejected files are reported, not thrown. Throws ConfigError when the database is
// another application's or newer than this dsreport, IoError when SQLite fails (disk full, lock
// held past busyTimeoutMs); in both cases nothing of this call was stored.
IngestReport ingestRuns(const std::string& dbPath, const std::vector<std::string>& paths,
                        const IngestOptions& options = {});

// Records already in memory, as ingestRuns reads them from files (the scale benchmark, tests): each
// has a run or a check, and `path` names it in the report and in the database's source_file.
struct IngestRecord {
  std::string path;
  std::optional<RunFile> run;
  std::optional<CheckReport> check;
};
IngestReport ingestRecords(const std::string& dbPath, std::vector<IngestRecord> records,
                           const IngestOptions& options = {});

// For the console: one line per added or skipped file (when `perFile`), one per rejected file
// (when `rejected`), then a summary line.
std::string formatIngestReport(const IngestReport& report, const std::string& dbPath, bool perFile = true,
                               bool rejected = true);

}  // namespace ds::report::history
