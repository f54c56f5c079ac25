// `dsreport ingest` as users run it: exit codes, rejected files named on stderr, --label, and two
// processes ingesting into one database at the same time.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "engine/testing/subprocess.h"
#include "reports/history/sqlite_db.h"
#include "reports/history/tests/history_fixtures.h"

using namespace ds::report::history;
using namespace ds::report::history::testing;
using ds::testing::TempDir;

namespace {

std::string dsreport() { return ds::testing::binDir() + "/dsreport"; }

}  // namespace

TEST(IngestCli, ExitCodesAndRejectedFilesByName) {
  TempDir dir;
  std::string db = dir.file("h.sqlite");
  std::string good = writeSweep(dir.file("good.json"), {});
  std::string bad = dir.file("bad.json");
  std::ofstream(bad) << R"({"schema": "dsperf.sweep", "schema_version": "1.0", "resu)";

  auto ok = ds::testing::run({dsreport(), "ingest", good, "--db", db}, ds::testing::cleanOptions());
  EXPECT_EQ(ok.exitCode, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("added"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("1 added, 0 already present, 0 rejected"), std::string::npos) << ok.out;

  auto again = ds::testing::run({dsreport(), "ingest", good, "--db", db}, ds::testing::cleanOptions());
  EXPECT_EQ(again.exitCode, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("already in the database"), std::string::npos) << again.out;

  SweepSpec s2;
  s2.startTime = isoTime(2);
  std::string good2 = writeSweep(dir.file("good2.json"), s2);
  auto mixed = ds::testing::run({dsreport(), "ingest", bad, good2, "--db", db, "--label", "pod-9"},
                                ds::testing::cleanOptions());
  EXPECT_EQ(mixed.exitCode, 2) << mixed.out << mixed.err;
  EXPECT_NE(mixed.err.find("rejected " + bad), std::string::npos) << mixed.err;
  EXPECT_NE(mixed.out.find("1 added, 0 already present, 1 rejected"), std::string::npos) << mixed.out;
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM runs"), 2);
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM runs WHERE label = 'pod-9'"), 1);

  // The database from the environment; a missing --db is a usage error.
  SweepSpec s3;
  s3.startTime = isoTime(3);
  std::string good3 = writeSweep(dir.file("good3.json"), s3);
  auto env = ds::testing::run({dsreport(), "ingest", "-q", good3},
                              ds::testing::cleanOptions(std::chrono::seconds(60), {{"DSREPORT_DB", db}}));
  EXPECT_EQ(env.exitCode, 0) << env.out << env.err;
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM runs"), 3);
  auto noDb = ds::testing::run({dsreport(), "ingest", good3}, ds::testing::cleanOptions());
  EXPECT_EQ(noDb.exitCode, 2) << noDb.out << noDb.err;

  // A database that is not ours: exit 2 with the reason.
  std::string other = dir.file("other.sqlite");
  {
    Database d(other, Database::Mode::kCreate, 1000);
    d.exec("CREATE TABLE t (x)");
  }
  auto foreign = ds::testing::run({dsreport(), "ingest", good, "--db", other}, ds::testing::cleanOptions());
  EXPECT_EQ(foreign.exitCode, 2) << foreign.out << foreign.err;
  EXPECT_NE(foreign.err.find("another application"), std::string::npos) << foreign.err;
}

TEST(IngestCli, TwoProcessesIngestingAtOnceBothSucceed) {
  TempDir dir;
  std::string db = dir.file("h.sqlite");
  // Each process gets 30 runs of its own and 10 that both ingest; the database does not exist yet,
  // so both also race to create the layout.
  const int own = 30, shared = 10;
  std::vector<std::string> argsA{dsreport(), "ingest", "-q", "--db", db};
  std::vector<std::string> argsB = argsA;
  auto make = [&](const std::string& name, int hour) {
    SweepSpec s;
    s.startTime = isoTime(hour);
    s.collectives = {"allreduce", "allgather", "broadcast"};
    s.sizes.clear();
    for (std::size_t b = 1024; b <= 256 * kMiB; b *= 2) s.sizes.push_back(b);
    return writeSweep(dir.file(name), s);
  };
  for (int i = 0; i < own; ++i) argsA.push_back(make(fmt::format("a{}.json", i), i));
  for (int i = 0; i < own; ++i) argsB.push_back(make(fmt::format("b{}.json", i), 100 + i));
  for (int i = 0; i < shared; ++i) {
    std::string f = make(fmt::format("s{}.json", i), 200 + i);
    argsA.push_back(f);
    argsB.push_back(f);
  }
  ds::testing::Process a(argsA, ds::testing::cleanOptions(std::chrono::seconds(120)));
  ds::testing::Process b(argsB, ds::testing::cleanOptions(std::chrono::seconds(120)));
  auto ra = a.wait();
  auto rb = b.wait();
  EXPECT_EQ(ra.exitCode, 0) << ra.out << ra.err;
  EXPECT_EQ(rb.exitCode, 0) << rb.out << rb.err;
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM runs"), 2 * own + shared);
  // Every run has all its rows; the shared runs were stored by exactly one of the two.
  EXPECT_EQ(countRows(db,
                  "SELECT count(*) FROM runs r WHERE row_count != (SELECT count(*) FROM sweep_rows s WHERE "
                  "s.run_id = r.run_id)"),
            0);
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM sweep_rows"), (2 * own + shared) * 3 * 19 * 2);
  Database d(db, Database::Mode::kExisting, 1000);
  EXPECT_EQ(d.queryText("PRAGMA integrity_check"), "ok");
  std::cout << "two ingests of " << own + shared << " files each (" << 3 * 19 * 2
            << " rows per file): " << ra.seconds << " s and " << rb.seconds << " s\n";
}
