// The history database in-process: what ingest stores, idempotency, rejected files, the layout's
// version checks, and the dashboard's series with their rolling-baseline verdicts.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <functional>

#include "engine/common/error.h"
#include "engine/testing/paths.h"
#include "engine/testing/subprocess.h"
#include "reports/diag/diag_schema.h"
#include "reports/history/dashboard_data.h"
#include "reports/history/history_schema.h"
#include "reports/history/ingest.h"
#include "reports/history/sqlite_db.h"
#include "reports/history/tests/history_fixtures.h"
#include "reports/json_io.h"
#include "reports/sweep/sweep_journal.h"

using namespace ds::report::history;
using namespace ds::report::history::testing;
using ds::testing::TempDir;

namespace {

void writeText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

const DashboardSeries* findSeries(const DashboardData& d, const std::string& collective, std::size_t bytes,
                                  const std::string& label = "") {
  for (const auto& s : d.series)
    if (s.collective == collective && s.bytes == bytes && s.label == label) return &s;
  return nullptr;
}

DashboardSeries seriesOf(const std::vector<double>& values, bool higherIsBetter) {
  DashboardSeries s;
  s.higherIsBetter = higherIsBetter;
  for (double v : values) {
    DashboardPoint p;
    p.value = v;
    s.points.push_back(p);
  }
  return s;
}

}  // namespace

TEST(HistoryIngest, StoresSweepAndTrainRunsWithAllRows) {
  TempDir dir;
  std::string db = dir.file("h.sqlite");
  SweepSpec s;
  s.collectives = {"allreduce", "allgather"};
  s.label = "pod-a";
  TrainSpec t;
  t.bucketCapsMb = {1, 25};
  auto rep = ingestRuns(db, {writeSweep(dir.file("s.json"), s), writeTrain(dir.file("t.json"), t)});
  ASSERT_EQ(rep.added, 2) << formatIngestReport(rep, db);
  EXPECT_EQ(rep.rejected, 0);
  EXPECT_EQ(rep.files[0].kind, "sweep");
  EXPECT_EQ(rep.files[0].label, "pod-a");
  EXPECT_EQ(rep.files[0].rows, sweepRows(s));
  EXPECT_EQ(rep.files[1].rows, 2u);
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM runs"), 2);
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM sweep_rows"), static_cast<std::int64_t>(sweepRows(s)));
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM train_rows"), 2);
  EXPECT_EQ(countRows(db,
                  "SELECT count(*) FROM runs WHERE label = 'pod-a' AND kind = 'sweep' AND world_size = 4 AND "
                  "backends = 'gloo' AND start_time = '2026-01-01T00:00:00Z' AND git_sha = 'abc1234'"),
            1);
  EXPECT_EQ(
      countRows(db,
            "SELECT count(*) FROM sweep_rows WHERE place = 'out' AND busbw = 10.0 AND bytes = 1048576 AND "
            "collective = 'allgather'"),
      1);
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM train_rows WHERE step_p50_ms = 100.0 AND bucket_cap_mb = 1.0"),
            1);
  // The layout is versioned and marked as ours.
  EXPECT_EQ(countRows(db, "PRAGMA user_version"), kHistorySchemaVersion);
  EXPECT_EQ(countRows(db, "PRAGMA application_id"), kHistoryApplicationId);
  Database d(db, Database::Mode::kExisting, 1000);
  EXPECT_EQ(d.queryText("PRAGMA journal_mode"), "wal");
}

TEST(HistoryIngest, SameRunTwiceIsStoredOnce) {
  TempDir dir;
  std::string db = dir.file("h.sqlite");
  std::string f = writeSweep(dir.file("s.json"), {});
  auto first = ingestRuns(db, {f});
  ASSERT_EQ(first.added, 1);
  // Again in a later call, twice in one call, and a copy under another name and another label.
  auto again = ingestRuns(db, {f, f});
  EXPECT_EQ(again.added, 0);
  EXPECT_EQ(again.alreadyPresent, 2);
  EXPECT_EQ(again.files[0].status, IngestStatus::kAlreadyPresent);
  EXPECT_NE(formatIngestReport(again, db).find("already in the database"), std::string::npos);
  std::string copy = dir.file("copy.json");
  ds::report::writeJsonAtomic(copy, ds::report::readJson(f));
  auto relabelled = ingestRuns(db, {copy}, {.label = "other"});
  EXPECT_EQ(relabelled.alreadyPresent, 1);
  EXPECT_EQ(relabelled.files[0].label, "") << "the label it is stored under is reported, not the new one";
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM sweep_rows"), 4);
  // Two files of one call that are the same run: the second is the duplicate.
  TempDir dir2;
  std::string db2 = dir2.file("h.sqlite");
  auto both = ingestRuns(db2, {f, copy});
  EXPECT_EQ(both.added, 1);
  EXPECT_EQ(both.files[1].status, IngestStatus::kAlreadyPresent);
}

TEST(HistoryIngest, LabelFlagOverridesTheFilesLabel) {
  TempDir dir;
  std::string db = dir.file("h.sqlite");
  SweepSpec a;
  a.label = "from-file";
  SweepSpec b = a;
  b.startTime = isoTime(1);
  ingestRuns(db, {writeSweep(dir.file("a.json"), a)});
  auto rep = ingestRuns(db, {writeSweep(dir.file("b.json"), b)}, {.label = "cluster-7"});
  EXPECT_EQ(rep.files[0].label, "cluster-7");
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM runs WHERE label = 'from-file'"), 1);
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM runs WHERE label = 'cluster-7'"), 1);
  // The one label rule of every tool: a bad label stores nothing.
  SweepSpec c = a;
  c.startTime = isoTime(2);
  EXPECT_THROW(ingestRuns(db, {writeSweep(dir.file("c.json"), c)}, {.label = std::string(65, 'x')}),
               ds::ConfigError);
  EXPECT_THROW(ingestRuns(db, {writeSweep(dir.file("c.json"), c)}, {.label = "tab\there"}), ds::ConfigError);
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM runs"), 2);
}

TEST(HistoryIngest, CorruptFilesAreRejectedByNameAndTheOthersGoIn) {
  TempDir dir;
  std::string db = dir.file("h.sqlite");
  std::string good1 = writeSweep(dir.file("good1.json"), {});
  SweepSpec s2;
  s2.startTime = isoTime(5);
  std::string good2 = writeSweep(dir.file("good2.json"), s2);
  std::string text = ds::testing::readFile(good1);
  std::string truncated = dir.file("truncated.json");
  writeText(truncated, text.substr(0, text.size() / 2));
  std::string wrongSchema = dir.file("wrong_schema.json");
  writeText(wrongSchema, R"({"schema": "somebody.else", "schema_version": "1.0", "rows": []})");
  std::string newer = dir.file("newer.json");
  auto j = nlohmann::json::parse(text);
  j["schema_version"] = "2.0";
  writeText(newer, j.dump());
  std::string empty = dir.file("empty.json");
  writeText(empty, "");
  std::string missing = dir.file("missing.json");
  std::string diag = dir.file("diag.json");
  ds::report::DiagReport report;
  report.host = "node-a";
  ds::report::writeJsonAtomic(diag, ds::report::diagToJson(report));

  auto rep = ingestRuns(db, {truncated, good1, wrongSchema, newer, empty, missing, good2});
  EXPECT_EQ(rep.added, 2) << formatIngestReport(rep, db);
  EXPECT_EQ(rep.rejected, 5);
  for (std::size_t i : {0u, 2u, 3u, 4u, 5u}) {
    EXPECT_EQ(rep.files[i].status, IngestStatus::kRejected) << rep.files[i].path;
    EXPECT_NE(rep.files[i].reason.find(rep.files[i].path), std::string::npos)
        << "the reason names the file: " << rep.files[i].reason;
  }
  EXPECT_NE(rep.files[2].reason.find("somebody.else"), std::string::npos) << rep.files[2].reason;
  EXPECT_NE(rep.files[3].reason.find("newer"), std::string::npos) << rep.files[3].reason;
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM runs"), 2);
  std::string summary = formatIngestReport(rep, db);
  EXPECT_NE(summary.find("REJECTED " + truncated), std::string::npos) << summary;
  EXPECT_NE(summary.find("2 added, 0 already present, 5 rejected"), std::string::npos) << summary;

  // A diag report without fleet mode is a valid file but not history material: rejected, saying why.
  auto d = ingestRuns(db, {diag});
  ASSERT_EQ(d.rejected, 1);
  EXPECT_EQ(d.files[0].kind, "diag");
  EXPECT_NE(d.files[0].reason.find("without fleet mode"), std::string::npos) << d.files[0].reason;
  EXPECT_NE(d.files[0].reason.find("fleet-mode dsdiag reports"), std::string::npos) << d.files[0].reason;

  // Only bad files: nothing stored, and no database created.
  std::string db2 = dir.file("never.sqlite");
  auto bad = ingestRuns(db2, {truncated});
  EXPECT_EQ(bad.rejected, 1);
  EXPECT_FALSE(std::ifstream(db2).good());
}

TEST(HistoryIngest, JournalsOfKilledRunsAndNcclTestsOutputGoIn) {
  TempDir dir;
  std::string db = dir.file("h.sqlite");
  // A sweep killed after its first size: the journal has no end line.
  SweepSpec spec;
  spec.startTime = "2026-02-01T10:00:00.125Z";
  auto run = makeSweep(spec);
  std::string journal = dir.file("killed.journal.jsonl");
  {
    ds::report::SweepJournal j(journal, run.args, run.metadata);
    j.append(run.results[0]);
  }
  const std::string samples = DS_NCCL_SAMPLES_DIR;
  auto rep = ingestRuns(db, {journal, samples + "/all_reduce_2.13.txt", samples + "/all_reduce_j3.json"},
                        {.label = "dgx-b"});
  ASSERT_EQ(rep.added, 3) << formatIngestReport(rep, db);
  EXPECT_EQ(rep.files[0].rows, 2u);
  EXPECT_EQ(
      countRows(db,
            "SELECT count(*) FROM runs WHERE origin = 'journal' AND status = 'incomplete' AND row_count = 2"),
      1);
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM runs WHERE origin LIKE 'nccl-tests%' AND backends = 'nccl'"), 2);
  // Every time in one sortable form, whatever the file wrote (nccl-tests JSON: "2025-05-04 01:00:00").
  EXPECT_EQ(countRows(db,
                  "SELECT count(*) FROM runs WHERE start_time NOT GLOB "
                  "'[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]*Z'"),
            0);
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM runs WHERE start_time = '2026-02-01T10:00:00.125Z'"), 1);
}

TEST(HistoryIngest, WriteLockHeldPastTheTimeoutIsAClearErrorAndStoresNothing) {
  TempDir dir;
  std::string db = dir.file("h.sqlite");
  ASSERT_EQ(ingestRuns(db, {writeSweep(dir.file("a.json"), {})}).added, 1);
  SweepSpec b;
  b.startTime = isoTime(1);
  std::string fb = writeSweep(dir.file("b.json"), b);
  {
    Database holder(db, Database::Mode::kExisting, 1000);
    WriteTransaction tx(holder);  // another writer, mid-transaction
    try {
      ingestRuns(db, {fb}, {.label = "", .busyTimeoutMs = 200});
      FAIL() << "the ingest did not wait for the lock";
    } catch (const ds::IoError& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("write lock"), std::string::npos) << m;
      EXPECT_NE(m.find(db), std::string::npos) << m;
    }
  }
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(ingestRuns(db, {fb}).added, 1) << "the lock is free again";
}

TEST(HistoryDatabase, NewerLayoutIsRefusedWithWhatToDo) {
  TempDir dir;
  std::string db = dir.file("h.sqlite");
  ingestRuns(db, {writeSweep(dir.file("s.json"), {})});
  {
    Database d(db, Database::Mode::kExisting, 1000);
    d.exec("PRAGMA user_version = 99");
  }
  SweepSpec s2;
  s2.startTime = isoTime(1);
  try {
    ingestRuns(db, {writeSweep(dir.file("s2.json"), s2)});
    FAIL() << "a newer layout was written into";
  } catch (const ds::ConfigError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("newer dsreport"), std::string::npos) << m;
    EXPECT_NE(m.find("layout 99"), std::string::npos) << m;
    EXPECT_NE(m.find(db), std::string::npos) << m;
  }
  EXPECT_THROW(queryDashboard(db), ds::ConfigError);
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM runs"), 1);
}

// Schema 1.2's tails go into sweep_rows.p90_us / p999_us; a file of schema 1.1 (no tails) stores NULL
// (unknown), never 0; a layout-2 database gains the columns on open, its rows NULL.
TEST(HistoryIngest, TailsAreStoredAndUnknownTailsAreNull) {
  TempDir dir;
  const std::string db = dir.file("h.sqlite");
  SweepSpec s;
  auto run = makeSweep(s);
  const double p999 = *run.results[0].outOfPlace.iter.p999Us;
  ASSERT_EQ(ingestRuns(db, {writeSweep(dir.file("s.json"), s)}).added, 1);
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM sweep_rows WHERE p90_us IS NULL OR p999_us IS NULL"), 0);
  {
    Database d(db, Database::Mode::kExisting, 1000);
    Statement st(d, "SELECT p999_us FROM sweep_rows WHERE seq = 0 AND place = 'out'");
    ASSERT_TRUE(st.step());
    EXPECT_DOUBLE_EQ(st.real(0), p999);
  }
  // The same run as dsperf 1.1 wrote it.
  SweepSpec later;
  later.startTime = isoTime(1);
  auto old = ds::report::sweepToJson(makeSweep(later));
  old["schema_version"] = "1.1";
  for (auto& row : old["results"]) {
    for (const char* place : {"out_of_place", "in_place"}) {
      row[place]["iter"].erase("p90_us");
      row[place]["iter"].erase("p999_us");
    }
  }
  ds::report::writeJsonAtomic(dir.file("old.json"), old);
  ASSERT_EQ(ingestRuns(db, {dir.file("old.json")}).added, 1);
  EXPECT_EQ(
      countRows(db, "SELECT count(*) FROM sweep_rows WHERE p90_us IS NULL AND p999_us IS NULL AND p99_us > 0"),
      static_cast<std::int64_t>(sweepRows(s)));

  // Layout 2 (before the tails) holding the first run, as the dsreport of that layout stored it: the
  // next ingest migrates it, and the stored rows' tails read NULL (unknown).
  const std::string v2 = dir.file("v2.sqlite");
  {
    Database d(v2, Database::Mode::kCreate, 1000);
    createLayoutAt(d, 2);
    EXPECT_EQ(d.queryInt("SELECT count(*) FROM pragma_table_info('sweep_rows') WHERE name = 'p90_us'"), 0);
    std::string cols;
    Statement st(d, "SELECT name FROM pragma_table_info('sweep_rows')");
    while (st.step()) cols += (cols.empty() ? "" : ", ") + st.text(0);
    d.exec(fmt::format("ATTACH DATABASE '{}' AS ref", db));
    d.exec(fmt::format(
        "INSERT INTO runs SELECT * FROM ref.runs WHERE source_file LIKE '%s.json'; INSERT INTO sweep_rows "
        "SELECT {} FROM ref.sweep_rows WHERE run_id IN (SELECT run_id FROM runs)",
        cols));
    d.exec("DETACH DATABASE ref");
  }
  ASSERT_EQ(countRows(v2, "SELECT count(*) FROM sweep_rows"), static_cast<std::int64_t>(sweepRows(s)));
  ASSERT_EQ(ingestRuns(v2, {dir.file("old.json")}).added, 1) << "into a layout-2 file";
  EXPECT_EQ(countRows(v2, "PRAGMA user_version"), kHistorySchemaVersion);
  EXPECT_EQ(countRows(v2, "SELECT count(*) FROM sweep_rows WHERE p90_us IS NULL AND p999_us IS NULL"),
            2 * static_cast<std::int64_t>(sweepRows(s)))
      << "the migrated rows and the 1.1 file's";
  EXPECT_EQ(countRows(v2, "SELECT count(*) FROM runs"), 2);
}

TEST(HistoryDatabase, AnotherApplicationsDatabaseIsNotWrittenInto) {
  TempDir dir;
  std::string db = dir.file("other.sqlite");
  {
    Database d(db, Database::Mode::kCreate, 1000);
    d.exec("CREATE TABLE accounts (id INTEGER)");
  }
  EXPECT_THROW(ingestRuns(db, {writeSweep(dir.file("s.json"), {})}), ds::ConfigError);
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM sqlite_master WHERE name = 'runs'"), 0);
  // Not SQLite at all.
  std::string text = dir.file("text.sqlite");
  writeText(text, std::string(4096, 'x'));
  EXPECT_THROW(ingestRuns(text, {writeSweep(dir.file("s.json"), {})}), ds::IoError);
}

// Issue 18: a database that is not a dsperf history, or is damaged, is refused with the file, what is
// wrong and what to do, by ingest and by the dashboard alike; never with our SQL.
TEST(HistoryDatabase, NotAHistoryOrDamagedSaysWhichFileWhatAndWhatToDo) {
  TempDir dir;
  const std::string run = writeSweep(dir.file("s.json"), {});
  auto messageOf = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const ds::Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  auto expectSays = [](const std::string& m, const std::string& path, const std::vector<std::string>& words) {
    EXPECT_NE(m.find("'" + path + "'"), std::string::npos) << m;
    for (const auto& w : words) EXPECT_NE(m.find(w), std::string::npos) << w << "\n  in: " << m;
    for (const char* sql : {"SELECT", "INSERT", "PRAGMA", "CREATE", "sqlite_master", "pragma_"})
      EXPECT_EQ(m.find(sql), std::string::npos) << "internal SQL in: " << m;
  };
  // A text file.
  const std::string text = dir.file("notes.sqlite");
  writeText(text, std::string(4096, 'x'));
  expectSays(messageOf([&] { ingestRuns(text, {run}); }), text, {"is not a SQLite database", "--db"});
  expectSays(messageOf([&] { queryDashboard(text); }), text, {"is not a SQLite database", "--db"});
  // Someone else's tables.
  const std::string other = dir.file("accounts.sqlite");
  {
    Database d(other, Database::Mode::kCreate, 1000);
    d.exec("CREATE TABLE accounts (id INTEGER, owner TEXT)");
  }
  expectSays(messageOf([&] { ingestRuns(other, {run}); }), other, {"another application", "--db"});
  expectSays(messageOf([&] { queryDashboard(other); }), other, {"another application", "--db"});
  // A history whose table pages were overwritten.
  const std::string damaged = dir.file("damaged.sqlite");
  ASSERT_EQ(ingestRuns(damaged, {run}).added, 1);
  {
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096);  // page 2 on: the tables, not the header and schema page
    const std::string junk(4 * 4096, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  expectSays(messageOf([&] { queryDashboard(damaged); }), damaged, {"damaged", "backup"});
  // A directory.
  expectSays(messageOf([&] { ingestRuns(dir.path(), {run}); }), dir.path(), {"is a directory", "--db"});
}

TEST(HistoryDashboard, MissingOrEmptyDatabaseSaysHowToMakeOne) {
  TempDir dir;
  try {
    queryDashboard(dir.file("none.sqlite"));
    FAIL();
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("dsreport ingest"), std::string::npos) << e.what();
  }
  writeText(dir.file("empty.sqlite"), "");
  EXPECT_THROW(queryDashboard(dir.file("empty.sqlite")), ds::ConfigError);
  DashboardOptions bad;
  bad.window = 0;
  EXPECT_THROW(queryDashboard(dir.file("none.sqlite"), bad), ds::ConfigError);
}

TEST(HistoryJudge, TooLittleHistoryGivesNoVerdict) {
  auto s = seriesOf({10, 10, 1}, true);
  judgeSeries(s, {});
  for (const auto& p : s.points) {
    EXPECT_FALSE(p.hasBaseline);
    EXPECT_FALSE(p.regressed);
  }
}

TEST(HistoryJudge, StepRegressionIsFlaggedOnceTheLevelIsPastIt) {
  // busbw: 10 GB/s with small noise for 10 runs, then a lasting drop to 8.
  auto s =
      seriesOf({10.0, 10.1, 9.9, 10.05, 9.95, 10.0, 10.02, 9.97, 10.03, 9.98, 8.0, 8.05, 7.95, 8.0}, true);
  judgeSeries(s, {});
  for (std::size_t i = 0; i < 12; ++i) EXPECT_FALSE(s.points[i].regressed || s.points[i].improved) << i;
  // The third low point: the current level (3 points) lies wholly below the 8 history points.
  EXPECT_TRUE(s.points[12].regressed);
  EXPECT_NEAR(s.points[12].baseline, 10.0, 0.03);
  EXPECT_NEAR(s.points[12].changePct, -20.0, 0.5);
  EXPECT_NEAR(s.points[12].p, 2.0 / 165.0, 1e-12);  // complete separation, 3 vs 8
  EXPECT_GE(s.regressions, 1);
  EXPECT_EQ(s.improvements, 0);
  EXPECT_TRUE(s.latestRegressed) << "a regression within the current level is what needs attention now";
}

TEST(HistoryJudge, NoiseWithinTheThresholdOrTheSpreadIsNotFlagged) {
  // +-3% around 10: under the 5% threshold.
  auto quiet = seriesOf({10, 10.3, 9.7, 10.2, 9.8, 10.3, 9.7, 10.1, 9.75, 10.28, 9.72, 10.25}, true);
  judgeSeries(quiet, {});
  EXPECT_EQ(quiet.regressions + quiet.improvements, 0);
  // Swings of +-10%: levels 8% below the baseline happen, but they rank inside the history's spread.
  auto noisy = seriesOf({10, 11.2, 8.9, 10.6, 9.3, 11.0, 8.8, 10.9, 9.1, 9.2, 8.9, 10.8, 9.0}, true);
  judgeSeries(noisy, {});
  EXPECT_EQ(noisy.regressions + noisy.improvements, 0);
  ASSERT_TRUE(noisy.points[10].hasBaseline);
  EXPECT_LT(noisy.points[10].changePct, -5.0);  // beyond the threshold: the test, not the floor, decided
  EXPECT_GT(noisy.points[10].p, 0.05);
}

TEST(HistoryJudge, AlternatingBetweenTwoLevelsIsNotARegressionButItsDropIs) {
  // A series that alternates between two levels (two NUMA placements, say): the rolling median of 5
  // sat on one level with a zero MAD, and the old rule flagged every point of the other level.
  std::vector<double> v;
  for (int i = 0; i < 20; ++i) v.push_back(i % 2 ? 80.0 : 100.0);
  auto flat = seriesOf(v, true);
  judgeSeries(flat, {});
  EXPECT_EQ(flat.regressions + flat.improvements, 0);
  for (const auto& p : flat.points) EXPECT_GT(p.p, 0.05);
  // Both levels drop by 25%: flagged within the next 3 runs.
  for (int i = 0; i < 6; ++i) v.push_back(i % 2 ? 60.0 : 75.0);
  auto dropped = seriesOf(v, true);
  judgeSeries(dropped, {});
  int firstFlag = -1;
  for (std::size_t i = 0; i < dropped.points.size(); ++i) {
    if (dropped.points[i].regressed && firstFlag < 0) firstFlag = static_cast<int>(i);
  }
  EXPECT_GE(firstFlag, 20);
  EXPECT_LE(firstFlag, 22);
  EXPECT_EQ(dropped.improvements, 0);
}

TEST(HistoryJudge, LowerIsBetterForStepTimes) {
  auto s = seriesOf({100, 101, 99, 100, 100, 99, 101, 100, 125, 126, 124, 80, 81, 79}, false);
  judgeSeries(s, {});
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(s.points[i].regressed) << i;
  EXPECT_TRUE(s.points[10].regressed);
  EXPECT_FALSE(s.points[10].improved);
  EXPECT_TRUE(s.points[13].improved);
  EXPECT_GE(s.regressions, 1);
  EXPECT_GE(s.improvements, 1);
  EXPECT_FALSE(s.latestRegressed);
}

TEST(HistoryJudge, SettingsTheTestCanNeverPassAreRefusedWithAFix) {
  DashboardOptions o;
  checkDashboardOptions(o);
  o.recent = 1;  // one point against 8: the smallest p is 2/9
  try {
    checkDashboardOptions(o);
    FAIL();
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("raise --recent or --window"), std::string::npos) << e.what();
  }
}

TEST(HistoryDashboard, SeriesFromTheDatabaseFlagTheStepAndNotTheNoise) {
  TempDir dir;
  std::string db = dir.file("h.sqlite");
  std::vector<std::string> files;
  // 10 runs per label; pod-a's 256 MiB... all sizes drop 25% from run 6 on; pod-b stays within 2%.
  const double noise[] = {0, 0.01, -0.015, 0.02, -0.01, 0.005, -0.02, 0.015, 0, -0.005};
  for (int i = 0; i < 10; ++i) {
    SweepSpec a;
    a.label = "pod-a";
    a.startTime = isoTime(i);
    a.busBw = (i >= 6 ? 7.5 : 10.0) * (1 + noise[i]);
    files.push_back(writeSweep(dir.file(fmt::format("a{}.json", i)), a));
    SweepSpec b = a;
    b.label = "pod-b";
    b.collectives = {"allreduce", "broadcast"};
    b.busBw = 20.0 * (1 + noise[(i + 3) % 10]);
    files.push_back(writeSweep(dir.file(fmt::format("b{}.json", i)), b));
    TrainSpec t;
    t.label = "pod-a";
    t.startTime = isoTime(i);
    t.stepMs = (i >= 7 ? 130.0 : 100.0) * (1 + noise[i]);
    files.push_back(writeTrain(dir.file(fmt::format("t{}.json", i)), t));
  }
  auto rep = ingestRuns(db, files);
  ASSERT_EQ(rep.added, 30) << formatIngestReport(rep, db);

  auto d = queryDashboard(db);
  EXPECT_EQ(d.runs, 30);
  EXPECT_EQ(d.labels, (std::vector<std::string>{"pod-a", "pod-b"}));
  EXPECT_EQ(d.backends, (std::vector<std::string>{"gloo"}));
  EXPECT_EQ(d.collectives, (std::vector<std::string>{"allreduce", "broadcast", "train"}));
  EXPECT_EQ(d.firstTime, isoTime(0));
  EXPECT_EQ(d.lastTime, isoTime(9));
  // pod-a: allreduce at 1 and 256 MiB, train; pod-b: allreduce and broadcast at 1 and 256 MiB.
  ASSERT_EQ(d.series.size(), 7u);
  EXPECT_EQ(d.series[0].label, "pod-a");
  EXPECT_EQ(d.series[2].collective, "train") << "train after the busbw series of its label";

  const DashboardSeries* a256 = findSeries(d, "allreduce", 256 * kMiB, "pod-a");
  ASSERT_NE(a256, nullptr);
  EXPECT_EQ(a256->title, "allreduce busbw, 256 MiB, f32 sum, 4 ranks");
  EXPECT_EQ(a256->unit, "GB/s");
  EXPECT_EQ(a256->id, "busbw|pod-a|gloo|allreduce|f32|sum|268435456|4");
  ASSERT_EQ(a256->points.size(), 10u);
  EXPECT_EQ(a256->points[0].time, isoTime(0));
  EXPECT_EQ(a256->points[6].sourceFile, dir.file("a6.json"));
  EXPECT_TRUE(a256->points[8].regressed);  // the third run at the new level
  EXPECT_GE(a256->regressions, 1);
  EXPECT_TRUE(a256->latestRegressed);
  for (int i = 0; i < 8; ++i) EXPECT_FALSE(a256->points[i].regressed || a256->points[i].improved) << i;

  for (const auto& s : d.series) {
    if (s.label == "pod-b") {
      EXPECT_EQ(s.regressions + s.improvements, 0) << s.id;
    }
  }
  const DashboardSeries* train = findSeries(d, "train", 0, "pod-a");
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->metric, "train_step_p50");
  EXPECT_FALSE(train->higherIsBetter);
  EXPECT_TRUE(train->latestRegressed);
  EXPECT_TRUE(train->points[9].regressed);
  EXPECT_NE(train->config.find("mlp:1024x4"), std::string::npos) << train->config;

  // Filters: by label, collective and size; the lists for the filter controls stay complete.
  DashboardOptions f;
  f.labels = {"pod-b"};
  f.collectives = {"broadcast"};
  f.sizes = {kMiB};
  auto fd = queryDashboard(db, f);
  ASSERT_EQ(fd.series.size(), 1u);
  EXPECT_EQ(fd.series[0].collective, "broadcast");
  EXPECT_EQ(fd.series[0].bytes, kMiB);
  EXPECT_EQ(fd.runs, 10);
  EXPECT_EQ(fd.labels.size(), 2u);
  DashboardOptions onlyTrain;
  onlyTrain.collectives = {"train"};
  EXPECT_EQ(queryDashboard(db, onlyTrain).series.size(), 1u);
  DashboardOptions otherBackend;
  otherBackend.backends = {"nccl"};
  EXPECT_TRUE(queryDashboard(db, otherBackend).series.empty());
}
