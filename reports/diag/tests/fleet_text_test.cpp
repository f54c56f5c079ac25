// Fleet mode's text, host lists and exclude file: what an operator reads and feeds to Slurm or
// DeepSpeed. Host lists are checked by hand-written cases and by expanding them again with
// engine/env's Slurm hostlist expansion.
#include "reports/diag/fleet_text.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <set>

#include "engine/common/error.h"
#include "engine/env/slurm.h"
#include "engine/testing/paths.h"
#include "engine/testing/subprocess.h"
#include "reports/diag/diag_text.h"
#include "reports/diag/hostlist.h"
#include "reports/input_file.h"
#include "reports/json_io.h"

using namespace ds::report;

namespace {

FleetReport fixture() {
  const std::string path = std::string(DS_REPORTS_TEST_DATA) + "/fleet16.json";
  return fleetFromJson(readJson(path), path);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::set<std::string> expanded(const std::string& list) {
  auto v = ds::env::expandNodelist(list, "test");
  return {v.begin(), v.end()};
}

FleetReport bigFleet(int n, std::vector<int> suspects) {
  FleetReport r;
  r.input.worldSize = n;
  for (int i = 0; i < n; ++i) {
    HostVerdict h{fmt::format("gpu{:04d}", i + 1), {i}, HostState::kHealthy, {}, "ib0"};
    if (std::find(suspects.begin(), suspects.end(), i) != suspects.end()) {
      h.state = HostState::kSuspect;
      h.evidence = {{"link_slow",
                     "links",
                     fmt::format("bandwidth with gpu0001 (rank 0) 0.01 GB/s, rank {}", i),
                     {0},
                     0.01,
                     2}};
    }
    r.judgement.hosts.push_back(h);
  }
  r.judgement.jobSocketIfname = "ib0";
  return r;
}

}  // namespace

TEST(Hostlist, HandWrittenCases) {
  EXPECT_EQ(slurmHostlist({"node18", "node03", "node17"}), "node[03,17-18]");
  EXPECT_EQ(slurmHostlist({"node08", "node09", "node10"}), "node[08-10]");
  EXPECT_EQ(slurmHostlist({"node9", "node10", "node11"}), "node[9-11]");
  EXPECT_EQ(slurmHostlist({"node098", "node099", "node100"}), "node[098-100]");
  EXPECT_EQ(slurmHostlist({"node1", "node01"}), "node[1,01]");
  EXPECT_EQ(slurmHostlist({"gpu2", "login", "gpu1", "cpu7", "gpu2"}), "cpu7,gpu[1-2],login");
  EXPECT_EQ(slurmHostlist({"node07"}), "node07");
  EXPECT_EQ(slurmHostlist({"rack1-n01", "rack1-n02", "rack2-n01"}), "rack1-n[01-02],rack2-n01");
  EXPECT_EQ(slurmHostlist({"10", "11", "13"}), "[10-11,13]");
  EXPECT_EQ(slurmHostlist({"a.example.com", "b"}), "a.example.com,b");
  EXPECT_EQ(slurmHostlist({}), "");
  EXPECT_THROW(slurmHostlist({"node1,node2"}), ds::ConfigError);
  EXPECT_THROW(slurmHostlist({"node[1]"}), ds::ConfigError);
  EXPECT_THROW(slurmHostlist({""}), ds::ConfigError);
  EXPECT_EQ(deepspeedExclude({"node14", "node07", "node07"}), "node07@node14");
  EXPECT_EQ(deepspeedExclude({}), "");
}

TEST(Hostlist, RandomSetsExpandBackToTheSameHosts) {
  std::mt19937 rng(26);
  const std::vector<std::string> prefixes{"node", "gpu-", "rack1-n", "x", ""};
  for (int trial = 0; trial < 300; ++trial) {
    std::set<std::string> hosts;
    int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const std::string& p = prefixes[rng() % prefixes.size()];
      int width = static_cast<int>(rng() % 4);  // 0: no padding
      int value = static_cast<int>(rng() % 120);
      hosts.insert(width == 0 ? p + std::to_string(value) : fmt::format("{}{:0{}}", p, value, width));
      if (rng() % 10 == 0) hosts.insert(p.empty() ? "login" : p + "head");
    }
    std::string list = slurmHostlist({hosts.begin(), hosts.end()});
    EXPECT_EQ(expanded(list), hosts) << list;
  }
  // A fleet of 1000 with a few bad hosts: one short line.
  std::vector<std::string> big;
  for (int i = 1; i <= 1000; ++i) big.push_back(fmt::format("gpu{:04d}", i));
  EXPECT_EQ(slurmHostlist(big), "gpu[0001-1000]");
  EXPECT_EQ(slurmHostlist({"gpu0017", "gpu0018", "gpu0999", "gpu0003"}), "gpu[0003,0017-0018,0999]");
}

TEST(FleetText, FixtureNamesTheSuspectsWithEvidenceAndTheExcludeLines) {
  std::string t = formatFleetText(fixture());
  EXPECT_TRUE(
      has(t, "Fleet: 16 host(s), 16 rank(s): 14 healthy, 2 suspect, 0 with no result; 1 suspect link(s)."))
      << t;
  EXPECT_TRUE(has(t, "  SUSPECT  node07 (rank 6)\n")) << t;
  EXPECT_TRUE(has(t, "fleet median 1.885 GB/s [link_slow, links]")) << t;
  EXPECT_TRUE(has(t, "      ... and ")) << "node07 has more evidence than shown by default:\n" << t;
  EXPECT_TRUE(has(t, "  SUSPECT  node14 (rank 13)\n      - node14 (rank 13) sent no heartbeat for 7.2 s"))
      << t;
  EXPECT_TRUE(
      has(t, "node03 (rank 2) <-> node11 (rank 10)\n      - node03 (rank 2) cannot open a TCP connection"))
      << t;
  EXPECT_TRUE(has(t, "Healthy: 14 host(s)")) << t;
  EXPECT_FALSE(has(t, "node01")) << "healthy hosts are listed only with --verbose:\n" << t;
  EXPECT_TRUE(has(t, "NCCL_SOCKET_IFNAME=eth0 GLOO_SOCKET_IFNAME=eth0 for the whole job")) << t;
  EXPECT_TRUE(has(t, "Link tests: 7 round(s), 53 pair(s) (1 failed, 1 timed out, 3 skipped)")) << t;
  EXPECT_TRUE(has(t, "median 1.885 GB/s (MAD 0.066)")) << t;
  EXPECT_TRUE(has(t, "Time on rank 0: join 0.41 s, local_checks 1.12 s, reachability 2.31 s, links 14.60 s"))
      << t;
  EXPECT_TRUE(has(t, "Exclude (Slurm hostlist, for srun/sbatch --exclude): node[07,14]\n")) << t;
  EXPECT_TRUE(has(t, "Exclude (DeepSpeed launcher, deepspeed --exclude): node07@node14\n")) << t;
  EXPECT_TRUE(has(t, "(exit 2)")) << t;
  EXPECT_EQ(t.find('\033'), std::string::npos) << "no colour unless asked";
  // Suspects come before the healthy count, and the order of the sections holds.
  EXPECT_LT(t.find("node07"), t.find("Healthy:"));
  EXPECT_LT(t.find("Suspect links"), t.find("Exclude"));

  std::string v = formatFleetText(fixture(), {false, true});
  EXPECT_TRUE(has(v, "Healthy hosts:\n  healthy  node01 (rank 0)\n")) << v;
  EXPECT_FALSE(has(v, "... and ")) << "--verbose shows every sentence";
  std::string c = formatFleetText(fixture(), {true, false});
  EXPECT_TRUE(has(c, "\033[1;31mSUSPECT\033[0m")) << c;
}

TEST(FleetText, AThousandHostsKeepTheSuspectsOnOneScreen) {
  FleetReport r = bigFleet(1000, {16, 502});
  std::string t = formatFleetText(r);
  EXPECT_LT(std::count(t.begin(), t.end(), '\n'), 20) << t;
  EXPECT_TRUE(has(t, "SUSPECT  gpu0017 (rank 16)")) << t;
  EXPECT_TRUE(has(t, "Exclude (Slurm hostlist, for srun/sbatch --exclude): gpu[0017,0503]")) << t;
  std::string v = formatFleetText(r, {false, true});
  EXPECT_GT(std::count(v.begin(), v.end(), '\n'), 1000);
}

TEST(FleetText, InterfacesPerHostWhenNoneServesTheWholeJobAndAHealthyFleet) {
  FleetReport r = bigFleet(6, {});
  r.judgement.jobSocketIfname = "";
  r.judgement.hosts[4].ncclSocketIfname = "eth1";
  r.judgement.hosts[5].ncclSocketIfname = "";
  std::string t = formatFleetText(r);
  EXPECT_TRUE(has(t, "set it per host:\n")) << t;
  EXPECT_TRUE(has(t, "  NCCL_SOCKET_IFNAME=ib0 GLOO_SOCKET_IFNAME=ib0 on gpu[0001-0004]\n")) << t;
  EXPECT_TRUE(has(t, "  NCCL_SOCKET_IFNAME=eth1 GLOO_SOCKET_IFNAME=eth1 on gpu0005\n")) << t;
  EXPECT_TRUE(has(t, "  leave unset on gpu0006")) << t;
  EXPECT_TRUE(has(t, "Exclude: nothing to exclude.")) << t;
  EXPECT_TRUE(has(t, "every host healthy (exit 0)")) << t;
  r.judgement.hosts[2].state = HostState::kNoResult;
  r.judgement.hosts[2].evidence = {
      {"no_result", "join", "gpu0003 (rank 2) never joined within 60 s", {}, 60, 0}};
  t = formatFleetText(r);
  EXPECT_TRUE(
      has(t, "Hosts with no result:\n  NO RESULT  gpu0003 (rank 2)\n      - gpu0003 (rank 2) never joined"))
      << t;
  EXPECT_TRUE(has(t, "--exclude): gpu0003\n")) << t;
}

TEST(FleetText, DiagTextPrintsTheFleetAfterTheChecksAndExitsTwo) {
  DiagReport d;
  d.mode = "world";
  d.worldSize = 16;
  d.host = "node01";
  DiagRecord rec;
  rec.id = "net.x";
  rec.family = "net";
  rec.message = "fine";
  d.checks = {rec};
  d.fleet = fixture();
  std::string t = formatDiagText(d);
  ASSERT_TRUE(has(t, "Suspect hosts:")) << t;
  EXPECT_LT(t.find("net.x"), t.find("Suspect hosts:"));
  EXPECT_LT(t.find("Suspect hosts:"), t.find("Summary:"));
  EXPECT_TRUE(has(t, "-> FAIL (exit 2)")) << t;
}

TEST(ExcludeFile, OneHostlistLineOrAnEmptyFileWrittenAtomically) {
  ds::testing::TempDir dir;
  const std::string path = dir.file("exclude.txt");
  writeExcludeFile(path, fixture().judgement);
  EXPECT_EQ(readInputFile(path), "node[07,14]\n");
  EXPECT_EQ(expanded("node[07,14]"), (std::set<std::string>{"node07", "node14"}));
  FleetJudgement healthy = fixture().judgement;
  for (auto& h : healthy.hosts) h.state = HostState::kHealthy;
  healthy.links.clear();
  writeExcludeFile(path, healthy);  // replaces the old one
  EXPECT_EQ(std::filesystem::file_size(path), 0u);
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1) << "no temp file left behind";
  try {
    writeExcludeFile(dir.file("no/such/dir/exclude.txt"), fixture().judgement);
    ADD_FAILURE() << "wrote into a missing folder";
  } catch (const ds::IoError& e) {
    EXPECT_TRUE(has(e.what(), "no/such/dir/exclude.txt")) << e.what();
  }
}
