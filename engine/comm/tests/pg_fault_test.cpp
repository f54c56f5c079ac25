// Process-group faults with real processes: a killed rank, a stopped rank, mismatched collectives, and
// the flight recorder's dumps on a hang and on SIGUSR2.
// The survivors must fail within their timeout (+ a few seconds of diagnosis) and name the rank. Every
// CPU backend runs every case (gloo; shm, whose waits watch the peers' pids and futexes).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "engine/comm/tests/pickle_data.h"
#include "engine/testing/subprocess.h"

using namespace ds::testing;

namespace {

std::unique_ptr<Process> startRank(const std::string& backend, int rank, int n, int port,
                                   const std::vector<std::string>& args, int timeoutMs,
                                   std::map<std::string, std::string> extra = {}) {
  RunOptions o;
  o.unsetEnv = launcherVariables();
  o.setEnv = {{"RANK", std::to_string(rank)},
              {"WORLD_SIZE", std::to_string(n)},
              {"LOCAL_RANK", std::to_string(rank)},
              {"MASTER_ADDR", "127.0.0.1"},
              {"MASTER_PORT", std::to_string(port)},
              {"DS_JOB_ID", "pg-fault"},
              {"DS_ACCELERATOR", "cpu"},
              {"FAULT_TIMEOUT_MS", std::to_string(timeoutMs)},
              {"FAULT_BACKEND", backend}};
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

class ProcessGroupFaults : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(ProcessGroupFaults, AKilledRankIsNamedBySurvivorsWithinTheTimeout) {
  const int port = unusedPort();
  const int timeoutMs = 4000;
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.push_back(startRank(GetParam(), r, 3, port, {"loop", std::to_string(8 << 20)}, timeoutMs));
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
    // rank 1 may instead find the store gone with rank 0, and must then say so. A survivor that had
    // not yet reported the op may be listed before it ("0 (has not reached op #6; its last reported
    // op was #5); 2 (... it stopped responding ...)", seen under ASan): rank 2 must be in the list.
    static const std::regex lost(R"(Ranks that never arrived: (?:\d+ \([^)]*\); )*2 \()");
    bool named = std::regex_search(res.err, lost);
    bool storeGone = res.err.find("look at rank 0's error") != std::string::npos;
    EXPECT_TRUE(named || (r == 1 && storeGone)) << res.err;
    EXPECT_NE(res.err.find("allreduce(f32"), std::string::npos) << res.err;
  }
  ranks[2]->wait();
}

TEST_P(ProcessGroupFaults, AStoppedRankIsNamedInTheTimeout) {
  const int port = unusedPort();
  const int timeoutMs = 3000;
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(startRank(GetParam(), r, 3, port, {"stop", "1"}, timeoutMs));
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

TEST_P(ProcessGroupFaults, MismatchedCollectivesAreNamedUnderDetail) {
  const int port = unusedPort();
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.push_back(
        startRank(GetParam(), r, 3, port, {"mismatch"}, 10000, {{"DS_DISTRIBUTED_DEBUG", "DETAIL"}}));
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

// The flight recorder on a live hang (8 ranks): rank 3 stops (SIGSTOP) before collective #5, the
// others wait in it. Every live rank writes its dump within timeout + 5 s: ranks 1-2 and 4-6 when their
// own op times out, rank 7 (whose op waits 10x longer) because the first of them signalled the dump
// through the store. Each dump shows its rank waiting in #5 (enqueued, not completed; #4 completed);
// the stopped rank leaves none. The pickle beside each JSON holds data opcodes only.
TEST_P(ProcessGroupFaults, AHungCollectiveLeavesAFlightRecorderDumpOnEveryLiveRank) {
  TempDir dumps;
  const std::string prefix = dumps.file("rank_");
  const int port = unusedPort();
  const int timeoutMs = 3000, n = 8, seq = 5, victim = 3, slow = 7;
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.push_back(startRank(GetParam(), r, n, port, {"hang", std::to_string(seq), std::to_string(victim)},
                              timeoutMs,
                              {{"TORCH_FR_DUMP_TEMP_FILE", prefix},
                               {"DS_FR_DUMP_JSON", "1"},
                               {"FAULT_SLOW_RANK", std::to_string(slow)},
                               {"FAULT_SLOW_TIMEOUT_MS", std::to_string(timeoutMs * 10)}}));
  }
  // When the last live rank entered #5 (each prints "at 5 <rank>" just before).
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    ASSERT_TRUE(waitForText(*ranks[r], ranks[r]->stdoutPath(), fmt::format("at {} {}", seq, r),
                            std::chrono::seconds(60)))
        << "rank " << r << ": " << readFile(ranks[r]->stderrPath());
  }
  const auto entered = std::chrono::steady_clock::now();
  const auto deadline = entered + std::chrono::milliseconds(timeoutMs) + std::chrono::seconds(5);
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    const std::string json = prefix + std::to_string(r) + ".json";
    while (!std::filesystem::exists(json) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(std::filesystem::exists(json))
        << "rank " << r << " wrote no dump within timeout + 5 s: " << readFile(ranks[r]->stderrPath());
  }
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    SCOPED_TRACE(fmt::format("rank {}", r));
    auto d = nlohmann::json::parse(readFile(prefix + std::to_string(r) + ".json"));
    EXPECT_EQ(d["version"], "2.10");
    EXPECT_EQ(d["pg_config"]["default"]["ranks"], "[0, 1, 2, 3, 4, 5, 6, 7]");
    EXPECT_EQ(d["pg_status"]["0"]["last_enqueued_collective"], std::to_string(seq));
    EXPECT_EQ(d["pg_status"]["0"]["last_completed_collective"], std::to_string(seq - 1));
    int waiting = 0;
    for (const auto& e : d["entries"]) {
      if (e["collective_seq_id"] != seq || e["is_p2p"] == true) continue;
      ++waiting;
      EXPECT_EQ(e["profiling_name"], GetParam() + ":all_reduce");
      EXPECT_NE(e["state"], "completed");
      EXPECT_EQ(e["process_group"], (nlohmann::json{"default", "default_pg"}));
    }
    EXPECT_EQ(waiting, 1) << d.dump();
    EXPECT_NO_THROW(ds::comm::testing::decodePickle(readFile(prefix + std::to_string(r))));
  }
  EXPECT_FALSE(std::filesystem::exists(prefix + std::to_string(victim)))
      << "the stopped rank cannot have dumped";
  EXPECT_TRUE(waitForText(*ranks[slow], ranks[slow]->stderrPath(),
                          "Received a dump signal due to a collective timeout from rank",
                          std::chrono::seconds(5)))
      << readFile(ranks[slow]->stderrPath());
  for (int r = 0; r < n; ++r) ::kill(ranks[r]->pid(), SIGKILL);
  for (auto& p : ranks) p->wait();
}

// SIGUSR2 makes a running rank dump (off the signal handler) and go on.
TEST_P(ProcessGroupFaults, SigUsr2DumpsTheFlightRecorderAndTheRankGoesOn) {
  TempDir dumps;
  const std::string prefix = dumps.file("sig_");
  const int port = unusedPort();
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(
        startRank(GetParam(), r, 2, port, {"loop", "64"}, 10000, {{"TORCH_FR_DUMP_TEMP_FILE", prefix}}));
  }
  ASSERT_TRUE(waitForText(*ranks[1], ranks[1]->stdoutPath(), "ready 1", std::chrono::seconds(30)))
      << readFile(ranks[1]->stderrPath());
  ::kill(ranks[1]->pid(), SIGUSR2);
  const std::string path = prefix + "1";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!std::filesystem::exists(path) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << readFile(ranks[1]->stderrPath());
  auto d = ds::comm::testing::decodePickle(readFile(path));
  EXPECT_EQ(d["version"], "2.10");
  EXPECT_GT(d["entries"].size(), 0u);
  EXPECT_FALSE(std::filesystem::exists(prefix + "0")) << "only the signalled rank dumps";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(::kill(ranks[1]->pid(), 0), 0) << "the signal ended the rank";
  for (auto& p : ranks) ::kill(p->pid(), SIGKILL);
  for (auto& p : ranks) p->wait();
}

// shm only: a /dev/shm (here DS_SHM_DIR) too small for the segment. The host's first rank says how much
// is needed; the others relay its message, instead of hanging.
TEST(ShmFaults, ATooSmallShmDirIsAClearErrorOnEveryRank) {
  TempDir dir;
  if (::mount("tmpfs", dir.path().c_str(), "tmpfs", 0, "size=256k") != 0) {
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root)";
  }
  const int port = unusedPort();
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.push_back(startRank("shm", r, 3, port, {"loop", "1024"}, 4000, {{"DS_SHM_DIR", dir.path()}}));
  }
  std::vector<RunResult> res;
  for (auto& p : ranks) res.push_back(p->wait());
  ::umount2(dir.path().c_str(), MNT_DETACH);
  EXPECT_EQ(res[0].exitCode, 5) << res[0].err;
  EXPECT_NE(res[0].err.find("the shm backend needs 3.0 MiB in " + dir.path()), std::string::npos)
      << res[0].err;
  EXPECT_NE(res[0].err.find("DS_SHM_BUFFER_BYTES"), std::string::npos) << res[0].err;
  for (int r : {1, 2}) {
    EXPECT_FALSE(res[r].timedOut);
    EXPECT_EQ(res[r].exitCode, 5) << res[r].err;
    EXPECT_NE(res[r].err.find("rank 0 (the first rank on host"), std::string::npos) << res[r].err;
    EXPECT_NE(res[r].err.find("the shm backend needs 3.0 MiB"), std::string::npos) << res[r].err;
  }
}

// shm only: a crashed run's leftovers never reach a new run. A fake segment named like one of a dead
// creator is swept, and the new job works.
TEST(ShmFaults, LeftoversOfACrashedRunAreSweptAndIgnored) {
  TempDir dir;
  // A creator pid that exited: our own reaped child.
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  int status = 0;
  ::waitpid(dead, &status, 0);
  struct stat st {};
  ASSERT_EQ(::stat("/proc/self/ns/pid", &st), 0);
  const std::string stale = dir.file(fmt::format("dsshm-{}-{}-0123456789abcdef", st.st_ino, dead));
  {
    std::ofstream f(stale);
    f << std::string(1 << 16, 'x');  // garbage where a header would be
  }
  const int port = unusedPort();
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(startRank("shm", r, 2, port, {"stop", "-1"}, 10000, {{"DS_SHM_DIR", dir.path()}}));
  }
  for (auto& p : ranks) {
    auto res = p->wait();
    EXPECT_EQ(res.exitCode, 0) << res.err;
  }
  EXPECT_FALSE(std::filesystem::exists(stale)) << "the dead creator's segment was not swept";
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "the run left a segment behind";
}

INSTANTIATE_TEST_SUITE_P(Backend, ProcessGroupFaults,
                         ::testing::Values(
#if DS_WITH_GLOO
                             std::string("gloo"),
#endif
                             std::string("shm")),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });
