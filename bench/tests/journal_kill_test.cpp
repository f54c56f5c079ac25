// The sweep journal survives SIGKILL (issue 9): dsbench coll is killed at 20 random points of a sweep.
// Every journal left behind must be readable by dsreport's loader and hold every size that finished
// (was printed) before the kill, in the order of a complete run.
//
// Ground truth is the row table dsbench prints (flushed per row) to stdout. The journal reporter runs
// before the text reporter (bench/coll/coll.cpp makeReporters), so every printed row must be in the
// journal; the journal may hold one more row than was printed (killed between the two).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <thread>

#include "engine/testing/subprocess.h"
#include "reports/run/run_file.h"

using namespace ds::testing;
using namespace std::chrono_literals;

namespace {

// Small sizes and few iterations, several collectives and dtypes: about 150 rows in about half a
// second on one rank (a few ms per row), so that kills land all over the sweep.
std::vector<std::string> sweep(const std::string& json) {
  return {binDir() + "/dsbench",
          "coll",
          "-b",
          "8",
          "-e",
          "1M",
          "-f",
          "2",
          "-n",
          "20",
          "-w",
          "1",
          "-d",
          "float,double",
          "--coll",
          "allreduce,allgather,broadcast,reduce",
          "-J",
          json};
}

// The rows of the printed table: lines that start with the size (comments start with '#'; the log
// goes to stderr).
int printedRows(const std::string& out) {
  std::istringstream in(out);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    auto b = line.find_first_not_of(" \t");
    if (b != std::string::npos && std::isdigit(static_cast<unsigned char>(line[b]))) ++n;
  }
  return n;
}

std::vector<std::string> keys(const ds::report::SweepRun& run) {
  std::vector<std::string> k;
  for (const auto& m : run.results) k.push_back(m.collective + "/" + m.dtype + "/" + std::to_string(m.bytes));
  return k;
}

RunOptions options() {
  // A port of its own: a single-rank run still starts a store server, and tests run in parallel.
  RunOptions o = cleanOptions(std::chrono::seconds(30), {{"MASTER_PORT", std::to_string(unusedPort())}});
  o.unsetEnv.push_back("DSBENCH_JSON");
  o.unsetEnv.push_back("DSBENCH_JOURNAL");
  return o;
}

}  // namespace

TEST(JournalKill, TwentyRandomSigkillsLeaveReadableCompleteJournals) {
  TempDir dir;
  // A complete run: the reference order of rows and how long a sweep takes.
  const std::string refJson = dir.file("ref.json");
  auto ref = run(sweep(refJson), options());
  ASSERT_EQ(ref.exitCode, 0) << ref.err;
  const auto full = ds::report::loadRunFile(refJson);
  const auto order = keys(*full.sweep);
  ASSERT_GE(order.size(), 50u);
  ASSERT_EQ(printedRows(ref.out), static_cast<int>(order.size())) << ref.out;

  // A random point of the sweep: after a random number of printed rows, plus a random 0-3 ms so that
  // the kill also lands inside a row (while it is measured or being written).
  const unsigned seed = static_cast<unsigned>(std::random_device{}());
  RecordProperty("seed", static_cast<int>(seed));
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> afterRows(0, static_cast<int>(order.size()) - 1);
  std::uniform_int_distribution<int> extraUs(0, 3000);
  int midSweep = 0;
  for (int k = 0; k < 20; ++k) {
    const std::string json = dir.file("k" + std::to_string(k) + ".json");
    const std::string journal = dir.file("k" + std::to_string(k) + ".journal.jsonl");
    const int target = afterRows(gen);
    const int extra = extraUs(gen);
    SCOPED_TRACE(::testing::Message() << "kill " << k << " after " << target << " row(s) + " << extra
                                    << " us (seed " << seed << ")");
    Process p(sweep(json), options());
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (printedRows(readFile(p.stdoutPath())) < target && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(extra));
    ::kill(p.pid(), SIGKILL);
    RunResult r = p.wait();
    const int printed = printedRows(r.out);
    if (::access(journal.c_str(), F_OK) != 0) {
      EXPECT_EQ(printed, 0) << "rows were printed but no journal exists";
      continue;
    }
    if (readFile(journal).empty()) {
      EXPECT_EQ(printed, 0) << "rows were printed but the journal is empty";
      continue;
    }
    ds::report::RunFile f;
    ASSERT_NO_THROW(f = ds::report::loadRunFile(journal)) << readFile(journal).substr(0, 2000);
    ASSERT_TRUE(f.sweep.has_value());
    const auto got = keys(*f.sweep);
    EXPECT_LE(got.size(), order.size());
    // Every row is the one a complete run has at that position (nothing lost in the middle, nothing
    // duplicated).
    for (std::size_t i = 0; i < got.size() && i < order.size(); ++i)
      EXPECT_EQ(got[i], order[i]) << "row " << i;
    // Every printed (finished) size is in the journal.
    EXPECT_GE(static_cast<int>(got.size()), printed) << r.out;
    EXPECT_LE(static_cast<int>(got.size()), printed + 1);
    if (r.exitCode == -SIGKILL && got.size() < order.size()) {
      ++midSweep;
      EXPECT_EQ(f.sweep->summary.status, "incomplete");
    }
  }
  // The random points must actually exercise killed sweeps, not only finished ones.
  EXPECT_GE(midSweep, 15);
}
