// The gloo backend's edges: bf16 rounding, timeouts, a dead peer, configuration errors, the store
// adapter and the interface choice.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <future>
#include <iostream>
#include <latch>

#include "engine/comm/backends/gloo/gloo_interface.h"
#include "engine/comm/backends/gloo/gloo_process_group.h"
#include "engine/comm/backends/gloo/gloo_store_adapter.h"
#include "engine/comm/backends/gloo/tests/gloo_test_util.h"
#include "engine/comm/half.h"
#include "engine/common/error.h"
#include "engine/env/world_info.h"

namespace ds::comm::testing {
namespace {

using namespace std::chrono_literals;

// Sets an environment variable for one test and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

template <typename Fn>
std::string errorOf(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// bf16 is reduced in f32 and rounded once. 256 + 1 + 1 + 1: rounding after every step gives 256 (257
// ties to even at 256, three times); rounding once gives round(259) = 260. Also checks avg and that
// reduce / reduce_scatter take the same path.
TEST(GlooBf16, ReducesInF32AndRoundsOnce) {
  runRanks(4, [](ProcessGroup& pg) {
    const std::uint16_t mine = floatToBf16(pg.rank() == 0 ? 256.0f : 1.0f);
    std::vector<std::uint16_t> v(5, mine), out(5, 0);
    Buffer b{v.data(), v.size(), DType::kBF16, {}};
    pg.allreduce(b, ReduceOp::kSum)->wait();
    for (auto x : v) EXPECT_EQ(bf16ToFloat(x), 260.0f);

    std::vector<std::uint16_t> a(3, mine);
    pg.allreduce(Buffer{a.data(), a.size(), DType::kBF16, {}}, ReduceOp::kAvg)->wait();
    for (auto x : a) EXPECT_EQ(bf16ToFloat(x), 65.0f);  // 259 / 4 = 64.75 -> bf16 65

    std::vector<std::uint16_t> in(5, mine);
    pg.reduce(Buffer{in.data(), 5, DType::kBF16, {}}, Buffer{out.data(), 5, DType::kBF16, {}}, 3,
              ReduceOp::kSum)
        ->wait();
    if (pg.rank() == 3) {
      for (auto x : out) EXPECT_EQ(bf16ToFloat(x), 260.0f);
    } else {
      for (auto x : out) EXPECT_EQ(x, 0);
    }

    std::vector<std::uint16_t> rsIn(8, mine), rsOut(2, 0);
    pg.reduceScatter(Buffer{rsIn.data(), 8, DType::kBF16, {}}, Buffer{rsOut.data(), 2, DType::kBF16, {}},
                     ReduceOp::kSum)
        ->wait();
    for (auto x : rsOut) EXPECT_EQ(bf16ToFloat(x), 260.0f);
  });
}

// One rank never calls the op: the others get a TimeoutError within the timeout plus a few seconds,
// naming the op, its sequence number, and the rank that never arrived.
TEST(GlooFaults, MissingRankTimesOut) {
  auto store = std::make_shared<store::HashStore>(30s);
  std::latch created(2);
  std::promise<void> done;
  auto doneFuture = done.get_future().share();
  std::string error;
  bool isTimeout = false;
  double elapsed = -1;
  auto make = [&](int r) {
    auto o = glooOptions(r, 2, store, 2000ms);
    o.heartbeatInterval = 200ms;
    return createProcessGroup("gloo", o);
  };
  std::thread r1([&] {
    auto pg = make(1);
    created.count_down();
    pg->barrier()->wait();
    doneFuture.wait_for(30s);  // alive, heartbeating, but never issues the allreduce
  });
  {
    auto pg = make(0);
    created.count_down();
    created.wait();
    pg->barrier()->wait();  // op #1: everyone is there
    std::vector<float> v(4, 1.0f);
    auto t0 = Clock::now();
    try {
      pg->allreduce(Buffer{v.data(), v.size(), DType::kF32, {}})->wait();
    } catch (const TimeoutError& e) {
      isTimeout = true;
      error = e.what();
    } catch (const std::exception& e) {
      error = e.what();
    }
    elapsed = secondsSince(t0);
    EXPECT_TRUE(pg->broken());
  }
  done.set_value();
  r1.join();
  EXPECT_TRUE(isTimeout) << error;
  EXPECT_LT(elapsed, 2.0 + 4.0) << error;
  EXPECT_GE(elapsed, 1.5) << error;
  EXPECT_NE(error.find("allreduce"), std::string::npos) << error;
  EXPECT_NE(error.find("#2"), std::string::npos) << error;
  EXPECT_NE(error.find("1 (has not reached op #2"), std::string::npos) << error;
  std::cout << "timeout after " << elapsed << " s: " << error << "\n";
}

// A peer that closed its group (as a crashed process would) makes the next op fail fast with a
// BackendError carrying Gloo's text, or at worst time out: never a hang.
TEST(GlooFaults, DeadPeerFailsInsteadOfHanging) {
  auto store = std::make_shared<store::HashStore>(30s);
  std::latch created(2), closed(2);
  std::thread r1([&] {
    auto pg = createProcessGroup("gloo", glooOptions(1, 2, store, 3000ms));
    created.arrive_and_wait();
    pg.reset();
    closed.arrive_and_wait();
  });
  auto pg = createProcessGroup("gloo", glooOptions(0, 2, store, 3000ms));
  created.arrive_and_wait();
  closed.arrive_and_wait();
  std::this_thread::sleep_for(200ms);
  std::vector<float> v(1024, 1.0f);
  auto t0 = Clock::now();
  std::string error = errorOf([&] { pg->allreduce(Buffer{v.data(), v.size(), DType::kF32, {}})->wait(); });
  double elapsed = secondsSince(t0);
  r1.join();
  EXPECT_FALSE(error.empty());
  EXPECT_LT(elapsed, 3.0 + 4.0) << error;
  EXPECT_NE(error.find("allreduce"), std::string::npos) << error;
  EXPECT_NE(error.find("is rank 1"), std::string::npos) << error;
  // The next op fails at once rather than waiting again.
  t0 = Clock::now();
  std::string second = errorOf([&] { pg->allreduce(Buffer{v.data(), v.size(), DType::kF32, {}})->wait(); });
  EXPECT_FALSE(second.empty());
  EXPECT_LT(secondsSince(t0), 1.0) << second;
  std::cout << "dead peer, first error after " << elapsed << " s: " << error << "\nsecond: " << second
            << "\n";
}

// A rank that never starts: the others fail creating the group within the timeout, naming it.
TEST(GlooFaults, RankThatNeverJoinsIsNamed) {
  auto store = std::make_shared<store::HashStore>(30s);
  std::vector<std::string> errors(2);
  std::vector<double> times(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r) {
    ts.emplace_back([&, r] {
      auto t0 = Clock::now();
      errors[r] = errorOf([&] { createProcessGroup("gloo", glooOptions(r, 3, store, 1500ms)); });
      times[r] = secondsSince(t0);
    });
  }
  for (auto& t : ts) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("ranks 2 never joined"), std::string::npos) << errors[r];
    EXPECT_LT(times[r], 1.5 + 3.0) << errors[r];
  }
}

TEST(GlooConfig, MissingInterfaceIsAConfigErrorListingTheUpOnes) {
  ScopedEnv env("GLOO_SOCKET_IFNAME", "nonexistent0");
  auto store = std::make_shared<store::HashStore>(5s);
  try {
    createProcessGroup("gloo", glooOptions(0, 2, store, 2000ms));
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("GLOO_SOCKET_IFNAME"), std::string::npos) << m;
    EXPECT_NE(m.find("nonexistent0"), std::string::npos) << m;
    EXPECT_NE(m.find("lo ("), std::string::npos) << m;  // the list of interfaces that are up
  }
}

TEST(GlooConfig, NcclExclusionSyntaxIsExplained) {
  try {
    detail::chooseGlooInterface(std::string("^lo"), nullptr);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("plain interface names"), std::string::npos) << m;
    EXPECT_NE(m.find("Unable to find address for: ^lo"), std::string::npos) << m;
  }
}

TEST(GlooConfig, CommaListUsesTheFirstInterface) {
  ScopedEnv env("GLOO_SOCKET_IFNAME", "lo,nonexistent0");
  auto c = detail::chooseGlooInterface(std::string("lo,nonexistent0"), nullptr);
  EXPECT_EQ(c.iface, "lo");
  EXPECT_EQ(c.hostname.rfind("127.", 0) == 0 || c.hostname == "::1", true) << c.hostname;
  runRanks(2, [](ProcessGroup& pg) {
    std::int64_t x = pg.rank() + 1;
    pg.allreduce(Buffer{&x, 1, DType::kI64, {}}, ReduceOp::kSum)->wait();
    EXPECT_EQ(x, 3);
  });
}

TEST(GlooConfig, AddressThatReachesMasterAddr) {
  env::WorldInfo w;
  w.masterAddr.value = "127.0.0.1";
  w.masterAddr.source = "MASTER_ADDR";
  w.masterPort.value = 29500;
  auto c = detail::chooseGlooInterface(std::nullopt, &w);
  EXPECT_EQ(c.hostname, "127.0.0.1");
  EXPECT_TRUE(c.iface.empty());
  EXPECT_EQ(detail::chooseGlooInterface(std::nullopt, nullptr).hostname, "127.0.0.1");
  w.masterAddr.value = "no-such-host.invalid";
  EXPECT_THROW(detail::chooseGlooInterface(std::nullopt, &w), ConfigError);
}

TEST(GlooConfig, CudaBuffersAreUnsupported) {
  auto store = std::make_shared<store::HashStore>(5s);
  auto o = glooOptions(0, 1, store);
  o.device = Device{DeviceType::kCuda, 0};
  std::string m = errorOf([&] { createProcessGroup("gloo", o); });
  EXPECT_NE(m.find("backend gloo does not support cuda:0"), std::string::npos) << m;
}

// Each op's Gloo buffers outlive the op (they are destroyed when the next op completes), while the
// caller frees its memory as soon as the op is done: the kept buffers must never touch that memory
// again (ASan sees it), and every later op, of every kind, must still get its own data.
TEST(GlooBuffers, MemoryFreedRightAfterEachOpIsNeverTouchedAgain) {
  runRanks(2, [](ProcessGroup& pg) {
    const int me = pg.rank();
    const int peer = 1 - me;
    for (int i = 0; i < 20; ++i) {
      const std::size_t n = 1 + static_cast<std::size_t>(i) * 37;
      {
        auto v = std::make_unique<std::vector<float>>(n, static_cast<float>(me + i));
        pg.allreduce(Buffer{v->data(), n, DType::kF32, {}})->wait();
        EXPECT_EQ((*v)[n - 1], static_cast<float>(1 + 2 * i));
      }
      {
        auto v = std::make_unique<std::vector<std::int32_t>>(n, me == 0 ? i : -1);
        pg.broadcast(Buffer{v->data(), n, DType::kI32, {}}, 0)->wait();
        EXPECT_EQ((*v)[0], i);
      }
      {
        std::vector<std::int32_t> in(n, me * 100 + i);
        auto out = std::make_unique<std::vector<std::int32_t>>(2 * n, -1);
        pg.allgather(Buffer{in.data(), n, DType::kI32, {}}, Buffer{out->data(), 2 * n, DType::kI32, {}})
            ->wait();
        EXPECT_EQ((*out)[n], 100 + i);
      }
      {
        auto v = std::make_unique<std::vector<std::int32_t>>(n, me == 0 ? i + 7 : -1);
        if (me == 0) {
          pg.send(Buffer{v->data(), n, DType::kI32, {}}, peer, i)->wait();
        } else {
          pg.recv(Buffer{v->data(), n, DType::kI32, {}}, peer, i)->wait();
          EXPECT_EQ((*v)[n - 1], i + 7);
        }
      }
      pg.barrier()->wait();
    }
  });
}

TEST(GlooStoreAdapter, PrefixesKeysAndBoundsWaits) {
  store::HashStore base(5s);
  detail::GlooStoreAdapter a(base, "pg/g/gloo/", 300ms);
  a.set("k", {'h', 'i'});
  EXPECT_EQ(store::toString(base.get("pg/g/gloo/k")), "hi");
  auto v = a.get("k");
  EXPECT_EQ(std::string(v.begin(), v.end()), "hi");
  a.wait({"k"});
  auto t0 = Clock::now();
  EXPECT_THROW(a.wait({"k", "missing"}), TimeoutError);  // the adapter's default
  EXPECT_LT(secondsSince(t0), 2.0);
  t0 = Clock::now();
  EXPECT_THROW(a.wait({"missing"}, 100ms), TimeoutError);
  EXPECT_LT(secondsSince(t0), 1.0);
  t0 = Clock::now();
  EXPECT_THROW(a.wait({"missing"}, 0ms), TimeoutError);  // gloo's kNoTimeout: the default, not forever
  EXPECT_LT(secondsSince(t0), 2.0);
  EXPECT_THROW(a.get("missing"), TimeoutError);
}

// Many small ops in a row, across all collectives, keep their tags apart (no stale message is taken
// by a later op) and stay fast; prints the median small-message allreduce latency for the report.
TEST(GlooLatency, ManySmallOpsInARow) {
  runRanks(2, [](ProcessGroup& pg) {
    std::vector<double> us;
    for (int i = 0; i < 200; ++i) {
      float x = static_cast<float>(pg.rank() + i);
      auto t0 = Clock::now();
      pg.allreduce(Buffer{&x, 1, DType::kF32, {}}, ReduceOp::kSum)->wait();
      us.push_back(secondsSince(t0) * 1e6);
      EXPECT_EQ(x, static_cast<float>(1 + 2 * i));
      if (i % 10 == 0) pg.barrier()->wait();
    }
    std::sort(us.begin(), us.end());
    if (pg.rank() == 0)
      std::cout << "2-rank f32 x1 allreduce: median " << us[us.size() / 2] << " us, p90 "
                << us[us.size() * 9 / 10] << " us\n";
  });
}

}  // namespace
}  // namespace ds::comm::testing
