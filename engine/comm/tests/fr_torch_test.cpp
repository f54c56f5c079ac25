// torch's own Flight Recorder analyzer on dsperf's dumps (label torch): a live hang of 4 ranks where
// rank 2 stalls on the host before collective #4 (its threads live on, so it dumps on the store's
// signal like the others). Ranks 1 and 3 first ran an allreduce on a group of their own ("odd"),
// which the analyzer must match across their dumps by its members' global ranks. `python -m
// torch.distributed.flight_recorder.fr_trace` must read the four dumps, name rank 2 missing from #4
// of the default group and find nothing wrong in "odd". Skipped, with the reason, where no Python with
// torch's analyzer is found: DS_TORCH_FR_PYTHON, else ${XDG_CACHE_HOME:-$HOME/.cache}/dsperf/torch-fr-venv.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "engine/testing/subprocess.h"

using namespace ds::testing;

namespace {

std::string analyzerPython() {
  if (const char* p = std::getenv("DS_TORCH_FR_PYTHON"); p != nullptr && *p != '\0') return p;
  std::string cache;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    cache = x;
  } else if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    cache = std::string(h) + "/.cache";
  }
  return cache.empty() ? "" : cache + "/dsperf/torch-fr-venv/bin/python";
}

}  // namespace

TEST(TorchFlightRecorderAnalyzer, ReadsDsperfsDumpsAndNamesTheStalledRank) {
  const std::string python = analyzerPython();
  if (python.empty() || !std::filesystem::exists(python)) GTEST_SKIP() << "no Python at '" << python << "'";
  RunOptions probe;
  probe.timeout = std::chrono::seconds(120);
  auto can = run({python, "-c", "import torch.distributed.flight_recorder.fr_trace"}, probe);
  if (can.exitCode != 0) GTEST_SKIP() << python << " cannot import torch's analyzer: " << can.err;

  TempDir dumps;
  const std::string prefix = dumps.file("rank_");
  const int port = unusedPort();
  const int n = 4, seq = 4, victim = 2, timeoutMs = 2000;
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < n; ++r) {
    RunOptions o;
    o.unsetEnv = launcherVariables();
    o.setEnv = {{"RANK", std::to_string(r)},
                {"WORLD_SIZE", std::to_string(n)},
                {"LOCAL_RANK", std::to_string(r)},
                {"MASTER_ADDR", "127.0.0.1"},
                {"MASTER_PORT", std::to_string(port)},
                {"DS_JOB_ID", "fr-torch"},
                {"DS_ACCELERATOR", "cpu"},
                {"FAULT_TIMEOUT_MS", std::to_string(timeoutMs)},
                {"FAULT_BACKEND", DS_WITH_GLOO ? "gloo" : "shm"},
                {"FAULT_VICTIM_SLEEPS", "1"},
                {"FAULT_ODD_GROUP", "1"},
                {"TORCH_FR_DUMP_TEMP_FILE", prefix}};
    o.timeout = std::chrono::seconds(60);
    ranks.push_back(
        std::make_unique<Process>(std::vector<std::string>{binDir() + "/ds_comm_fault_worker", "hang",
                                                           std::to_string(seq), std::to_string(victim)},
                                  o));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  auto allThere = [&] {
    for (int r = 0; r < n; ++r) {
      if (!std::filesystem::exists(prefix + std::to_string(r))) return false;
    }
    return true;
  };
  while (!allThere() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (auto& p : ranks) ::kill(p->pid(), SIGKILL);
  for (auto& p : ranks) p->wait();
  ASSERT_TRUE(allThere()) << "not every rank dumped";

  RunOptions o;
  o.timeout = std::chrono::seconds(120);
  auto res =
      run({python, "-m", "torch.distributed.flight_recorder.fr_trace", dumps.path(), "-p", "rank_"}, o);
  const std::string all = res.out + res.err;
  EXPECT_EQ(res.exitCode, 0) << all;
  EXPECT_NE(all.find("Not all ranks joining collective, sequence number: 4"), std::string::npos) << all;
  EXPECT_NE(all.find("missing ranks: {2}"), std::string::npos) << all;
  EXPECT_NE(all.find("collective: " + std::string(DS_WITH_GLOO ? "gloo" : "shm") + ":all_reduce"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("group info: default:default_pg"), std::string::npos) << all;
  // No complaint about "odd": it matched on ranks 1 and 3 (members given as 0 and 1, the analyzer
  // looks for its entries in rank 0's dump and says "group info: odd ... missing ranks: {0}").
  EXPECT_EQ(all.find("group info: odd"), std::string::npos) << all;
}
