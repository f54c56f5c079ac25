// Process-group faults with real processes: a killed rank, a stopped rank, mismatched collectives.
// The survivors must fail within their timeout (+ a few seconds of diagnosis) and name the rank.
#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <thread>

#include "engine/testing/subprocess.h"

using namespace ds::testing;

namespace {

std::unique_ptr<Process> startRank(int rank, int n, int port, const std::vector<std::string>& args,
                                   int timeoutMs, std::map<std::string, std::string> extra = {}) {
  RunOptions o;
  o.unsetEnv = launcherVariables();
  o.setEnv = {{"RANK", std::to_string(rank)},
              {"WORLD_SIZE", std::to_string(n)},
              {"LOCAL_RANK", std::to_string(rank)},
              {"MASTER_ADDR", "127.0.0.1"},
              {"MASTER_PORT", std::to_string(port)},
              {"DS_JOB_ID", "pg-fault"},
              {"DS_ACCELERATOR", "cpu"},
              {"FAULT_TIMEOUT_MS", std::to_string(timeoutMs)}};
  for (auto& [k, v] : extra) o.setEnv[k] = v;
  o.timeout = std::chrono::milliseconds(timeoutMs) + std::chrono::seconds(40);
  std::vector<std::string> argv{binDir() + "/ds_comm_fault_worker"};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<Process>(argv, o);
}

bool waitForText(Process& p, const std::string& file, const std::string& text, std::chrono::seconds bound) {
  auto deadline = std::chrono::steady_clock::now() + bound;
  while (std::chrono::steady_clock::now() < deadline) {
    if (readFile(file).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace

TEST(ProcessGroupFaults, AKilledRankIsNamedBySurvivorsWithinTheTimeout) {
  const int port = unusedPort();
  const int timeoutMs = 4000;
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.push_back(startRank(r, 3, port, {"loop", std::to_string(8 << 20)}, timeoutMs));
  ASSERT_TRUE(waitForText(*ranks[2], ranks[2]->stdoutPath(), "ready 2", std::chrono::seconds(30)))
      << readFile(ranks[2]->stderrPath());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // mid-allreduce
  auto killedAt = std::chrono::steady_clock::now();
  ::kill(ranks[2]->pid(), SIGKILL);
  for (int r = 0; r < 2; ++r) {
    auto res = ranks[r]->wait();
    double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - killedAt).count();
    EXPECT_FALSE(res.timedOut) << "rank " << r << " hung";
    EXPECT_TRUE(res.exitCode == 3 || res.exitCode == 4) << res.err;
    EXPECT_LT(after, timeoutMs / 1000.0 + 5 + 2) << res.err;
    // The heartbeats name the lost rank, whether the backend saw a reset connection or a timeout;
    // rank 1 may instead find the store gone with rank 0, and must then say so.
    bool named = res.err.find("Ranks that never arrived: 2 (") != std::string::npos;
    bool storeGone = res.err.find("look at rank 0's error") != std::string::npos;
    EXPECT_TRUE(named || (r == 1 && storeGone)) << res.err;
    EXPECT_NE(res.err.find("allreduce(f32"), std::string::npos) << res.err;
  }
  ranks[2]->wait();
}

TEST(ProcessGroupFaults, AStoppedRankIsNamedInTheTimeout) {
  const int port = unusedPort();
  const int timeoutMs = 3000;
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(startRank(r, 3, port, {"stop", "1"}, timeoutMs));
  for (int r : {0, 2}) {
    auto res = ranks[r]->wait();
    EXPECT_FALSE(res.timedOut);
    EXPECT_EQ(res.exitCode, 4) << res.err;
    EXPECT_NE(res.err.find("allreduce(f32, count=1, op=sum) #2"), std::string::npos) << res.err;
    // Rank 0 hosts the store and can always tell. Rank 2 can too, unless rank 0 already exited and
    // took the store along, which it must then say instead of guessing.
    bool named = res.err.find("1 (has not reached op #2") != std::string::npos;
    bool storeGone = res.err.find("look at rank 0's error") != std::string::npos;
    EXPECT_TRUE(named || (r != 0 && storeGone)) << res.err;
    EXPECT_LT(res.seconds, timeoutMs / 1000.0 + 15);
  }
  ::kill(ranks[1]->pid(), SIGKILL);
  ranks[1]->wait();
}

TEST(ProcessGroupFaults, MismatchedCollectivesAreNamedUnderDetail) {
  const int port = unusedPort();
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.push_back(startRank(r, 3, port, {"mismatch"}, 10000, {{"DS_DISTRIBUTED_DEBUG", "DETAIL"}}));
  }
  for (int r = 0; r < 3; ++r) {
    auto res = ranks[r]->wait();
    EXPECT_EQ(res.exitCode, 3) << res.err;
    EXPECT_NE(res.err.find("collective mismatch at op #1"), std::string::npos) << res.err;
    EXPECT_NE(res.err.find("ranks 0, 2 issued allreduce(f32, count=4, op=sum)"), std::string::npos)
        << res.err;
    EXPECT_NE(res.err.find("rank 1 issued broadcast(f32, count=4, root=0)"), std::string::npos) << res.err;
  }
}
