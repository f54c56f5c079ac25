// Two hosts made of network namespaces joined by a veth pair (diag/tests/netns.sh), one rank in
// each. Skips with the reason when namespaces cannot be made here.
#include <gtest/gtest.h>
#include <unistd.h>

#include "engine/testing/paths.h"
#include "engine/testing/subprocess.h"
#include "reports/json_io.h"

using namespace ds::testing;

namespace {

// Creates the pair on construction, always removes it on destruction.
class TwoHosts {
 public:
  explicit TwoHosts(int delayMs = 0) {
    static int counter = 0;
    net_ = (getpid() + counter) % 200 + 20;
    name_ = "dsd" + std::to_string(getpid() % 10000) + "n" + std::to_string(counter++);
    auto r = run({"sh", DS_NETNS_SCRIPT, "setup", name_, std::to_string(net_), std::to_string(delayMs)});
    status_ = r.exitCode;
    why_ = r.err;
    shaping_ = r.out;
  }
  ~TwoHosts() { run({"sh", DS_NETNS_SCRIPT, "teardown", name_}); }
  // 0 ok, 4 no namespaces, 5 no netem.
  int status() const { return status_; }
  const std::string& why() const { return why_; }
  // "shaped: netem ..." or "shaped: tbf ... (tc netem is not available ...)".
  const std::string& shaping() const { return shaping_; }
  std::string ns(char h) const { return name_ + h; }
  std::string ip(char h) const { return "10.77." + std::to_string(net_) + (h == 'a' ? ".1" : ".2"); }
  std::string veth(char h) const { return name_ + (h == 'a' ? "0" : "1"); }
  std::vector<std::string> exec(char h, std::vector<std::string> argv) const {
    std::vector<std::string> full{"ip", "netns", "exec", ns(h)};
    full.insert(full.end(), argv.begin(), argv.end());
    return full;
  }

 private:
  std::string name_;
  int net_ = 0;
  int status_ = -1;
  std::string why_;
  std::string shaping_;
};

#define REQUIRE_HOSTS(h)                                                       \
  if ((h).status() == 4) GTEST_SKIP() << "no network namespaces: " << (h).why(); \
  if ((h).status() == 5) GTEST_SKIP() << "tc netem unavailable: " << (h).why();  \
  ASSERT_EQ((h).status(), 0) << (h).why()

RunOptions rankEnv(int rank, int size, int localRank, int localSize, const std::string& master, int port,
                   std::map<std::string, std::string> extra = {}) {
  RunOptions o;
  o.unsetEnv = launcherVariables();
  o.unsetEnv.emplace_back("NCCL_SOCKET_IFNAME");
  o.unsetEnv.emplace_back("GLOO_SOCKET_IFNAME");
  o.setEnv = {{"RANK", std::to_string(rank)},         {"WORLD_SIZE", std::to_string(size)},
              {"LOCAL_RANK", std::to_string(localRank)}, {"LOCAL_WORLD_SIZE", std::to_string(localSize)},
              {"GROUP_RANK", rank < localSize ? "0" : "1"}, {"MASTER_ADDR", master},
              {"MASTER_PORT", std::to_string(port)},     {"OMP_NUM_THREADS", "1"}};
  for (auto& [k, v] : extra) o.setEnv[k] = v;
  o.timeout = std::chrono::seconds(60);
  return o;
}

const nlohmann::json* find(const nlohmann::json& j, const std::string& id, int rank) {
  for (const auto& c : j["checks"]) {
    if (c["id"] == id && c["rank"] == rank) return &c;
  }
  return nullptr;
}

}  // namespace

TEST(DsdiagNetns, MasterReachableAcrossNamespacesPasses) {
  TwoHosts h;
  REQUIRE_HOSTS(h);
  TempDir d;
  int port = 29600 + getpid() % 300;
  Process r0(h.exec('a', {binDir() + "/dsdiag", "--world", "--timeout", "20", "--json", d.file("w.json")}),
             rankEnv(0, 2, 0, 1, h.ip('a'), port));
  Process r1(h.exec('b', {binDir() + "/dsdiag", "--world", "--timeout", "20"}), rankEnv(1, 2, 0, 1, h.ip('a'), port));
  auto a = r0.wait();
  auto b = r1.wait();
  auto j = ds::report::readJson(d.file("w.json"));
  ASSERT_NE(find(j, "net.master_reachable", 1), nullptr) << a.out;
  EXPECT_EQ((*find(j, "net.master_reachable", 1))["status"], "PASS") << a.out;
  EXPECT_EQ((*find(j, "world.smoke_allreduce", -1))["status"], "PASS") << a.out << b.out;
  EXPECT_NE((*find(j, "net.master_reachable", 1))["data"]["route"]["iface"], "lo");
}

TEST(DsdiagNetns, UnreachableMasterFailsWithARemedy) {
  TwoHosts h;
  REQUIRE_HOSTS(h);
  TempDir d;
  // 10.77.250.1 is on no network host b has: no route.
  auto r = run(h.exec('b', {binDir() + "/dsdiag", "--only", "net.master_reachable,net.interfaces", "--connect-timeout", "1",
                            "--json", d.file("r.json")}),
               rankEnv(1, 2, 0, 1, "10.77.250.1", 29500));
  EXPECT_EQ(r.exitCode, 2) << r.out;
  auto j = ds::report::readJson(d.file("r.json"));
  const auto* c = find(j, "net.master_reachable", 1);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["status"], "FAIL");
  EXPECT_NE((*c)["remedy"].get<std::string>().find("MASTER_ADDR"), std::string::npos);
  EXPECT_EQ((*find(j, "net.interfaces", 1))["status"], "FAIL") << "no interface routes there";
}

TEST(DsdiagNetns, WrongNcclSocketIfnameIsCaught) {
  TwoHosts h;
  REQUIRE_HOSTS(h);
  auto r = run(h.exec('b', {binDir() + "/dsdiag", "--only", "net.nccl_socket_ifname"}),
               rankEnv(1, 2, 0, 1, h.ip('a'), 29500, {{"NCCL_SOCKET_IFNAME", "eth0"}}));
  EXPECT_EQ(r.exitCode, 2) << r.out;
  EXPECT_NE(r.out.find(h.veth('b')), std::string::npos) << "the remedy lists the interfaces that are up: " << r.out;
  auto ok = run(h.exec('b', {binDir() + "/dsdiag", "--only", "net.nccl_socket_ifname"}),
                rankEnv(1, 2, 0, 1, h.ip('a'), 29500, {{"NCCL_SOCKET_IFNAME", h.veth('b')}}));
  EXPECT_EQ(ok.exitCode, 0) << ok.out;
}

// Two hosts, three ranks: the link is tested between the host leaders (ranks 0 and 2), never by
// rank 1 (the second rank of host a). With one pair there is no fleet to compare against, so only
// the absolute floor (--min-link-gbps) can call the shaped link slow.
TEST(DsdiagNetns, LinksRunBetweenHostLeadersAndTheFloorNamesASlowLink) {
  TwoHosts h(20);
  REQUIRE_HOSTS(h);
  std::cerr << "link shaping: " << h.shaping();
  RecordProperty("shaping", h.shaping());
  TempDir d;
  int port = 29600 + (getpid() + 7) % 300;
  // Ranks 0 and 1 on host a, rank 2 on host b behind a shaped link (20 mbit/s, or 20 ms with netem).
  std::vector<std::string> args{binDir() + "/dsdiag", "--world", "--timeout", "30", "--link-large-mib", "0.25",
                                "--min-link-gbps", "0.01", "--slow-link-ms", "10", "--only",
                                "world,env.world_info,system.host_identity"};
  auto with = [&](std::vector<std::string> v, const std::string& extra) {
    v.push_back(extra);
    return v;
  };
  // Each host with its own hostname (a UTS namespace), as real hosts: fleet mode tells hosts apart by it.
  auto on = [&](char host, std::vector<std::string> argv) {
    std::vector<std::string> full{"unshare", "--uts", "sh", "-c",
                                  std::string("hostname linkhost") + host + " && exec \"$@\"", "sh"};
    full.insert(full.end(), argv.begin(), argv.end());
    return h.exec(host, full);
  };
  Process r0(on('a', with(with(args, "--json"), d.file("w.json"))), rankEnv(0, 3, 0, 2, h.ip('a'), port));
  Process r1(on('a', args), rankEnv(1, 3, 1, 2, h.ip('a'), port));
  Process r2(on('b', args), rankEnv(2, 3, 0, 1, h.ip('a'), port));
  auto a = r0.wait();
  r1.wait();
  r2.wait();
  EXPECT_EQ(a.exitCode, 2) << a.out;
  auto j = ds::report::readJson(d.file("w.json"));
  ASSERT_TRUE(j.contains("fleet")) << a.out;
  const auto& pairs = j["fleet"]["input"]["pairs"];
  ASSERT_FALSE(pairs.empty()) << a.out;
  for (const auto& p : pairs) {
    EXPECT_EQ(p["a"], 0) << p.dump();
    EXPECT_EQ(p["b"], 2) << p.dump();
  }
  const auto* m = find(j, "world.link_matrix", -1);
  ASSERT_NE(m, nullptr) << a.out;
  EXPECT_EQ((*m)["status"], "FAIL") << a.out;
  const auto& judged = j["fleet"]["judgement"];
  EXPECT_EQ(judged["hosts"].size(), 2u) << a.out;
  EXPECT_FALSE(judged["links"].empty() && j["fleet"]["summary"]["suspect"] == 0) << "the slow link is named: " << a.out;
}
