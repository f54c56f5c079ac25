// Pure parts of dsrun: option checks, program lookup, the worker environment, the failure table.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "engine/common/error.h"
#include "engine/launch/launcher.h"
#include "engine/launch/tests/dsrun_test_util.h"

namespace ds::launch {
namespace {

using testing::TempDir;

LaunchOptions validOptions() {
  LaunchOptions o;
  o.command = {"/bin/true"};
  return o;
}

// Runs validateLaunchOptions and returns the ConfigError message ("" when it passed).
std::string configErrorOf(const LaunchOptions& o) {
  try {
    validateLaunchOptions(o);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchOptionsTest, DefaultsAreTorchruns) {
  LaunchOptions o;
  EXPECT_EQ(o.nprocPerNode, 1);
  EXPECT_EQ(o.nnodes, 1);
  EXPECT_EQ(o.nodeRank, 0);
  EXPECT_EQ(o.masterAddr, "127.0.0.1");
  EXPECT_EQ(o.masterPort, 29500);
  EXPECT_EQ(o.maxRestarts, 0);
  EXPECT_FALSE(o.tee);
  EXPECT_EQ(configErrorOf(validOptions()), "");
}

TEST(LaunchOptionsTest, BadValuesNameFlagValueAndRange) {
  struct Case {
    std::function<void(LaunchOptions&)> set;
    std::vector<std::string> expected;
  };
  std::vector<Case> cases = {
      {[](LaunchOptions& o) { o.nprocPerNode = 0; }, {"--nproc-per-node", "0", ">= 1"}},
      {[](LaunchOptions& o) { o.nnodes = 0; }, {"--nnodes", "0", ">= 1"}},
      {[](LaunchOptions& o) { o.nodeRank = -1; }, {"--node-rank", "-1", "0..0"}},
      {[](LaunchOptions& o) {
         o.nnodes = 2;
         o.nodeRank = 2;
       },
       {"--node-rank", "2", "--nnodes 2", "0..1"}},
      {[](LaunchOptions& o) { o.masterPort = 0; }, {"--master-port", "0", "1..65535"}},
      {[](LaunchOptions& o) { o.masterPort = 70000; }, {"--master-port", "70000", "1..65535"}},
      {[](LaunchOptions& o) { o.gracePeriodS = -1; }, {"--grace-period", "-1", "0..3600"}},
      {[](LaunchOptions& o) { o.maxRestarts = 3; }, {"--max-restarts", "3", "only valid value is 0"}},
      {[](LaunchOptions& o) { o.runId = "a/b"; }, {"--rdzv-id", "a/b", "'/'"}},
      {[](LaunchOptions& o) {
         o.standalone = true;
         o.nnodes = 2;
       },
       {"--standalone", "--nnodes"}},
      {[](LaunchOptions& o) { o.masterAddr = ""; }, {"--master-addr"}},
      {[](LaunchOptions& o) { o.command.clear(); }, {"no program given", "Usage: dsrun"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    LaunchOptions o = validOptions();
    cases[i].set(o);
    std::string msg = configErrorOf(o);
    ASSERT_FALSE(msg.empty()) << "case " << i << " passed validation";
    for (const auto& want : cases[i].expected) EXPECT_NE(msg.find(want), std::string::npos) << msg;
  }
}

// Issue 18: 100000 workers forked until fork failed. The count is refused before any fork, with how
// many were asked for and how many the machine allows.
TEST(WorkerLimitsTest, RefusesBeyondTheCapUlimitAndPidMax) {
  auto messageOf = [](int n, ProcessLimits l) -> std::string {
    try {
      checkWorkerLimits(n, l);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  ProcessLimits none;
  EXPECT_EQ(messageOf(kMaxWorkersPerNode, none), "");
  std::string m = messageOf(100000, none);
  EXPECT_NE(m.find("--nproc-per-node 100000"), std::string::npos) << m;
  EXPECT_NE(m.find(std::to_string(kMaxWorkersPerNode)), std::string::npos) << m;

  ProcessLimits ulimit;
  ulimit.userProcessLimit = 100;
  ulimit.userProcesses = 40;
  EXPECT_EQ(messageOf(60, ulimit), "");
  m = messageOf(61, ulimit);
  EXPECT_NE(m.find("ulimit -u is 100 and 40 processes already run, so at most 60 more"), std::string::npos)
      << m;

  ProcessLimits pids;
  pids.pidMax = 1000;
  EXPECT_EQ(messageOf(500, pids), "");
  m = messageOf(501, pids);
  EXPECT_NE(m.find("pid_max 1000"), std::string::npos) << m;
}

TEST(WorkerLimitsTest, ThisMachineHasAPidMax) {
  ProcessLimits l = readProcessLimits();
  EXPECT_GT(l.pidMax, 0);
  if (l.userProcessLimit >= 0) {
    EXPECT_GT(l.userProcesses, 0);
  }
}

TEST(LaunchOptionsTest, ResolveFillsRunIdAndStandalonePort) {
  LaunchOptions a = resolveLaunchOptions(validOptions());
  LaunchOptions b = resolveLaunchOptions(validOptions());
  EXPECT_EQ(a.runId.size(), 12u);
  EXPECT_NE(a.runId, b.runId);

  LaunchOptions given = validOptions();
  given.runId = "job42";
  EXPECT_EQ(resolveLaunchOptions(given).runId, "job42");

  LaunchOptions s = validOptions();
  s.standalone = true;
  s.masterAddr = "10.1.2.3";
  LaunchOptions r = resolveLaunchOptions(s);
  EXPECT_EQ(r.masterAddr, "127.0.0.1");
  EXPECT_GE(r.masterPort, 1);
  EXPECT_LE(r.masterPort, 65535);
}

TEST(LaunchOptionsTest, MultiNodeRunIdIsTheSameOnEveryNode) {
  // Each node's dsrun resolves the id alone, so the default must not be random.
  LaunchOptions o = validOptions();
  o.nnodes = 2;
  o.nodeRank = 1;
  o.masterAddr = "10.0.0.1";
  o.masterPort = 1234;
  EXPECT_EQ(resolveLaunchOptions(o).runId, "10.0.0.1_1234");
  EXPECT_EQ(resolveLaunchOptions(o, {{"SLURM_JOB_ID", "777"}}).runId, "777");
  o.runId = "given";
  EXPECT_EQ(resolveLaunchOptions(o, {{"SLURM_JOB_ID", "777"}}).runId, "given");
}

TEST(WorkerEnvTest, SecondNodeGetsGlobalRanks) {
  LaunchOptions o = validOptions();
  o.nnodes = 2;
  o.nodeRank = 1;
  o.nprocPerNode = 4;
  o.masterAddr = "node0";
  o.masterPort = 1234;
  o.runId = "job7";
  std::map<std::string, std::string> parent = {{"PATH", "/usr/bin"}, {"HOME", "/root"}};
  auto env = buildWorkerEnv(o, 3, parent);
  EXPECT_EQ(env["RANK"], "7");
  EXPECT_EQ(env["LOCAL_RANK"], "3");
  EXPECT_EQ(env["WORLD_SIZE"], "8");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(env["GROUP_RANK"], "1");
  EXPECT_EQ(env["ROLE_RANK"], "7");
  EXPECT_EQ(env["ROLE_WORLD_SIZE"], "8");
  EXPECT_EQ(env["MASTER_ADDR"], "node0");
  EXPECT_EQ(env["MASTER_PORT"], "1234");
  EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "job7");
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "0");
  EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "0");
  EXPECT_EQ(env["DS_JOB_ID"], "job7");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "1");
  EXPECT_EQ(env["PATH"], "/usr/bin");  // the parent environment is kept
  EXPECT_EQ(env["HOME"], "/root");
}

TEST(WorkerEnvTest, ParentJobIdAndOmpWin) {
  LaunchOptions o = validOptions();
  o.nprocPerNode = 2;
  o.runId = "mine";
  auto env = buildWorkerEnv(o, 0, {{"DS_JOB_ID", "sched-99"}, {"OMP_NUM_THREADS", "4"}, {"RANK", "stale"}});
  EXPECT_EQ(env["DS_JOB_ID"], "sched-99");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "4");
  EXPECT_EQ(env["RANK"], "0");  // a stale RANK from the parent is replaced
  EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "mine");
}

TEST(WorkerEnvTest, SingleWorkerLeavesOmpAlone) {
  LaunchOptions o = validOptions();
  o.runId = "x";
  auto env = buildWorkerEnv(o, 0, {});
  EXPECT_EQ(env.count("OMP_NUM_THREADS"), 0u);
  EXPECT_EQ(env["WORLD_SIZE"], "1");
}

TEST(WorkerEnvTest, UnresolvedOptionsAreABug) {
  LaunchOptions o = validOptions();  // runId empty
  EXPECT_THROW(buildWorkerEnv(o, 0, {}), InternalError);
}

class ResolveProgramTest : public ::testing::Test {
 protected:
  void makeFile(const std::string& path, mode_t mode) {
    std::ofstream(path) << "#!/bin/sh\nexit 0\n";
    ::chmod(path.c_str(), mode);
  }
  std::string errorOf(const std::string& program, const std::string& pathEnv) {
    try {
      resolveProgram(program, pathEnv);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }
  TempDir dir_;
};

TEST_F(ResolveProgramTest, SearchesPathLikeExecvp) {
  std::string a = dir_.sub("a"), b = dir_.sub("b");
  makeFile(a + "/tool", 0644);  // not executable: skipped, as execvp does
  makeFile(b + "/tool", 0755);
  EXPECT_EQ(resolveProgram("tool", a + ":" + b), b + "/tool");
}

TEST_F(ResolveProgramTest, NonExecutableOnPathSaysChmod) {
  std::string a = dir_.sub("a");
  makeFile(a + "/tool", 0644);
  std::string msg = errorOf("tool", a);
  EXPECT_NE(msg.find("not executable"), std::string::npos) << msg;
  EXPECT_NE(msg.find("chmod +x " + a + "/tool"), std::string::npos) << msg;
}

TEST_F(ResolveProgramTest, MissingSaysGiveAPathOrPutOnPath) {
  std::string msg = errorOf("no_such_tool_xyz", "/nonexistent");
  EXPECT_NE(msg.find("'no_such_tool_xyz' was not found on PATH"), std::string::npos) << msg;
  EXPECT_NE(msg.find("put its directory on PATH"), std::string::npos) << msg;
}

TEST_F(ResolveProgramTest, ExplicitPathChecks) {
  std::string file = dir_.path() + "/train.py";
  makeFile(file, 0644);
  std::string msg = errorOf(file, "");
  EXPECT_NE(msg.find("chmod +x " + file), std::string::npos) << msg;
  EXPECT_NE(msg.find("python3 " + file), std::string::npos) << msg;
  msg = errorOf(dir_.path(), "");
  EXPECT_NE(msg.find("is a directory"), std::string::npos) << msg;
  msg = errorOf(dir_.path() + "/missing", "");
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
  ::chmod(file.c_str(), 0755);
  EXPECT_EQ(resolveProgram(file, ""), file);
}

TEST(ExitCodeTest, SignalsAreNegativeWithNames) {
  EXPECT_EQ(exitCodeText(3), "3");
  EXPECT_EQ(exitCodeText(-9), "-9 (SIGKILL)");
  EXPECT_EQ(exitCodeText(-15), "-15 (SIGTERM)");
  EXPECT_EQ(launcherExitCode(3), 3);
  EXPECT_EQ(launcherExitCode(-9), 137);
  EXPECT_EQ(launcherExitCode(-11), 139);
}

WorkerExit makeExit(int rank, int code, bool stopped, pid_t pid) {
  WorkerExit e;
  e.rank = rank;
  e.localRank = rank;
  e.exitCode = code;
  e.stoppedByLauncher = stopped;
  e.pid = pid;
  e.time = std::chrono::system_clock::now();
  return e;
}

TEST(FailureReportTest, NothingFailedGivesEmpty) {
  EXPECT_EQ(formatFailureReport("prog", "h", {makeExit(0, 0, false, 10), makeExit(1, 0, false, 11)}, 5), "");
}

TEST(FailureReportTest, RootCauseFirstThenOthersThenStopped) {
  std::vector<WorkerExit> exits = {
      makeExit(3, 0, false, 13),   // finished fine before anything failed: not listed
      makeExit(2, -9, false, 12),  // first failure: root cause
      makeExit(1, 7, false, 11),   // failed on its own in the same pass
      makeExit(0, -15, true, 10),  // stopped by dsrun
  };
  exits.back().killedAfterGrace = false;
  exits[1].logFile = "/logs/r/attempt_0/2/stderr.log";
  std::string t = formatFailureReport("./train", "node17", exits, 5);
  size_t root = t.find("Root Cause (first observed failure):");
  size_t others = t.find("Other Failures");
  size_t stopped = t.find("Terminated by dsrun after rank 2 failed");
  ASSERT_NE(root, std::string::npos) << t;
  ASSERT_NE(others, std::string::npos) << t;
  ASSERT_NE(stopped, std::string::npos) << t;
  EXPECT_LT(root, others);
  EXPECT_LT(others, stopped);
  EXPECT_EQ(t.find("./train FAILED"), t.find('\n') + 1) << t;
  std::string rootBlock = t.substr(root, others - root);
  EXPECT_NE(rootBlock.find("host      : node17"), std::string::npos) << t;
  EXPECT_NE(rootBlock.find("rank      : 2 (local_rank: 2)"), std::string::npos) << t;
  EXPECT_NE(rootBlock.find("exitcode  : -9 (SIGKILL) (pid: 12)"), std::string::npos) << t;
  EXPECT_NE(rootBlock.find("error_file: <N/A>"), std::string::npos) << t;
  EXPECT_NE(rootBlock.find("log_file  : /logs/r/attempt_0/2/stderr.log"), std::string::npos) << t;
  EXPECT_NE(rootBlock.find("OOM"), std::string::npos) << t;  // the SIGKILL hint
  std::string otherBlock = t.substr(others, stopped - others);
  EXPECT_NE(otherBlock.find("exitcode  : 7 (pid: 11)"), std::string::npos) << t;
  EXPECT_NE(t.substr(stopped).find("rank 0 (local_rank: 0, pid: 10): exitcode -15 (SIGTERM)"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("rank      : 3"), std::string::npos) << t;
}

TEST(FailureReportTest, FailuresAfterTheStopAreNotRootCauses) {
  // Only workers dsrun stopped failed (e.g. after Ctrl-C): no root cause, no table.
  EXPECT_EQ(formatFailureReport("p", "h", {makeExit(0, -15, true, 1), makeExit(1, 1, true, 2)}, 5), "");
}

}  // namespace
}  // namespace ds::launch
