// `dsbench coll` when things go wrong: bad flags, a rank killed mid-sweep, a hung rank and -T.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/testing/subprocess.h"
#include "reports/json_io.h"
#include "reports/sweep/sweep_journal.h"

using namespace ds::testing;
using namespace std::chrono_literals;

namespace {

RunOptions cleanEnv(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  RunOptions o;
  o.unsetEnv = launcherVariables();
  o.timeout = timeout;
  return o;
}

// Waits until the journal holds a start line and `rows` measurement lines; returns the start line.
nlohmann::json waitForJournal(const std::string& path, int rows, std::chrono::seconds bound) {
  auto deadline = std::chrono::steady_clock::now() + bound;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path);
    std::string line;
    nlohmann::json start;
    int n = 0;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.value("type", "") == "start") start = j;
      if (j.value("type", "") == "measurement") ++n;
    }
    if (!start.is_null() && n >= rows) return start;
    std::this_thread::sleep_for(20ms);
  }
  return nullptr;
}

// A long sweep: many small sizes, so that a fault lands in the middle of it.
std::vector<std::string> longSweep(const std::string& json) {
  return {binDir() + "/dsbench", "coll", "-b", "1K", "-e", "4M", "-i", "1K", "-n", "5", "-J", json};
}

}  // namespace

TEST(CollBadFlags, ClearErrorsBeforeAnythingStarts) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  // Values are checked as the command line is parsed (the flag named once, then what to give);
  // a clash between two flags is found right after, as a configuration error.
  const Case cases[] = {
      {{"-b", "2M", "-e", "1M"}, "-b/--minbytes 2097152 is larger than -e/--maxbytes 1048576"},
      {{"-f", "1"}, "--stepfactor: '1' is out of range; give a whole number from 2 to 1024."},
      {{"-o", "median"}, "--op: unknown reduction op 'median'"},
      {{"-d", "float128"}, "--datatype: unknown datatype 'float128'"},
      {{"-b", "12Q"}, "--minbytes '12Q': unknown suffix 'Q'"},
      {{"--coll", "gather"}, "--coll: unknown collective 'gather'"},
      {{"-I", "3"}, "--per_iter_timing '3' is not valid: give 0 (no per-iteration columns, the default), 1"},
      {{"-I", "on"}, "--per_iter_timing 'on' is not valid: give 0"},
      {{"-K", "20"}, "-K/--per_iter_skip 20 is not valid with -n/--iters 20"},
      {{"-n", "5", "--per_iter_skip", "7"}, "Give -K from 0 to 4, or raise -n."},
      {{"-K", "-1"}, "--per_iter_skip: '-1' is out of range"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv{binDir() + "/dsbench", "coll"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    auto r = run(argv, cleanEnv(10s));
    EXPECT_EQ(r.exitCode, 5) << c.says << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
    EXPECT_LT(r.seconds, 5.0) << "a usage error must not wait for a rendezvous";
  }
  // The environment twins are checked alike, naming the variable.
  const std::pair<std::map<std::string, std::string>, std::string> envCases[] = {
      {{{"DSBENCH_PER_ITER_TIMING", "abc"}},
       "DSBENCH_PER_ITER_TIMING (twin of --per_iter_timing) 'abc' is not valid"},
      {{{"DSBENCH_PER_ITER_TIMING", "3"}},
       "DSBENCH_PER_ITER_TIMING (twin of --per_iter_timing) '3' is not valid"},
      {{{"DSBENCH_PER_ITER_SKIP", "many"}},
       "DSBENCH_PER_ITER_SKIP (twin of --per_iter_skip): 'many' is not a whole"},
  };
  for (const auto& [env, says] : envCases) {
    auto opts = cleanEnv(10s);
    for (const auto& [k, v] : env) opts.setEnv[k] = v;
    auto r = run({binDir() + "/dsbench", "coll"}, opts);
    EXPECT_EQ(r.exitCode, 5) << says << "\n" << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  }
}

TEST(CollFault, KilledRankLeavesReadableJournal) {
  TempDir dir;
  std::vector<std::string> argv{binDir() + "/dsrun", "--nproc-per-node", "2",
                                "--standalone",      "--grace-period",   "1"};
  for (auto& a : longSweep(dir.file("out.json"))) argv.push_back(a);
  Process p(argv, cleanEnv());
  std::string journal = dir.file("out.journal.jsonl");
  auto start = waitForJournal(journal, 2, 30s);
  ASSERT_FALSE(start.is_null()) << readFile(p.stderrPath());
  long victim = start["metadata"]["ranks"][1]["pid"];
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
  auto r = p.wait();
  EXPECT_FALSE(r.timedOut);
  EXPECT_NE(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("SIGKILL"), std::string::npos) << r.err;
  // What was measured before the kill is all there, and dsreport-style readers accept it.
  auto run = ds::report::readSweepJournal(journal);
  EXPECT_GE(run.results.size(), 2u);
  EXPECT_EQ(run.summary.status, "incomplete");
  EXPECT_EQ(run.results[0].requestedBytes, 1024u);
  EXPECT_EQ(run.results[0].outOfPlace.wrong, 0);
}

TEST(CollFault, TimeoutFiresOnAHungRankAndKeepsResults) {
  TempDir dir;
  std::vector<std::string> argv{binDir() + "/dsrun", "--nproc-per-node", "2",
                                "--standalone",      "--grace-period",   "1"};
  for (auto& a : longSweep(dir.file("out.json"))) argv.push_back(a);
  argv.insert(argv.end(), {"-T", "1.5"});
  Process p(argv, cleanEnv());
  std::string journal = dir.file("out.journal.jsonl");
  auto start = waitForJournal(journal, 1, 30s);
  ASSERT_FALSE(start.is_null()) << readFile(p.stderrPath());
  long victim = start["metadata"]["ranks"][1]["pid"];
  // A hung rank: stopped, not dead, so only a timeout can notice it.
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGSTOP), 0);
  auto r = p.wait();
  ::kill(static_cast<pid_t>(victim), SIGKILL);  // in case dsrun left it
  EXPECT_FALSE(r.timedOut);
  EXPECT_EQ(r.exitCode, 4) << r.out << r.err;  // nccl-tests' timeout code, passed on by dsrun
  EXPECT_NE(r.out.find("# Stopped early (timeout)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  // The final JSON is written with what was measured.
  auto j = ds::report::readJson(dir.file("out.json"));
  EXPECT_EQ(j["summary"]["status"], "timeout");
  EXPECT_EQ(j["summary"]["exit_code"], 4);
  EXPECT_GE(j["results"].size(), 1u);
  auto run = ds::report::readSweepJournal(journal);
  EXPECT_EQ(run.summary.status, "timeout");
  EXPECT_EQ(run.results.size(), j["results"].size());
}
