// The shm hierarchy across two "hosts": network namespaces joined by a veth pair, each with its own
// host name (a UTS namespace), one dsrun per host with 2 ranks each. Within a host the ranks share a
// segment; the hosts' first ranks talk gloo over the veth. Needs root (ip netns); skips otherwise.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "engine/testing/subprocess.h"

using namespace ds::testing;
using namespace std::chrono_literals;

namespace {

class TwoHosts {
 public:
  TwoHosts() {
    int id = static_cast<int>(getpid() % 100000);
    subnet_ = 20 + (id % 200);
    nsA_ = fmt::format("dssa{}", id);
    nsB_ = fmt::format("dssb{}", id);
    auto r = run({"ip", "netns", "add", nsA_}, cleanOptions(10s));
    if (r.exitCode != 0) {
      why_ = "cannot create network namespaces (needs root and ip netns): " + r.err;
      return;
    }
    made_ = true;
    const std::string vA = "v" + nsA_, vB = "v" + nsB_;
    const std::vector<std::vector<std::string>> steps = {
        {"ip", "netns", "add", nsB_},
        {"ip", "link", "add", vA, "type", "veth", "peer", "name", vB},
        {"ip", "link", "set", vA, "netns", nsA_},
        {"ip", "link", "set", vB, "netns", nsB_},
        {"ip", "-n", nsA_, "addr", "add", addrA() + "/24", "dev", vA},
        {"ip", "-n", nsB_, "addr", "add", addrB() + "/24", "dev", vB},
        {"ip", "-n", nsA_, "link", "set", "lo", "up"},
        {"ip", "-n", nsB_, "link", "set", "lo", "up"},
        {"ip", "-n", nsA_, "link", "set", vA, "up"},
        {"ip", "-n", nsB_, "link", "set", vB, "up"},
    };
    for (const auto& s : steps) {
      auto x = run(s, cleanOptions(10s));
      if (x.exitCode != 0) {
        why_ = fmt::format("'{}' failed: {}", fmt::join(s, " "), x.err);
        return;
      }
    }
    if (run({"unshare", "--version"}, cleanOptions(10s)).exitCode != 0) {
      why_ = "unshare (util-linux) is missing";
      return;
    }
    ok_ = true;
  }
  ~TwoHosts() {
    if (made_) {
      run({"ip", "netns", "del", nsA_}, cleanOptions(10s));
      run({"ip", "netns", "del", nsB_}, cleanOptions(10s));
    }
  }
  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  std::string addrA() const { return fmt::format("10.78.{}.1", subnet_); }
  std::string addrB() const { return fmt::format("10.78.{}.2", subnet_); }
  std::vector<std::string> on(const std::string& host, const std::string& command) const {
    return {"ip",
            "netns",
            "exec",
            host == "nodeA" ? nsA_ : nsB_,
            "unshare",
            "--uts",
            "sh",
            "-c",
            "hostname " + host + " && exec " + command};
  }

 private:
  int subnet_ = 0;
  std::string nsA_, nsB_, why_;
  bool made_ = false, ok_ = false;
};

}  // namespace

TEST(ShmTwoHosts, HierarchyPassesTheMatrixWithTwoRanksPerHost) {
  TwoHosts hosts;
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
