// The one heartbeat (comm/heartbeat.h): its beat format, its thread and its last beats, over an
// in-memory store.
#include "engine/comm/heartbeat.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/store/hash_store.h"

using namespace ds::comm;
using namespace std::chrono_literals;

namespace {

std::string valueOf(ds::store::Store& s, const std::string& key) {
  return ds::store::toString(s.get(key, std::chrono::milliseconds(1000)));
}

// Polls until `pred` holds, at most 5 s.
template <class Pred>
bool eventually(Pred pred) {
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

}  // namespace

TEST(Beat, FormatAndParseRoundTrip) {
  EXPECT_EQ(formatBeat(7, "links"), "7 links");
  auto b = parseBeat("12 3 2 0");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->counter, 12u);
  EXPECT_EQ(b->state, "3 2 0");
  auto bare = parseBeat("5");
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->counter, 5u);
  EXPECT_EQ(bare->state, "");
  EXPECT_FALSE(parseBeat("").has_value());
  EXPECT_FALSE(parseBeat("join 1").has_value());
  EXPECT_FALSE(parseBeat("12x done").has_value());
}

TEST(Heartbeat, TheThreadBeatsEveryIntervalAndTheCounterGrows) {
  auto store = std::make_shared<ds::store::HashStore>();
  std::atomic<int> stage{0};
  std::atomic<int> after{0};
  HeartbeatOptions o;
  o.store = store;
  o.key = "t/hb/0";
  o.interval = 20ms;
  o.state = [&] { return "stage" + std::to_string(stage.load()); };
  o.afterBeat = [&] { ++after; };
  Heartbeat hb(o);
  hb.start();
  ASSERT_TRUE(eventually([&] { return store->check({"t/hb/0"}); }));
  stage = 1;
  ASSERT_TRUE(eventually([&] {
    auto b = parseBeat(valueOf(*store, "t/hb/0"));
    return b && b->counter >= 3 && b->state == "stage1";
  }));
  EXPECT_GE(after.load(), 2);
  hb.stop();
  const std::string last = valueOf(*store, "t/hb/0");
  std::this_thread::sleep_for(60ms);
  EXPECT_EQ(valueOf(*store, "t/hb/0"), last) << "the thread beat after stop()";
  // A last beat from the caller, after the thread ended: the counter goes on.
  stage = 2;
  hb.beatNow(1000ms);
  auto b = parseBeat(valueOf(*store, "t/hb/0"));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->counter, parseBeat(last)->counter + 1);
  EXPECT_EQ(b->state, "stage2");
  EXPECT_EQ(parseBeat(hb.nextValue())->counter, b->counter + 1);
}

TEST(Heartbeat, StopWakesTheThreadAtOnce) {
  auto store = std::make_shared<ds::store::HashStore>();
  HeartbeatOptions o;
  o.store = store;
  o.key = "t/hb/1";
  o.interval = std::chrono::minutes(10);
  o.state = [] { return std::string("x"); };
  Heartbeat hb(o);
  hb.start();
  ASSERT_TRUE(eventually([&] { return store->check({"t/hb/1"}); }));
  const auto t0 = std::chrono::steady_clock::now();
  hb.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
}

TEST(Heartbeat, TheOwnersStoppingFlagEndsTheThreadAtItsNextLook) {
  auto store = std::make_shared<ds::store::HashStore>();
  std::atomic<bool> stopping{false};
  std::atomic<int> beats{0};
  HeartbeatOptions o;
  o.store = store;
  o.key = "t/hb/2";
  o.interval = 10ms;
  o.state = [] { return std::string("x"); };
  o.afterBeat = [&] { ++beats; };
  o.stopping = &stopping;
  Heartbeat hb(o);
  hb.start();
  ASSERT_TRUE(eventually([&] { return beats.load() >= 1; }));
  stopping = true;
  std::this_thread::sleep_for(50ms);  // the thread's next look sees the flag
  const int seen = beats.load();
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(beats.load(), seen);
  hb.stop();
}
