// What a user sees when the world does not come together: missing ranks, a wrong WORLD_SIZE, a job
// id from another job, a port in use, an unreachable master. Never a hang.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>

#include "engine/testing/subprocess.h"

using namespace ds::testing;

namespace {

// One dsbench world process with env:// variables of our choosing.
std::unique_ptr<Process> startRank(int rank, int worldSize, int port, int timeoutSeconds,
                                   std::map<std::string, std::string> extra = {}) {
  RunOptions o;
  o.unsetEnv = launcherVariables();
  o.setEnv = {{"RANK", std::to_string(rank)},       {"WORLD_SIZE", std::to_string(worldSize)},
              {"MASTER_ADDR", "127.0.0.1"},         {"MASTER_PORT", std::to_string(port)},
              {"LOCAL_RANK", std::to_string(rank)}, {"DS_JOB_ID", "fault-test"}};
  for (auto& [k, v] : extra) o.setEnv[k] = v;
  o.timeout = std::chrono::seconds(timeoutSeconds + 20);
  return std::make_unique<Process>(
      std::vector<std::string>{binDir() + "/dsbench", "world", "--timeout", std::to_string(timeoutSeconds)},
      o);
}

constexpr int kExitTimeout = 4;
constexpr int kExitConfig = 5;
constexpr int kExitIo = 6;

}  // namespace

TEST(WorldFaults, AMissingRankIsNamedAndEveryoneTimesOut) {
  int port = unusedPort();
  auto r0 = startRank(0, 3, port, 3);
  auto r1 = startRank(1, 3, port, 3);
  auto a = r0->wait();
  auto b = r1->wait();
  EXPECT_FALSE(a.timedOut);
  EXPECT_EQ(a.exitCode, kExitTimeout) << a.err;
  // Rank 1 times out too, or, when rank 0 gave up a moment earlier, loses rank 0's store: either is
  // a clear, bounded failure.
  EXPECT_TRUE(b.exitCode == kExitTimeout || b.exitCode == kExitIo) << b.err;
  EXPECT_FALSE(b.timedOut);
  EXPECT_NE(a.err.find("2/3 clients joined"), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("Ranks that never joined: 2."), std::string::npos) << a.err;
  EXPECT_LT(a.seconds, 3 + 10);
}

TEST(WorldFaults, ARankWithAnotherWorldSizeFails) {
  int port = unusedPort();
  auto r0 = startRank(0, 2, port, 3);
  auto r1 = startRank(1, 3, port, 3);
  auto a = r0->wait();
  auto b = r1->wait();
  EXPECT_NE(a.exitCode, 0);
  EXPECT_NE(b.exitCode, 0);
  EXPECT_FALSE(a.timedOut || b.timedOut);
  std::string all = a.err + b.err;
  EXPECT_NE(all.find("WORLD_SIZE"), std::string::npos) << all;
}

TEST(WorldFaults, AStrayProcessOfAnotherJobIsRefused) {
  int port = unusedPort();
  auto r0 = startRank(0, 2, port, 3);
  auto r1 = startRank(1, 2, port, 3, {{"DS_JOB_ID", "old-job"}});
  auto a = r0->wait();
  auto b = r1->wait();
  EXPECT_EQ(b.exitCode, kExitConfig) << b.err;
  EXPECT_NE(b.err.find("fault-test"), std::string::npos) << b.err;
  EXPECT_NE(b.err.find("old-job"), std::string::npos) << b.err;
  EXPECT_EQ(a.exitCode, kExitTimeout) << a.err;
  EXPECT_NE(a.err.find("Ranks that never joined: 1."), std::string::npos) << a.err;
}

TEST(WorldFaults, PortInUseNamesThePortAndErrno) {
  int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_any;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin6_port);
  auto r = startRank(0, 1, port, 3)->wait();
  ::close(fd);
  EXPECT_EQ(r.exitCode, kExitIo) << r.err;
  EXPECT_NE(r.err.find(std::to_string(port)), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("errno: 98"), std::string::npos) << r.err;
}

TEST(WorldFaults, AnUnreachableMasterTimesOutWithC10dWords) {
  int port = unusedPort();
  auto r = startRank(1, 2, port, 2)->wait();
  EXPECT_EQ(r.exitCode, kExitTimeout) << r.err;
  EXPECT_NE(r.err.find("while trying to connect to (127.0.0.1, " + std::to_string(port) + ")"),
            std::string::npos)
      << r.err;
  EXPECT_LT(r.seconds, 2 + 10);
}

TEST(WorldFaults, GarbageEnvironmentIsAConfigErrorNamingTheVariable) {
  RunOptions o;
  o.unsetEnv = launcherVariables();
  o.setEnv = {{"RANK", "zero"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}};
  auto r = run({binDir() + "/dsbench", "world"}, o);
  EXPECT_EQ(r.exitCode, kExitConfig);
  EXPECT_NE(r.err.find("RANK='zero' is not an integer"), std::string::npos) << r.err;
}

// No silent wait: ranks waiting at rendezvous say, 10 s in, how many joined and who is missing.
TEST(WorldFaults, WaitingRanksSayWhoIsMissingWhileTheyWait) {
  int port = unusedPort();
  auto r0 = startRank(0, 3, port, 12);
  auto r1 = startRank(1, 3, port, 12);
  auto a = r0->wait();
  auto b = r1->wait();
  EXPECT_FALSE(a.timedOut || b.timedOut);
  for (const auto* r : {&a, &b}) {
    EXPECT_NE(r->err.find("rendezvous: still waiting after 10 s"), std::string::npos) << r->err;
    EXPECT_NE(r->err.find("2/3 ranks joined; missing ranks: "), std::string::npos) << r->err;
  }
  // Rank 0 keeps the list.
  EXPECT_NE(a.err.find("missing ranks: 2;"), std::string::npos) << a.err;
}
