// dsdiag --world under dsrun and mpirun, and with a rank that never starts.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "engine/testing/subprocess.h"
#include "reports/diag/diag_schema.h"
#include "reports/json_io.h"

using namespace ds::testing;

namespace {

RunOptions clean(std::map<std::string, std::string> set = {}) {
  return cleanOptions(std::chrono::seconds(60), std::move(set));
}

const nlohmann::json& check(const nlohmann::json& j, const std::string& id) {
  for (const auto& c : j["checks"]) {
    if (c["id"] == id && c["rank"] == -1) return c;
  }
  throw std::runtime_error("no world check " + id + " in " + j.dump().substr(0, 300));
}

}  // namespace

TEST(DsdiagWorld, TwoRanksUnderDsrun) {
  TempDir d;
  auto r = run({binDir() + "/dsrun", "--nproc-per-node", "2", "--standalone", binDir() + "/dsdiag", "--world",
                "--timeout", "20", "--json", d.file("w.json")},
               clean());
  auto j = ds::report::readJson(d.file("w.json"));
  auto rep = ds::report::diagFromJson(j, "w.json");
  EXPECT_EQ(rep.mode, "world");
  EXPECT_EQ(rep.worldSize, 2);
  EXPECT_EQ(check(j, "world.smoke_allreduce")["status"], "PASS");
  EXPECT_EQ(check(j, "world.ranks_unique")["status"], "PASS");
  // Under --standalone each rank is its own unit: ranks 0 and 1 test their link over loopback.
  EXPECT_EQ(check(j, "world.link_matrix")["status"], "PASS") << r.out;
  EXPECT_GE(check(j, "world.link_matrix")["data"]["pairs"].get<int>(), 1);
  EXPECT_EQ(check(j, "world.reachability")["status"], "PASS") << r.out;
  EXPECT_EQ(check(j, "world.hosts")["status"], "PASS") << r.out;
  ASSERT_TRUE(j.contains("fleet")) << j.dump().substr(0, 300);
  EXPECT_EQ(j["fleet"]["judgement"]["hosts"].size(), 2u) << "standalone: one verdict per rank";
  EXPECT_EQ(check(j, "world.gather")["status"], "PASS");
  // Both ranks' local records are there.
  std::set<int> ranks;
  for (const auto& c : j["checks"]) ranks.insert(c["rank"].get<int>());
  EXPECT_TRUE(ranks.count(0) && ranks.count(1));
  EXPECT_NE(r.out.find("dsdiag rank 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dsdiag --world: 2 rank(s)"), std::string::npos) << r.out;
  EXPECT_EQ(r.exitCode, j["summary"]["exit_code"].get<int>()) << r.out << r.err;
}

// Under a launcher, warnings with --fail-on fail end the job cleanly: every rank exits 0, so dsrun prints
// no failure table and terminates no rank.
TEST(DsdiagWorld, WarningsUnderDsrunWithFailOnFailEndClean) {
  TempDir d;
  auto r = run({binDir() + "/dsrun", "--nproc-per-node", "2", "--standalone", binDir() + "/dsdiag", "--world",
                "--timeout", "20", "--fail-on", "fail", "--json", d.file("w.json")},
               clean({{"OMP_NUM_THREADS", "abc"}}));  // a WARN on every rank
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find("Root Cause"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("Root Cause"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exit 0 under --fail-on fail"), std::string::npos) << r.out;
  auto j = ds::report::readJson(d.file("w.json"));
  EXPECT_GE(j["summary"]["exit_code"].get<int>(), 1);  // the report still says what it found
}

// A job on nccl gets its smoke allreduce on nccl where every rank can drive a GPU of its own; here
// (no GPU) it runs on gloo and says why, naming the rank, instead of passing silently.
TEST(DsdiagWorld, ASmokeNotOnTheJobsNcclSaysWhy) {
  TempDir d;
  auto r = run({binDir() + "/dsrun", "--nproc-per-node", "2", "--standalone", binDir() + "/dsdiag", "--world",
                "--backend", "nccl", "--timeout", "20", "--json", d.file("w.json")},
               clean());
  auto j = ds::report::readJson(d.file("w.json"));
  const auto& smoke = check(j, "world.smoke_allreduce");
  EXPECT_EQ(smoke["status"], "PASS") << r.out;
  const std::string msg = smoke["message"];
  const bool onNccl = msg.rfind("allreduce(sum) of 1024 floats on nccl:", 0) == 0;
  EXPECT_TRUE(onNccl || msg.find(" (not on the job's nccl: rank ") != std::string::npos) << msg;
  EXPECT_EQ(smoke["data"]["backend"], onNccl ? "nccl" : "gloo") << msg;
  EXPECT_EQ(check(j, "world.clock_skew")["status"], "PASS") << r.out;
}

// Four ranks under dsrun, rank 2 given dsdiag's test hook `fault` (<freeze|exit|fail>@<stage>); the
// report and the exclude file's first line.
namespace {

struct FrozenRun {
  RunResult r;
  nlohmann::json j;
  std::string excluded;
};
FrozenRun runWithRank2FaultAt(const std::string& fault) {
  TempDir d;
  FrozenRun out;
  out.r = run({binDir() + "/dsrun", "--nproc-per-node", "4", "--standalone", "/bin/bash", "-c",
               "if [ \"$RANK\" = 2 ]; then export DSDIAG_TEST_FAULT=" + fault + "; fi; exec \"$0\" \"$@\"",
               binDir() + "/dsdiag", "--world", "--backend", "gloo", "--timeout", "90", "--json", d.file("w.json"),
               "--exclude-file", d.file("exclude.txt")},
              cleanOptions(std::chrono::seconds(110)));
  out.j = ds::report::readJson(d.file("w.json"));
  std::ifstream ex(d.file("exclude.txt"));
  std::getline(ex, out.excluded);
  return out;
}

void expectRank2NamedAt(const FrozenRun& f, const std::string& stage) {
  const auto& hosts = check(f.j, "world.hosts");
  EXPECT_EQ(hosts["status"], "FAIL") << f.r.out;
  EXPECT_NE(hosts["message"].get<std::string>().find("(rank 2) stopped sending heartbeats during stage \"" + stage +
                                                     "\""),
            std::string::npos)
      << hosts["message"];
  EXPECT_EQ(check(f.j, "world.clock_skew")["status"], "SKIP");
  EXPECT_NE(f.excluded.find("(rank 2)"), std::string::npos) << f.excluded;
  EXPECT_EQ(f.j["summary"]["exit_code"].get<int>(), 2) << f.r.out;
}

}  // namespace

// A rank that stops after the fleet's stages (here: as the smoke allreduce begins, dsdiag's test
// hook) is named in the hosts' verdict and the exclude file, and the smoke gives up once the
// heartbeats name it instead of waiting out --timeout (issue 41).
TEST(DsdiagWorld, ARankFrozenAtTheSmokeIsNamedAndNotWaitedFor) {
  auto f = runWithRank2FaultAt("freeze@smoke");
  expectRank2NamedAt(f, "smoke");
  const std::string smoke = check(f.j, "world.smoke_allreduce")["message"];
  EXPECT_NE(smoke.find("stopped waiting after"), std::string::npos) << smoke;
  EXPECT_NE(smoke.find("the fleet's heartbeats name rank(s) 2 frozen or gone"), std::string::npos) << smoke;
}

// The same rank stopped before the process group's rendezvous (stage "report", after the fleet's
// verdict): the others stop waiting for it once the heartbeats name it, not after --timeout.
TEST(DsdiagWorld, ARankFrozenBeforeTheProcessGroupIsNamedAndNotWaitedFor) {
  auto f = runWithRank2FaultAt("freeze@report");
  expectRank2NamedAt(f, "report");
  const std::string smoke = check(f.j, "world.smoke_allreduce")["message"];
  EXPECT_NE(smoke.find("stopped waiting for clients"), std::string::npos) << smoke;
  EXPECT_NE(smoke.find("the fleet's heartbeats name rank(s) 2 frozen or gone"), std::string::npos) << smoke;
  EXPECT_NE(smoke.find("Ranks that never joined: 2."), std::string::npos) << smoke;
}

// A rank that fails with an error in the fleet's stages leaves its reason in the store: the verdict
// quotes it, with the rank, its host and the stage, instead of "read its stderr". The ranks are
// started one by one (as srun without --kill-on-bad-exit, or a fleet's own launcher, does); under
// dsrun or torchrun a failing rank ends the job.
namespace {

// Four dsdiag --world ranks on loopback started one by one (no launcher), rank 2 with dsdiag's test
// hook `fault`; rank 0 writes w.json and exclude.txt into `d`.
std::vector<std::unique_ptr<Process>> startFourRanks(const TempDir& d, const std::string& fault,
                                                     const std::string& timeoutS) {
  const int port = unusedPort();
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 4; ++r) {
    auto o = clean({{"RANK", std::to_string(r)},
                    {"WORLD_SIZE", "4"},
                    {"LOCAL_RANK", std::to_string(r)},
                    {"LOCAL_WORLD_SIZE", "4"},
                    {"MASTER_ADDR", "127.0.0.1"},
                    {"MASTER_PORT", std::to_string(port)},
                    {"OMP_NUM_THREADS", "1"}});
    if (r == 2) o.setEnv["DSDIAG_TEST_FAULT"] = fault;
    std::vector<std::string> args{binDir() + "/dsdiag", "--world", "--backend", "gloo", "--timeout", timeoutS};
    if (r == 0) args.insert(args.end(), {"--json", d.file("w.json"), "--exclude-file", d.file("exclude.txt")});
    ranks.push_back(std::make_unique<Process>(args, o));
  }
  return ranks;
}

}  // namespace

TEST(DsdiagWorld, ARankThatFailsLeavesItsErrorForTheVerdict) {
  TempDir d;
  auto ranks = startFourRanks(d, "fail@links", "30");
  auto r0 = ranks[0]->wait();
  auto r2 = ranks[2]->wait();
  EXPECT_NE(r2.exitCode, 0) << r2.out << r2.err;
  auto j = ds::report::readJson(d.file("w.json"));
  const auto& hosts = check(j, "world.hosts");
  EXPECT_EQ(hosts["status"], "FAIL") << r0.out;
  const std::string msg = hosts["message"];
  EXPECT_NE(msg.find("(rank 2) gave up during stage \"links\" and exited; its own error: Rank 2 on "),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("failed during stage \"links\": test fault at stage \"links\""), std::string::npos) << msg;
  std::ifstream ex(d.file("exclude.txt"));
  std::string line;
  std::getline(ex, line);
  EXPECT_NE(line.find("(rank 2)"), std::string::npos) << line;
  EXPECT_EQ(r0.exitCode, 2) << r0.out;
}

// A rank that reaches the store only after rank 0 has closed the join (a lossy path to the store
// loses its first SYNs; here dsdiag's test hook "late@join") is named with its host, not as a bare
// rank: rank 0 reads its host again as it judges, and quotes the rank's own reason.
TEST(DsdiagWorld, ARankThatJoinsAfterTheJoinClosedIsNamedWithItsHost) {
  TempDir d;
  auto ranks = startFourRanks(d, "late@join", "6");
  auto r0 = ranks[0]->wait();
  auto r2 = ranks[2]->wait();
  EXPECT_NE(r2.exitCode, 0) << r2.out << r2.err;
  EXPECT_NE((r2.out + r2.err).find("joined after rank 0 had closed the join"), std::string::npos) << r2.out << r2.err;
  auto j = ds::report::readJson(d.file("w.json"));
  const auto& hosts = check(j, "world.hosts");
  EXPECT_EQ(hosts["status"], "FAIL") << r0.out;
  const std::string msg = hosts["message"];
  const std::string host = j["fleet"]["input"]["ranks"][2]["host"];
  EXPECT_FALSE(host.empty()) << msg;
  EXPECT_NE(msg.find(host + " (rank 2) never joined the fleet rendezvous"), std::string::npos) << msg;
  EXPECT_NE(msg.find("its own error: Rank 2 on " + host + " joined after rank 0 had closed the join"),
            std::string::npos)
      << msg;
  std::ifstream ex(d.file("exclude.txt"));
  std::string line;
  std::getline(ex, line);
  EXPECT_NE(line.find(host + " (rank 2)"), std::string::npos) << line;
  EXPECT_EQ(r0.exitCode, 2) << r0.out;
}

TEST(DsdiagWorld, TwoRanksUnderMpirun) {
  std::string mpirun = DS_MPIRUN_PATH;
  if (mpirun.empty()) GTEST_SKIP() << "built without MPI";
  TempDir d;
  auto r = run({mpirun, "-np", "2", "--oversubscribe", binDir() + "/dsdiag", "--world", "--timeout", "20",
                "--json", d.file("w.json")},
               mpirunOptions(std::chrono::seconds(60)));
  auto j = ds::report::readJson(d.file("w.json"));
  EXPECT_EQ(check(j, "world.smoke_allreduce")["status"], "PASS") << r.out;
  bool ompi = false;
  for (const auto& c : j["checks"]) {
    if (c["id"] == "mpi.launcher")
      ompi = ompi || c["message"].get<std::string>().find("Open MPI") != std::string::npos;
  }
  EXPECT_TRUE(ompi) << r.out;
}

TEST(DsdiagWorld, MissingRankIsNamedWithinTheTimeout) {
  // WORLD_SIZE=3, but only ranks 0 and 1 are started.
  int port = unusedPort();
  auto env = [&](int rank) {
    return clean({{"RANK", std::to_string(rank)},
                  {"WORLD_SIZE", "3"},
                  {"LOCAL_RANK", std::to_string(rank)},
                  {"LOCAL_WORLD_SIZE", "3"},
                  {"MASTER_ADDR", "127.0.0.1"},
                  {"MASTER_PORT", std::to_string(port)},
                  {"OMP_NUM_THREADS", "1"}});
  };
  TempDir d;
  auto t0 = std::chrono::steady_clock::now();
  Process r0({binDir() + "/dsdiag", "--world", "--timeout", "4", "--json", d.file("w.json")}, env(0));
  Process r1({binDir() + "/dsdiag", "--world", "--timeout", "4"}, env(1));
  auto a = r0.wait();
  auto b = r1.wait();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  EXPECT_EQ(a.exitCode, 2) << a.out << a.err;
  EXPECT_EQ(b.exitCode, 2) << b.out << b.err;
  EXPECT_NE(a.out.find("Rank(s) 2 never joined the store"), std::string::npos) << a.out;
  auto j = ds::report::readJson(d.file("w.json"));
  bool found = false;
  for (const auto& c : j["checks"]) {
    if (c["id"] == "world.rendezvous") {
      found = true;
      EXPECT_EQ(c["status"], "FAIL");
    }
  }
  EXPECT_TRUE(found);
}

TEST(DsdiagWorld, LauncherFlagAfterTheProgramIsCaught) {
  auto r = run({binDir() + "/dsrun", "--nproc-per-node", "1", "--standalone", binDir() + "/dsdiag", "--only",
                "env.launcher_flags", "--master-port", "29511"},
               clean());
  EXPECT_EQ(r.exitCode, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("--master-port"), std::string::npos) << r.out;
}
