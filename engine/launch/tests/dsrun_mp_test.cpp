// dsrun spawning real workers: the environment of each rank, flags after the program, --tee and
// --log-dir.
#include <gtest/gtest.h>

#include "engine/launch/tests/dsrun_test_util.h"

namespace ds::launch::testing {
namespace {

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

TEST(DsrunEnvTest, FourRanksGetTorchrunsEnvironment) {
  TempDir d;
  RunResult r =
      runDsrun({"--nproc-per-node", "4", "--rdzv-id", "job1", workerPath(), "--dump-env", d.path()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "OMP_NUM_THREADS is not set, so it is set to 1")) << r.err;
  for (int i = 0; i < 4; ++i) {
    auto env = readEnvDump(d.path() + "/env." + std::to_string(i));
    std::string s = std::to_string(i);
    EXPECT_EQ(env["RANK"], s);
    EXPECT_EQ(env["LOCAL_RANK"], s);
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
    EXPECT_EQ(env["GROUP_RANK"], "0");
    EXPECT_EQ(env["ROLE_RANK"], s);
    EXPECT_EQ(env["ROLE_WORLD_SIZE"], "4");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["MASTER_PORT"], "29500");
    EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "job1");
    EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "0");
    EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "0");
    EXPECT_EQ(env["DS_JOB_ID"], "job1");
    EXPECT_EQ(env["OMP_NUM_THREADS"], "1");
    EXPECT_EQ(env["TORCHELASTIC_ERROR_FILE"], "<unset>");  // only with --log-dir
  }
}

TEST(DsrunEnvTest, SecondNodeUnderscoreSpellings) {
  TempDir d;
  RunResult r =
      runDsrun({"--nnodes", "2", "--node_rank", "1", "--nproc_per_node", "4", "--master_addr", "10.0.0.1",
                "--master_port", "1234", "--run_id", "job2", workerPath(), "--dump-env", d.path()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  for (int lr = 0; lr < 4; ++lr) {
    auto env = readEnvDump(d.path() + "/env." + std::to_string(4 + lr));
    EXPECT_EQ(env["RANK"], std::to_string(4 + lr));
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(lr));
    EXPECT_EQ(env["WORLD_SIZE"], "8");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
    EXPECT_EQ(env["GROUP_RANK"], "1");
    EXPECT_EQ(env["ROLE_RANK"], std::to_string(4 + lr));
    EXPECT_EQ(env["ROLE_WORLD_SIZE"], "8");
    EXPECT_EQ(env["MASTER_ADDR"], "10.0.0.1");
    EXPECT_EQ(env["MASTER_PORT"], "1234");
    EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "job2");
  }
}

TEST(DsrunEnvTest, RandomRunIdParentJobIdAndOmpKept) {
  TempDir d;
  RunResult r = runDsrun({"--nproc-per-node", "2", workerPath(), "--dump-env", d.path()},
                         {{"DS_JOB_ID", "sched-5"}, {"OMP_NUM_THREADS", "3"}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_FALSE(contains(r.err, "OMP_NUM_THREADS is not set")) << r.err;
  auto e0 = readEnvDump(d.path() + "/env.0");
  auto e1 = readEnvDump(d.path() + "/env.1");
  EXPECT_EQ(e0["TORCHELASTIC_RUN_ID"].size(), 12u);
  EXPECT_EQ(e0["TORCHELASTIC_RUN_ID"], e1["TORCHELASTIC_RUN_ID"]);
  EXPECT_EQ(e0["DS_JOB_ID"], "sched-5");
  EXPECT_EQ(e0["OMP_NUM_THREADS"], "3");
}

TEST(DsrunEnvTest, StandalonePicksOneFreePort) {
  TempDir d;
  RunResult r = runDsrun({"--standalone", "--nproc-per-node", "2", "--master-addr", "10.9.9.9", workerPath(),
                          "--dump-env", d.path()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto e0 = readEnvDump(d.path() + "/env.0");
  auto e1 = readEnvDump(d.path() + "/env.1");
  EXPECT_EQ(e0["MASTER_ADDR"], "127.0.0.1");
  EXPECT_EQ(e0["MASTER_PORT"], e1["MASTER_PORT"]);
  int port = std::stoi(e0["MASTER_PORT"]);
  EXPECT_GE(port, 1);
  EXPECT_LE(port, 65535);
}

TEST(DsrunEnvTest, EnvTwinsSetFlags) {
  TempDir d;
  RunResult r =
      runDsrun({workerPath(), "--dump-env", d.path()},
               {{"DSRUN_NPROC_PER_NODE", "3"}, {"DSRUN_RDZV_ID", "twin"}, {"DSRUN_MASTER_PORT", "4321"}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(countFiles(d.path()), 3);
  auto e2 = readEnvDump(d.path() + "/env.2");
  EXPECT_EQ(e2["WORLD_SIZE"], "3");
  EXPECT_EQ(e2["TORCHELASTIC_RUN_ID"], "twin");
  EXPECT_EQ(e2["MASTER_PORT"], "4321");
}

TEST(DsrunArgsTest, FlagsAfterTheProgramGoToTheProgram) {
  TempDir d;
  RunResult r = runDsrun({"--nproc-per-node", "1", workerPath(), "--args-file", d.path(), "--master_port",
                          "1", "--nproc-per-node", "7", "--", "x y"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(countFiles(d.path()), 1);  // one worker: the second --nproc-per-node went to the program
  EXPECT_EQ(readFile(d.path() + "/args.0"),
            "--args-file\n" + d.path() + "\n--master_port\n1\n--nproc-per-node\n7\n--\nx y\n");
}

TEST(DsrunArgsTest, DoubleDashEndsDsrunFlags) {
  TempDir d;
  RunResult r = runDsrun({"--nproc-per-node", "2", "--", workerPath(), "--dump-env", d.path()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(countFiles(d.path()), 2);
}

TEST(DsrunOutputTest, WithoutTeeWorkersShareDsrunsOutput) {
  RunResult r = runDsrun({"--nproc-per-node", "2", workerPath(), "--print", "2"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "out line 1 of rank 1")) << r.out;
  EXPECT_TRUE(contains(r.err, "err line 0 of rank 0")) << r.err;
  EXPECT_FALSE(contains(r.out, "[rank")) << r.out;
}

TEST(DsrunOutputTest, TeePrefixesEveryLine) {
  RunResult r = runDsrun({"--tee", "--nproc-per-node", "3", workerPath(), "--print", "3"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    std::string p = "[rank" + std::to_string(rank) + "]:";
    for (int i = 0; i < 3; ++i) {
      std::string n = std::to_string(i) + " of rank " + std::to_string(rank) + "\n";
      EXPECT_TRUE(contains(r.out, p + "out line " + n)) << r.out;
      EXPECT_TRUE(contains(r.err, p + "err line " + n)) << r.err;
    }
    // The unterminated last line is flushed at exit, with its prefix and a newline.
    EXPECT_TRUE(contains(r.out, p + "tail of rank " + std::to_string(rank) + "\n")) << r.out;
  }
  // Every stdout line is one whole prefixed line (no interleaving inside a line).
  std::istringstream in(r.out);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_EQ(line.rfind("[rank", 0), 0u) << line;
  }
  EXPECT_EQ(lines, 12);
}

TEST(DsrunOutputTest, LogDirKeepsEachRanksOutputOnly) {
  TempDir d;
  RunResult r = runDsrun(
      {"--log-dir", d.path(), "--rdzv-id", "r1", "--nproc-per-node", "2", workerPath(), "--print", "2"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_FALSE(contains(r.out, "out line")) << r.out;
  EXPECT_FALSE(contains(r.err, "err line")) << r.err;
  for (int rank = 0; rank < 2; ++rank) {
    std::string base = d.path() + "/r1/attempt_0/" + std::to_string(rank);
    std::string rs = std::to_string(rank);
    EXPECT_EQ(readFile(base + "/stdout.log"),
              "out line 0 of rank " + rs + "\nout line 1 of rank " + rs + "\ntail of rank " + rs);
    EXPECT_EQ(readFile(base + "/stderr.log"),
              "err line 0 of rank " + rs + "\nerr line 1 of rank " + rs + "\n");
  }
}

TEST(DsrunOutputTest, TeeAndLogDirTogether) {
  TempDir d;
  RunResult r = runDsrun({"--tee", "--log-dir", d.path(), "--rdzv-id", "r2", "--nproc-per-node", "2",
                          workerPath(), "--print", "1"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "[rank1]:out line 0 of rank 1\n")) << r.out;
  EXPECT_TRUE(contains(r.err, "[rank0]:err line 0 of rank 0\n")) << r.err;
  // The files get the raw output, without prefixes.
  EXPECT_EQ(readFile(d.path() + "/r2/attempt_0/1/stdout.log"), "out line 0 of rank 1\ntail of rank 1");
  EXPECT_EQ(readFile(d.path() + "/r2/attempt_0/0/stderr.log"), "err line 0 of rank 0\n");
}

}  // namespace
}  // namespace ds::launch::testing
