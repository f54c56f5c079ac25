// dsdiag's fleet mode on a fleet of network-namespace hosts (diag/tests/fleet.sh, one bridge in a
// switch namespace): one dsdiag rank per host (or several), one fault injected, and rank 0's JSON
// must name exactly the faulty host (or link) and no innocent one. Built twice: the smoke suite
// (label netns, 16 hosts, a few faults) and the long suite (DS_FLEET_LONG, labels netns;fleet: 64
// hosts, every fault, several at once). DS_FLEET_HOSTS overrides the host count and DS_FLEET_RESULTS
// names a file that gets one JSON line per run (scripts/fleet-targets.sh reads them); DS_FLEET_KEEP
// names a folder that gets rank 0's dsdiag JSON of every run (scripts/baseline-targets.sh reads them).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "engine/testing/fleet_hosts.h"
#include "engine/testing/paths.h"
#include "engine/testing/subprocess.h"
#include "reports/json_io.h"

using namespace ds::testing;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

#ifndef DS_FLEET_LONG
#define DS_FLEET_LONG 0
#endif
// The third octet of 10.79.K.0/24, distinct per test program (each fleet is isolated in its own
// namespaces anyway).
constexpr int kNet = DS_FLEET_LONG ? 2 : 1;
constexpr const char* kTag = DS_FLEET_LONG ? "l" : "s";

int hostCount(int dflt) {
  const char* v = std::getenv("DS_FLEET_HOSTS");
  if (v == nullptr || *v == '\0') return dflt;
  int n = std::atoi(v);
  if (n < 4 || n > 250) throw std::runtime_error(fmt::format("DS_FLEET_HOSTS={} must be 4..250", v));
  return n;
}

// What happens to a rank while the fleet runs.
enum class Signal { kNone, kStop, kKill };

struct Scenario {
  std::string name;
  int hosts = 16;
  int ranksPerHost = 1;
  std::vector<std::string> setupOptions;         // fleet.sh setup options (--mtu 9000)
  std::vector<std::vector<std::string>> faults;  // fleet.sh fault arguments, host numbers as text
  std::map<int, std::map<std::string, std::string>> hostEnv;  // extra variables for a host's ranks
  std::map<std::string, std::string> env;                     // extra variables for every rank
  int signalHost = -1;  // its first rank gets `signal` after signalAfter
  Signal signal = Signal::kNone;
  // Inside the run: a healthy 16-host fleet finishes in about 1 s here. A rank stopped before it
  // joined is no_result, one stopped later frozen: named either way.
  std::chrono::milliseconds signalAfter = 500ms;
  std::set<int> expectHosts;                  // host indices named (suspect or no_result)
  std::set<std::pair<int, int>> expectLinks;  // host index pairs named as links, a < b
};

// Victims and peers chosen from the fleet's size, never host 0 (rank 0 reports).
int victim(int hosts, int k = 0) { return (hosts / 3 + 1 + k * (hosts / 4)) % hosts; }

const json* member(const json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (j.contains(k)) return &j[k];
  }
  return nullptr;
}

struct Outcome {
  bool haveJson = false, haveFleet = false;
  std::set<int> named;                  // hosts not healthy
  std::set<std::pair<int, int>> links;  // suspect links
  std::map<int, std::string> state;     // host -> state
  int exitCode = -1;
  double seconds = 0;
  std::string summary;  // what an engineer reads on failure
};

Outcome judge(const FleetHosts& fleet, const std::string& path, const RunResult& r0) {
  Outcome o;
  o.exitCode = r0.exitCode;
  json j;
  try {
    j = ds::report::readJson(path);
    o.haveJson = true;
  } catch (const std::exception& e) {
    o.summary = fmt::format("rank 0 wrote no readable JSON ({}): exit {}{}\n{}\n{}", e.what(), r0.exitCode,
                            r0.timedOut ? " (killed: timed out)" : "", r0.out.substr(0, 4000),
                            r0.err.substr(0, 2000));
    return o;
  }
  if (!j.contains("fleet")) {
    // Today's world mode: say what it concluded, for developing the bed.
    std::string checks;
    for (const auto& c : j.value("checks", json::array())) {
      if (c.value("rank", 0) == -1 && c.value("status", "") != "PASS")
        checks += fmt::format("\n  {} {}: {}", c.value("id", ""), c.value("status", ""),
                              c.value("message", "").substr(0, 200));
    }
    o.summary = fmt::format("world mode exit {} in {:.1f} s; its non-PASS world checks:{}", r0.exitCode,
                            r0.seconds, checks.empty() ? " none" : checks);
    return o;
  }
  o.haveFleet = true;
  const json& jd = j["fleet"]["judgement"];
  for (const auto& h : jd.value("hosts", json::array())) {
    int i = fleet.hostIndex(h.value("host", ""));
    std::string st = h.value("state", "");
    if (i < 0) {
      o.summary += fmt::format("\n  a host this fleet does not have: {}", h.dump());
      continue;
    }
    o.state[i] = st;
    if (st != "healthy") o.named.insert(i);
  }
  for (const auto& l : jd.value("links", json::array())) {
    const json* a = member(l, {"host_a", "hostA"});
    const json* b = member(l, {"host_b", "hostB"});
    if (a == nullptr || b == nullptr) continue;
    int x = fleet.hostIndex(a->get<std::string>()), y = fleet.hostIndex(b->get<std::string>());
    o.links.insert({std::min(x, y), std::max(x, y)});
  }
  std::string named;
  for (const auto& h : jd.value("hosts", json::array())) {
    if (h.value("state", "") == "healthy") continue;
    named += fmt::format("\n  {} {}:", h.value("host", ""), h.value("state", ""));
    for (const auto& e : h.value("evidence", json::array()))
      named += fmt::format(" [{}@{}] {}", e.value("kind", ""), e.value("stage", ""), e.value("text", ""));
  }
  for (const auto& l : jd.value("links", json::array())) named += "\n  link " + l.dump().substr(0, 300);
  o.summary = fmt::format("fleet exit {} in {:.1f} s; named:{}", r0.exitCode, r0.seconds,
                          named.empty() ? " nothing" : named);
  return o;
}

void record(const Scenario& s, const Outcome& o, bool right, int innocent) {
  const char* path = std::getenv("DS_FLEET_RESULTS");
  if (path == nullptr || *path == '\0') return;
  json line{{"scenario", s.name},
            {"hosts", s.hosts},
            {"ranks", s.hosts * s.ranksPerHost},
            {"fleet", o.haveFleet},
            {"json", o.haveJson},
            {"right", right},
            {"innocent", innocent},
            {"named", std::vector<int>(o.named.begin(), o.named.end())},
            {"expected", std::vector<int>(s.expectHosts.begin(), s.expectHosts.end())},
            {"links", std::vector<std::pair<int, int>>(o.links.begin(), o.links.end())},
            {"expected_links", std::vector<std::pair<int, int>>(s.expectLinks.begin(), s.expectLinks.end())},
            {"seconds", o.seconds},
            {"exit_code", o.exitCode}};
  std::ofstream(path, std::ios::app) << line.dump() << "\n";
}

std::vector<std::string> dsdiagArgs(const std::string& json) {
  return {binDir() + "/dsdiag",
          "--world",
          "--timeout",
          "60",
          "--backend",
          "gloo",
          "--color",
          "never",
          "--json",
          json};
}

void runScenario(const Scenario& s) {
  FleetHosts fleet(DS_FLEET_SCRIPT, kTag, s.hosts, kNet, s.setupOptions);
  if (fleet.skipped()) GTEST_SKIP() << "no network namespaces here: " << fleet.why();
  ASSERT_TRUE(fleet.ok()) << fleet.why();
  for (const auto& f : s.faults) {
    auto r = fleet.fault(f);
    if (r.exitCode == 5) GTEST_SKIP() << "this fault cannot be made here: " << r.err;
    ASSERT_EQ(r.exitCode, 0) << fmt::format("fleet.sh fault {}: {}{}", fmt::join(f, " "), r.out, r.err);
  }
  TempDir d("ds_fleet");
  const int world = s.hosts * s.ranksPerHost;
  std::vector<std::unique_ptr<Process>> ranks;
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < world; ++r) {
    int host = r / s.ranksPerHost, local = r % s.ranksPerHost;
    RunOptions o = cleanOptions(scaled(150s));
    for (const char* v : {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "DSDIAG_TEST_FAULT"})
      o.unsetEnv.emplace_back(v);
    for (const auto& v : variablesWithPrefix("DSDIAG_")) o.unsetEnv.push_back(v);
    o.setEnv = {{"RANK", std::to_string(r)},
                {"WORLD_SIZE", std::to_string(world)},
                {"LOCAL_RANK", std::to_string(local)},
                {"LOCAL_WORLD_SIZE", std::to_string(s.ranksPerHost)},
                {"GROUP_RANK", std::to_string(host)},
                {"MASTER_ADDR", fleet.addr(0)},
                {"MASTER_PORT", "29500"},  // each fleet has its own network namespaces
                {"OMP_NUM_THREADS", "1"}};
    for (const auto& [k, v] : s.env) o.setEnv[k] = v;
    if (auto it = s.hostEnv.find(host); it != s.hostEnv.end()) {
      for (const auto& [k, v] : it->second) o.setEnv[k] = v;
    }
    ranks.push_back(
        std::make_unique<Process>(fleet.on(host, dsdiagArgs(d.file(fmt::format("rank{}.json", r)))), o));
    // Modest parallelism on a small machine: a pause after every 8 starts.
    if (r % 8 == 7) std::this_thread::sleep_for(20ms);
  }
  if (s.signal != Signal::kNone) {
    std::this_thread::sleep_until(t0 + s.signalAfter);
    ::kill(ranks[s.signalHost * s.ranksPerHost]->pid(), s.signal == Signal::kStop ? SIGSTOP : SIGKILL);
  }
  RunResult r0 = ranks[0]->wait();
  double seconds = r0.seconds;  // rank 0's run, from its start to its verdict
  // The others end once rank 0 has judged; a stopped or stuck one is killed by its Process.
  int lingering = 0;
  auto bound =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0) + 10s;
  // A rank stopped by the test (SIGSTOP, or dsdiag's freeze@<stage> hook) never ends: not waited for.
  auto stopped = [&s](int r) {
    const int host = r / s.ranksPerHost;
    if (s.signal == Signal::kStop && r == s.signalHost * s.ranksPerHost) return true;
    auto it = s.hostEnv.find(host);
    if (it == s.hostEnv.end()) return false;
    auto fault = it->second.find("DSDIAG_TEST_FAULT");
    return fault != it->second.end() && fault->second.rfind("freeze@", 0) == 0;
  };
  for (int r = 1; r < world; ++r) {
    if (stopped(r)) continue;
    if (ranks[r]->wait(bound).timedOut) ++lingering;
  }
  ranks.clear();

  Outcome o = judge(fleet, d.file("rank0.json"), r0);
  if (const char* keep = std::getenv("DS_FLEET_KEEP"); keep != nullptr && *keep != '\0') {
    static int kept = 0;
    std::error_code ec;
    std::filesystem::create_directories(keep, ec);
    std::filesystem::copy_file(d.file("rank0.json"),
                               fmt::format("{}/{}-{}h-{}-{:03d}.json", keep, s.name, s.hosts, ::getpid(), kept++),
                               std::filesystem::copy_options::overwrite_existing, ec);
  }
  o.seconds = seconds;
  std::string names;
  for (int h : s.expectHosts) names += " " + fleet.hostname(h);
  std::string report =
      fmt::format("[{}] {} hosts x {} rank(s), fleet made in {:.2f} s, expected:{}{}; {}{}", s.name, s.hosts,
                  s.ranksPerHost, fleet.setupSeconds(), names.empty() ? " nothing" : names,
                  s.expectLinks.empty() ? "" : " (a link)", o.summary,
                  lingering ? fmt::format("\n  {} rank(s) still ran 10 s after rank 0", lingering) : "");
  std::cout << report << "\n";
  int innocent = 0;
  for (int h : o.named) innocent += s.expectHosts.count(h) ? 0 : 1;
  for (const auto& l : o.links) innocent += s.expectLinks.count(l) ? 0 : 1;
  bool right = o.haveFleet && o.named == s.expectHosts && o.links == s.expectLinks;
  record(s, o, right, innocent);
  ASSERT_TRUE(o.haveJson) << report;
  if (!o.haveFleet)
    GTEST_SKIP() << "dsdiag has no fleet mode yet (no \"fleet\" object in rank 0's JSON); the bed ran: "
                 << report;
  EXPECT_EQ(o.named, s.expectHosts) << report;
  EXPECT_EQ(o.links, s.expectLinks) << report;
  EXPECT_EQ(o.exitCode, s.expectHosts.empty() && s.expectLinks.empty() ? 0 : 2) << report;
}

// The scenarios, sized for `hosts`.
Scenario healthy(int hosts) {
  Scenario s;
  s.name = "healthy";
  s.hosts = hosts;
  return s;
}

[[maybe_unused]] Scenario slowNic(int hosts) {
  Scenario s = healthy(hosts);
  s.name = "slow_nic";
  int v = victim(hosts);
  s.faults = {{"slow", std::to_string(v), "30mbit"}};
  s.expectHosts = {v};
  return s;
}

// Host v cannot reach three peers (none of them host 0, which holds the store).
[[maybe_unused]] Scenario cut(int hosts, const std::string& how) {
  Scenario s = healthy(hosts);
  s.name = "cut_" + how;
  int v = victim(hosts);
  std::vector<int> peers{victim(hosts, 1), victim(hosts, 2), hosts - 1};
  s.faults = {{"cut", std::to_string(v), fmt::format("{}", fmt::join(peers, ",")), how}};
  s.expectHosts = {v};
  return s;
}

// One pair of hosts that cannot talk, both ends fine with everyone else: a link.
[[maybe_unused]] Scenario cutLink(int hosts) {
  Scenario s = healthy(hosts);
  s.name = "cut_link";
  int a = victim(hosts), b = victim(hosts, 1);
  s.faults = {{"cut", std::to_string(a), std::to_string(b), "both"}};
  s.expectLinks = {{std::min(a, b), std::max(a, b)}};
  return s;
}

[[maybe_unused]] Scenario frozen(int hosts) {
  Scenario s = healthy(hosts);
  s.name = "frozen_sigstop";
  s.signalHost = victim(hosts);
  s.signal = Signal::kStop;
  // After the victim joined (its start-up takes longer with more ranks on the 2 cores, and 3 times
  // longer under ASan: a rank stopped before it joins is only "rank N never joined", with no host to
  // name; seen in the ASan suite with 500 ms), and before a healthy fleet would be done (1.1 s at 16
  // hosts, 5 s at 64; a freeze after the fleet stages is named too, by the smoke's heartbeats).
  s.signalAfter = scaled(std::max(500ms, std::chrono::milliseconds(500 * hosts / 16)));
  s.expectHosts = {s.signalHost};
  return s;
}

[[maybe_unused]] Scenario killed(int hosts) {
  Scenario s = frozen(hosts);
  s.name = "killed_sigkill";
  s.signal = Signal::kKill;
  return s;
}

// dsdiag's test hook DSDIAG_TEST_FAULT=<freeze|exit>@<stage> on the victim's ranks.
[[maybe_unused]] Scenario atStage(int hosts, const std::string& what, const std::string& stage) {
  Scenario s = healthy(hosts);
  s.name = what + "@" + stage;
  int v = victim(hosts);
  s.hostEnv[v] = {{"DSDIAG_TEST_FAULT", what + "@" + stage}};
  s.expectHosts = {v};
  return s;
}

[[maybe_unused]] Scenario ifname(int hosts) {
  Scenario s = healthy(hosts);
  s.name = "ifname";
  int v = victim(hosts);
  s.faults = {{"ifname", std::to_string(v), "ens5"}};
  s.env = {{"NCCL_SOCKET_IFNAME", "eth0"}};
  s.expectHosts = {v};
  return s;
}

// Jumbo frames on every host and port, but one host's switch port at 1500: its connections open and
// its large transfers stall.
[[maybe_unused]] Scenario mtuSwitch(int hosts) {
  Scenario s = healthy(hosts);
  s.name = "mtu_switch_port";
  int v = victim(hosts);
  s.setupOptions = {"--mtu", "9000"};
  s.faults = {{"mtu", std::to_string(v), "1500", "--switch"}};
  s.expectHosts = {v};
  return s;
}

// A black hole: the fleet at 1500 and one host's switch port at 1400, so that its connections open and
// its large frames (both ways) vanish (fleet.sh drops them with an nftables rule on the port: the port's
// MTU alone lets GSO packets through). MtuSwitchPort is the other geometry (a 9000 fleet, one port at
// 1500). The host's rank cannot read the leaders' records from the store at join, says why, and exits.
[[maybe_unused]] Scenario mtuBlackHole(int hosts, int v) {
  Scenario s = healthy(hosts);
  s.name = "mtu_black_hole";
  s.faults = {{"mtu", std::to_string(v), "1400", "--switch"}};
  s.expectHosts = {v};
  return s;
}

// One host's eth0 at 1400 in a 1500 fleet: TCP adapts (MSS), the mismatch is named.
[[maybe_unused]] Scenario mtuHost(int hosts) {
  Scenario s = healthy(hosts);
  s.name = "mtu_host";
  int v = victim(hosts);
  s.faults = {{"mtu", std::to_string(v), "1400"}};
  s.expectHosts = {v};
  return s;
}

[[maybe_unused]] Scenario loss(int hosts) {
  Scenario s = healthy(hosts);
  s.name = "loss";
  int v = victim(hosts);
  s.faults = {{"loss", std::to_string(v), "20"}};
  s.expectHosts = {v};
  return s;
}

// 20 ms more each way on one host (fleet.sh: NFQUEUE and ds_fleet_delay): its latency to every peer.
[[maybe_unused]] Scenario delayed(int hosts) {
  Scenario s = healthy(hosts);
  s.name = "delay";
  int v = victim(hosts);
  s.faults = {{"delay", std::to_string(v), "20"}};
  s.expectHosts = {v};
  return s;
}

[[maybe_unused]] Scenario cpuStarved(int hosts) {
  Scenario s = healthy(hosts);
  s.name = "cpu_starved";
  int v = victim(hosts);
  s.faults = {{"cpu", std::to_string(v), "5"}};
  s.expectHosts = {v};
  return s;
}

// Three faults at once: a slow NIC, a host cut from three peers, a frozen rank.
[[maybe_unused]] Scenario several(int hosts) {
  Scenario s = healthy(hosts);
  s.name = "several";
  int a = victim(hosts), b = victim(hosts, 1), c = victim(hosts, 2);
  s.faults = {{"slow", std::to_string(a), "30mbit"}, {"cut", std::to_string(b), "1,2,3", "out"}};
  s.signalHost = c;
  s.signal = Signal::kStop;
  // As frozen(): after the victim joined. With the default 500 ms at 64 hosts the rank was stopped
  // before it joined ("rank 54 never joined", no host to name; this test's failure in issue 41).
  s.signalAfter = frozen(hosts).signalAfter;
  s.expectHosts = {a, b, c};
  return s;
}

}  // namespace

#if !DS_FLEET_LONG
// The smoke suite: 16 hosts, a healthy fleet and four single faults.
TEST(FleetSmoke, HealthyFleetNamesNobody) { runScenario(healthy(hostCount(16))); }
TEST(FleetSmoke, SlowNicIsNamed) { runScenario(slowNic(hostCount(16))); }
TEST(FleetSmoke, HostThatCannotReachThreePeersIsNamed) { runScenario(cut(hostCount(16), "out")); }
TEST(FleetSmoke, FrozenRankIsNamed) { runScenario(frozen(hostCount(16))); }
#else
// The long suite: 64 hosts (DS_FLEET_HOSTS changes it), every fault, several at once.
TEST(Fleet, Healthy) { runScenario(healthy(hostCount(64))); }
TEST(Fleet, SlowNic) { runScenario(slowNic(hostCount(64))); }
TEST(Fleet, CutOneWay) { runScenario(cut(hostCount(64), "out")); }
TEST(Fleet, CutBothWays) { runScenario(cut(hostCount(64), "both")); }
TEST(Fleet, CutByBlackholeRoute) { runScenario(cut(hostCount(64), "route")); }
TEST(Fleet, CutLink) { runScenario(cutLink(hostCount(64))); }
TEST(Fleet, MtuSwitchPort) { runScenario(mtuSwitch(hostCount(64))); }
TEST(Fleet, MtuHost) { runScenario(mtuHost(hostCount(64))); }
TEST(Fleet, MtuBlackHole) { runScenario(mtuBlackHole(hostCount(64), victim(hostCount(64)))); }
// The geometry of issue 41 (host 3 of 16).
TEST(Fleet, MtuBlackHoleHost3Of16) { runScenario(mtuBlackHole(16, 3)); }
TEST(Fleet, Ifname) { runScenario(ifname(hostCount(64))); }
TEST(Fleet, PacketLoss) { runScenario(loss(hostCount(64))); }
TEST(Fleet, Delay) { runScenario(delayed(hostCount(64))); }
TEST(Fleet, CpuStarved) { runScenario(cpuStarved(hostCount(64))); }
TEST(Fleet, FrozenBySigstop) { runScenario(frozen(hostCount(64))); }
TEST(Fleet, KilledBySigkill) { runScenario(killed(hostCount(64))); }
TEST(Fleet, SeveralFaultsAtOnce) { runScenario(several(hostCount(64))); }
TEST(Fleet, FourRanksPerHostSlowNic) {
  Scenario s = slowNic(hostCount(64) / 4);
  s.name = "slow_nic_4_per_host";
  s.ranksPerHost = 4;
  runScenario(s);
}

// A rank frozen or exiting at each stage, through dsdiag's DSDIAG_TEST_FAULT hook.
class FleetStage : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};
TEST_P(FleetStage, RankIsNamed) {
  runScenario(atStage(hostCount(64), std::get<0>(GetParam()), std::get<1>(GetParam())));
}
INSTANTIATE_TEST_SUITE_P(Stages, FleetStage,
                         ::testing::Combine(::testing::Values("freeze", "exit"),
                                            ::testing::Values("join", "local_checks", "reachability", "links",
                                                              "confirm", "bisect", "report", "process_group",
                                                              "smoke")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });
#endif

#if !DS_FLEET_LONG
// The bed itself (fleet.sh): what it makes, what each fault does, what it refuses, what it cleans.
namespace {

RunResult script(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"bash", DS_FLEET_SCRIPT};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, cleanOptions(60s));
}

std::set<std::string> namespacesStartingWith(const std::string& prefix) {
  std::set<std::string> out;
  std::istringstream in(run({"ip", "netns", "list"}, cleanOptions(10s)).out);
  for (std::string line; std::getline(in, line);) {
    auto name = line.substr(0, line.find(' '));
    if (name.rfind(prefix, 0) == 0) out.insert(name);
  }
  return out;
}

// A TCP connect from host `from` to `to`:5000 within 1.5 s: "ok" or the error.
std::string connect(const FleetHosts& f, int from, int to) {
  auto r = run(
      f.on(
          from,
          {"python3", "-c",
           "import socket,sys\ntry:\n socket.create_connection((sys.argv[1],5000),timeout=1.5); print('ok')\n"
           "except Exception as e: print(type(e).__name__)",
           f.addr(to)}),
      cleanOptions(20s));
  return r.out.substr(0, r.out.find('\n'));
}

}  // namespace

TEST(FleetBed, BadUsageIsRefusedWithASentence) {
  auto r = script({"setup", "fbx", "1"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("host count '1' must be a number from 2 to 250"), std::string::npos) << r.err;
  r = script({"fault", "fbnosuch", "slow", "1"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("no fleet named 'fbnosuch'"), std::string::npos) << r.err;
  r = script({"frobnicate"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("unknown command 'frobnicate'"), std::string::npos) << r.err;
}

TEST(FleetBed, HostsAreMadeAndEverythingIsRemoved) {
  std::string name;
  {
    FleetHosts f(DS_FLEET_SCRIPT, "b", 4, kNet);
    if (f.skipped()) GTEST_SKIP() << "no network namespaces here: " << f.why();
    ASSERT_TRUE(f.ok()) << f.why();
    name = f.name();
    EXPECT_EQ(namespacesStartingWith(name).size(), 5u) << "four hosts and the switch";
    auto r = run(f.on(2, {"sh", "-c", "hostname; ip -br addr show eth0"}), cleanOptions(20s));
    EXPECT_EQ(r.out.substr(0, r.out.find('\n')), "fleet02") << r.out << r.err;
    EXPECT_NE(r.out.find(f.addr(2) + "/24"), std::string::npos) << r.out;
    EXPECT_EQ(f.hostIndex("fleet03"), 3);
    EXPECT_EQ(f.hostIndex("fleet04"), -1);
    // A process left running on a host does not keep the fleet alive.
    Process sleeper(f.on(1, {"sleep", "300"}), cleanOptions(300s));
    std::this_thread::sleep_for(300ms);
    auto bad = f.fault({"cut", "1", "1", "out"});
    EXPECT_EQ(bad.exitCode, 2);
    EXPECT_NE(bad.err.find("host 1 cannot be cut from itself"), std::string::npos) << bad.err;
    bad = f.fault({"slow", "9"});
    EXPECT_NE(bad.err.find("host '9' is not in fleet"), std::string::npos) << bad.err;
  }
  EXPECT_TRUE(namespacesStartingWith(name).empty());
  EXPECT_FALSE(std::filesystem::exists("/run/dsfleet/" + name));
}

TEST(FleetBed, FaultsDoWhatTheySay) {
  FleetHosts f(DS_FLEET_SCRIPT, "b", 4, kNet);
  if (f.skipped()) GTEST_SKIP() << "no network namespaces here: " << f.why();
  ASSERT_TRUE(f.ok()) << f.why();
  std::vector<std::unique_ptr<Process>> listeners;
  for (int h = 0; h < 4; ++h) {
    listeners.push_back(
        std::make_unique<Process>(f.on(h, {"python3", "-c",
                                           "import socket,time\ns=socket.socket(); s.bind(('0.0.0.0',5000)); "
                                           "s.listen(64); time.sleep(60)"}),
                                  cleanOptions(90s)));
  }
  std::this_thread::sleep_for(700ms);
  ASSERT_EQ(connect(f, 1, 2), "ok");
  ASSERT_EQ(f.fault({"cut", "1", "2", "out"}).exitCode, 0);
  EXPECT_EQ(connect(f, 1, 2), "TimeoutError") << "host 1 cannot open connections to host 2";
  EXPECT_EQ(connect(f, 2, 1), "ok") << "one direction only";
  ASSERT_EQ(f.fault({"cut", "3", "0", "reject"}).exitCode, 0);
  EXPECT_EQ(connect(f, 3, 0), "ConnectionRefusedError");
  ASSERT_EQ(f.fault({"cut", "0", "2", "route"}).exitCode, 0);
  EXPECT_NE(connect(f, 2, 0), "ok") << "a blackhole route on host 0 breaks TCP both ways";
  EXPECT_EQ(connect(f, 3, 2), "ok") << "innocent pairs still talk";

  ASSERT_EQ(f.fault({"slow", "2", "20mbit"}).exitCode, 0);
  auto tc = run(f.on(2, {"tc", "qdisc", "show", "dev", "eth0"}), cleanOptions(10s));
  EXPECT_NE(tc.out.find("tbf"), std::string::npos) << tc.out;
  ASSERT_EQ(f.fault({"ifname", "3", "ens5"}).exitCode, 0);
  auto link = run(f.on(3, {"ip", "-br", "addr"}), cleanOptions(10s));
  EXPECT_NE(link.out.find("ens5"), std::string::npos) << link.out;
  EXPECT_NE(link.out.find(f.addr(3)), std::string::npos) << "the address moves with the name: " << link.out;
  ASSERT_EQ(f.fault({"mtu", "1", "1400"}).exitCode, 0);
  auto mtu = run(f.on(1, {"ip", "link", "show", "eth0"}), cleanOptions(10s));
  EXPECT_NE(mtu.out.find("mtu 1400"), std::string::npos) << mtu.out;
  ASSERT_EQ(f.fault({"loss", "1", "30"}).exitCode, 0);

  auto cpu = f.fault({"cpu", "2", "10"});
  if (cpu.exitCode == 5) {
    std::cout << "no cpu cgroup here: " << cpu.err;
  } else {
    ASSERT_EQ(cpu.exitCode, 0) << cpu.err;
    // A process started on host 2 afterwards is in the quota's cgroup.
    auto cg = run(f.on(2, {"cat", "/proc/self/cgroup"}), cleanOptions(10s));
    EXPECT_NE(cg.out.find("dsfleet/" + f.name() + "/h2"), std::string::npos) << cg.out;
    // ... and sees its limit, as on a real host (ip netns exec's fresh sysfs hides /sys/fs/cgroup;
    // fleet.sh mounts the cpu hierarchy again).
    auto seen = run(f.on(2, {binDir() + "/dsdiag", "--only", "system.cpu_quota"}), cleanOptions(20s));
    EXPECT_NE(seen.out.find("cgroup CPU limit 0.1 CPU"), std::string::npos) << seen.out << seen.err;
    auto other = run(f.on(0, {binDir() + "/dsdiag", "--only", "system.cpu_quota"}), cleanOptions(20s));
    EXPECT_NE(other.out.find("No cgroup CPU limit"), std::string::npos) << other.out << other.err;
  }
}

// No sch_netem here: ds_fleet_delay holds the host's packets behind iptables' NFQUEUE.
TEST(FleetBed, DelayIsAddedThroughAUserspaceQueue) {
  FleetHosts f(DS_FLEET_SCRIPT, "b", 3, kNet);
  if (f.skipped()) GTEST_SKIP() << "no network namespaces here: " << f.why();
  ASSERT_TRUE(f.ok()) << f.why();
  auto delay = f.fault({"delay", "1", "30"});
  if (delay.exitCode == 5) GTEST_SKIP() << "delay cannot be made here: " << delay.err;
  ASSERT_EQ(delay.exitCode, 0) << delay.err;
  EXPECT_EQ(f.fault({"delay", "1", "0"}).exitCode, 2);
  // The time of a TCP handshake (one round trip) from host 0 to host 1 and to host 2.
  auto rtt = [&](int to) {
    Process l(
        f.on(
            to,
            {"python3", "-c",
             "import socket,time\ns=socket.socket(); s.bind(('0.0.0.0',5000)); s.listen(8); time.sleep(20)"}),
        cleanOptions(30s));
    std::this_thread::sleep_for(500ms);
    auto r = run(
        f.on(
            0,
            {"python3", "-c",
             "import socket,sys,time\nt=time.time(); socket.create_connection((sys.argv[1],5000),timeout=3)\n"
             "print(int((time.time()-t)*1000))",
             f.addr(to)}),
        cleanOptions(20s));
    return std::atoi(r.out.c_str());
  };
  int slow = rtt(1), fast = rtt(2);
  EXPECT_GE(slow, 55) << "30 ms each way on host 1";
  EXPECT_LT(fast, 25) << "host 2 is not delayed";
}

TEST(FleetBed, FleetOfAGoneOwnerIsSweptAtTheNextSetup) {
  // An owner that has exited: the fleet of a killed test.
  Process gone({"true"}, cleanOptions(10s));
  pid_t dead = gone.pid();
  gone.wait();
  std::string stale = fmt::format("fbstale{}", getpid() % 100000);
  auto r = script({"setup", stale, "2", "--net", std::to_string(kNet), "--owner", std::to_string(dead)});
  if (r.exitCode == 4) GTEST_SKIP() << "no network namespaces here: " << r.err;
  ASSERT_EQ(r.exitCode, 0) << r.err;
  ASSERT_EQ(namespacesStartingWith(stale).size(), 3u);
  FleetHosts f(DS_FLEET_SCRIPT, "b", 2, kNet);
  ASSERT_TRUE(f.ok()) << f.why();
  EXPECT_TRUE(namespacesStartingWith(stale).empty()) << "the stale fleet was swept";
  script({"teardown", stale});
}
#endif
