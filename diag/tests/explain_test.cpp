// One test per error pattern of `dsdiag explain`, with the texts users actually paste.
#include <gtest/gtest.h>

#include "diag/explain.h"
#include "diag/registry.h"

using namespace ds::diag;

namespace {

void expectKey(const std::string& text, const std::string& key) {
  auto found = explain(text);
  bool hit = std::any_of(found.begin(), found.end(), [&](const auto& e) { return e.key == key; });
  EXPECT_TRUE(hit) << "'" << text << "' should explain as " << key;
}

}  // namespace

TEST(Explain, PortInUse) {
  expectKey("The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).", "port_in_use");
}
TEST(Explain, ClientConnectTimeout) {
  expectKey("The client socket has timed out after 60000ms while trying to connect to (10.0.0.1, 29500).",
            "master_unreachable");
}
TEST(Explain, WaitingForClients) {
  expectKey("Timed out after 601 seconds waiting for clients. 3/4 clients joined.", "world_incomplete");
}
TEST(Explain, DuplicateGpu) {
  expectKey("ncclInvalidUsage: Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000", "duplicate_gpu");
}
TEST(Explain, InvalidDeviceOrdinal) { expectKey("RuntimeError: CUDA error: invalid device ordinal", "invalid_device_ordinal"); }
TEST(Explain, GlooUnableToFindAddress) { expectKey("RuntimeError: Unable to find address for: ^lo", "gloo_ifname"); }
TEST(Explain, UnhandledSystemError) {
  expectKey("NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.18.1", "nccl_system_error");
}
TEST(Explain, WatchdogTimeout) {
  expectKey("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=600000)",
            "collective_timeout");
  expectKey("Ranks 1, 2 failed to pass monitoredBarrier in 2000 ms", "collective_timeout");
  // ... and points to the tool that names the rank from the Flight Recorder dumps.
  auto found = explain("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE)");
  ASSERT_FALSE(found.empty());
  bool pointsToHang = false;
  for (const auto& c : found.front().causes) pointsToHang = pointsToHang || c.find("dsdiag hang") != std::string::npos;
  EXPECT_TRUE(pointsToHang);
}
TEST(Explain, RankExpected) {
  expectKey("ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable RANK "
            "expected, but not set",
            "missing_launcher_vars");
}
TEST(Explain, StoreWaitTimeout) { expectKey("wait timeout after 30000ms, keys: /init/done", "store_wait_timeout"); }
TEST(Explain, NcclSocketInterface) { expectKey("NET/Socket : no socket interface found", "nccl_ifname"); }
TEST(Explain, DriverTooOld) {
  expectKey("CUDA driver version is insufficient for CUDA runtime version", "driver_too_old");
}
TEST(Explain, NoGpu) { expectKey("libcuda.so.1: cannot open shared object file", "no_gpu"); }
TEST(Explain, NcclLibrary) { expectKey("libnccl.so.2: cannot open shared object file: No such file", "nccl_library"); }
TEST(Explain, LauncherFlagMisplaced) {
  expectKey("train.py: error: unrecognized arguments: --master_port 29501", "launcher_flag_misplaced");
}

TEST(Explain, EveryExplanationNamesChecksThatExist) {
  std::vector<std::string> ids;
  for (const auto& c : localChecks()) ids.push_back(c.id);
  for (const auto& c : worldChecks()) ids.emplace_back(c.id);
  for (const auto& e : explanations()) {
    EXPECT_FALSE(e.causes.empty()) << e.key;
    for (const auto& c : e.checks) EXPECT_NE(std::find(ids.begin(), ids.end(), c), ids.end()) << e.key << " -> " << c;
  }
}

TEST(Explain, UnknownTextSaysSo) {
  EXPECT_TRUE(explain("everything is fine").empty());
  EXPECT_NE(formatExplanations("x", {}).find("no known pattern"), std::string::npos);
  auto text = formatExplanations("errno: 98", explain("errno: 98"));
  EXPECT_NE(text.find("dsdiag --only net.master_port_free"), std::string::npos) << text;
}
