// `dsreport compare` as CI runs it: the exit codes (0 pass, 1 regression, 2 bad input, 4
// inconclusive), several runs per side split by "--", and the messages for a misplaced "--".
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/testing/subprocess.h"
#include "reports/compare/tests/compare_fixtures.h"
#include "reports/json_io.h"
#include "reports/sweep/sweep_schema.h"

using namespace ds::report;
using ds::testing::TempDir;

namespace {

std::string dsreport() { return ds::testing::binDir() + "/dsreport"; }

// A two-size allreduce sweep whose time per op is timeUs at every size; with repeats > 1, the
// passes spread 1% around it.
std::string writeRun(const std::string& path, double timeUs, int repeats) {
  SweepRun run;
  run.metadata.worldSize = 2;
  run.metadata.hosts = {"node-a"};
  run.args.repeat = repeats;
  for (std::size_t bytes : {std::size_t{4096}, std::size_t{1} << 20}) {
    run.results.push_back(ds::report::testing::row(bytes, timeUs, 0.01, repeats, 7));
  }
  run.summary = summarize(run.results);
  writeJsonAtomic(path, sweepToJson(run));
  return path;
}

ds::testing::RunResult compare(const std::vector<std::string>& args) {
  std::vector<std::string> argv{dsreport(), "compare"};
  argv.insert(argv.end(), args.begin(), args.end());
  return ds::testing::run(argv, ds::testing::cleanOptions());
}

}  // namespace

TEST(CompareCli, OneRunASideIsInconclusiveWithItsOwnExitCode) {
  TempDir dir;
  auto a = writeRun(dir.file("a.json"), 100, 1);
  auto b = writeRun(dir.file("b.json"), 150, 1);
  std::string json = dir.file("cmp.json");
  auto r = compare({a, b, "--json", json});
  EXPECT_EQ(r.exitCode, 4) << r.out << r.err;
  EXPECT_NE(r.out.find("Verdict: INCONCLUSIVE (exit 4)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("compare 5 runs a side"), std::string::npos) << r.out;
  EXPECT_EQ(readJson(json)["exit_code"], 4);
  auto same = compare({a, writeRun(dir.file("a2.json"), 101, 1)});
  EXPECT_EQ(same.exitCode, 0) << same.out << same.err;
}

TEST(CompareCli, RunsSplitByDoubleDashGiveAVerdictRepeatsInOneFileDoNot) {
  TempDir dir;
  // One run a side with tight repeats, 30% slower: inconclusive (exit 4), never a regression.
  auto one = compare({writeRun(dir.file("a.json"), 100, 5), writeRun(dir.file("b.json"), 130, 5)});
  EXPECT_EQ(one.exitCode, 4) << one.out << one.err;
  auto aa = compare({writeRun(dir.file("a.json"), 100, 5), writeRun(dir.file("c.json"), 100.5, 5)});
  EXPECT_EQ(aa.exitCode, 0) << aa.out << aa.err;

  std::vector<std::string> args;
  for (int i = 0; i < 4; ++i) args.push_back(writeRun(dir.file(fmt::format("base{}.json", i)), 100 + i, 1));
  args.push_back("--");
  for (int i = 0; i < 4; ++i) args.push_back(writeRun(dir.file(fmt::format("cur{}.json", i)), 130 + i, 1));
  auto multi = compare(args);
  EXPECT_EQ(multi.exitCode, 1) << multi.out << multi.err;
  EXPECT_NE(multi.out.find("4 runs:"), std::string::npos) << multi.out;
  EXPECT_NE(multi.out.find("Verdict: REGRESSION in 2 of 2"), std::string::npos) << multi.out;
}

TEST(CompareCli, AMisplacedSeparatorOrTooManyRunsIsABadInputSentence) {
  TempDir dir;
  auto a = writeRun(dir.file("a.json"), 100, 1);
  auto b = writeRun(dir.file("b.json"), 100, 1);
  auto three = compare({a, b, a});
  EXPECT_EQ(three.exitCode, 2);
  EXPECT_NE(three.err.find("got 3 run file(s) and no '--'"), std::string::npos) << three.err;
  auto empty = compare({a, b, "--"});
  EXPECT_EQ(empty.exitCode, 2);
  EXPECT_NE(empty.err.find("at least one run file on each side (2 before it, 0 after)"), std::string::npos)
      << empty.err;
}
