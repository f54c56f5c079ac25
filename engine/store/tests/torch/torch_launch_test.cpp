// dsbench and dsdiag started by PyTorch's launchers (label torch): torchrun in its static (default)
// and --standalone modes, where every rank is a client of the agent's c10d store, and
// torch.distributed.launch without --use_env through a Python wrapper, which passes --local_rank=N
// as DeepSpeed's launcher does. Debian's torchrun needs tests/torch/torch_launcher_shim.py on
// Python 3.11 (the shim says why).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/store/tests/torch/torch_test_util.h"

namespace {

using namespace std::chrono_literals;
using namespace ds::testing;
namespace tt = ds::testing::torch;

// The JSON a tool wrote (engine tests read it directly: reports' reader is a floor above).
nlohmann::json readJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// `python3 shim run|launch ARGS` with a MASTER_PORT of its own (tests may run in parallel).
RunResult launch(const std::string& mode, std::vector<std::string> args, bool standalone = false) {
  std::vector<std::string> argv{tt::python(), tt::script("torch_launcher_shim.py"), mode, "--nproc_per_node",
                                "2"};
  if (standalone) {
    argv.push_back("--standalone");
  } else {
    argv.push_back("--master_port");
    argv.push_back(std::to_string(unusedPort()));
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, cleanOptions(180s, {{"DEEPSPEED_TIMEOUT", "1"}, {"OMP_NUM_THREADS", "1"}}));
}

std::string dsbench() { return binDir() + "/dsbench"; }

// Two ranks, 0 and 1, each with its own local rank; `arg`: each also recorded --local_rank.
void expectTwoRanks(const nlohmann::json& j, bool arg) {
  ASSERT_EQ(j["ranks"].size(), 2u) << j.dump();
  std::set<int> ranks;
  for (const auto& r : j["ranks"]) {
    ranks.insert(r["rank"].get<int>());
    EXPECT_EQ(r["local_rank"], r["rank"]);
    if (arg) {
      EXPECT_EQ(r.value("local_rank_arg", -1), r["local_rank"].get<int>()) << r.dump();
    } else {
      EXPECT_FALSE(r.contains("local_rank_arg")) << r.dump();
    }
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));
}

// `dsbench world`, then a tiny `dsbench coll` sweep, each its own torchrun job (two jobs in one
// torchrun attempt would share the agent store's keys, as two torch jobs would).
void torchrunRunsWorldAndColl(bool standalone) {
  TempDir d;
  auto w = launch("run", {"--no_python", dsbench(), "world", "--json", d.file("w.json")}, standalone);
  ASSERT_EQ(w.exitCode, 0) << w.out << w.err;
  auto j = readJson(d.file("w.json"));
  expectTwoRanks(j, false);
  EXPECT_EQ(j["ranks"][0]["job_id"], j["ranks"][1]["job_id"]);
  EXPECT_TRUE(j["smoke"]["ok"].get<bool>());
  auto c = launch("run",
                  {"--no_python", dsbench(), "coll", "--coll", "allreduce", "-b", "8", "-e", "64", "-f", "8",
                   "-n", "2", "-w", "1", "-J", d.file("c.json")},
                  standalone);
  ASSERT_EQ(c.exitCode, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("Out of bounds values : 0 OK"), std::string::npos) << c.out;
  EXPECT_EQ(readJson(d.file("c.json"))["metadata"]["world_size"], 2) << c.out;
}

TEST(TorchLaunch, TorchrunStaticStartsDsbenchWorldAndColl) {
  DS_REQUIRE_TORCH();
  torchrunRunsWorldAndColl(false);
}

TEST(TorchLaunch, TorchrunStandaloneStartsDsbenchWorldAndColl) {
  DS_REQUIRE_TORCH();
  torchrunRunsWorldAndColl(true);
}

TEST(TorchLaunch, DistributedLaunchWithoutUseEnvPassesLocalRankThroughAWrapper) {
  DS_REQUIRE_TORCH();
  TempDir d;
  // Each worker runs `python3 -u exec_wrapper.py --local_rank=N dsbench world ...`, which runs
  // `dsbench --local_rank=N world ...`: the argument before the subcommand.
  auto r = launch("launch", {tt::script("exec_wrapper.py"), dsbench(), "world", "--json", d.file("w.json")});
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  expectTwoRanks(readJson(d.file("w.json")), true);
}

TEST(TorchLaunch, DsdiagWorldUnderDistributedLaunchPassesMasterPortAndShowsEachRanksLocalRankArg) {
  DS_REQUIRE_TORCH();
  TempDir d;
  auto r = launch("launch", {tt::script("exec_wrapper.py"), binDir() + "/dsdiag", "--world", "--timeout",
                             "60", "--only", "env,net.master_port_free", "--json", d.file("w.json")});
  auto j = readJson(d.file("w.json"));
  bool sawPort = false;
  std::set<int> argRanks;
  for (const auto& c : j["checks"]) {
    if (c["id"] == "net.master_port_free" && c["status"] != "SKIP") {
      sawPort = true;
      EXPECT_EQ(c["status"], "PASS") << c.dump();
      EXPECT_NE(c["message"].get<std::string>().find("torchrun's agent hosts it"), std::string::npos)
          << c.dump();
    }
    if (c["id"] == "env.world_info" && c["rank"].get<int>() >= 0) {
      EXPECT_EQ(c["data"].value("local_rank_arg", -1), c["data"]["local_rank"].get<int>()) << c.dump();
      argRanks.insert(c["rank"].get<int>());
    }
    if (c["id"] == "env.launcher_flags") {
      EXPECT_EQ(c["status"], "PASS") << c.dump();
    }
  }
  EXPECT_TRUE(sawPort) << j.dump().substr(0, 2000);
  EXPECT_EQ(argRanks, (std::set<int>{0, 1})) << r.out;
  EXPECT_LE(r.exitCode, 1) << r.out << r.err;  // passes, or warnings only (e.g. a single-host job)
}

}  // namespace
