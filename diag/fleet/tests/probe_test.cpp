// The fleet's own TCP on loopback: the hello and the job id, reachability outcomes, a link pair and
// the ring, each bounded by its deadline.
#include "diag/fleet/probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <future>
#include <thread>

using namespace ds::diag::fleet;
using namespace std::chrono_literals;

namespace {

ProbeServer server(const std::string& job = "job1", int members = 4) {
  return ProbeServer("127.0.0.1", job, [members](int r) { return r >= 0 && r < members; });
}

// A port nothing listens on (bound, never listening, then closed).
int deadPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace

TEST(FleetProbe, ReachCountsAnswersAndNamesRefusalsAndOtherJobs) {
  auto s = server();
  auto other = server("job2");
  ReachOptions o;
  o.jobId = "job1";
  o.myRank = 1;
  o.connectTimeout = 1000ms;
  long long messages = 0;
  std::vector<ReachTarget> t = {{2, "lo", "127.0.0.1", "lo", "127.0.0.1", s.port()},
                                {3, "lo", "127.0.0.1", "lo", "127.0.0.1", deadPort()},
                                {0, "lo", "127.0.0.1", "lo", "127.0.0.1", other.port()}};
  auto r = probeAll(t, o, messages);
  EXPECT_EQ(r.probes, 3);
  EXPECT_EQ(r.ok, 1);
  ASSERT_EQ(r.failures.size(), 2u);
  EXPECT_EQ(r.failures[0].to, 3);
  EXPECT_NE(r.failures[0].error.find("connection refused"), std::string::npos) << r.failures[0].error;
  EXPECT_FALSE(r.failures[0].timedOut);
  EXPECT_EQ(r.failures[1].to, 0);
  EXPECT_NE(r.failures[1].error.find("another job"), std::string::npos) << r.failures[1].error;
  EXPECT_GE(other.refused(), 1);
  EXPECT_GE(messages, 3);
}

TEST(FleetProbe, ANonMemberIsRefused) {
  auto s = server("job1", 2);
  ReachOptions o;
  o.jobId = "job1";
  o.myRank = 7;  // not a member of a 2-rank job
  long long messages = 0;
  auto r = probeAll({{0, "lo", "", "lo", "127.0.0.1", s.port()}}, o, messages);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_NE(r.failures[0].error.find("member"), std::string::npos) << r.failures[0].error;
}

TEST(FleetProbe, APeerThatConnectsAndSaysNothingIsDroppedAndOthersStillServed) {
  auto s = server();
  int mute = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(s.port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(mute, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ReachOptions o;
  o.jobId = "job1";
  o.myRank = 1;
  long long messages = 0;
  auto r = probeAll({{0, "lo", "", "lo", "127.0.0.1", s.port()}}, o, messages);
  EXPECT_EQ(r.ok, 1) << "a silent connection must not block the listener";
  char c;
  auto t0 = Clock::now();
  EXPECT_LE(::recv(mute, &c, 1, 0), 0);  // closed by the listener after its hello bound
  EXPECT_LT(Clock::now() - t0, 5s);
  ::close(mute);
}

TEST(FleetProbe, LinkPairMeasuresLatencyAndBandwidth) {
  auto s1 = server();
  LinkOptions o;
  o.jobId = "job1";
  o.myRank = 0;
  o.largeBytes = 1 << 20;
  auto serving = std::async(std::launch::async, [&] { return servePair(s1, 0, 5, Clock::now() + 5s, 5000ms); });
  long long messages = 0;
  double busy = -1;
  auto r = measurePair(1, "127.0.0.1", s1.port(), 5, o, Clock::now() + 5s, 5000ms, messages, {}, &busy);
  EXPECT_EQ(r.outcome, ds::report::PairOutcome::kOk) << r.error;
  EXPECT_EQ(r.a, 0);
  EXPECT_EQ(r.b, 1);
  EXPECT_GT(r.latencyUs, 0);
  EXPECT_GT(r.bandwidthGBps, 0);
  EXPECT_GT(busy, 0);
  // The kernel's counters of both ends: 3 x 1 MiB each way at least, nothing lost on loopback.
  EXPECT_GE(r.sentBytes, 6u << 20);
  EXPECT_LT(r.retransBytes, r.sentBytes / 100);
  auto served = serving.get();
  EXPECT_EQ(served.error, "");
  EXPECT_FALSE(served.peerGone);
  EXPECT_GT(served.busySeconds, 0);
}

// A rank whose link tests already went bad with several peers marks its answer to the warm-up ping;
// the lower rank then ends the pair, recorded as skipped with the reason, and neither side errs.
TEST(FleetProbe, AServerInShortTestEndsThePairAfterTheWarmUp) {
  auto s1 = server();
  LinkOptions o;
  o.jobId = "job1";
  o.myRank = 0;
  auto serving = std::async(std::launch::async, [&] { return servePair(s1, 0, 6, Clock::now() + 5s, 5000ms, {}, true); });
  long long messages = 0;
  auto r = measurePair(1, "127.0.0.1", s1.port(), 6, o, Clock::now() + 5s, 5000ms, messages);
  EXPECT_EQ(r.outcome, ds::report::PairOutcome::kSkipped) << r.error;
  EXPECT_NE(r.error.find("rank 1's link tests in this stage had already gone bad"), std::string::npos) << r.error;
  EXPECT_EQ(r.bandwidthGBps, 0);
  EXPECT_EQ(serving.get().error, "");
}

TEST(FleetProbe, AMeasurerInShortTestEndsThePairAtOnce) {
  auto s1 = server();
  LinkOptions o;
  o.jobId = "job1";
  o.myRank = 0;
  o.shortTest = true;
  auto serving = std::async(std::launch::async, [&] { return servePair(s1, 0, 7, Clock::now() + 5s, 5000ms); });
  long long messages = 0;
  auto r = measurePair(1, "127.0.0.1", s1.port(), 7, o, Clock::now() + 5s, 5000ms, messages);
  EXPECT_EQ(r.outcome, ds::report::PairOutcome::kSkipped) << r.error;
  EXPECT_NE(r.error.find("rank 0's link tests in this stage had already gone bad"), std::string::npos) << r.error;
  auto served = serving.get();
  EXPECT_EQ(served.error, "");
  EXPECT_LT(served.busySeconds, 1.0);
}

// ... and does not wait for a peer that has not reached this round yet (it answered the hello from
// its listener; it serves the pair 2 s later): the short test asks it for nothing.
TEST(FleetProbe, AMeasurerInShortTestDoesNotWaitForALatePeer) {
  auto s1 = server();
  LinkOptions o;
  o.jobId = "job1";
  o.myRank = 0;
  o.shortTest = true;
  auto serving = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(2s);
    return servePair(s1, 0, 8, Clock::now() + 5s, 5000ms);
  });
  long long messages = 0;
  const auto t0 = Clock::now();
  auto r = measurePair(1, "127.0.0.1", s1.port(), 8, o, Clock::now() + 8s, 5000ms, messages);
  EXPECT_LT(Clock::now() - t0, 1s);
  EXPECT_EQ(r.outcome, ds::report::PairOutcome::kSkipped) << r.error;
  serving.get();
}

TEST(FleetProbe, APeerThatNeverArrivesCostsOnlyItsPair) {
  auto s1 = server();  // rank 1's listener; rank 1 never serves the pair (frozen)
  LinkOptions o;
  o.jobId = "job1";
  o.myRank = 0;
  long long messages = 0;
  auto t0 = Clock::now();
  auto r = measurePair(1, "127.0.0.1", s1.port(), 9, o, Clock::now() + 1500ms, 1000ms, messages);
  EXPECT_EQ(r.outcome, ds::report::PairOutcome::kTimeout) << r.error;
  EXPECT_NE(r.error.find("rank 1 never answered"), std::string::npos) << r.error;
  EXPECT_LT(Clock::now() - t0, 4s);
}

TEST(FleetProbe, RingOfThreeCompletesAndAMissingMemberIsNamed) {
  std::vector<std::unique_ptr<ProbeServer>> servers;
  for (int i = 0; i < 3; ++i) {
    servers.push_back(std::make_unique<ProbeServer>("127.0.0.1", "job1", [](int r) { return r >= 0 && r < 3; }));
  }
  auto addrOf = [&](int r) { return std::make_pair(std::string("127.0.0.1"), servers[static_cast<size_t>(r)]->port()); };
  std::vector<std::future<std::string>> f;
  for (int r = 0; r < 3; ++r) {
    f.push_back(std::async(std::launch::async, [&, r] {
      long long m = 0;
      return ringCollective(*servers[static_cast<size_t>(r)], {0, 1, 2}, 7, addrOf, "job1", r, Clock::now() + 5s, m);
    }));
  }
  for (auto& x : f) EXPECT_EQ(x.get(), "");
  // Rank 2 absent: rank 0 waits for its previous neighbour (2) in vain, and says so.
  long long m = 0;
  auto e0 = std::async(std::launch::async, [&] {
    return ringCollective(*servers[0], {0, 1, 2}, 8, addrOf, "job1", 0, Clock::now() + 1s, m);
  });
  long long m1 = 0;
  auto e1 = ringCollective(*servers[1], {0, 1, 2}, 8, addrOf, "job1", 1, Clock::now() + 1s, m1);
  auto text0 = e0.get();
  EXPECT_NE(text0.find("rank 2"), std::string::npos) << text0;
  EXPECT_NE(e1, "") << "rank 1 gets nothing from rank 0 either";
}
