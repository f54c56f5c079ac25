// storeBarrier and monitoredBarrier over HashStore and TcpStore (ranks as threads).
#include "engine/store/barrier.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "engine/common/error.h"
#include "engine/store/hash_store.h"
#include "engine/store/tcp_store.h"
#include "engine/store/tests/test_util.h"

namespace ds::store {
namespace {

using namespace std::chrono_literals;
using testing::Clock;
using testing::secondsSince;

// Runs fn(rank) on worldSize threads; returns each rank's error text ("" = passed).
template <typename F>
std::vector<std::string> runRanks(int worldSize, F fn) {
  std::vector<std::string> errors(worldSize);
  std::vector<std::thread> threads;
  for (int r = 0; r < worldSize; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

TEST(StoreBarrierTest, EightRanksPassOverHashStoreRepeatedly) {
  HashStore store(5s);
  std::atomic<int> passed{0};
  auto errors = runRanks(8, [&](int r) {
    for (int i = 0; i < 20; ++i) storeBarrier(store, fmt::format("it/{}", i), r, 8);
    ++passed;
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(passed.load(), 8);
}

TEST(StoreBarrierTest, NoRankLeavesBeforeTheLastArrives) {
  HashStore store(5s);
  std::atomic<int> arrived{0};
  std::atomic<bool> early{false};
  auto errors = runRanks(4, [&](int r) {
    if (r == 3) std::this_thread::sleep_for(200ms);
    ++arrived;
    storeBarrier(store, "b", r, 4);
    if (arrived.load() != 4) early = true;
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_FALSE(early.load());
}

TEST(StoreBarrierTest, TwoHundredFiftySixTcpClientsPass) {
  testing::raiseFdLimit();
  constexpr int kWorld = 256;
  TcpStoreOptions so;
  so.port = 0;
  so.isServer = true;
  so.timeout = 20s;
  TcpStore master("127.0.0.1", so);
  std::vector<std::unique_ptr<TcpStore>> clients;
  for (int r = 0; r < kWorld; ++r) {
    TcpStoreOptions o;
    o.port = master.port();
    o.timeout = 20s;
    clients.push_back(std::make_unique<TcpStore>("127.0.0.1", o));
  }
  EXPECT_EQ(master.server()->numClients(), static_cast<size_t>(kWorld + 1));
  const auto start = Clock::now();
  auto errors = runRanks(kWorld, [&](int r) {
    storeBarrier(*clients[r], "first", r, kWorld);
    storeBarrier(*clients[r], "second", r, kWorld);
  });
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  EXPECT_EQ(master.add("barrier/second/count", 0), kWorld);
  // A bound against a wake-up storm, not a speed target; sanitizer builds run slower (timeScale()).
  EXPECT_LT(secondsSince(start), 10.0 * ds::testing::timeScale());
}

TEST(TcpStoreScaleTest, ServesThousandTwentyFourConnectedClients) {
  testing::raiseFdLimit();
  constexpr int kClients = 1024;
  TcpStoreOptions so;
  so.port = 0;
  so.isServer = true;
  so.timeout = 20s;
  TcpStore master("127.0.0.1", so);
  std::vector<std::unique_ptr<TcpStore>> clients;
  for (int r = 0; r < kClients; ++r) {
    TcpStoreOptions o;
    o.port = master.port();
    o.timeout = 20s;
    clients.push_back(std::make_unique<TcpStore>("127.0.0.1", o));
  }
  EXPECT_EQ(master.server()->numClients(), static_cast<size_t>(kClients + 1));
  for (int r = 0; r < kClients; ++r) clients[r]->add("joined", 1);
  // Every connection is still live: each reads what the last one wrote.
  for (int r = kClients - 1; r >= 0; --r) ASSERT_EQ(clients[r]->add("joined", 0), kClients) << "client " << r;
}

TEST(StoreBarrierTest, TimeoutSaysHowManyArrived) {
  HashStore store(5s);
  auto errors = runRanks(2, [&](int r) { storeBarrier(store, "partial", r, 3, 300ms); });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("2 of 3 ranks arrived"), std::string::npos) << e;
    EXPECT_NE(e.find("partial"), std::string::npos) << e;
  }
}

TEST(StoreBarrierTest, ReusedNameIsAConfigError) {
  HashStore store(1s);
  storeBarrier(store, "once", 0, 1);
  EXPECT_THROW(storeBarrier(store, "once", 0, 1), ConfigError);
  EXPECT_THROW(storeBarrier(store, "bad", 3, 2), ConfigError);
}

TEST(StoreMonitoredBarrierTest, AllRanksPass) {
  HashStore store(5s);
  auto errors = runRanks(6, [&](int r) { monitoredBarrier(store, "mb", r, 6, 2s); });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(StoreMonitoredBarrierTest, RankZeroNamesTheMissingRanksAndTheOthersQuoteIt) {
  HashStore store(5s);
  const auto start = Clock::now();
  // Ranks 1 and 2 never come.
  auto errors = runRanks(4, [&](int r) {
    if (r == 1 || r == 2) return;
    monitoredBarrier(store, "mb", r, 4, 500ms);
  });
  EXPECT_NE(errors[0].find("Ranks 1, 2 failed to pass monitoredBarrier in 500 ms"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[3].find("rank 0 reports: Ranks 1, 2 failed to pass monitoredBarrier in 500 ms"),
            std::string::npos)
      << errors[3];
  EXPECT_LT(secondsSince(start), 3.0);
}

TEST(StoreMonitoredBarrierTest, SingleMissingRankUsesTheSingularForm) {
  HashStore store(5s);
  auto errors = runRanks(3, [&](int r) {
    if (r != 2) monitoredBarrier(store, "mb1", r, 3, 300ms);
  });
  EXPECT_NE(errors[0].find("Rank 2 failed to pass monitoredBarrier in 300 ms"), std::string::npos)
      << errors[0];
}

TEST(StoreMonitoredBarrierTest, OthersDoNotHangWhenRankZeroIsGone) {
  HashStore store(5s);
  const auto start = Clock::now();
  auto errors = runRanks(3, [&](int r) {
    if (r != 0) monitoredBarrier(store, "mb2", r, 3, 300ms);
  });
  EXPECT_NE(errors[1].find("rank 0 did not publish its verdict"), std::string::npos) << errors[1];
  EXPECT_NE(errors[2].find("rank 0 did not publish its verdict"), std::string::npos) << errors[2];
  EXPECT_LT(secondsSince(start), 0.3 + 1.0 + 1.0);
}

}  // namespace
}  // namespace ds::store
