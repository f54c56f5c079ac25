// The history database's layout and its versioning. The layout is normalised: one `runs` row per
// ingested run, its measured rows in `sweep_rows` (one per size x place of a collective sweep) or
// `train_rows` (one per train configuration). The version lives in SQLite's `PRAGMA user_version`;
// `PRAGMA application_id` marks the file as a dsreport history, so a stray SQLite file is refused
// instead of being written into.
#pragma once

#include <string>

#include "reports/history/sqlite_db.h"

namespace ds::report::history {

// The newest layout this dsreport writes and reads. Bump it with a new entry in the migration list
// (history_schema.cpp); older databases are migrated forward in one transaction on open.
// 1: runs, sweep_rows, train_rows. 2: fleet-mode diag runs, samples, patterns, skus, checks,
// host_checks; the samples of sweep runs stored under layout 1 are derived from their rows on migration.
// 3: sweep_rows.p90_us and p999_us (sweep schema 1.2's tails); NULL where unknown (rows stored before,
// files of schema 1.1 and older).
// 4: host_checks.state may be 'cannot_judge' (check schema 1.1); the table is rebuilt, its rows kept.
inline constexpr int kHistorySchemaVersion = 4;
// "DSPH" as a 32-bit big-endian integer.
inline constexpr int kHistoryApplicationId = 0x44535048;

// Sets the connection up (WAL journal, synchronous=NORMAL, foreign keys) and creates or migrates
// the layout. Safe when several processes open the same new file at once: creation happens inside
// a write transaction that re-reads the version. Throws ConfigError when the file is another
// application's database or was written by a newer dsreport (with what to do), IoError on SQLite
// failures.
void prepareForWrite(Database& db);
// For readers (the dashboard): the same checks, but a file that is empty or has no dsreport layout
// is a ConfigError (nothing was ever ingested there) rather than being created. An older layout is
// migrated forward, as on write.
void prepareForRead(Database& db);

// For tests of migrations: builds layout `version` (1..kHistorySchemaVersion), exactly as the dsreport
// of that layout made it, in an empty file. ConfigError when the file is not empty.
void createLayoutAt(Database& db, int version);

}  // namespace ds::report::history
