// The ProcessGroup base's own behaviour (validation, DETAIL, timeout diagnosis, broken state), run on
// the gloo backend as threads over a HashStore.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "engine/comm/tests/matrix.h"
#include "engine/common/error.h"

using namespace ds::comm;
using ds::comm::testing::runThreads;

namespace {

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

ProcessGroupOptions fastOptions() {
  ProcessGroupOptions o;
  o.timeout = std::chrono::milliseconds(1500);
  o.heartbeatInterval = std::chrono::milliseconds(100);
  return o;
}

}  // namespace

TEST(ProcessGroupBase, BadBuffersAreConfigErrorsBeforeAnythingRuns) {
  runThreads("gloo", 1, [](ProcessGroup& pg) {
    float a[4] = {};
    float b[8] = {};
    Buffer four{a, 4, DType::kF32, {}};
    Buffer eight{b, 8, DType::kF32, {}};
    EXPECT_NE(errorOf([&] { pg.allreduce(four, eight); }).find("output has 8 elements, but must have 4"),
              std::string::npos);
    EXPECT_NE(
        errorOf([&] { pg.broadcast(four, 3); }).find("broadcast root 3 is not a rank of this group (0 to 0)"),
        std::string::npos);
    Buffer ints{a, 4, DType::kI32, {}};
    EXPECT_NE(errorOf([&] { pg.allreduce(four, ints); }).find("input is f32 but output is i32"),
              std::string::npos);
    Buffer gpu{a, 4, DType::kF32, Device{DeviceType::kCuda, 0}};
    EXPECT_NE(errorOf([&] { pg.allreduce(gpu); }).find("is on cuda:0, but this process group works on cpu"),
              std::string::npos);
    Buffer null{nullptr, 4, DType::kF32, {}};
    EXPECT_NE(errorOf([&] { pg.allreduce(null); }).find("no memory"), std::string::npos);
    EXPECT_NE(errorOf([&] { pg.send(four, 0); }).find("cannot send to itself"), std::string::npos);
  });
}

TEST(ProcessGroupBase, OpsAreNumberedAndTimed) {
  runThreads("gloo", 2, [](ProcessGroup& pg) {
    std::vector<float> v(1 << 16, 1.0f);
    Buffer b{v.data(), v.size(), DType::kF32, {}};
    auto w1 = pg.allreduce(b);
    auto w2 = pg.allreduce(b);
    w2->wait();
    EXPECT_TRUE(w1->isCompleted());  // in issue order
    EXPECT_EQ(w1->desc().seq + 1, w2->desc().seq);
    EXPECT_GT(w2->duration().count(), 0);
    EXPECT_EQ(v[0], 4.0f);
  });
}

TEST(ProcessGroupBase, ATimeoutNamesTheRankThatNeverArrived) {
  std::atomic<int> timeouts{0};
  std::string message;
  std::mutex mu;
  auto start = std::chrono::steady_clock::now();
  runThreads(
      "gloo", 3,
      [&](ProcessGroup& pg) {
        float x = 1;
        Buffer b{&x, 1, DType::kF32, {}};
        pg.allreduce(b)->wait();
        if (pg.rank() == 2) {
          // Rank 2 skips the second allreduce but stays alive (its heartbeats go on).
          std::this_thread::sleep_for(std::chrono::milliseconds(3500));
          return;
        }
        std::string err = errorOf([&] { pg.allreduce(b)->wait(); });
        if (!err.empty()) {
          ++timeouts;
          std::lock_guard<std::mutex> lock(mu);
          message = err;
        }
        EXPECT_TRUE(pg.broken());
        EXPECT_NE(errorOf([&] { pg.allreduce(b); }).find("is unusable"), std::string::npos);
      },
      fastOptions());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(timeouts.load(), 2);
  EXPECT_NE(message.find("allreduce(f32, count=1, op=sum) #2"), std::string::npos) << message;
  EXPECT_NE(message.find("Ranks that never arrived: 2 (has not reached op #2; its last reported op was #1)"),
            std::string::npos)
      << message;
  EXPECT_LT(seconds, 10);
}

TEST(ProcessGroupBase, OpsQueuedBehindATimeoutFailAtOnceAndTheGroupGoesIdle) {
  // nccl-tests' default: every iteration is issued, then waited. When the first times out, the
  // others must not each wait out a timeout of their own, and the caller must be able to tell when
  // the worker no longer touches the buffers (waitIdle) before freeing them.
  runThreads(
      "gloo", 2,
      [&](ProcessGroup& pg) {
        EXPECT_TRUE(pg.waitIdle(std::chrono::milliseconds(0)));  // nothing issued yet
        std::vector<float> v(64, 1.0f);
        Buffer b{v.data(), v.size(), DType::kF32, {}};
        if (pg.rank() == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(4000));  // alive, never joins
          return;
        }
        std::vector<std::shared_ptr<Work>> works;
        for (int i = 0; i < 5; ++i) works.push_back(pg.allreduce(b));
        EXPECT_NE(errorOf([&] { works[0]->wait(); }).find("timed out"), std::string::npos);
        EXPECT_TRUE(pg.waitIdle(ProcessGroup::kAbandonedOpGrace));
        for (int i = 2; i < 5; ++i) {
          EXPECT_NE(errorOf([&] { works[i]->wait(); }).find("is unusable"), std::string::npos) << "op " << i;
        }
      },
      fastOptions());
}

TEST(ProcessGroupBase, DetailModeNamesMismatchedRanks) {
  ProcessGroupOptions o = fastOptions();
  o.detailDebug = true;
  o.timeout = std::chrono::seconds(10);
  std::mutex mu;
  std::vector<std::string> errors;
  runThreads(
      "gloo", 3,
      [&](ProcessGroup& pg) {
        float x[2] = {1, 2};
        Buffer b{x, 2, DType::kF32, {}};
        pg.allreduce(b)->wait();  // matching ops pass
        Buffer c{x, pg.rank() == 2 ? 1u : 2u, DType::kF32, {}};
        std::string err = errorOf([&] { pg.allreduce(c)->wait(); });
        std::lock_guard<std::mutex> lock(mu);
        errors.push_back(err);
      },
      o);
  ASSERT_EQ(errors.size(), 3u);
  for (const auto& e : errors) {
    EXPECT_NE(e.find("collective mismatch at op #2"), std::string::npos) << e;
    EXPECT_NE(e.find("ranks 0, 1 issued allreduce(f32, count=2, op=sum)"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 2 issued allreduce(f32, count=1, op=sum)"), std::string::npos) << e;
  }
}

TEST(ProcessGroupBase, DebugEnvValues) {
  EXPECT_FALSE(detailDebugFromEnv(nullptr));
  EXPECT_FALSE(detailDebugFromEnv("OFF"));
  EXPECT_TRUE(detailDebugFromEnv("DETAIL"));
  EXPECT_THROW(detailDebugFromEnv("verbose"), ds::ConfigError);
}

TEST(ProcessGroupBase, UnknownBackendIsAConfigError) {
  ProcessGroupOptions o;
  o.store = nullptr;
  EXPECT_NE(errorOf([&] { createProcessGroup("ucx", o); }).find("'ucx' is not a backend"), std::string::npos);
}
