#include <gtest/gtest.h>

#include "engine/common/error.h"
#include "engine/env/slurm.h"
#include "engine/env/world_info.h"

using ds::ConfigError;
using ds::env::discoverWorld;
using ds::env::DiscoveryOptions;
using ds::env::Launcher;
using ds::env::MapEnv;
using ds::env::WorldInfo;

namespace {

WorldInfo discover(std::map<std::string, std::string, std::less<>> vars, DiscoveryOptions opts = {}) {
  MapEnv env(std::move(vars));
  return discoverWorld(opts, env);
}

// Expects a ConfigError whose message contains every fragment.
void expectConfigError(std::map<std::string, std::string, std::less<>> vars,
                       std::vector<std::string> fragments, DiscoveryOptions opts = {}) {
  try {
    discover(std::move(vars), opts);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    for (const auto& f : fragments)
      EXPECT_NE(msg.find(f), std::string::npos) << "missing '" << f << "' in: " << msg;
  }
}

}  // namespace

TEST(Discovery, NothingSetIsASingleProcess) {
  auto w = discover({});
  EXPECT_EQ(w.rank.value, 0);
  EXPECT_EQ(w.worldSize.value, 1);
  EXPECT_EQ(w.localRank.value, 0);
  EXPECT_EQ(w.localWorldSize.value, 1);
  EXPECT_EQ(w.masterAddr.value, "127.0.0.1");
  EXPECT_EQ(w.masterPort.value, 29500);
  EXPECT_EQ(w.masterPort.source, "distributed_port (default 29500)");
  EXPECT_EQ(w.launcher, Launcher::kNone);
  EXPECT_EQ(w.jobId.value, "default");
}

TEST(Discovery, TorchrunEnvironment) {
  auto w = discover({{"RANK", "5"},
                     {"WORLD_SIZE", "8"},
                     {"LOCAL_RANK", "1"},
                     {"LOCAL_WORLD_SIZE", "4"},
                     {"GROUP_RANK", "1"},
                     {"MASTER_ADDR", "10.0.0.1"},
                     {"MASTER_PORT", "1234"},
                     {"TORCHELASTIC_RUN_ID", "abc"}});
  EXPECT_EQ(w.rank.value, 5);
  EXPECT_EQ(w.rank.source, "RANK");
  EXPECT_EQ(w.localRank.value, 1);
  EXPECT_EQ(w.localWorldSize.value, 4);
  EXPECT_EQ(w.nodeRank.value, 1);
  EXPECT_EQ(w.nodeRank.source, "GROUP_RANK");
  EXPECT_EQ(w.masterAddr.value, "10.0.0.1");
  EXPECT_EQ(w.masterPort.value, 1234);
  EXPECT_EQ(w.jobId.value, "abc");
  EXPECT_EQ(w.launcher, Launcher::kEnv);
  auto lines = w.describe();
  EXPECT_EQ(lines[0], "RANK=5 (from RANK)");
}

TEST(Discovery, DeepSpeedLauncherSpellings) {
  auto w = discover({{"RANK", "3"},
                     {"WORLD_SIZE", "4"},
                     {"LOCAL_RANK", "1"},
                     {"LOCAL_SIZE", "2"},
                     {"CROSS_RANK", "1"},
                     {"MASTER_ADDR", "h0"},
                     {"MASTER_PORT", "29501"}});
  EXPECT_EQ(w.localWorldSize.value, 2);
  EXPECT_EQ(w.localWorldSize.source, "LOCAL_SIZE");
  EXPECT_EQ(w.nodeRank.source, "CROSS_RANK");
}

TEST(Discovery, OpenMpiVariablesWithProvenance) {
  auto w = discover({{"OMPI_COMM_WORLD_RANK", "3"},
                     {"OMPI_COMM_WORLD_SIZE", "4"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                     {"MASTER_ADDR", "m"},
                     {"OMPI_MCA_ess_base_jobid", "77"}});
  EXPECT_EQ(w.launcher, Launcher::kOpenMpi);
  EXPECT_EQ(w.describe()[0], "RANK=3 (from OMPI_COMM_WORLD_RANK)");
  EXPECT_EQ(w.worldSize.source, "OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(w.localRank.value, 1);
  EXPECT_EQ(w.localRank.source, "OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(w.localWorldSize.value, 2);
  EXPECT_EQ(w.nodeRank.value, 1);
  EXPECT_EQ(w.nodeRank.source, "derived: RANK / LOCAL_WORLD_SIZE");
  EXPECT_EQ(w.jobId.value, "77");
  EXPECT_FALSE(w.needsMpiMasterAddr);
}

TEST(Discovery, OpenMpiWithoutMasterAddrNeedsMpiAgreement) {
  auto w = discover({{"OMPI_COMM_WORLD_RANK", "0"},
                     {"OMPI_COMM_WORLD_SIZE", "4"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  EXPECT_TRUE(w.needsMpiMasterAddr);
  EXPECT_FALSE(w.needsMpiLocalRanks);
  EXPECT_EQ(w.masterPort.value, 29500);
}

TEST(Discovery, MpichAndMvapichAndPmix) {
  auto m = discover({{"PMI_RANK", "2"},
                     {"PMI_SIZE", "3"},
                     {"MPI_LOCALRANKID", "2"},
                     {"MPI_LOCALNRANKS", "3"},
                     {"MASTER_ADDR", "x"}});
  EXPECT_EQ(m.launcher, Launcher::kMpich);
  EXPECT_EQ(m.rank.source, "PMI_RANK");
  EXPECT_EQ(m.localRank.source, "MPI_LOCALRANKID");
  auto v = discover({{"MV2_COMM_WORLD_RANK", "1"},
                     {"MV2_COMM_WORLD_SIZE", "2"},
                     {"MV2_COMM_WORLD_LOCAL_RANK", "1"},
                     {"MASTER_ADDR", "x"}});
  EXPECT_EQ(v.launcher, Launcher::kMvapich);
  EXPECT_EQ(v.localRank.value, 1);
  EXPECT_TRUE(v.needsMpiLocalRanks);  // no local size from MVAPICH's table entry
  auto p = discover({{"PMIX_RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "x"}});
  EXPECT_EQ(p.launcher, Launcher::kPmix);
  EXPECT_EQ(p.rank.source, "PMIX_RANK");
  EXPECT_TRUE(p.needsMpiLocalRanks);
}

TEST(Discovery, SlurmTakesMasterFromTheNodelist) {
  auto w = discover({{"SLURM_PROCID", "5"},
                     {"SLURM_NTASKS", "8"},
                     {"SLURM_LOCALID", "1"},
                     {"SLURM_NODEID", "2"},
                     {"SLURM_TASKS_PER_NODE", "2(x4)"},
                     {"SLURM_JOB_NODELIST", "gpu-[07-10]"},
                     {"SLURM_JOB_ID", "4242"},
                     {"SLURM_STEP_ID", "0"}});
  EXPECT_EQ(w.launcher, Launcher::kSlurm);
  EXPECT_EQ(w.rank.value, 5);
  EXPECT_EQ(w.localWorldSize.value, 2);
  EXPECT_EQ(w.localWorldSize.source, "SLURM_TASKS_PER_NODE[SLURM_NODEID]");
  EXPECT_EQ(w.nodeRank.value, 2);
  EXPECT_EQ(w.nodeRank.source, "SLURM_NODEID");
  EXPECT_EQ(w.masterAddr.value, "gpu-07");
  EXPECT_EQ(w.masterAddr.source, "SLURM_JOB_NODELIST (first host)");
  EXPECT_EQ(w.jobId.value, "4242.0");
}

TEST(Discovery, OpenMpiWinsOverSlurmInsideAnAllocation) {
  auto w = discover({{"SLURM_PROCID", "0"},
                     {"SLURM_NTASKS", "1"},
                     {"OMPI_COMM_WORLD_RANK", "3"},
                     {"OMPI_COMM_WORLD_SIZE", "4"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                     {"MASTER_ADDR", "a"}});
  EXPECT_EQ(w.launcher, Launcher::kOpenMpi);
  EXPECT_EQ(w.rank.value, 3);
}

TEST(Discovery, PrecedenceArgumentsThenEnvThenLauncher) {
  DiscoveryOptions opts;
  opts.rank = 1;
  opts.worldSize = 2;
  opts.masterAddr = "h";
  opts.masterPort = 777;
  auto w = discover({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "z"}, {"MASTER_PORT", "1"}}, opts);
  EXPECT_EQ(w.rank.value, 1);
  EXPECT_EQ(w.rank.source, "argument rank");
  EXPECT_EQ(w.masterAddr.source, "argument init_method");
  EXPECT_EQ(w.masterPort.value, 777);

  // env:// beats the launcher where it agrees; LOCAL_RANK from env, local size from the launcher.
  auto e = discover({{"RANK", "1"},
                     {"WORLD_SIZE", "2"},
                     {"LOCAL_RANK", "1"},
                     {"OMPI_COMM_WORLD_RANK", "1"},
                     {"OMPI_COMM_WORLD_SIZE", "2"},
                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                     {"MASTER_ADDR", "m"}});
  EXPECT_EQ(e.rank.source, "RANK");
  EXPECT_EQ(e.localRank.source, "LOCAL_RANK");
  EXPECT_EQ(e.localWorldSize.source, "OMPI_COMM_WORLD_LOCAL_SIZE");
}

TEST(Discovery, AutoMpiDiscoveryOffIgnoresLauncherVariables) {
  DiscoveryOptions opts;
  opts.autoMpiDiscovery = false;
  auto w = discover({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}}, opts);
  EXPECT_EQ(w.worldSize.value, 1);
  EXPECT_EQ(w.launcher, Launcher::kNone);
}

TEST(Discovery, UnderALocalLauncherTheOuterLauncherIsNotCompared) {
  // srun starts one dsrun per node; its workers carry SLURM_PROCID of the agent.
  auto w = discover({{"RANK", "9"},
                     {"WORLD_SIZE", "16"},
                     {"LOCAL_RANK", "1"},
                     {"LOCAL_WORLD_SIZE", "8"},
                     {"MASTER_ADDR", "n0"},
                     {"TORCHELASTIC_RUN_ID", "r"},
                     {"SLURM_PROCID", "1"},
                     {"SLURM_NTASKS", "2"}});
  EXPECT_EQ(w.rank.value, 9);
  EXPECT_EQ(w.launcher, Launcher::kEnv);
}

TEST(DiscoveryErrors, NonInteger) {
  expectConfigError({{"RANK", "abc"}, {"WORLD_SIZE", "2"}},
                    {"RANK='abc'", "not an integer", "0 to WORLD_SIZE-1"});
  expectConfigError({{"RANK", "0"}, {"WORLD_SIZE", "2x"}}, {"WORLD_SIZE='2x'", "not an integer"});
  expectConfigError({{"MASTER_PORT", ""}}, {"MASTER_PORT=''", "not an integer", "1 to 65535"});
  expectConfigError({{"OMPI_COMM_WORLD_RANK", "1.5"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
                    {"OMPI_COMM_WORLD_RANK='1.5'"});
}

TEST(DiscoveryErrors, Negative) {
  expectConfigError({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, {"RANK=-1", "negative"});
  expectConfigError({{"LOCAL_RANK", "-3"}}, {"LOCAL_RANK=-3", "negative"});
}

TEST(DiscoveryErrors, RankNotBelowWorldSize) {
  expectConfigError({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "m"}},
                    {"RANK=4 (from RANK)", "WORLD_SIZE=4 (from WORLD_SIZE)", "0 to 3"});
}

TEST(DiscoveryErrors, LocalRankNotBelowLocalWorldSize) {
  expectConfigError({{"RANK", "1"},
                     {"WORLD_SIZE", "4"},
                     {"LOCAL_RANK", "2"},
                     {"LOCAL_WORLD_SIZE", "2"},
                     {"MASTER_ADDR", "m"}},
                    {"LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2", "0 to 1"});
}

TEST(DiscoveryErrors, WorldSizeBelowOne) {
  expectConfigError({{"RANK", "0"}, {"WORLD_SIZE", "0"}}, {"WORLD_SIZE=0", "at least 1"});
  DiscoveryOptions opts;
  opts.worldSize = 0;
  expectConfigError({}, {"world_size", "at least 1"}, opts);
}

TEST(DiscoveryErrors, PortOutOfRange) {
  expectConfigError({{"MASTER_PORT", "0"}}, {"MASTER_PORT=0", "1 to 65535"});
  expectConfigError({{"MASTER_PORT", "65536"}}, {"MASTER_PORT=65536", "1 to 65535"});
  DiscoveryOptions opts;
  opts.distributedPort = 70000;
  expectConfigError({}, {"distributed_port=70000"}, opts);
}

TEST(DiscoveryErrors, EmptyMasterAddr) { expectConfigError({{"MASTER_ADDR", ""}}, {"MASTER_ADDR is empty"}); }

TEST(DiscoveryErrors, MissingMasterAddrForAMultiProcessEnvJob) {
  expectConfigError({{"RANK", "0"}, {"WORLD_SIZE", "2"}},
                    {"MASTER_ADDR expected, but not set", "WORLD_SIZE=2"});
}

TEST(DiscoveryErrors, HalfOfEnvIsMissing) {
  expectConfigError({{"RANK", "1"}}, {"WORLD_SIZE expected, but not set", "RANK=1"});
  expectConfigError({{"WORLD_SIZE", "4"}}, {"RANK expected, but not set", "0 to 3"});
}

TEST(DiscoveryErrors, EnvDisagreesWithMpiLauncher) {
  expectConfigError({{"RANK", "1"},
                     {"WORLD_SIZE", "4"},
                     {"OMPI_COMM_WORLD_RANK", "2"},
                     {"OMPI_COMM_WORLD_SIZE", "4"},
                     {"MASTER_ADDR", "m"}},
                    {"RANK=1 disagrees with OMPI_COMM_WORLD_RANK=2", "Open MPI", "Unset RANK"});
  expectConfigError({{"WORLD_SIZE", "8"}, {"PMI_RANK", "0"}, {"PMI_SIZE", "4"}},
                    {"WORLD_SIZE=8 disagrees with PMI_SIZE=4"});
  expectConfigError({{"LOCAL_RANK", "0"},
                     {"SLURM_PROCID", "1"},
                     {"SLURM_NTASKS", "2"},
                     {"SLURM_LOCALID", "1"},
                     {"SLURM_JOB_NODELIST", "n1"}},
                    {"LOCAL_RANK=0 disagrees with SLURM_LOCALID=1", "Slurm"});
}

TEST(DiscoveryErrors, LauncherRankBeyondItsSize) {
  expectConfigError({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"MASTER_ADDR", "m"}},
                    {"RANK=4 (from OMPI_COMM_WORLD_RANK)", "WORLD_SIZE=4 (from OMPI_COMM_WORLD_SIZE)"});
}

// The environments below are what Slurm 22.05 (Debian bookworm) sets, recorded from real srun/sbatch
// runs; 23.x and 24.x export the same names (srun(1)/sbatch(1) "OUTPUT ENVIRONMENT VARIABLES").
namespace {

using Env = std::map<std::string, std::string, std::less<>>;

// Task 1 of `srun -n 2` inside `sbatch -N1 --ntasks-per-node=4` (job 4): the allocation's
// SLURM_NTASKS_PER_NODE=4 stays, the step's variables describe 2 tasks.
Env srunStepInWiderAllocation() {
  return {{"SLURM_JOB_ID", "4"},          {"SLURM_JOB_NODELIST", "vm"},      {"SLURM_LOCALID", "1"},
          {"SLURM_NNODES", "1"},          {"SLURM_NODEID", "0"},             {"SLURM_NODELIST", "vm"},
          {"SLURM_NTASKS", "2"},          {"SLURM_NTASKS_PER_NODE", "4"},    {"SLURM_PROCID", "1"},
          {"SLURM_STEPID", "0"},          {"SLURM_STEP_ID", "0"},            {"SLURM_STEP_NODELIST", "vm"},
          {"SLURM_STEP_NUM_NODES", "1"},  {"SLURM_STEP_NUM_TASKS", "2"},     {"SLURM_STEP_TASKS_PER_NODE", "2"},
          {"SLURM_TASKS_PER_NODE", "2"}};
}

// The batch script of the same job, before any srun.
Env batchScript() {
  return {{"SLURM_JOB_ID", "4"},   {"SLURM_JOB_NODELIST", "vm"}, {"SLURM_LOCALID", "0"},
          {"SLURM_NNODES", "1"},   {"SLURM_NODEID", "0"},        {"SLURM_NODELIST", "vm"},
          {"SLURM_NTASKS", "4"},   {"SLURM_NTASKS_PER_NODE", "4"}, {"SLURM_PROCID", "0"},
          {"SLURM_TASKS_PER_NODE", "4"}};
}

Env with(Env e, const Env& more) {
  for (const auto& [k, v] : more) e[k] = v;
  return e;
}

}  // namespace

TEST(SlurmDiscovery, StepVariablesWinOverTheAllocation) {
  // A 5-node allocation, a 2-node step on its last nodes: the master must be in the step.
  auto w = discover(with(srunStepInWiderAllocation(), {{"SLURM_JOB_NODELIST", "n[1-5]"},
                                                       {"SLURM_STEP_NODELIST", "n[4-5]"},
                                                       {"SLURM_NTASKS", "9"},
                                                       {"SLURM_STEP_NUM_TASKS", "3"},
                                                       {"SLURM_PROCID", "2"},
                                                       {"SLURM_LOCALID", "0"},
                                                       {"SLURM_NODEID", "1"},
                                                       {"SLURM_STEP_TASKS_PER_NODE", "2,1"},
                                                       {"SLURM_TASKS_PER_NODE", "4,4,1"}}));
  EXPECT_EQ(w.launcher, Launcher::kSlurm);
  EXPECT_EQ(w.worldSize.value, 3);
  EXPECT_EQ(w.worldSize.source, "SLURM_STEP_NUM_TASKS");
  EXPECT_EQ(w.masterAddr.value, "n4");
  EXPECT_EQ(w.masterAddr.source, "SLURM_STEP_NODELIST (first host)");
  EXPECT_EQ(w.localWorldSize.value, 1);
  EXPECT_EQ(w.localWorldSize.source, "SLURM_STEP_TASKS_PER_NODE[SLURM_NODEID]");
  EXPECT_EQ(w.nodeRank.value, 1);
  EXPECT_TRUE(w.notes.empty());
}

TEST(SlurmDiscovery, RealStepInsideAWiderBatchAllocation) {
  auto w = discover(srunStepInWiderAllocation());
  EXPECT_EQ(w.rank.value, 1);
  EXPECT_EQ(w.worldSize.value, 2);
  EXPECT_EQ(w.localRank.value, 1);
  EXPECT_EQ(w.localWorldSize.value, 2);
  EXPECT_EQ(w.masterAddr.value, "vm");
  EXPECT_EQ(w.jobId.value, "4.0");
  EXPECT_FALSE(w.needsMpiMasterAddr);
  EXPECT_FALSE(w.needsMpiLocalRanks);
}

TEST(SlurmDiscovery, UnevenTasksPerNode) {
  // srun -n 7 over 4 nodes: SLURM_STEP_TASKS_PER_NODE=2(x3),1; the last node holds task 6 alone.
  Env e = with(srunStepInWiderAllocation(), {{"SLURM_STEP_NODELIST", "gpu[01-04]"},
                                             {"SLURM_STEP_NUM_TASKS", "7"},
                                             {"SLURM_NTASKS", "7"},
                                             {"SLURM_STEP_NUM_NODES", "4"},
                                             {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"},
                                             {"SLURM_TASKS_PER_NODE", "2(x3),1"},
                                             {"SLURM_PROCID", "6"},
                                             {"SLURM_LOCALID", "0"},
                                             {"SLURM_NODEID", "3"}});
  auto w = discover(e);
  EXPECT_EQ(w.localWorldSize.value, 1);
  EXPECT_EQ(w.nodeRank.value, 3);
  EXPECT_EQ(w.masterAddr.value, "gpu01");
  e["SLURM_PROCID"] = "3";
  e["SLURM_LOCALID"] = "1";
  e["SLURM_NODEID"] = "1";
  auto v = discover(e);
  EXPECT_EQ(v.localWorldSize.value, 2);
  EXPECT_EQ(v.localRank.value, 1);
}

TEST(SlurmDiscovery, PmixPluginTakesTheSizeFromTheStep) {
  // srun --mpi=pmix: PMIX_RANK and no size; this failed with "WORLD_SIZE expected, but not set".
  auto w = discover(with(srunStepInWiderAllocation(), {{"PMIX_RANK", "1"},
                                                       {"PMIX_NAMESPACE", "slurm.pmix.4.0"},
                                                       {"PMIX_VERSION", "4.2.2rc2"}}));
  EXPECT_EQ(w.launcher, Launcher::kSlurm);
  EXPECT_EQ(w.rank.value, 1);
  EXPECT_EQ(w.worldSize.value, 2);
  EXPECT_FALSE(w.needsMpiMasterAddr);  // no MPI_Init for a gloo job
  EXPECT_FALSE(w.needsMpiLocalRanks);
}

TEST(SlurmDiscovery, Pmi2PluginNeedsNoMpi) {
  // srun --mpi=pmi2 exports PMI_RANK/PMI_SIZE/PMI_FD: not MPICH's mpiexec, and no MPI_Init.
  auto w = discover(with(srunStepInWiderAllocation(),
                         {{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"PMI_FD", "11"}, {"PMI_JOBID", "4.0"}}));
  EXPECT_EQ(w.launcher, Launcher::kSlurm);
  EXPECT_FALSE(w.needsMpiMasterAddr);
  EXPECT_FALSE(w.needsMpiLocalRanks);
  EXPECT_EQ(w.masterAddr.value, "vm");
  EXPECT_EQ(ds::env::slurmMpiPlugin(MapEnv({{"PMI_FD", "11"}, {"PMI_RANK", "0"}})), "pmi2");
  EXPECT_EQ(ds::env::slurmMpiPlugin(MapEnv({{"PMIX_RANK", "0"}})), "pmix");
  EXPECT_EQ(ds::env::slurmMpiPlugin(MapEnv({{"SLURM_PROCID", "0"}})), "none");
}

TEST(SlurmDiscovery, HydraInsideAnAllocationIsNotTheStep) {
  // mpiexec (Hydra) starts one proxy per node with srun: PMI_RANK differs from the proxy's
  // SLURM_PROCID, and PMI's world is the one that counts.
  auto w = discover(with(srunStepInWiderAllocation(), {{"PMI_RANK", "5"},
                                                       {"PMI_SIZE", "8"},
                                                       {"MPI_LOCALRANKID", "1"},
                                                       {"MPI_LOCALNRANKS", "4"},
                                                       {"SLURM_PROCID", "1"},
                                                       {"MASTER_ADDR", "vm"}}));
  EXPECT_EQ(w.launcher, Launcher::kMpich);
  EXPECT_EQ(w.worldSize.value, 8);
}

TEST(SlurmDiscovery, BatchScriptWithoutSrunRunsAloneAndSaysSo) {
  auto w = discover(batchScript());
  EXPECT_EQ(w.worldSize.value, 1);
  EXPECT_EQ(w.rank.value, 0);
  EXPECT_NE(w.launcher, Launcher::kSlurm);
  ASSERT_EQ(w.notes.size(), 1U);
  EXPECT_NE(w.notes[0].find("not in an srun step"), std::string::npos) << w.notes[0];
  EXPECT_NE(w.notes[0].find("SLURM_NTASKS=4"), std::string::npos) << w.notes[0];
  EXPECT_NE(w.notes[0].find("`srun`"), std::string::npos) << w.notes[0];
  // Slurm's special step ids (the batch step 0xfffffffb) are not task steps either.
  auto b = discover(with(batchScript(), {{"SLURM_STEP_ID", "4294967291"}}));
  EXPECT_EQ(b.worldSize.value, 1);
  EXPECT_EQ(b.notes.size(), 1U);
  // One task allocated: nothing to say.
  EXPECT_TRUE(discover(with(batchScript(), {{"SLURM_NTASKS", "1"}})).notes.empty());
  EXPECT_EQ(ds::env::slurmPlace(MapEnv(batchScript())), ds::env::SlurmPlace::kAllocation);
  EXPECT_EQ(ds::env::slurmPlace(MapEnv(srunStepInWiderAllocation())), ds::env::SlurmPlace::kStep);
  EXPECT_EQ(ds::env::slurmPlace(MapEnv({{"SLURM_STEP_ID", "extern"}, {"SLURM_JOB_ID", "1"}})),
            ds::env::SlurmPlace::kAllocation);
  EXPECT_EQ(ds::env::slurmPlace(MapEnv({{"SLURM_PROCID", "0"}})), ds::env::SlurmPlace::kNone);
}

TEST(SlurmDiscovery, BatchScriptKeepsAnExplicitWorld) {
  // dsrun (or a hand-set world) inside a batch script: env:// decides, Slurm's allocation is ignored.
  auto w = discover(with(batchScript(), {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "vm"}}));
  EXPECT_EQ(w.worldSize.value, 2);
  EXPECT_EQ(w.launcher, Launcher::kEnv);
  EXPECT_TRUE(w.notes.empty());
}

TEST(SlurmDiscovery, DefaultPortFollowsTheJobIdAsLightningDoes) {
  auto w = discover(with(srunStepInWiderAllocation(), {{"SLURM_JOB_ID", "1234567"}}));
  EXPECT_EQ(w.masterPort.value, 15000 + 4567);
  EXPECT_NE(w.masterPort.source.find("SLURM_JOB_ID=1234567"), std::string::npos);
  EXPECT_EQ(discover(srunStepInWiderAllocation()).masterPort.value, 15004);
  // MASTER_PORT and a non-default distributed_port win.
  EXPECT_EQ(discover(with(srunStepInWiderAllocation(), {{"MASTER_PORT", "2222"}})).masterPort.value, 2222);
  DiscoveryOptions opts;
  opts.distributedPort = 3333;
  EXPECT_EQ(discover(srunStepInWiderAllocation(), opts).masterPort.value, 3333);
  EXPECT_EQ(ds::env::slurmDefaultPort("99"), 15099);
  EXPECT_EQ(ds::env::slurmDefaultPort("abc"), std::nullopt);
}

TEST(SlurmDiscovery, PmixWithoutAnySizeSaysWhatToDo) {
  expectConfigError({{"PMIX_RANK", "0"}, {"MASTER_ADDR", "x"}},
                    {"PMIX_RANK=0", "PMIx exports no world size", "srun"});
}

TEST(SlurmDiscovery, TasksPerNodeErrorsAreNotCalledAHostList) {
  try {
    ds::env::expandTasksPerNode("2(x3", "SLURM_STEP_TASKS_PER_NODE");
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("tasks-per-node list"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("host list"), std::string::npos) << msg;
    EXPECT_NE(msg.find("SLURM_STEP_TASKS_PER_NODE"), std::string::npos) << msg;
  }
}
