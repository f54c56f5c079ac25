// The ProcessGroup base's fast path (inlineEligible/startInline), on a scripted in-process backend:
// which thread runs an op, issue order between inline ops, their continuations and the worker, the
// size limit and its variable, errors and timeouts raised inline, and the async contract of wait().
// (The base's own tests live in engine/comm/tests; this one sits with the mpi backend, the fast
// path's first user.)
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/comm/process_group.h"
#include "engine/common/error.h"
#include "engine/store/hash_store.h"

using namespace ds::comm;
using namespace std::chrono_literals;

namespace {

// What the scripted backend does when an op starts inline.
enum class Script { kComplete, kContinue, kThrow, kTimeout };

class ScriptedGroup final : public ProcessGroup {
 public:
  explicit ScriptedGroup(ProcessGroupOptions o) : ProcessGroup(std::move(o)) {}
  ~ScriptedGroup() override {
    release();
    shutdown();
  }
  std::string backendName() const override { return "scripted"; }

  Script script = Script::kComplete;
  bool eligible = true;

  struct Event {
    std::string what;  // "inline #3", "rest #3", "worker #3"
    std::thread::id thread;
  };
  std::vector<Event> events() {
    std::lock_guard<std::mutex> l(mu_);
    return events_;
  }
  // Ops that block (a worker op with `blockWorker`, a continuation) wait for release().
  void release() {
    {
      std::lock_guard<std::mutex> l(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }
  bool blockWorker = false;
  // Waits until `n` events were recorded (bounded).
  bool waitEvents(std::size_t n) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, 5s, [&] { return events_.size() >= n; });
  }

 protected:
  bool inlineEligible(const OpDesc&) const override { return eligible; }
  std::function<void()> startInline(const OpDesc& d, const Buffer&, const Buffer&,
                                    std::chrono::steady_clock::time_point) override {
    record("inline #" + std::to_string(d.seq));
    switch (script) {
      case Script::kComplete:
        return nullptr;
      case Script::kContinue:
        return [this, d] {
          record("rest #" + std::to_string(d.seq));
          block();
        };
      case Script::kThrow:
        throw ds::BackendError("the scripted transport broke");
      case Script::kTimeout:
        throw ds::TimeoutError("the scripted peer never came");
    }
    return nullptr;
  }
  void doAllreduce(const OpDesc& d, const Buffer&, const Buffer&) override {
    record("worker #" + std::to_string(d.seq));
    if (blockWorker) block();
    if (workerTimesOut) throw ds::TimeoutError("the scripted peer never came");
  }

  bool keepsOwnTimeout(const OpDesc&) const override { return ownTimeout; }
  bool callerMayRunToEnd(const OpDesc& d) const override { return callerRunsAll || keepsOwnTimeout(d); }
  // Instead of ending the process: recorded, and the hung call let go.
  void abortHungCall(const OpDesc& d) override {
    record("abort #" + std::to_string(d.seq));
    release();
  }

 public:
  bool workerTimesOut = false;
  // False: the worker's op blocks without a timeout of its own (as mpi's blocking calls), so the
  // group's watchdog must time it out.
  bool ownTimeout = true;
  // On one core, ops without a timeout of their own run on the caller too (as mpi's).
  bool callerRunsAll = false;

 private:
  void record(std::string what) {
    {
      std::lock_guard<std::mutex> l(mu_);
      events_.push_back(Event{std::move(what), std::this_thread::get_id()});
    }
    cv_.notify_all();
  }
  void block() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, 10s, [&] { return released_; });
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
  bool released_ = false;
};

// `cpus`: the placement the group believes it has (2: the worker thread is worth it, whatever the
// affinity of the test process; 1: one core, ops run on the caller's thread).
ProcessGroupOptions options(bool detail = false, int cpus = 2) {
  ProcessGroupOptions o;
  o.store = std::make_shared<ds::store::HashStore>();
  o.timeout = 3s;
  o.detailDebug = detail;
  o.cpus = cpus;
  return o;
}

// Sets DS_PG_INLINE_MAX_BYTES for the scope (groups read it at construction).
struct InlineLimit {
  explicit InlineLimit(const char* v) {
    if (v != nullptr) ::setenv("DS_PG_INLINE_MAX_BYTES", v, 1);
  }
  ~InlineLimit() { ::unsetenv("DS_PG_INLINE_MAX_BYTES"); }
};

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ProcessGroupInline, ASmallOpCompletesOnTheCallersThreadBeforeIssueReturns) {
  InlineLimit limit(nullptr);
  ScriptedGroup pg(options());
  float v[4] = {};
  auto w = pg.allreduce(Buffer{v, 4, DType::kF32, {}});
  EXPECT_TRUE(w->isCompleted());
  w->wait();
  EXPECT_GT(w->duration().count(), 0);
  auto ev = pg.events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].what, "inline #1");
  EXPECT_EQ(ev[0].thread, std::this_thread::get_id());
  EXPECT_EQ(pg.inlineMaxBytes(), kDefaultInlineMaxBytes);
}

TEST(ProcessGroupInline, OpsAboveTheLimitOrNotEligibleGoToTheWorker) {
  InlineLimit limit("64");
  ScriptedGroup pg(options());
  std::vector<float> v(32);
  pg.allreduce(Buffer{v.data(), 16, DType::kF32, {}})->wait();  // 64 bytes: inline
  pg.allreduce(Buffer{v.data(), 17, DType::kF32, {}})->wait();  // 68 bytes: worker
  pg.eligible = false;
  pg.allreduce(Buffer{v.data(), 1, DType::kF32, {}})->wait();  // the backend says no: worker
  auto ev = pg.events();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].what, "inline #1");
  EXPECT_EQ(ev[1].what, "worker #2");
  EXPECT_NE(ev[1].thread, std::this_thread::get_id());
  EXPECT_EQ(ev[2].what, "worker #3");
}

TEST(ProcessGroupInline, ZeroTurnsTheFastPathOffAndSoDoesDetail) {
  {
    InlineLimit limit("0");
    ScriptedGroup pg(options());
    float v = 0;
    pg.allreduce(Buffer{&v, 1, DType::kF32, {}})->wait();
    pg.barrier()->wait();  // 0 bytes: still not inline when the limit is 0
    auto ev = pg.events();
    ASSERT_EQ(ev.size(), 2u);
    EXPECT_EQ(ev[0].what, "worker #1");
    EXPECT_EQ(ev[1].what, "worker #2");  // the base's barrier is a one-element allreduce
  }
  {
    InlineLimit limit(nullptr);
    ScriptedGroup pg(options(/*detail=*/true));
    EXPECT_EQ(pg.inlineMaxBytes(), 0u);
    float v = 0;
    pg.allreduce(Buffer{&v, 1, DType::kF32, {}})->wait();
    EXPECT_EQ(pg.events().at(0).what, "worker #1");
  }
}

TEST(ProcessGroupInline, AnOpIssuedWhileTheWorkerIsBusyQueuesBehindIt) {
  InlineLimit limit("8");
  ScriptedGroup pg(options());
  pg.blockWorker = true;
  std::vector<float> big(16);
  float small = 0;
  auto w1 = pg.allreduce(Buffer{big.data(), big.size(), DType::kF32, {}});  // worker, blocks
  ASSERT_TRUE(pg.waitEvents(1));
  auto w2 = pg.allreduce(Buffer{&small, 1, DType::kF32, {}});  // small, but #1 is running
  EXPECT_FALSE(w2->isCompleted());
  pg.release();
  w1->wait();
  w2->wait();
  auto ev = pg.events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].what, "worker #1");
  EXPECT_EQ(ev[1].what, "worker #2");  // not inline, and after #1
}

TEST(ProcessGroupInline, TheRestOfASlowOpRunsOnTheWorkerBeforeLaterOps) {
  InlineLimit limit(nullptr);
  ScriptedGroup pg(options());
  pg.script = Script::kContinue;
  float a = 0;
  auto t0 = std::chrono::steady_clock::now();
  auto w1 = pg.allreduce(Buffer{&a, 1, DType::kF32, {}});
  // The caller is not held for the rest: issue returns at once, and wait() keeps its contract.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_FALSE(w1->isCompleted());
  EXPECT_NE(errorOf([&] { w1->wait(50ms); }).find("still running"), std::string::npos);
  pg.script = Script::kComplete;
  // #1's rest stays stuck past the drain budget (2 ms): #2 queues behind it, issue does not hang.
  auto w2 = pg.allreduce(Buffer{&a, 1, DType::kF32, {}});
  pg.release();
  w1->wait();
  w2->wait();
  auto ev = pg.events();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].what, "inline #1");
  EXPECT_EQ(ev[0].thread, std::this_thread::get_id());
  EXPECT_EQ(ev[1].what, "rest #1");
  EXPECT_NE(ev[1].thread, std::this_thread::get_id());
  EXPECT_EQ(ev[2].what, "worker #2");
  // And once the worker is idle again, small ops take the fast path again.
  pg.allreduce(Buffer{&a, 1, DType::kF32, {}})->wait();
  EXPECT_EQ(pg.events().back().what, "inline #3");
}

TEST(ProcessGroupInline, AfterASlowOpTheNextSmallOpWaitsForItAndRunsOnTheCaller) {
  // The rest of #1 runs on the worker; #2, issued while it is queued or running, waits for it
  // (briefly) and then takes the fast path, rather than following it to the worker: otherwise a
  // back-to-back loop of small ops stays on the worker, each op paying a handoff.
  InlineLimit limit(nullptr);
  auto o = options();
  o.smallOpDrain = 2s;  // the worker may wait for a core on a loaded machine
  ScriptedGroup pg(o);
  pg.script = Script::kContinue;
  float a = 0;
  auto w1 = pg.allreduce(Buffer{&a, 1, DType::kF32, {}});
  EXPECT_FALSE(w1->isCompleted());
  pg.release();  // the rest can finish now; #2 is issued before the worker has run it
  pg.script = Script::kComplete;
  const auto t0 = std::chrono::steady_clock::now();
  auto w2 = pg.allreduce(Buffer{&a, 1, DType::kF32, {}});
  const auto waited = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // #1 completes just after the group turns idle (the worker's order), so wait() for it.
  w1->wait();
  EXPECT_TRUE(w2->isCompleted()) << "issue waited " << waited << " ms";
  auto ev = pg.events();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[1].what, "rest #1");
  EXPECT_EQ(ev[2].what, "inline #2");
  EXPECT_EQ(ev[2].thread, std::this_thread::get_id());
}

TEST(ProcessGroupInline, AnErrorRaisedInlineLandsInTheWorkNamingOpAndRank) {
  InlineLimit limit(nullptr);
  ScriptedGroup pg(options());
  pg.script = Script::kThrow;
  float a = 0;
  auto w = pg.allreduce(Buffer{&a, 1, DType::kF32, {}});
  EXPECT_TRUE(w->isCompleted());
  std::string e = errorOf([&] { w->wait(); });
  EXPECT_NE(e.find("scripted allreduce(f32, count=1, op=sum) #1 (4 bytes) failed on rank 0"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("the scripted transport broke"), std::string::npos) << e;
  EXPECT_FALSE(pg.broken());
}

TEST(ProcessGroupInline, ATimeoutRaisedInlineIsDiagnosedAndBreaksTheGroup) {
  InlineLimit limit(nullptr);
  ScriptedGroup pg(options());
  pg.script = Script::kTimeout;
  float a = 0;
  auto w = pg.allreduce(Buffer{&a, 1, DType::kF32, {}});
  std::string e = errorOf([&] { w->wait(); });
  EXPECT_NE(e.find("scripted allreduce(f32, count=1, op=sum) #1 (4 bytes) timed out on rank 0 of 1"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("The group is now unusable"), std::string::npos) << e;
  EXPECT_TRUE(pg.broken());
  EXPECT_NE(errorOf([&] {
              pg.allreduce(Buffer{&a, 1, DType::kF32, {}});
            }).find("is unusable"),
            std::string::npos);
}

TEST(ProcessGroupInline, OnOneCoreEveryOpRunsToItsEndOnTheCallersThread) {
  InlineLimit limit(nullptr);
  ScriptedGroup pg(options(false, /*cpus=*/1));
  EXPECT_TRUE(pg.callerRunsOps());
  pg.eligible = false;  // the fast path would send it to the worker
  std::vector<float> big(kDefaultInlineMaxBytes / sizeof(float) * 4);  // and so would its size
  auto w = pg.allreduce(Buffer{big.data(), big.size(), DType::kF32, {}});
  EXPECT_TRUE(w->isCompleted());
  w->wait();
  pg.barrier()->wait();
  auto ev = pg.events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].what, "worker #1");
  EXPECT_EQ(ev[0].thread, std::this_thread::get_id());
  EXPECT_EQ(ev[1].what, "worker #2");
  EXPECT_EQ(ev[1].thread, std::this_thread::get_id());
}

TEST(ProcessGroupInline, OnOneCoreATimeoutIsDiagnosedAndBreaksTheGroup) {
  InlineLimit limit(nullptr);
  ScriptedGroup pg(options(false, /*cpus=*/1));
  pg.workerTimesOut = true;
  float a = 0;
  auto w = pg.allreduce(Buffer{&a, 1, DType::kF32, {}});
  EXPECT_TRUE(w->isCompleted());
  std::string e = errorOf([&] { w->wait(); });
  EXPECT_NE(e.find("scripted allreduce(f32, count=1, op=sum) #1 (4 bytes) timed out on rank 0 of 1"),
            std::string::npos)
      << e;
  EXPECT_TRUE(pg.broken());
}

TEST(ProcessGroupInline, OnOneCoreZeroOrDetailStillUseTheWorker) {
  for (bool detail : {false, true}) {
    InlineLimit limit(detail ? nullptr : "0");
    ScriptedGroup pg(options(detail, /*cpus=*/1));
    EXPECT_FALSE(pg.callerRunsOps()) << detail;
    float a = 0;
    pg.allreduce(Buffer{&a, 1, DType::kF32, {}})->wait();
    auto ev = pg.events();
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0].what, "worker #1");
    EXPECT_NE(ev[0].thread, std::this_thread::get_id()) << detail;
  }
}

TEST(ProcessGroupInline, ManyThreadsIssuingKeepOneOpAtATimeInSeqOrder) {
  for (int cpus : {2, 1}) {
    InlineLimit limit(nullptr);
    ScriptedGroup pg(options(false, cpus));
    std::atomic<int> done{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        float a = 0;
        for (int i = 0; i < 200; ++i) pg.allreduce(Buffer{&a, 1, DType::kF32, {}})->wait();
        ++done;
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(done.load(), 4);
    auto ev = pg.events();
    ASSERT_EQ(ev.size(), 800u);
    // Every op ran exactly once, in seq order (inline or on the worker, never two at once: the
    // events are recorded in the order the ops ran).
    for (std::size_t i = 0; i < ev.size(); ++i) {
      std::string seq = "#" + std::to_string(i + 1);
      EXPECT_EQ(ev[i].what.substr(ev[i].what.find('#')), seq) << i << " with " << cpus << " CPUs";
    }
  }
}

TEST(ProcessGroupInline, TheLimitVariableIsParsedStrictly) {
  EXPECT_EQ(inlineMaxBytesFromEnv(nullptr), kDefaultInlineMaxBytes);
  EXPECT_EQ(inlineMaxBytesFromEnv(""), kDefaultInlineMaxBytes);
  EXPECT_EQ(inlineMaxBytesFromEnv("0"), 0u);
  EXPECT_EQ(inlineMaxBytesFromEnv("4096"), 4096u);
  EXPECT_EQ(inlineMaxBytesFromEnv("64K"), 65536u);
  EXPECT_EQ(inlineMaxBytesFromEnv("2M"), 2u << 20);
  for (const char* bad : {"abc", "-1", "1X", "K", "1KB", "12 ", "99999999999999999999"}) {
    std::string e = errorOf([&] { inlineMaxBytesFromEnv(bad); });
    EXPECT_NE(e.find("DS_PG_INLINE_MAX_BYTES"), std::string::npos) << bad << ": " << e;
  }
}

TEST(ProcessGroupWait, TheYieldVariableIsParsedStrictly) {
  EXPECT_EQ(waitSpinFromEnv(nullptr), ProcessGroupOptions::kDefaultWaitSpin);
  EXPECT_EQ(waitSpinFromEnv(""), ProcessGroupOptions::kDefaultWaitSpin);
  EXPECT_EQ(waitSpinFromEnv("0").count(), 0);
  EXPECT_EQ(waitSpinFromEnv("250").count(), 250);
  EXPECT_EQ(waitSpinFromEnv("1000000").count(), 1000000);
  for (const char* bad : {"abc", "-1", "1.5", "1000001", "12us", "99999999999999999999"}) {
    std::string e = errorOf([&] { waitSpinFromEnv(bad); });
    EXPECT_NE(e.find("DS_PG_WAIT_SPIN_US"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("0 to 1000000 microseconds"), std::string::npos) << bad << ": " << e;
  }
}

TEST(ProcessGroupWatchdog, AnOpWithoutItsOwnTimeoutFailsAtItsDeadlineWhenNobodyWaits) {
  InlineLimit limit("0");
  ProcessGroupOptions o = options();
  o.timeout = 300ms;
  ScriptedGroup pg(o);
  pg.blockWorker = true;
  pg.ownTimeout = false;
  float v = 0;
  auto first = pg.allreduce(Buffer{&v, 1, DType::kF32, {}});   // blocks on the worker
  auto second = pg.allreduce(Buffer{&v, 1, DType::kF32, {}});  // queued behind it
  const auto giveUp = std::chrono::steady_clock::now() + 5s;
  while (!(first->isCompleted() && second->isCompleted()) && std::chrono::steady_clock::now() < giveUp) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(first->isCompleted()) << "no watchdog failed the op that cannot time out itself";
  ASSERT_TRUE(second->isCompleted()) << "the op queued behind a timed-out one must fail at once";
  std::string e1 = errorOf([&] { first->wait(); });
  EXPECT_NE(e1.find("allreduce(f32, count=1, op=sum) #1"), std::string::npos) << e1;
  EXPECT_NE(e1.find("timed out on rank 0"), std::string::npos) << e1;
  std::string e2 = errorOf([&] { second->wait(); });
  EXPECT_NE(e2.find("is unusable"), std::string::npos) << e2;
  EXPECT_TRUE(pg.broken());
  EXPECT_EQ(pg.events().size(), 1u) << "the queued op's body must never run";
  pg.release();
}

TEST(ProcessGroupWatchdog, OnOneCoreAnOpWithoutItsOwnTimeoutRunsOnTheCallerAndAHangEndsTheJob) {
  InlineLimit limit(nullptr);
  ProcessGroupOptions o = options(false, /*cpus=*/1);
  o.timeout = 300ms;
  ScriptedGroup pg(o);
  pg.ownTimeout = false;
  pg.callerRunsAll = true;
  float v = 0;
  auto first = pg.allreduce(Buffer{&v, 1, DType::kF32, {}});  // done in time: no abort
  EXPECT_TRUE(first->isCompleted());
  first->wait();
  pg.blockWorker = true;  // the next call hangs until abortHungCall() lets it go
  auto second = pg.allreduce(Buffer{&v, 1, DType::kF32, {}});
  EXPECT_TRUE(second->isCompleted());
  std::string e = errorOf([&] { second->wait(); });
  EXPECT_NE(e.find("scripted allreduce(f32, count=1, op=sum) #2 (4 bytes) timed out on rank 0 of 1"),
            std::string::npos)
      << e;
  EXPECT_TRUE(pg.broken());
  auto ev = pg.events();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].what, "worker #1");
  EXPECT_EQ(ev[0].thread, std::this_thread::get_id()) << "the op must run on the caller's thread";
  EXPECT_EQ(ev[1].what, "worker #2");
  EXPECT_EQ(ev[1].thread, std::this_thread::get_id());
  EXPECT_EQ(ev[2].what, "abort #2") << "the watchdog must end the job when the caller is stuck";
  EXPECT_NE(ev[2].thread, std::this_thread::get_id());
}
