// `dsbench world` started by dsrun and by mpirun: both must give every rank the same identity.
#include <gtest/gtest.h>

#include <set>

#include "engine/testing/subprocess.h"
#include "reports/json_io.h"
#include "reports/schema/world.h"

using ds::report::RankRecord;
using namespace ds::testing;

namespace {

std::vector<RankRecord> readWorld(const std::string& path) {
  return ds::report::worldFromJson(ds::report::readJson(path), path);
}

RunOptions cleanEnv() { return cleanOptions(std::chrono::seconds(90)); }

void expectSingleNodeWorld(const std::vector<RankRecord>& ranks, int n) {
  ASSERT_EQ(static_cast<int>(ranks.size()), n);
  std::set<long> pids;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(ranks[i].rank, i);
    EXPECT_EQ(ranks[i].worldSize, n);
    EXPECT_EQ(ranks[i].localRank, i);
    EXPECT_EQ(ranks[i].localWorldSize, n);
    EXPECT_EQ(ranks[i].nodeRank, 0);
    EXPECT_EQ(ranks[i].jobId, ranks[0].jobId);
    pids.insert(ranks[i].pid);
  }
  EXPECT_EQ(static_cast<int>(pids.size()), n) << "every rank must be its own process";
}

}  // namespace

TEST(WorldUnderDsrun, FourRanksReportWhoTheyAre) {
  TempDir dir;
  auto r = run({binDir() + "/dsrun", "--nproc-per-node", "4", "--standalone", binDir() + "/dsbench", "world",
                "--json", dir.file("w.json")},
               cleanEnv());
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  auto ranks = readWorld(dir.file("w.json"));
  expectSingleNodeWorld(ranks, 4);
  EXPECT_EQ(ranks[2].provenance[0], "RANK=2 (from RANK)");
  EXPECT_NE(r.out.find("4 rank(s) on 1 host(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("Rendezvous complete: 4 rank(s)"), std::string::npos) << r.err;
  auto j = ds::report::readJson(dir.file("w.json"));
  EXPECT_EQ(j["smoke"]["ok"], true);
  EXPECT_EQ(j["smoke"]["backend"], "gloo");
  EXPECT_EQ(j["smoke"]["got"], 10.0);
}

TEST(WorldUnderMpirun, MpiBackendSmokeAllreduce) {
  std::string mpirun = DS_MPIRUN_PATH;
  if (mpirun.empty()) GTEST_SKIP() << "built without MPI";
  TempDir dir;
  RunOptions o = mpirunOptions();
  auto r = run({mpirun, "-np", "3", "--oversubscribe", binDir() + "/dsbench", "world", "--backend", "mpi",
                "--json", dir.file("w.json")},
               o);
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  auto j = ds::report::readJson(dir.file("w.json"));
  EXPECT_EQ(j["smoke"]["backend"], "mpi");
  EXPECT_EQ(j["smoke"]["got"], 6.0);
  EXPECT_NE(r.out.find("smoke allreduce on mpi: ok"), std::string::npos) << r.out;
}

TEST(WorldUnderDsrun, MpiBackendWithoutMpirunIsAClearError) {
  std::string mpirun = DS_MPIRUN_PATH;
  if (mpirun.empty()) GTEST_SKIP() << "built without MPI";
  auto r = run({binDir() + "/dsrun", "--nproc-per-node", "2", "--standalone", binDir() + "/dsbench", "world",
                "--backend", "mpi", "--timeout", "20"},
               cleanEnv());
  EXPECT_NE(r.exitCode, 0);
  EXPECT_NE(r.err.find("mpirun"), std::string::npos) << r.err;
}

TEST(WorldUnderDsrun, FileInitMethod) {
  TempDir dir;
  auto r = run({binDir() + "/dsrun", "--nproc-per-node", "3", "--standalone", binDir() + "/dsbench", "world",
                "--init-method", "file://" + dir.file("rdzv"), "--json", dir.file("w.json")},
               cleanEnv());
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  expectSingleNodeWorld(readWorld(dir.file("w.json")), 3);
}

TEST(WorldUnderMpirun, MatchesDsrun) {
  std::string mpirun = DS_MPIRUN_PATH;
  if (mpirun.empty()) GTEST_SKIP() << "built without MPI: no mpirun to compare with";
  TempDir dir;
  auto viaDsrun = run({binDir() + "/dsrun", "--nproc-per-node", "4", "--standalone", binDir() + "/dsbench",
                       "world", "--json", dir.file("dsrun.json")},
                      cleanEnv());
  ASSERT_EQ(viaDsrun.exitCode, 0) << viaDsrun.err;
  // More ranks than cores need --oversubscribe.
  auto viaMpirun = run({mpirun, "-np", "4", "--oversubscribe", binDir() + "/dsbench", "world", "--json",
                        dir.file("mpirun.json")},
                       mpirunOptions());
  ASSERT_EQ(viaMpirun.exitCode, 0) << viaMpirun.out << viaMpirun.err;
  auto a = readWorld(dir.file("dsrun.json"));
  auto b = readWorld(dir.file("mpirun.json"));
  expectSingleNodeWorld(b, 4);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].rank, b[i].rank);
    EXPECT_EQ(a[i].localRank, b[i].localRank);
    EXPECT_EQ(a[i].localWorldSize, b[i].localWorldSize);
    EXPECT_EQ(a[i].nodeRank, b[i].nodeRank);
  }
  EXPECT_EQ(b[3].provenance[0], "RANK=3 (from OMPI_COMM_WORLD_RANK)");
  EXPECT_NE(b[0].provenance[5].find("MPI: rank 0's address"), std::string::npos) << b[0].provenance[5];
  EXPECT_NE(viaMpirun.err.find("Discovered MPI settings of world_rank=0"), std::string::npos)
      << viaMpirun.err;
}

// --dry-run prints what discovery concludes, with each value's source, and exits at once: rank 3 of a
// torchrun-style environment whose master does not exist is not contacted (it would wait otherwise).
TEST(WorldDryRun, PrintsTheDiscoveredWorldWithoutContactingAnything) {
  RunOptions o = cleanOptions(std::chrono::seconds(20), {{"RANK", "3"},
                                                         {"WORLD_SIZE", "8"},
                                                         {"LOCAL_RANK", "1"},
                                                         {"LOCAL_WORLD_SIZE", "2"},
                                                         {"MASTER_ADDR", "node-that-does-not-exist.invalid"},
                                                         {"MASTER_PORT", "29511"},
                                                         {"DS_ACCELERATOR", "cpu"}});
  auto r = run({binDir() + "/dsbench", "world", "--dry-run"}, o);
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("nothing was contacted"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("RANK=3 (from RANK)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("WORLD_SIZE=8 (from WORLD_SIZE)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MASTER_PORT=29511 (from MASTER_PORT)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("accelerator  cpu (DS_ACCELERATOR)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("backend      gloo"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("connect to the store at node-that-does-not-exist.invalid:29511"), std::string::npos)
      << r.out;
  // A configuration that discovery refuses is refused by the dry run too (exit 5), with the variable named.
  o.setEnv["RANK"] = "9";
  auto bad = run({binDir() + "/dsbench", "world", "--dry-run"}, o);
  EXPECT_EQ(bad.exitCode, 5) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("RANK"), std::string::npos) << bad.err;
}

// A batch script that forgot srun: the dry run shows discovery's note saying so.
TEST(WorldDryRun, ShowsDiscoveryNotesForABatchScriptWithoutSrun) {
  RunOptions o = cleanOptions(std::chrono::seconds(20), {{"SLURM_JOB_ID", "4"},
                                                         {"SLURM_JOB_NODELIST", "vm"},
                                                         {"SLURM_LOCALID", "0"},
                                                         {"SLURM_NNODES", "1"},
                                                         {"SLURM_NODEID", "0"},
                                                         {"SLURM_NODELIST", "vm"},
                                                         {"SLURM_NTASKS", "4"},
                                                         {"SLURM_NTASKS_PER_NODE", "4"},
                                                         {"SLURM_PROCID", "0"},
                                                         {"SLURM_TASKS_PER_NODE", "4"},
                                                         {"DS_ACCELERATOR", "cpu"}});
  auto r = run({binDir() + "/dsbench", "world", "--dry-run"}, o);
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("#   note         "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("srun"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("WORLD_SIZE=1"), std::string::npos) << r.out;
}
