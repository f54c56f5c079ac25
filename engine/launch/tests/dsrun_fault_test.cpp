// dsrun when things go wrong: a failing rank, a rank killed by a signal, Ctrl-C, SIGTERM, a worker
// that ignores SIGTERM, dsrun itself SIGKILLed, a program that cannot start, bad flags.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include "engine/launch/tests/dsrun_test_util.h"

namespace ds::launch::testing {
namespace {

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

void expectAllGone(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    ASSERT_GT(pid, 0) << "a worker did not record its pid";
    EXPECT_TRUE(waitUntil([&] { return !pidAlive(pid); }, 2.0)) << "worker pid " << pid << " still runs";
  }
}

TEST(DsrunFailureTest, FailingRankIsRootCauseAndOthersAreStopped) {
  TempDir d;
  RunResult r = runDsrun({"--nproc-per-node", "4", "--grace-period", "5", workerPath(), "--pid-dir", d.path(),
                          "--wait-peers", "4", "--fail-rank", "2", "--exit-code", "3", "--sleep", "60"});
  EXPECT_EQ(r.exitCode, 3) << r.err;
  EXPECT_LT(r.seconds, 8.0) << "the sleeping workers should stop at SIGTERM, not run for 60 s";
  auto pids = readPids(d.path(), 4);
  expectAllGone(pids);
  size_t root = r.err.find("Root Cause (first observed failure):");
  size_t stopped = r.err.find("Terminated by dsrun after rank 2 failed");
  ASSERT_NE(root, std::string::npos) << r.err;
  ASSERT_NE(stopped, std::string::npos) << r.err;
  EXPECT_LT(root, stopped);
  std::string rootBlock = r.err.substr(root, stopped - root);
  EXPECT_TRUE(contains(rootBlock, "rank      : 2 (local_rank: 2)")) << r.err;
  EXPECT_TRUE(contains(rootBlock, "exitcode  : 3 (pid: " + std::to_string(pids[2]) + ")")) << r.err;
  EXPECT_TRUE(contains(rootBlock, "error_file: <N/A>")) << r.err;
  EXPECT_TRUE(contains(r.err, "ds_test_worker FAILED")) << r.err;
  for (int rank : {0, 1, 3}) {
    EXPECT_TRUE(contains(r.err.substr(stopped),
                         "rank " + std::to_string(rank) + " (local_rank: " + std::to_string(rank) +
                             ", pid: " + std::to_string(pids[rank]) + "): exitcode -15 (SIGTERM)"))
        << r.err;
  }
  EXPECT_FALSE(contains(r.err, "Other Failures")) << r.err;
}

TEST(DsrunFailureTest, SignalDeathIsNegativeWithNameAndExits128PlusSig) {
  TempDir d;
  RunResult r = runDsrun({"--nproc-per-node", "3", workerPath(), "--pid-dir", d.path(), "--wait-peers", "3",
                          "--fail-rank", "1", "--signal", std::to_string(SIGKILL), "--sleep", "60"});
  EXPECT_EQ(r.exitCode, 128 + SIGKILL) << r.err;
  auto pids = readPids(d.path(), 3);
  expectAllGone(pids);
  EXPECT_TRUE(contains(r.err, "exitcode  : -9 (SIGKILL) (pid: " + std::to_string(pids[1]) + ")")) << r.err;
  EXPECT_TRUE(contains(r.err, "Terminated by dsrun after rank 1 failed")) << r.err;
}

TEST(DsrunFailureTest, WorkerIgnoringSigtermIsKilledAfterGracePeriod) {
  TempDir d;
  RunResult r = runDsrun({"--nproc-per-node", "2", "--grace-period", "1", workerPath(), "--pid-dir", d.path(),
                          "--wait-peers", "2", "--ignore-sigterm", "--fail-rank", "0", "--exit-code", "4",
                          "--sleep", "60"});
  EXPECT_EQ(r.exitCode, 4) << r.err;
  EXPECT_GE(r.seconds, 0.9);
  EXPECT_LT(r.seconds, 6.0);
  auto pids = readPids(d.path(), 2);
  expectAllGone(pids);
  EXPECT_TRUE(contains(r.err, "rank 1 (local_rank: 1, pid: " + std::to_string(pids[1]) +
                                  "): exitcode -9 (SIGKILL), did not stop within the grace period"))
      << r.err;
}

TEST(DsrunFailureTest, LogDirFailureNamesTheLogFile) {
  TempDir d;
  std::string logs = d.sub("logs");
  RunResult r = runDsrun({"--log-dir", logs, "--rdzv-id", "f1", "--nproc-per-node", "2", workerPath(),
                          "--print", "1", "--fail-rank", "1", "--exit-code", "5"});
  EXPECT_EQ(r.exitCode, 5) << r.err;
  EXPECT_TRUE(contains(r.err, "log_file  : " + logs + "/f1/attempt_0/1/stderr.log")) << r.err;
}

void interruptTest(int sig, int expectedExit) {
  TempDir d;
  DsrunProcess p({"--nproc-per-node", "3", workerPath(), "--pid-dir", d.path(), "--sleep", "60"});
  ASSERT_GT(p.pid(), 0);
  ASSERT_TRUE(waitUntil([&] { return countFiles(d.path()) == 3; }, 10)) << "workers did not start";
  auto pids = readPids(d.path(), 3);
  ::kill(p.pid(), sig);
  RunResult r = p.wait(10);
  EXPECT_EQ(r.exitCode, expectedExit) << r.err;
  EXPECT_LT(r.seconds, 8.0);
  expectAllGone(pids);
  EXPECT_FALSE(contains(r.err, "Root Cause")) << r.err;  // an interrupt is not a worker failure
  EXPECT_TRUE(contains(r.err, "stopped after")) << r.err;
}

TEST(DsrunInterruptTest, CtrlCStopsAllWorkersAndExits130) { interruptTest(SIGINT, 130); }

TEST(DsrunInterruptTest, SigtermStopsAllWorkersAndExits143) { interruptTest(SIGTERM, 143); }

TEST(DsrunInterruptTest, WorkersDieWhenDsrunIsKilled) {
  TempDir d;
  DsrunProcess p({"--nproc-per-node", "2", workerPath(), "--pid-dir", d.path(), "--sleep", "60"});
  ASSERT_GT(p.pid(), 0);
  ASSERT_TRUE(waitUntil([&] { return countFiles(d.path()) == 2; }, 10)) << "workers did not start";
  auto pids = readPids(d.path(), 2);
  ::kill(p.pid(), SIGKILL);
  RunResult r = p.wait(5);
  EXPECT_EQ(r.exitCode, -SIGKILL);
  for (pid_t pid : pids)
    EXPECT_TRUE(waitUntil([&] { return !pidAlive(pid); }, 5.0)) << "orphan worker " << pid;
}

TEST(DsrunStartTest, MissingProgramIsAClearUsageError) {
  RunResult r = runDsrun({"--nproc-per-node", "2", "no_such_program_xyz"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(contains(r.err, "'no_such_program_xyz' was not found on PATH")) << r.err;
  EXPECT_TRUE(contains(r.err, "Give a path")) << r.err;
  r = runDsrun({"./no/such/file"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(contains(r.err, "'./no/such/file' does not exist")) << r.err;
}

TEST(DsrunStartTest, NonExecutableFileAndDirectoryAreUsageErrors) {
  TempDir d;
  std::string file = d.path() + "/train.sh";
  std::ofstream(file) << "#!/bin/sh\necho started >> " << d.path() << "/ran\n";
  ::chmod(file.c_str(), 0644);
  RunResult r = runDsrun({"--nproc-per-node", "2", file});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(contains(r.err, "chmod +x " + file)) << r.err;
  r = runDsrun({d.path()});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(contains(r.err, "is a directory")) << r.err;
  EXPECT_FALSE(fs::exists(d.path() + "/ran"));
  // The same script, once executable, runs on both ranks: the check above was the only obstacle.
  ::chmod(file.c_str(), 0755);
  r = runDsrun({"--nproc-per-node", "2", file});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(readFile(d.path() + "/ran"), "started\nstarted\n");
}

TEST(DsrunStartTest, ExecFailureInTheChildIsReported) {
  TempDir d;
  std::string file = d.path() + "/garbage";
  std::ofstream(file) << "\x7f"
                      << "not an ELF file\n";
  ::chmod(file.c_str(), 0755);
  RunResult r = runDsrun({"--nproc-per-node", "2", file});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(contains(r.err, "rank 0: cannot execute '" + file + "'")) << r.err;
  EXPECT_FALSE(contains(r.err, "rank 1")) << r.err;  // nothing more was started
}

TEST(DsrunStartTest, BadFlagValuesAreUsageErrors) {
  TempDir d;
  struct Case {
    std::vector<std::string> flags;
    std::vector<std::string> expected;
  };
  std::vector<Case> cases = {
      // Checked as parsed (engine/common/cli.h): "<flag>: '<value>' ...; give ...", the flag named once.
      {{"--nproc-per-node", "0"}, {"--nproc-per-node: '0' is out of range", "from 1 to 1024"}},
      {{"--node-rank", "-1"}, {"--node-rank: '-1' is out of range"}},
      {{"--master-port", "70000"}, {"--master-port: '70000' is out of range", "from 1 to 65535"}},
      {{"--master-port", "0"}, {"--master-port: '0' is out of range", "from 1 to 65535"}},
      {{"--grace-period", "-1"}, {"--grace-period: '-1' is out of range", "from 0 to 3600"}},
      {{"--nproc-per-node", "four"}, {"--nproc-per-node: 'four' is not a whole number"}},
      {{"--grace-period", "nan"}, {"--grace-period: 'nan' is not a finite number"}},
      // Checked against each other after parsing (resolveLaunchOptions).
      {{"--nnodes", "2", "--node-rank", "2"}, {"--node-rank 2", "0..1"}},
      {{"--max-restarts", "2"}, {"--max-restarts 2"}},
      {{"--bogus-flag"}, {"--bogus-flag"}},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = c.flags;
    args.insert(args.end(), {workerPath(), "--pid-dir", d.path()});
    RunResult r = runDsrun(args);
    EXPECT_EQ(r.exitCode, 2) << c.flags[0] << ": " << r.err;
    for (const auto& want : c.expected) EXPECT_TRUE(contains(r.err, want)) << "[" << want << "] in: " << r.err;
    // Each message names its flag once ("--flag: --flag: ..." was a doubled prefix).
    EXPECT_FALSE(contains(r.err, c.flags[0] + ": " + c.flags[0])) << r.err;
  }
  EXPECT_EQ(countFiles(d.path()), 0) << "a worker was started despite a bad flag";
  RunResult r = runDsrun({"--nproc-per-node", "2"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(contains(r.err, "no program given")) << r.err;
}

}  // namespace
}  // namespace ds::launch::testing
