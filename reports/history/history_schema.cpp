#include "reports/history/history_schema.h"

#include <fmt/format.h>

#include <chrono>
#include <thread>
#include <vector>

#include "engine/common/error.h"

namespace ds::report::history {

namespace {

// migrations[i] takes a database from layout i to layout i + 1. Never edit a released entry: add one.
const std::vector<const char*>& migrations() {
  static const std::vector<const char*> m{
      // 0 -> 1: the first layout.
      R"sql(
CREATE TABLE runs (
  run_id         TEXT PRIMARY KEY NOT NULL,  -- RunFile::runId: 16 hex characters
  label          TEXT NOT NULL DEFAULT '',   -- cluster / system label; '' when none
  kind           TEXT NOT NULL CHECK (kind IN ('sweep', 'train')),
  origin         TEXT NOT NULL DEFAULT '',   -- '', 'journal', 'nccl-tests text', 'nccl-tests json'
  start_time     TEXT NOT NULL,              -- ISO 8601 UTC; the ingest time when the file had none
  end_time       TEXT NOT NULL DEFAULT '',
  ingested_at    TEXT NOT NULL,
  hosts          TEXT NOT NULL DEFAULT '[]', -- JSON array, distinct, in rank order
  world_size     INTEGER NOT NULL DEFAULT 0,
  backends       TEXT NOT NULL DEFAULT '',   -- comma-separated, as measured
  source_file    TEXT NOT NULL,              -- the path given to ingest
  schema_version TEXT NOT NULL,              -- of the file, e.g. '1.0'
  dsperf_version TEXT NOT NULL DEFAULT '',
  git_sha        TEXT NOT NULL DEFAULT '',
  status         TEXT NOT NULL DEFAULT '',   -- sweep summary status (ok, wrong_data, ...); '' for train
  metadata       TEXT NOT NULL DEFAULT '{}', -- the file's metadata block, as JSON
  row_count      INTEGER NOT NULL            -- rows stored for it in sweep_rows or train_rows
);
CREATE INDEX runs_by_time ON runs (start_time, run_id);
CREATE INDEX runs_by_label ON runs (label);

CREATE TABLE sweep_rows (
  run_id       TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  seq          INTEGER NOT NULL,  -- the row's index in the file's results
  place        TEXT NOT NULL CHECK (place IN ('out', 'in')),
  backend      TEXT NOT NULL,
  collective   TEXT NOT NULL,
  dtype        TEXT NOT NULL,
  op           TEXT NOT NULL,
  root         INTEGER NOT NULL,
  world_size   INTEGER NOT NULL,
  bytes        INTEGER NOT NULL,
  count        INTEGER NOT NULL,
  iters        INTEGER NOT NULL,
  time_us      REAL NOT NULL,
  algbw        REAL NOT NULL,     -- GB/s, GB = 1e9 bytes
  busbw        REAL NOT NULL,     -- GB/s
  wrong        INTEGER NOT NULL,  -- -1 when not checked
  min_us       REAL, max_us REAL, avg_us REAL, p50_us REAL, p95_us REAL, p99_us REAL,
  stdev_us     REAL, cv_pct REAL,
  slowest_rank INTEGER,
  spread_pct   REAL,
  PRIMARY KEY (run_id, seq, place)
) WITHOUT ROWID;
CREATE INDEX sweep_rows_by_series ON sweep_rows (backend, collective, dtype, op, bytes, place);

CREATE TABLE train_rows (
  run_id                  TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  seq                     INTEGER NOT NULL,  -- the configuration's index in the file's runs
  model                   TEXT NOT NULL,
  params                  INTEGER NOT NULL,
  world_size              INTEGER NOT NULL,
  backend                 TEXT NOT NULL,
  device                  TEXT NOT NULL,
  per_rank_batch          INTEGER NOT NULL,
  steps                   INTEGER NOT NULL,
  warmup                  INTEGER NOT NULL,
  optimizer               TEXT NOT NULL,
  bucket_cap_mb           REAL NOT NULL,
  overlap                 INTEGER NOT NULL,
  comm_hook               TEXT NOT NULL,
  gradient_as_bucket_view INTEGER NOT NULL,
  buckets                 INTEGER NOT NULL,
  step_p50_ms             REAL NOT NULL,
  step_p90_ms             REAL NOT NULL,
  step_p99_ms             REAL NOT NULL,
  step_mean_ms            REAL NOT NULL,
  forward_p50_ms          REAL NOT NULL,
  backward_compute_p50_ms REAL NOT NULL,
  backward_comm_p50_ms    REAL NOT NULL,
  exposed_comm_p50_ms     REAL NOT NULL,
  optimizer_p50_ms        REAL NOT NULL,
  comm_busy_p50_ms        REAL NOT NULL,
  samples_per_sec         REAL NOT NULL,
  overlap_efficiency      REAL NOT NULL,
  hidden_comm_ms          REAL NOT NULL,
  loss_start              REAL NOT NULL,
  loss_end                REAL NOT NULL,
  record                  TEXT NOT NULL,  -- the whole record as JSON (DDP logging data, all percentiles)
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
)sql",
  };
  return m;
}

struct Identity {
  int version = 0;
  std::int64_t appId = 0;
  std::int64_t objects = 0;  // tables, indexes, ...: 0 in a new or empty file
};

// One statement, so one consistent snapshot even while another process creates the layout.
Identity readIdentity(Database& db) {
  Statement st(db,
               "SELECT (SELECT user_version FROM pragma_user_version), (SELECT application_id FROM "
               "pragma_application_id), (SELECT count(*) FROM sqlite_master)");
  Identity id;
  if (st.step()) {
    id.version = static_cast<int>(st.integer(0));
    id.appId = st.integer(1);
    id.objects = st.integer(2);
  }
  return id;
}

void checkIdentity(Database& db, const Identity& id) {
  int version = id.version;
  std::int64_t appId = id.appId;
  if (appId != kHistoryApplicationId && !(appId == 0 && version == 0 && id.objects == 0))
    throw ConfigError(
        fmt::format("'{}' is a SQLite database of another application (application_id {:#x}), not a "
                    "dsreport history; point --db at a new file or at one made by `dsreport ingest`",
                    db.path(), appId));
  if (version > kHistorySchemaVersion)
    throw ConfigError(
        fmt::format("the history database '{}' was written by a newer dsreport (history layout {}; this "
                    "dsreport knows layouts up to {}); upgrade dsreport, or use another --db",
                    db.path(), version, kHistorySchemaVersion));
}

// Runs the migrations from `version` up, inside the caller's write transaction.
void migrate(Database& db, int version) {
  for (int v = version; v < kHistorySchemaVersion; ++v) db.exec(migrations()[static_cast<std::size_t>(v)]);
  db.exec(fmt::format("PRAGMA application_id = {}", kHistoryApplicationId));
  db.exec(fmt::format("PRAGMA user_version = {}", kHistorySchemaVersion));
}

// Switching a new file to WAL needs an exclusive lock, for which SQLite may answer BUSY at once
// (without its busy handler) while another process opens the same new file: retry for a while.
std::string switchToWal(Database& db) {
  for (int attempt = 0;; ++attempt) {
    sqlite3_stmt* st = nullptr;
    int rc = sqlite3_prepare_v2(db.handle(), "PRAGMA journal_mode = WAL", -1, &st, nullptr);
    std::string mode;
    if (rc == SQLITE_OK) {
      rc = sqlite3_step(st);
      if (rc == SQLITE_ROW) {
        const unsigned char* t = sqlite3_column_text(st, 0);
        mode = t ? reinterpret_cast<const char*>(t) : "";
        rc = SQLITE_OK;
      }
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_OK) return mode;
    if ((rc & 0xff) != SQLITE_BUSY || attempt >= 600) db.fail("switching to WAL journal mode", rc);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void configure(Database& db) {
  // WAL: readers never block the writer and a killed writer leaves the last committed state.
  // synchronous=NORMAL in WAL mode keeps every commit across a process crash (the OS has the
  // pages); only a power loss can drop the newest commits, never corrupt the file.
  std::string mode = switchToWal(db);
  if (mode != "wal")
    throw IoError(
        fmt::format("history database '{}': SQLite refused WAL mode (journal mode stays '{}'); WAL needs "
                    "a local file system with shared memory, so keep the database off NFS",
                    db.path(), mode));
  db.exec("PRAGMA synchronous = NORMAL");
  db.exec("PRAGMA foreign_keys = ON");
}

void prepare(Database& db, bool create) {
  Identity id = readIdentity(db);
  checkIdentity(db, id);
  if (!create && id.version == 0)
    throw ConfigError(
        fmt::format("'{}' holds no runs yet (it is not a dsreport history database); fill it with "
                    "`dsreport ingest RUN.json... --db {}`",
                    db.path(), db.path()));
  configure(db);
  if (id.version == kHistorySchemaVersion) return;
  // Another process may be creating or migrating the same file right now: take the write lock,
  // then look again.
  WriteTransaction tx(db);
  id = readIdentity(db);
  checkIdentity(db, id);
  if (id.version < kHistorySchemaVersion) migrate(db, id.version);
  tx.commit();
}

}  // namespace

void prepareForWrite(Database& db) { prepare(db, true); }
void prepareForRead(Database& db) { prepare(db, false); }

}  // namespace ds::report::history
