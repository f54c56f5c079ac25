// Every Store operation, on every store: HashStore, FileStore, TcpStore and a PrefixStore over a
// TcpStore.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "engine/common/error.h"
#include "engine/store/file_store.h"
#include "engine/store/hash_store.h"
#include "engine/store/prefix_store.h"
#include "engine/store/tcp_store.h"
#include "engine/store/tests/test_util.h"

namespace ds::store {
namespace {

using namespace std::chrono_literals;
using testing::Clock;
using testing::secondsSince;

enum class Kind { kHash, kFile, kTcp, kPrefixTcp };

std::string kindName(const ::testing::TestParamInfo<Kind>& info) {
  switch (info.param) {
    case Kind::kHash:
      return "Hash";
    case Kind::kFile:
      return "File";
    case Kind::kTcp:
      return "Tcp";
    case Kind::kPrefixTcp:
      return "PrefixTcp";
  }
  return "?";
}

constexpr Duration kTestTimeout = 5s;

class StoreOpsTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override { store_ = make(); }

  // Another client of the same data as store_ (the same object for HashStore). The first TcpStore
  // made hosts the server, as rank 0's does.
  std::shared_ptr<Store> make() {
    switch (GetParam()) {
      case Kind::kHash:
        if (!hash_) hash_ = std::make_shared<HashStore>(kTestTimeout);
        return hash_;
      case Kind::kFile:
        return std::make_shared<FileStore>(dir_.file("store"), kTestTimeout);
      case Kind::kTcp:
      case Kind::kPrefixTcp: {
        TcpStoreOptions o;
        o.timeout = kTestTimeout;
        o.port = port_;
        o.isServer = port_ == 0;
        auto tcp = std::make_shared<TcpStore>("127.0.0.1", o);
        port_ = tcp->port();
        if (GetParam() == Kind::kTcp) return tcp;
        return std::make_shared<PrefixStore>("pg0", tcp);
      }
    }
    return nullptr;
  }

  void TearDown() override {
    clients_.clear();
    store_.reset();  // the server goes last
  }

  testing::TempDir dir_;
  std::shared_ptr<HashStore> hash_;
  int port_ = 0;
  std::vector<std::shared_ptr<Store>> clients_;
  std::shared_ptr<Store> store_;
};

TEST_P(StoreOpsTest, SetThenGetReturnsTheValue) {
  store_->set("a", toBytes("1"));
  EXPECT_EQ(toString(store_->get("a")), "1");
  store_->set("a", toBytes("two"));
  EXPECT_EQ(toString(store_->get("a")), "two");
}

TEST_P(StoreOpsTest, BinaryAndEmptyValuesRoundTrip) {
  Bytes bin{0, 1, 2, 255, 0, 128};
  store_->set("bin", bin);
  store_->set("empty", {});
  EXPECT_EQ(store_->get("bin"), bin);
  EXPECT_TRUE(store_->get("empty").empty());
  Bytes big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i * 7);
  store_->set("big", big);
  EXPECT_EQ(store_->get("big"), big);
}

TEST_P(StoreOpsTest, GetWaitsForAKeySetLaterByAnotherClient) {
  auto other = make();
  std::thread t([&] {
    std::this_thread::sleep_for(150ms);
    other->set("late", toBytes("here"));
  });
  const auto start = Clock::now();
  EXPECT_EQ(toString(store_->get("late")), "here");
  EXPECT_GE(secondsSince(start), 0.1);
  t.join();
}

TEST_P(StoreOpsTest, GetTimesOutNamingKeyAndStore) {
  const auto start = Clock::now();
  try {
    store_->get("never", 300ms);
    FAIL() << "get returned";
  } catch (const TimeoutError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("wait timeout after 300ms"), std::string::npos) << msg;
    EXPECT_NE(msg.find("never"), std::string::npos) << msg;
    EXPECT_NE(msg.find("waited"), std::string::npos) << msg;
    if (GetParam() == Kind::kTcp || GetParam() == Kind::kPrefixTcp) {
      EXPECT_NE(msg.find("TCPStore at 127.0.0.1:" + std::to_string(port_)), std::string::npos) << msg;
    }
    if (GetParam() == Kind::kFile) {
      EXPECT_NE(msg.find("FileStore at "), std::string::npos) << msg;
    }
  }
  EXPECT_GE(secondsSince(start), 0.29);
  EXPECT_LT(secondsSince(start), 2.0 * ds::testing::timeScale());  // honoured, not the default wait
}

TEST_P(StoreOpsTest, AddCreatesAtZeroAndCounts) {
  EXPECT_EQ(store_->add("n", 1), 1);
  EXPECT_EQ(store_->add("n", 5), 6);
  EXPECT_EQ(store_->add("n", -10), -4);
  EXPECT_EQ(store_->add("n", 0), -4);
  EXPECT_EQ(toString(store_->get("n")), "-4");
}

TEST_P(StoreOpsTest, AddOnTextValueIsRejectedAndStoreStaysUsable) {
  store_->set("text", toBytes("abc"));
  // HashStore/FileStore: ProtocolError. TcpStore: c10d has no error reply, so the server closes the
  // connection (its log says why) and the client reports an IoError; the next call reconnects.
  EXPECT_THROW(store_->add("text", 1), Error);
  store_->set("after", toBytes("ok"));
  EXPECT_EQ(toString(store_->get("after")), "ok");
}

TEST_P(StoreOpsTest, CompareSetFollowsC10dSemantics) {
  // Absent + empty expected: sets.
  EXPECT_EQ(toString(store_->compareSet("k", {}, toBytes("v1"))), "v1");
  // Present and equal: swaps.
  EXPECT_EQ(toString(store_->compareSet("k", toBytes("v1"), toBytes("v2"))), "v2");
  // Present and different: returns the current value, unchanged.
  EXPECT_EQ(toString(store_->compareSet("k", toBytes("zzz"), toBytes("v3"))), "v2");
  EXPECT_EQ(toString(store_->get("k")), "v2");
  // Absent + non-empty expected: returns expected and does not create the key.
  EXPECT_EQ(toString(store_->compareSet("absent", toBytes("e"), toBytes("d"))), "e");
  EXPECT_FALSE(store_->check({"absent"}));
}

TEST_P(StoreOpsTest, CheckDoesNotWait) {
  store_->set("x", toBytes("1"));
  const auto start = Clock::now();
  EXPECT_TRUE(store_->check({"x"}));
  EXPECT_FALSE(store_->check({"x", "y"}));
  EXPECT_TRUE(store_->check({}));
  EXPECT_LT(secondsSince(start), 1.0);
}

TEST_P(StoreOpsTest, DeleteKeyRemovesAndReportsExistence) {
  store_->set("d", toBytes("1"));
  EXPECT_TRUE(store_->deleteKey("d"));
  EXPECT_FALSE(store_->deleteKey("d"));
  EXPECT_FALSE(store_->check({"d"}));
  EXPECT_THROW(store_->get("d", 100ms), TimeoutError);
}

TEST_P(StoreOpsTest, NumKeysCountsKeys) {
  const auto before = store_->numKeys();
  store_->set("n1", {});
  store_->set("n2", {});
  store_->add("n3", 1);
  EXPECT_EQ(store_->numKeys(), before + 3);
  store_->deleteKey("n1");
  EXPECT_EQ(store_->numKeys(), before + 2);
}

TEST_P(StoreOpsTest, WaitReturnsWhenAllKeysAreSet) {
  auto other = make();
  std::thread t([&] {
    other->set("w1", {});
    std::this_thread::sleep_for(100ms);
    other->set("w2", {});
  });
  store_->wait({"w1", "w2"});
  EXPECT_TRUE(store_->check({"w1", "w2"}));
  t.join();
}

TEST_P(StoreOpsTest, WaitTimeoutNamesOnlyTheMissingKeys) {
  store_->set("present", {});
  try {
    store_->wait({"present", "missing_a", "missing_b"}, 200ms);
    FAIL() << "wait returned";
  } catch (const TimeoutError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("missing_a"), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing_b"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("present"), std::string::npos) << msg;
  }
  // The store is still in step after a timeout.
  store_->set("after", toBytes("1"));
  EXPECT_EQ(toString(store_->get("after")), "1");
}

TEST_P(StoreOpsTest, MultiSetAndMultiGet) {
  store_->multiSet({"m1", "m2", "m3"}, {toBytes("a"), toBytes("b"), {}});
  auto v = store_->multiGet({"m3", "m1", "m2"});
  ASSERT_EQ(v.size(), 3u);
  EXPECT_TRUE(v[0].empty());
  EXPECT_EQ(toString(v[1]), "a");
  EXPECT_EQ(toString(v[2]), "b");
  EXPECT_THROW(store_->multiSet({"a", "b"}, {toBytes("1")}), ConfigError);
  EXPECT_THROW(store_->multiGet({"m1", "nope"}, 150ms), TimeoutError);
}

TEST_P(StoreOpsTest, AppendCreatesAndExtends) {
  store_->append("log", toBytes("ab"));
  store_->append("log", toBytes("cd"));
  EXPECT_EQ(toString(store_->get("log")), "abcd");
}

TEST_P(StoreOpsTest, SixteenThreadsHammeringOneKeySpaceKeepExactCounts) {
  constexpr int kThreads = 16;
  const int kIters = GetParam() == Kind::kFile ? 60 : 200;
  std::vector<std::shared_ptr<Store>> clients;
  for (int i = 0; i < kThreads; ++i) clients.push_back(i % 2 == 0 ? nullptr : make());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      // Even threads share store_ (thread safety of one object); odd ones have their own client.
      Store& s = clients[i] ? *clients[i] : *store_;
      try {
        for (int j = 0; j < kIters; ++j) {
          s.add("counter", 1);
          s.add(fmt::format("per/{}", i % 4), 2);
          const std::string key = fmt::format("t{}/k{}", i, j % 8);
          s.set(key, toBytes(std::to_string(j)));
          if (toString(s.get(key)) != std::to_string(j)) ++failures;
          s.get("counter");
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << i << ": " << e.what();
        ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store_->add("counter", 0), kThreads * kIters);
  for (int p = 0; p < 4; ++p) EXPECT_EQ(store_->add(fmt::format("per/{}", p), 0), 2 * kIters * kThreads / 4);
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreOpsTest,
                         ::testing::Values(Kind::kHash, Kind::kFile, Kind::kTcp, Kind::kPrefixTcp), kindName);

TEST(PrefixStoreTest, PrefixesEveryKeyAndSeparatesUsers) {
  auto base = std::make_shared<HashStore>(1s);
  PrefixStore a("a", base);
  PrefixStore b("b", *base);
  a.set("k", toBytes("from a"));
  b.set("k", toBytes("from b"));
  EXPECT_EQ(toString(base->get("a/k")), "from a");
  EXPECT_EQ(toString(base->get("b/k")), "from b");
  EXPECT_EQ(a.add("c", 3), 3);
  EXPECT_TRUE(base->check({"a/c"}));
  try {
    a.wait({"w"}, 50ms);
    FAIL();
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("a/w"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.numKeys(), base->numKeys());
  EXPECT_NE(a.describe().find("HashStore"), std::string::npos);
}

TEST(FileStoreTest, RejectsAFileThatIsNotAStore) {
  testing::TempDir dir;
  {
    FILE* f = std::fopen(dir.file("other").c_str(), "w");
    std::fputs("hello, I am a text file\n", f);
    std::fclose(f);
  }
  FileStore fs(dir.file("other"), 1s);
  EXPECT_THROW(fs.get("x", 10ms), ProtocolError);
}

TEST(FileStoreTest, UnwritableDirectoryIsAnIoError) {
  EXPECT_THROW(FileStore("/nonexistent_dir_ds/store", 1s), IoError);
}

TEST(FileStoreTest, StateSurvivesAReopen) {
  testing::TempDir dir;
  {
    FileStore a(dir.file("s"), 1s);
    a.set("k", toBytes("v"));
    a.add("n", 7);
    a.append("l", toBytes("x"));
    a.append("l", toBytes("y"));
    a.deleteKey("gone");
  }
  FileStore b(dir.file("s"), 1s);
  EXPECT_EQ(toString(b.get("k")), "v");
  EXPECT_EQ(b.add("n", 0), 7);
  EXPECT_EQ(toString(b.get("l")), "xy");
  EXPECT_EQ(b.describe(), "FileStore at " + dir.file("s"));
}

}  // namespace
}  // namespace ds::store
