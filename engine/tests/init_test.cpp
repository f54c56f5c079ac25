#include "engine/init.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "engine/common/error.h"
#include "engine/common/progress.h"
#include "engine/testing/subprocess.h"

using ds::ConfigError;
using ds::InitMethod;
using ds::parseInitMethod;

namespace {

// Clears launcher variables a CI machine might carry, so the test process is a lone process.
void clearLauncherEnv() {
  for (const char* v :
       {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID",
        "SLURM_NTASKS", "MV2_COMM_WORLD_RANK", "DS_ACCELERATOR", "DEEPSPEED_TIMEOUT"}) {
    unsetenv(v);
  }
}

std::string errorText(const std::function<void()>& f) {
  try {
    f();
  } catch (const ds::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(InitMethodParse, AcceptedForms) {
  EXPECT_EQ(parseInitMethod("").kind, InitMethod::Kind::kEnv);
  EXPECT_EQ(parseInitMethod("env://").kind, InitMethod::Kind::kEnv);
  auto t = parseInitMethod("tcp://node1:23456");
  EXPECT_EQ(t.kind, InitMethod::Kind::kTcp);
  EXPECT_EQ(t.host, "node1");
  EXPECT_EQ(t.port, 23456);
  auto v6 = parseInitMethod("tcp://[::1]:80");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 80);
  auto f = parseInitMethod("file:///shared/rdzv");
  EXPECT_EQ(f.kind, InitMethod::Kind::kFile);
  EXPECT_EQ(f.path, "/shared/rdzv");
}

TEST(InitMethodParse, BadFormsSayWhatIsAccepted) {
  for (const char* bad : {"tcp://host", "tcp://:80", "tcp://h:0", "tcp://h:99999", "tcp://h:x",
                          "file://relative", "http://x", "tcp://[::1]80"}) {
    std::string msg = errorText([&] { parseInitMethod(bad); });
    EXPECT_NE(msg.find("tcp://HOST:PORT"), std::string::npos) << bad << " -> " << msg;
  }
}

TEST(InitTimeout, DeepSpeedTimeoutInMinutes) {
  ds::env::MapEnv none;
  EXPECT_EQ(ds::defaultTimeout(none), std::chrono::minutes(10));
  ds::env::MapEnv five({{"DEEPSPEED_TIMEOUT", "5"}});
  EXPECT_EQ(ds::defaultTimeout(five), std::chrono::minutes(5));
  ds::env::MapEnv bad({{"DEEPSPEED_TIMEOUT", "soon"}});
  EXPECT_NE(errorText([&] { ds::defaultTimeout(bad); }).find("DEEPSPEED_TIMEOUT='soon'"), std::string::npos);
}

TEST(InitDistributed, DistInitRequiredFalseWithNothingInitializedIsAnError) {
  clearLauncherEnv();
  ds::InitOptions o;
  o.distInitRequired = false;
  std::string msg = errorText([&] { ds::initDistributed(o); });
  EXPECT_NE(msg.find("dist_init_required=false"), std::string::npos) << msg;
  EXPECT_FALSE(ds::isInitialized());
}

TEST(InitDistributed, SingleProcessOverAFileStoreIsIdempotent) {
  clearLauncherEnv();
  ds::testing::TempDir dir("ds_init");  // removed with the store file however the test ends
  ds::InitOptions o;
  o.initMethod = "file://" + dir.file("store");
  o.verbose = false;
  auto w = ds::initDistributed(o);
  EXPECT_TRUE(ds::isInitialized());
  EXPECT_EQ(w->rank(), 0);
  EXPECT_EQ(w->worldSize(), 1);
  EXPECT_EQ(w->backend(), w->accelerator().communicationBackendName());
  EXPECT_EQ(w->timeout(), std::chrono::minutes(10));
  w->barrier();
  w->barrier();
  // A second call returns the same world.
  EXPECT_EQ(ds::initDistributed(o).get(), w.get());
  ds::destroyProcessGroup();
  EXPECT_FALSE(ds::isInitialized());
}

TEST(InitDistributed, TcpInitMethodWithExplicitRankAndSize) {
  clearLauncherEnv();
  ds::InitOptions o;
  o.initMethod = "tcp://127.0.0.1:0";
  std::string msg = errorText([&] { ds::initDistributed(o); });
  EXPECT_NE(msg.find("init_method port"), std::string::npos) << msg;
}

TEST(InitDistributed, UnknownOrUnbuiltBackendIsAConfigError) {
  clearLauncherEnv();
  ds::InitOptions o;
  o.distBackend = "ucc";
  o.verbose = false;
  std::string msg = errorText([&] { ds::initDistributed(o); });
  EXPECT_NE(msg.find("dist_backend='ucc'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nccl, gloo, mpi, shm"), std::string::npos) << msg;
  o.distBackend = "nccl";
  setenv("DS_ACCELERATOR", "cpu", 1);
  msg = errorText([&] { ds::initDistributed(o); });
  EXPECT_NE(msg.find("nccl"), std::string::npos) << msg;
  unsetenv("DS_ACCELERATOR");
  EXPECT_FALSE(ds::isInitialized());
}

// A rank of two over a file store, its peer never started: `stopWaiting` ends the wait with its
// reason and the ranks that never joined; while it has no reason, the timeout still applies.
TEST(InitDistributed, StopWaitingEndsTheRendezvousEarlyWithItsReason) {
  clearLauncherEnv();
  ds::testing::TempDir dir("ds_init_stop");
  const std::string path = dir.file("store");
  ds::InitOptions o;
  o.initMethod = "file://" + path;
  o.verbose = false;
  o.rank = 0;
  o.worldSize = 2;
  o.timeout = std::chrono::seconds(60);
  setenv("MASTER_ADDR", "127.0.0.1", 1);  // discovery asks for it with a world of two
  int asked = 0;
  o.stopWaiting = [&asked]() -> std::string { return ++asked < 2 ? "" : "rank 1 is frozen (test)"; };
  auto t0 = std::chrono::steady_clock::now();
  std::string msg = errorText([&] { ds::initDistributed(o); });
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(msg.find("Rank 0 stopped waiting for clients"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 1 is frozen (test)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1/2 clients joined. Ranks that never joined: 1."), std::string::npos) << msg;
  EXPECT_GE(asked, 2);
  EXPECT_LT(took, 30.0) << "the wait should end about a second after the reason comes, not at the timeout";
  EXPECT_FALSE(ds::isInitialized());
  std::filesystem::remove(path);

  o.timeout = std::chrono::seconds(2);
  o.stopWaiting = [] { return std::string(); };
  msg = errorText([&] { ds::initDistributed(o); });
  EXPECT_NE(msg.find("Timed out after 2 seconds waiting for clients. 1/2 clients joined."), std::string::npos)
      << msg;
  std::filesystem::remove(path);
  unsetenv("MASTER_ADDR");
}

// Rendezvous and the store's connect print a line on this plan: never more than 60 s of silence.
TEST(ProgressSchedule, TenThirtySixtyThenEveryMinute) {
  using std::chrono::seconds;
  EXPECT_EQ(ds::ProgressSchedule::offset(0), seconds(10));
  EXPECT_EQ(ds::ProgressSchedule::offset(1), seconds(30));
  EXPECT_EQ(ds::ProgressSchedule::offset(2), seconds(60));
  EXPECT_EQ(ds::ProgressSchedule::offset(3), seconds(120));
  for (int n = 2; n < 200; ++n) {
    EXPECT_LE(ds::ProgressSchedule::offset(n + 1) - ds::ProgressSchedule::offset(n), seconds(60)) << n;
  }
  const auto t0 = ds::ProgressSchedule::Clock::now();
  ds::ProgressSchedule p(t0);
  EXPECT_FALSE(p.due(t0 + seconds(9)));
  EXPECT_TRUE(p.due(t0 + seconds(10)));
  p.advance();
  EXPECT_EQ(p.next(), t0 + seconds(30));
  EXPECT_DOUBLE_EQ(p.elapsedSeconds(t0 + seconds(45)), 45.0);
}
