// The differential table: every environment of engine/env/tests/deepspeed/cases.json must give, in
// dsperf's DeepSpeed view, what the real deepspeed.init_distributed() concluded there
// (fixtures.json, recorded by scripts/deepspeed/record.py; the DeepSpeed version is in the file).
// Runs without DeepSpeed. The live twin (label deepspeed) re-records and compares.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/common/error.h"
#include "engine/env/deepspeed_view.h"
#include "engine/env/launchers.h"
#include "engine/testing/paths.h"

namespace ds::env {
namespace {

using nlohmann::json;

std::string fixturesPath() {
  if (const char* p = std::getenv("DS_DEEPSPEED_FIXTURES"); p && *p)
    return p;  // the live test's fresh record
  return DS_DEEPSPEED_FIXTURES;
}

json load(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return json::parse(in);
}

json textOrNull(const DsVar& v) { return v.text ? json(*v.text) : json(nullptr); }

// One case: the view against DeepSpeed's recorded answer. Returns the mismatches as text.
std::vector<std::string> compare(const json& c, const json& r, const std::string& stubAddr) {
  MapEnv env;
  env.set("CUDA_VISIBLE_DEVICES", "");
  for (const auto& [k, v] : c.at("env").items()) env.set(k, v.get<std::string>());
  DeepSpeedOptions o;
  if (c.contains("options")) {
    o.autoMpiDiscovery = c["options"].value("auto_mpi_discovery", true);
    o.distributedPort = c["options"].value("distributed_port", 29500);
  }
  DeepSpeedView v = deepspeedView(env, o);
  std::vector<std::string> bad;
  auto expect = [&](const char* what, const json& ours, const json& theirs) {
    if (ours != theirs)
      bad.push_back(fmt::format("{}: dsperf's view {} but DeepSpeed {}", what, ours.dump(), theirs.dump()));
  };
  const bool noMpi4py = c.at("mpi").is_null();
  if (!r.at("ok").get<bool>()) {
    std::string type = r.at("error_type");
    if (type == "ModuleNotFoundError" && noMpi4py) {
      if (!v.mpi4pyNeeded || v.failure)
        bad.push_back("DeepSpeed needed mpi4py here; the view does not say so");
      return bad;
    }
    if (!v.failure) {
      bad.push_back(fmt::format("DeepSpeed fails ({}: {}) but the view does not", type,
                                r.at("error").get<std::string>()));
      return bad;
    }
    expect("failure stage", v.failure->stage, r.at("stage"));
    expect("failure type", v.failure->type, type);
    // Where the outcome depends on what is installed, DeepSpeed's text names the module: the type and
    // stage are the claim.
    if (v.failure->unless.empty()) expect("failure message", v.failure->message, r.at("error"));
    return bad;
  }
  if (v.failure) {
    bad.push_back(
        fmt::format("the view fails ({}: {}) but DeepSpeed starts", v.failure->type, v.failure->message));
    return bad;
  }
  if (noMpi4py && v.mpi4pyNeeded) bad.push_back("the view needs mpi4py, but DeepSpeed ran without it");
  expect("rank", v.rankValue ? json(*v.rankValue) : json(nullptr), r.at("rank"));
  expect("world_size", v.worldSizeValue ? json(*v.worldSizeValue) : json(nullptr), r.at("world_size"));
  expect("master_addr", v.masterAddrFromMpiRank0 ? json(stubAddr) : textOrNull(v.masterAddr),
         r.at("master_addr"));
  expect("master_port", v.masterPortValue ? json(*v.masterPortValue) : json(nullptr), r.at("master_port"));
  expect("timeout_s", v.timeoutSeconds ? json(static_cast<double>(*v.timeoutSeconds)) : json(nullptr),
         r.at("timeout_s"));
  expect("backend", v.backend, r.at("backend"));
  expect("accelerator", v.accelerator, r.at("accelerator"));
  expect("LOCAL_RANK after", textOrNull(v.localRank), r.at("env_after").at("LOCAL_RANK"));
  expect("NCCL_SOCKET_IFNAME after", textOrNull(v.ncclSocketIfname),
         r.at("env_after").at("NCCL_SOCKET_IFNAME"));
  return bad;
}

TEST(DeepSpeedFixtures, EveryEnvironmentGivesDeepSpeedsAnswer) {
  json fixtures = load(fixturesPath());
  json cases = load(DS_DEEPSPEED_CASES).at("cases");
  ASSERT_GE(cases.size(), 40u);
  ASSERT_EQ(fixtures.at("cases").size(), cases.size())
      << "fixtures.json is stale: re-record with scripts/deepspeed/record.py";
  std::string stubAddr = fixtures.at("stub_hostname_i").get<std::string>();
  stubAddr = stubAddr.substr(0, stubAddr.find(' '));
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const auto& rec = fixtures["cases"][i];
    ASSERT_EQ(rec.at("name"), c.at("name"))
        << "fixtures.json is stale: re-record with scripts/deepspeed/record.py";
    for (const auto& m : compare(c, rec.at("result"), stubAddr)) {
      ADD_FAILURE() << c.at("name").get<std::string>() << ": " << m;
      ++failures;
    }
  }
  RecordProperty("deepspeed_version", fixtures["versions"]["deepspeed"].get<std::string>());
  EXPECT_EQ(failures, 0) << "against DeepSpeed " << fixtures["versions"]["deepspeed"].get<std::string>();
}

TEST(PythonInt, ReadsWhatIntReads) {
  EXPECT_EQ(pythonInt("10"), 10);
  EXPECT_EQ(pythonInt(" 10 "), 10);
  EXPECT_EQ(pythonInt("1_0"), 10);
  EXPECT_EQ(pythonInt("+7"), 7);
  EXPECT_EQ(pythonInt("-1"), -1);
  EXPECT_EQ(pythonInt("007"), 7);
  EXPECT_EQ(pythonInt("\t3\n"), 3);
  EXPECT_FALSE(pythonInt(""));
  EXPECT_FALSE(pythonInt("  "));
  EXPECT_FALSE(pythonInt("1__0"));
  EXPECT_FALSE(pythonInt("_1"));
  EXPECT_FALSE(pythonInt("1_"));
  EXPECT_FALSE(pythonInt("1.5"));
  EXPECT_FALSE(pythonInt("abc"));
  EXPECT_FALSE(pythonInt("0x10"));
  EXPECT_FALSE(pythonInt("- 1"));
  EXPECT_EQ(pythonInt("99999999999999999999999"), LLONG_MAX);
}

TEST(PythonRepr, QuotesAsPythonDoes) {
  EXPECT_EQ(pythonRepr("abc"), "'abc'");
  EXPECT_EQ(pythonRepr(""), "''");
  EXPECT_EQ(pythonRepr("it's"), "\"it's\"");
  EXPECT_EQ(pythonRepr("a\nb"), "'a\\nb'");
}

TEST(DeepSpeedView, SaysWhyDeepSpeedReplacesAnExportedPort) {
  MapEnv env{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "1234"}};
  DeepSpeedView v = deepspeedView(env);
  ASSERT_FALSE(v.failure);
  EXPECT_EQ(v.path, "mpi_discovery");
  EXPECT_EQ(v.masterPortValue, 29500);
  WorldInfo mine = discoverWorld({}, env);
  auto diffs = deepspeedDifferences(v, &mine, "", env);
  bool found = false;
  for (const auto& d : diffs) {
    if (d.field == "MASTER_PORT") {
      found = true;
      EXPECT_NE(d.sentence.find(
                    "DeepSpeed will replace MASTER_PORT=1234 with 29500, because LOCAL_RANK is not set"),
                std::string::npos)
          << d.sentence;
    }
  }
  EXPECT_TRUE(found);
}

TEST(DeepSpeedView, FollowedAsDiscoveryGivesDeepSpeedsWorld) {
  // Outside mpirun with LOCAL_RANK missing, DeepSpeed makes every process rank 0 of 1.
  MapEnv env{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "1234"}};
  WorldInfo w = worldFromDeepSpeed(deepspeedView(env), env);
  EXPECT_EQ(w.rank.value, 0);
  EXPECT_EQ(w.worldSize.value, 1);
  EXPECT_EQ(w.masterPort.value, 29500);
  MapEnv bad{{"DEEPSPEED_TIMEOUT", "abc"}};
  try {
    worldFromDeepSpeed(deepspeedView(bad), bad);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("invalid literal for int() with base 10: 'abc'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ds::env

namespace ds::env {
namespace {

MapEnv slurmStepWithDeepSpeedLauncher(bool withStepId) {
  MapEnv env{{"SLURM_JOB_ID", "4242"},
             {"SLURM_PROCID", "0"},
             {"SLURM_NTASKS", "1"},
             {"SLURM_STEP_NUM_TASKS", "1"},
             {"SLURM_LOCALID", "0"},
             {"SLURM_NODEID", "0"},
             {"SLURM_JOB_NODELIST", "node01"},
             {"RANK", "1"},
             {"WORLD_SIZE", "2"},
             {"LOCAL_RANK", "1"},
             {"MASTER_ADDR", "127.0.0.1"},
             {"MASTER_PORT", "29500"},
             {"CROSS_RANK", "0"},
             {"CROSS_SIZE", "1"},
             {"LOCAL_SIZE", "2"}};
  if (withStepId) env.set("SLURM_STEP_ID", "0");
  return env;
}

TEST(Launchers, DeepSpeedsLauncherInsideASlurmStepIsALocalLauncher) {
  for (bool step : {true, false}) {
    MapEnv env = slurmStepWithDeepSpeedLauncher(step);
    auto d = detectLaunchers(env);
    ASSERT_TRUE(d.local) << "step " << step;
    EXPECT_EQ(d.local->name, "DeepSpeed's launcher");
    EXPECT_EQ(d.launcher, nullptr);
    WorldInfo w = discoverWorld({}, env);  // used to throw "RANK=1 disagrees with SLURM_PROCID=0"
    EXPECT_EQ(w.rank.value, 1);
    EXPECT_EQ(w.worldSize.value, 2);
    EXPECT_EQ(w.localWorldSize.value, 2);
    EXPECT_EQ(w.launcher, Launcher::kEnv);
  }
  // Without the launcher's CROSS_* variables, the same RANK beside srun's is still a contradiction.
  MapEnv noCross{{"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "0"},        {"SLURM_PROCID", "0"},
                 {"SLURM_NTASKS", "1"},    {"SLURM_STEP_NUM_TASKS", "1"}, {"RANK", "1"},
                 {"WORLD_SIZE", "2"},      {"MASTER_ADDR", "x"}};
  EXPECT_THROW(discoverWorld({}, noCross), ConfigError);
}

TEST(Launchers, BatchScriptSlurmVariablesAreNamedAsTheAllocations) {
  MapEnv env{{"SLURM_JOB_ID", "7"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}};
  auto d = detectLaunchers(env);
  EXPECT_TRUE(d.slurmAllocationOnly);
  EXPECT_EQ(d.launcher, nullptr);
}

TEST(Launchers, CrayPalsIsOneLauncherWithItsLocalRank) {
  MapEnv env{{"PALS_RANKID", "3"}, {"PALS_LOCAL_RANKID", "1"}, {"PMI_RANK", "3"},
             {"PMI_SIZE", "4"},    {"PMI_LOCAL_SIZE", "2"},    {"MASTER_ADDR", "n1"}};
  auto d = detectLaunchers(env);
  ASSERT_EQ(d.present.size(), 1u);
  EXPECT_EQ(d.label, "Cray PALS");
  WorldInfo w = discoverWorld({}, env);
  EXPECT_EQ(w.rank.value, 3);
  EXPECT_EQ(w.worldSize.value, 4);
  EXPECT_EQ(w.localRank.value, 1);
  EXPECT_EQ(w.localRank.source, "PALS_LOCAL_RANKID");
}

TEST(Launchers, AzureMlNamesTheMasterAndItsPorts) {
  MapEnv multi{{"AZUREML_EXPERIMENT_ID", "e"},      {"OMPI_COMM_WORLD_RANK", "3"},
               {"OMPI_COMM_WORLD_SIZE", "4"},       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
               {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"AZ_BATCH_MASTER_NODE", "10.0.0.5:6000"}};
  WorldInfo w = discoverWorld({}, multi);
  EXPECT_EQ(w.masterAddr.value, "10.0.0.5");
  EXPECT_EQ(w.masterPort.value, 6105);
  EXPECT_FALSE(w.needsMpiMasterAddr);
  MapEnv single{{"AZUREML_EXPERIMENT_ID", "e"},      {"OMPI_COMM_WORLD_RANK", "1"},
                {"OMPI_COMM_WORLD_SIZE", "2"},       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"AZ_BATCHAI_MPI_MASTER_NODE", "10.0.0.4"}};
  w = discoverWorld({}, single);
  EXPECT_EQ(w.masterAddr.value, "10.0.0.4");
  EXPECT_EQ(w.masterPort.value, 54965);
  single.set("DLTS_JOB_ID", "d");  // DLTS: not AzureML's rules
  EXPECT_TRUE(discoverWorld({}, single).needsMpiMasterAddr);
}

}  // namespace
}  // namespace ds::env
