// Fault: `dsreport ingest` SIGKILLed at random points, 20 times, into one database. After every kill
// the database passes SQLite's integrity check, each batch (one ingest call) is wholly present or
// wholly absent, every stored run has all its rows, and the next ingest works.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <iostream>
#include <random>
#include <thread>

#include "engine/testing/subprocess.h"
#include "reports/history/sqlite_db.h"
#include "reports/history/tests/history_fixtures.h"

using namespace ds::report::history;
using namespace ds::report::history::testing;
using ds::testing::TempDir;

namespace {

constexpr int kKills = 20;
constexpr int kFilesPerBatch = 25;

std::vector<std::string> makeBatch(const TempDir& dir, int batch) {
  std::vector<std::string> files;
  for (int i = 0; i < kFilesPerBatch; ++i) {
    SweepSpec s;
    s.startTime = isoTime(batch * kFilesPerBatch + i);
    s.label = fmt::format("batch-{}", batch);
    s.collectives = {"allreduce", "allgather", "broadcast"};
    s.sizes.clear();
    for (std::size_t b = 1024; b <= 256 * kMiB; b *= 2) s.sizes.push_back(b);
    files.push_back(writeSweep(dir.file(fmt::format("b{}_{}.json", batch, i)), s));
  }
  return files;
}

std::vector<std::string> ingestArgs(const std::string& db, const std::vector<std::string>& files) {
  std::vector<std::string> args{ds::testing::binDir() + "/dsreport", "ingest", "-q", "--db", db};
  args.insert(args.end(), files.begin(), files.end());
  return args;
}

}  // namespace

TEST(IngestFault, KilledIngestsNeverCorruptTheDatabase) {
  TempDir dir;
  std::string db = dir.file("h.sqlite");
  std::vector<std::vector<std::string>> batches;
  for (int b = 0; b <= kKills; ++b) batches.push_back(makeBatch(dir, b));

  // Batch 0 goes in whole: the database exists, and its time tells how long one ingest takes. Its
  // second ingest (every run already there) takes about as long as reading the files: the write
  // transaction of a real ingest lies between the two times.
  auto first = ds::testing::run(ingestArgs(db, batches[0]), ds::testing::cleanOptions());
  ASSERT_EQ(first.exitCode, 0) << first.out << first.err;
  auto skip = ds::testing::run(ingestArgs(db, batches[0]), ds::testing::cleanOptions());
  ASSERT_EQ(skip.exitCode, 0) << skip.out << skip.err;
  const double fullMs = std::max(20.0, first.seconds * 1000.0);
  const double readMs = std::min(fullMs, skip.seconds * 1000.0);

  std::random_device rd;
  const unsigned seed = rd();
  std::mt19937 rng(seed);
  // Half the kills anywhere in the run, half aimed at its write transaction.
  std::uniform_real_distribution<double> anywhere(0.0, 1.2 * fullMs);
  std::uniform_real_distribution<double> writing(0.8 * readMs, fullMs);
  std::cout << "seed " << seed << "; one ingest of " << kFilesPerBatch << " files took " << fullMs
            << " ms, reading them " << readMs << " ms\n";
  std::vector<bool> present(batches.size(), false);
  present[0] = true;
  int killed = 0, landedWhole = 0, landedNone = 0;
  for (int b = 1; b <= kKills; ++b) {
    double wait = b % 2 ? anywhere(rng) : writing(rng);
    {
      ds::testing::Process p(ingestArgs(db, batches[static_cast<std::size_t>(b)]),
                             ds::testing::cleanOptions());
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long>(wait * 1000)));
      ::kill(p.pid(), SIGKILL);
      auto r = p.wait();
      if (r.exitCode == -SIGKILL)
        ++killed;
      else
        ASSERT_EQ(r.exitCode, 0) << "kill " << b << " after " << wait << " ms: " << r.out << r.err;
    }
    Database d(db, Database::Mode::kExisting, 10000);
    ASSERT_EQ(d.queryText("PRAGMA integrity_check"), "ok")
        << "after kill " << b << " at " << wait << " ms (seed " << seed << ")";
    Statement st(d, "SELECT count(*) FROM runs WHERE label = ?1");
    st.bind(1, fmt::format("batch-{}", b));
    ASSERT_TRUE(st.step());
    std::int64_t n = st.integer(0);
    ASSERT_TRUE(n == 0 || n == kFilesPerBatch)
        << "batch " << b << " is half stored (" << n << " of " << kFilesPerBatch << " runs) after a kill at "
        << wait << " ms (seed " << seed << ")";
    present[static_cast<std::size_t>(b)] = n == kFilesPerBatch;
    (n ? landedWhole : landedNone) += 1;
    ASSERT_EQ(
        d.queryInt("SELECT count(*) FROM runs r WHERE row_count != (SELECT count(*) FROM sweep_rows s WHERE "
                   "s.run_id = r.run_id)"),
        0)
        << "a run lost rows after kill " << b;
    std::int64_t expected = 0;
    for (bool p : present) expected += p ? kFilesPerBatch : 0;
    ASSERT_EQ(d.queryInt("SELECT count(*) FROM runs"), expected) << "stray or lost runs after kill " << b;
  }
  std::cout << kKills << " kills (" << killed << " while running): " << landedWhole
            << " batches stored whole, " << landedNone << " not at all\n";

  // Everything again in one call: the killed batches go in, the stored ones are skipped.
  std::vector<std::string> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  auto last = ds::testing::run(ingestArgs(db, all), ds::testing::cleanOptions(std::chrono::seconds(120)));
  ASSERT_EQ(last.exitCode, 0) << last.out << last.err;
  Database d(db, Database::Mode::kExisting, 10000);
  EXPECT_EQ(d.queryText("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(d.queryInt("SELECT count(*) FROM runs"),
            static_cast<std::int64_t>(batches.size()) * kFilesPerBatch);
  EXPECT_EQ(
      d.queryInt("SELECT count(*) FROM runs r WHERE row_count != (SELECT count(*) FROM sweep_rows s WHERE "
                 "s.run_id = r.run_id)"),
      0);
}
