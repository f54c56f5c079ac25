// The shm hierarchy across two "hosts": network namespaces joined by a veth pair, each with its own
// host name (a UTS namespace), one dsrun per host with 2 ranks each. Within a host the ranks share a
// segment; the hosts' first ranks talk gloo over the veth. Needs root (ip netns); skips otherwise.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "engine/testing/paths.h"
#include "engine/testing/subprocess.h"
#include "engine/testing/two_hosts.h"

using namespace ds::testing;
using namespace std::chrono_literals;

TEST(ShmTwoHosts, HierarchyPassesTheMatrixWithTwoRanksPerHost) {
  TwoHosts hosts("s", 78);
  if (!hosts.ok()) GTEST_SKIP() << "netns test skipped: " << hosts.why();
  const int port = unusedPort();
  auto dsrun = [&](int nodeRank) {
    return fmt::format(
        "{}/dsrun --nnodes 2 --node-rank {} --nproc-per-node 2 --master-addr {} --master-port {} "
        "--rdzv-id shm-netns {}/ds_shm_world_worker",
        binDir(), nodeRank, hosts.addrA(), port, std::string(DS_SHM_TEST_BIN_DIR));
  };
  Process a(hosts.on("nodeA", dsrun(0)), cleanOptions(120s));
  Process b(hosts.on("nodeB", dsrun(1)), cleanOptions(120s));
  auto rb = b.wait();
  auto ra = a.wait();
  ASSERT_EQ(ra.exitCode, 0) << ra.out << ra.err;
  ASSERT_EQ(rb.exitCode, 0) << rb.out << rb.err;
  for (int r : {0, 1}) {
    EXPECT_NE(ra.out.find(fmt::format("shm-world ok rank {} of 4 on nodeA", r)), std::string::npos) << ra.out;
  }
  for (int r : {2, 3}) {
    EXPECT_NE(rb.out.find(fmt::format("shm-world ok rank {} of 4 on nodeB", r)), std::string::npos) << rb.out;
  }
}
