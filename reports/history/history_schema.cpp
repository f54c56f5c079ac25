#include "reports/history/history_schema.h"

#include <fmt/format.h>

#include <chrono>
#include <thread>
#include <vector>

#include "engine/common/error.h"
#include "reports/history/sample_store.h"

namespace ds::report::history {

namespace {

// migrations[i] takes a database from layout i to layout i + 1: its SQL, then (when set) a step in
// C++ for what SQL cannot derive. Never edit a released entry: add one.
struct Migration {
  const char* sql;
  void (*after)(Database&);
};

// 1 -> 2: the samples of every sweep run already stored, rebuilt from its runs row and sweep_rows.
void rederiveSamples(Database& db) { rederiveSweepSamples(db); }

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> m{
      // 0 -> 1: the first layout.
      {R"sql(
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
       nullptr},
      // 1 -> 2: per-host history (issue 28). Fleet-mode dsdiag reports become runs (kind 'diag': the
      // runs table is rebuilt, as SQLite changes a CHECK constraint, with foreign keys off while it
      // is); every judgeable figure of a run is a `samples` row (reports/baseline/sample.h: scope host,
      // link or job, the host, the pattern); `dsreport check` results go to `checks` and `host_checks`.
      {R"sql(
CREATE TABLE runs_v2 (
  run_id         TEXT PRIMARY KEY NOT NULL,  -- RunFile::runId: 16 hex characters
  label          TEXT NOT NULL DEFAULT '',   -- cluster / system label; '' when none
  kind           TEXT NOT NULL CHECK (kind IN ('sweep', 'train', 'diag')),  -- diag: fleet mode only
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
  status         TEXT NOT NULL DEFAULT '',   -- sweep summary status (ok, wrong_data, ...); diag: healthy or
                                             -- suspects; '' for train
  metadata       TEXT NOT NULL DEFAULT '{}', -- the file's metadata block, as JSON
  row_count      INTEGER NOT NULL            -- rows stored for it in sweep_rows or train_rows; diag: samples
);
INSERT INTO runs_v2 (run_id, label, kind, origin, start_time, end_time, ingested_at, hosts, world_size,
                     backends, source_file, schema_version, dsperf_version, git_sha, status, metadata, row_count)
  SELECT run_id, label, kind, origin, start_time, end_time, ingested_at, hosts, world_size, backends,
         source_file, schema_version, dsperf_version, git_sha, status, metadata, row_count FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v2 RENAME TO runs;
CREATE INDEX runs_by_time ON runs (start_time, run_id);
CREATE INDEX runs_by_label ON runs (label);

-- What a sample measured, the same for every host: patternKey() and its parts.
CREATE TABLE patterns (
  pattern_id       INTEGER PRIMARY KEY,
  pattern_key      TEXT NOT NULL UNIQUE,    -- "busbw allreduce nccl f32 sum 1073741824 out w8", "link_bw pair tcp w16"
  metric           TEXT NOT NULL,           -- busbw, link_bw, link_latency
  collective       TEXT NOT NULL,           -- allreduce, ...; "pair" for fleet links
  backend          TEXT NOT NULL,
  dtype            TEXT NOT NULL DEFAULT '',
  op               TEXT NOT NULL DEFAULT '',
  bytes            INTEGER NOT NULL DEFAULT 0,
  place            TEXT NOT NULL DEFAULT '', -- out, in; '' for fleet links
  world_size       INTEGER NOT NULL DEFAULT 0,
  unit             TEXT NOT NULL,           -- GB/s, us
  higher_is_better INTEGER NOT NULL
);
CREATE TABLE skus (
  sku_id INTEGER PRIMARY KEY,
  sku    TEXT NOT NULL UNIQUE                -- hw::skuKey() of the host's hardware; 'unknown', 'mixed' (a job)
);
-- One row per judgeable figure of a run (samplesOf): a single-host sweep's rows are that host's, a
-- multi-host sweep's the job's (host = its Slurm hostlist), a fleet run's pairs are links of both
-- ends plus each host's median of its links.
CREATE TABLE samples (
  run_id     TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  seq        INTEGER NOT NULL,                -- its index in samplesOf(run)
  time       TEXT NOT NULL,                   -- the run's start_time (kept here: series are read by time)
  label      TEXT NOT NULL DEFAULT '',        -- the run's label (kept here: filters need no join)
  scope      TEXT NOT NULL CHECK (scope IN ('host', 'link', 'job')),
  host       TEXT NOT NULL,
  peer       TEXT NOT NULL DEFAULT '',        -- scope link: the other end
  rank       INTEGER NOT NULL DEFAULT -1,     -- the rank that measured it; -1 none
  pattern_id INTEGER NOT NULL REFERENCES patterns (pattern_id),
  value      REAL NOT NULL,
  sku_id     INTEGER NOT NULL REFERENCES skus (sku_id),
  stack      TEXT NOT NULL DEFAULT '',        -- "nccl 2.21.5", "open_mpi 4.1.4", "tcp"
  bound_gbps REAL NOT NULL DEFAULT 0,         -- the hardware bound that applies; 0 unknown
  bound_name TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
-- A host's series (loadSamples by host, the host panel), and every host of one pattern over time
-- (the fleet heatmap, baselines of a pattern), the latter without touching the table.
CREATE INDEX samples_by_host ON samples (host, scope, pattern_id, time);
CREATE INDEX samples_by_pattern ON samples (pattern_id, scope, time, host, value, sku_id);
-- The whole record in one row, for people with sqlite3.
CREATE VIEW samples_flat AS
  SELECT s.run_id, s.seq, s.time, s.label, s.scope, s.host, s.peer, s.rank, p.pattern_key, p.metric,
         p.collective, p.backend, p.dtype, p.op, p.bytes, p.place, p.world_size, s.value, p.unit,
         p.higher_is_better, k.sku, s.stack, s.bound_gbps, s.bound_name
  FROM samples s JOIN runs r ON r.run_id = s.run_id JOIN patterns p ON p.pattern_id = s.pattern_id
  JOIN skus k ON k.sku_id = s.sku_id;

-- dsreport check results (schema dsperf.check): one row per ingested check, one per host verdict.
CREATE TABLE checks (
  check_id       TEXT PRIMARY KEY NOT NULL,  -- FNV-1a 64 of the record: the same check twice is stored once
  label          TEXT NOT NULL DEFAULT '',   -- ingest --label
  time           TEXT NOT NULL,              -- when the check ran, ISO 8601 UTC; the ingest time when none
  ingested_at    TEXT NOT NULL,
  baseline_id    TEXT NOT NULL DEFAULT '',
  rules_file     TEXT NOT NULL DEFAULT '',
  k              INTEGER NOT NULL,
  n              INTEGER NOT NULL,
  run_ids        TEXT NOT NULL DEFAULT '[]', -- JSON array: the runs judged
  source_file    TEXT NOT NULL,
  schema_version TEXT NOT NULL,
  hosts          INTEGER NOT NULL,           -- host verdicts stored in host_checks
  unhealthy      INTEGER NOT NULL            -- of them unhealthy or with no result
);
CREATE INDEX checks_by_time ON checks (time, check_id);
CREATE TABLE host_checks (
  check_id  TEXT NOT NULL REFERENCES checks (check_id) ON DELETE CASCADE,
  host      TEXT NOT NULL,
  time      TEXT NOT NULL,                   -- the check's time (kept here: a host's checks are read by time)
  sku       TEXT NOT NULL DEFAULT '',
  state     TEXT NOT NULL CHECK (state IN ('healthy', 'unhealthy', 'no_baseline', 'no_result')),
  summary   TEXT NOT NULL DEFAULT '',        -- "Healthy", "ERROR: <rule>: expected X, measured Y"
  rule      TEXT NOT NULL DEFAULT '',        -- the first rule that fired; '' when none did
  pattern   TEXT NOT NULL DEFAULT '',        -- and its figure: pattern, measured, expected
  measured  REAL NOT NULL DEFAULT 0,
  expected  REAL NOT NULL DEFAULT 0,
  fired     TEXT NOT NULL DEFAULT '[]',      -- JSON: every finding that did not pass
  PRIMARY KEY (check_id, host)
) WITHOUT ROWID;
CREATE INDEX host_checks_by_host ON host_checks (host, time, check_id);  -- a host's newest n: one seek
)sql",
       rederiveSamples},
      // 2 -> 3: the sweep's tails (schema 1.2, issue 29). Rows already stored keep NULL: unknown, as
      // for files of schema 1.1 and older ingested later.
      {R"sql(
ALTER TABLE sweep_rows ADD COLUMN p90_us REAL;
ALTER TABLE sweep_rows ADD COLUMN p999_us REAL;
)sql",
       nullptr},
      // 3 -> 4: host_checks.state may be 'cannot_judge' (check schema 1.1). SQLite cannot change a
      // CHECK constraint in place: the table is rebuilt (its rows copied as they are) and its index made
      // again. Nothing refers to host_checks.
      {R"sql(
CREATE TABLE host_checks_4 (
  check_id  TEXT NOT NULL REFERENCES checks (check_id) ON DELETE CASCADE,
  host      TEXT NOT NULL,
  time      TEXT NOT NULL,                   -- the check's time (kept here: a host's checks are read by time)
  sku       TEXT NOT NULL DEFAULT '',
  state     TEXT NOT NULL CHECK (state IN ('healthy', 'unhealthy', 'no_baseline', 'no_result', 'cannot_judge')),
  summary   TEXT NOT NULL DEFAULT '',        -- "Healthy", "ERROR: <rule>: expected X, measured Y"
  rule      TEXT NOT NULL DEFAULT '',        -- the first rule that fired (else the first that could not judge)
  pattern   TEXT NOT NULL DEFAULT '',        -- and its figure: pattern, measured, expected
  measured  REAL NOT NULL DEFAULT 0,
  expected  REAL NOT NULL DEFAULT 0,
  fired     TEXT NOT NULL DEFAULT '[]',      -- JSON: every finding that did not pass (broke or could not judge)
  PRIMARY KEY (check_id, host)
) WITHOUT ROWID;
INSERT INTO host_checks_4 (check_id, host, time, sku, state, summary, rule, pattern, measured, expected, fired)
  SELECT check_id, host, time, sku, state, summary, rule, pattern, measured, expected, fired FROM host_checks;
DROP TABLE host_checks;
ALTER TABLE host_checks_4 RENAME TO host_checks;
CREATE INDEX host_checks_by_host ON host_checks (host, time, check_id);  -- a host's newest n: one seek
)sql",
       nullptr},
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
void migrate(Database& db, int version, int target) {
  for (int v = version; v < target; ++v) {
    const Migration& m = migrations()[static_cast<std::size_t>(v)];
    db.exec(m.sql);
    if (m.after) m.after(db);
  }
  // A rebuilt table must leave every reference intact (checked here, as foreign keys were off).
  if (db.queryInt("SELECT count(*) FROM pragma_foreign_key_check") != 0)
    throw IoError(
        fmt::format("history database '{}': migrating its layout from {} to {} left rows that refer to "
                    "missing runs; nothing was changed. The file may be damaged: keep a copy and "
                    "report it, or start a new --db",
                    db.path(), version, target));
  db.exec(fmt::format("PRAGMA application_id = {}", kHistoryApplicationId));
  db.exec(fmt::format("PRAGMA user_version = {}", target));
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

// Foreign keys off for the life of this object (outside any transaction: the pragma is a no-op in
// one), on again at its end, also when a migration throws.
class ForeignKeysOff {
 public:
  explicit ForeignKeysOff(Database& db) : db_(db) { db_.exec("PRAGMA foreign_keys = OFF"); }
  ~ForeignKeysOff() {
    try {
      db_.exec("PRAGMA foreign_keys = ON");
    } catch (const std::exception&) {  // the connection is failing anyway; the caller sees the first error
    }
  }
  ForeignKeysOff(const ForeignKeysOff&) = delete;
  ForeignKeysOff& operator=(const ForeignKeysOff&) = delete;

 private:
  Database& db_;
};

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
  // then look again. Foreign keys are off while a migration rebuilds a table (SQLite's procedure for
  // layout changes; dropping the old table would otherwise cascade into its rows' children), and on
  // again after; the pragma cannot change inside a transaction.
  ForeignKeysOff off(db);
  {
    WriteTransaction tx(db);
    id = readIdentity(db);
    checkIdentity(db, id);
    if (id.version < kHistorySchemaVersion) migrate(db, id.version, kHistorySchemaVersion);
    tx.commit();
  }
}

}  // namespace

void prepareForWrite(Database& db) { prepare(db, true); }

void createLayoutAt(Database& db, int version) {
  if (version < 1 || version > kHistorySchemaVersion)
    throw ConfigError(
        fmt::format("history layout {} does not exist (1..{})", version, kHistorySchemaVersion));
  Identity id = readIdentity(db);
  if (id.objects != 0 || id.version != 0)
    throw ConfigError(
        fmt::format("'{}' is not empty: an older layout is built in a new file only", db.path()));
  configure(db);
  ForeignKeysOff off(db);
  WriteTransaction tx(db);
  migrate(db, 0, version);
  tx.commit();
}
void prepareForRead(Database& db) { prepare(db, false); }

}  // namespace ds::report::history
