// `dsreport ingest`: stores dsbench results (sweeps and train runs, also their journals and imported
// nccl-tests output) in the SQLite history database that the dashboard reads.
//
// - Every file is read and checked first, without the database lock. A file that cannot be read or
//   is not a sweep/train result is rejected with its name and the reason; the others still go in.
// - All accepted files of one call go in one write transaction (BEGIN IMMEDIATE): a killed ingest
//   leaves the database as before it, never half a run. Concurrent ingests queue on the lock.
// - A run already in the database (same run id: a hash of its content, label excluded) is skipped,
//   so ingesting a file twice stores it once.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

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
  std::string kind;      // sweep, train (when classified)
  std::string runId;     // when classified
  std::string label;     // the label it was stored under (kAdded) or is stored under (kAlreadyPresent)
  std::size_t rows = 0;  // measured rows stored (kAdded)
  std::string reason;    // kRejected: why, as a sentence
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

// For the console: one line per added or skipped file (when `perFile`), one per rejected file
// (when `rejected`), then a summary line.
std::string formatIngestReport(const IngestReport& report, const std::string& dbPath, bool perFile = true,
                               bool rejected = true);

}  // namespace ds::report::history
