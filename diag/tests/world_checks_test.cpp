// The world-check table and the checks that judge the steps of world mode (join, gather, fleet,
// smoke allreduce, clock exchange), on crafted facts.
#include "diag/world/transport.h"
#include "diag/world/world_checks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

using namespace ds::diag;
using ds::report::DiagRecord;
using ds::report::DiagStatus;

namespace {

// A fleet of `n` ranks, one per host h0..h{n-1}, all healthy; `absent` never joined.
ds::report::FleetReport fleetOf(int n, std::set<int> absent = {}) {
  ds::report::FleetReport fr;
  fr.input.worldSize = n;
  for (int r = 0; r < n; ++r) {
    ds::report::FleetRank fr0;
    fr0.rank = r;
    fr0.host = "h" + std::to_string(r);
    fr0.joined = !absent.count(r);
    fr.input.ranks.push_back(fr0);
    ds::report::HostVerdict h;
    h.host = fr0.host;
    h.ranks = {r};
    fr.judgement.hosts.push_back(h);
  }
  return fr;
}

// Facts about a run of `n` ranks on the fleet `fr`.
WorldFacts factsOn(const ds::report::FleetReport& fr, int n) {
  WorldFacts f;
  f.worldSize = n;
  f.fleet = &fr;
  return f;
}

std::vector<std::string> ids(const std::vector<DiagRecord>& v) {
  std::vector<std::string> out;
  for (const auto& r : v) out.push_back(r.id);
  return out;
}

}  // namespace

TEST(WorldChecks, EveryRowHasAFunction) {
  for (const auto& c : worldChecks()) {
    EXPECT_NE(c.judge, nullptr) << c.id;
    EXPECT_EQ(std::string(c.id).rfind("world.", 0), 0u) << c.id;
  }
}

// Findings come out step by step (WorldStep's order), not in --list order: the report's order.
TEST(WorldChecks, FindingsComeOutStepByStep) {
  auto fr = fleetOf(2);
  auto f = factsOn(fr, 2);
  f.processGroupSkipped = "not selected";
  auto out = runWorldChecks(f, Selection{});
  EXPECT_EQ(ids(out), (std::vector<std::string>{
                          "world.rendezvous", "world.gather", "world.ranks_unique", "world.local_rank_unique",
                          "world.gpu_unique", "world.versions_equal", "world.nccl_settings_equal",
                          "world.cores_disjoint", "world.hostnames", "world.reachability",
                          "world.link_matrix", "world.hosts", "world.smoke_allreduce", "world.clock_skew"}));
  for (const auto& r : out) {
    EXPECT_EQ(r.family, "world");
    EXPECT_EQ(r.rank, -1);
  }
}

TEST(WorldChecks, ProcessGroupStepsAreSkippedWithTheReason) {
  auto fr = fleetOf(2);
  auto f = factsOn(fr, 2);
  f.processGroupSkipped = "the fleet has suspects or ranks without a result";
  Selection sel;
  sel.only = {"world.smoke_allreduce", "world.clock_skew"};
  auto out = runWorldChecks(f, sel);
  ASSERT_EQ(out.size(), 2u);
  for (const auto& r : out) {
    EXPECT_EQ(r.status, DiagStatus::kSkip) << r.id;
    EXPECT_EQ(r.message,
              "Not run: the fleet has suspects or ranks without a result (the backend's full-mesh connect "
              "would hang on them; see world.hosts)");
  }
}

TEST(WorldChecks, SelectionLeavesRowsOut) {
  auto fr = fleetOf(1);
  auto f = factsOn(fr, 1);
  Selection sel;
  sel.skip = {"world.hosts", "world.clock_skew"};
  auto got = ids(runWorldChecks(f, sel));
  EXPECT_EQ(std::count(got.begin(), got.end(), "world.hosts"), 0);
  EXPECT_EQ(std::count(got.begin(), got.end(), "world.clock_skew"), 0);
  EXPECT_EQ(std::count(got.begin(), got.end(), "world.smoke_allreduce"), 1);
}

TEST(WorldChecks, RendezvousAndGatherNameTheirOwnRanks) {
  auto fr = fleetOf(4, {3});
  auto f = factsOn(fr, 4);
  f.joinSeconds = 2;
  f.timeout = std::chrono::milliseconds(1500);
  f.missing = {2, 3};  // 3 never joined; 2 joined but sent no local report
  auto r = world::rendezvous(f);
  EXPECT_EQ(r.status, DiagStatus::kFail);
  EXPECT_NE(r.message.find("Rank(s) 3 never joined the store within 2 s (3 of 4 joined)"), std::string::npos)
      << r.message;
  auto g = world::gather(f);
  EXPECT_EQ(g.status, DiagStatus::kFail);
  EXPECT_NE(g.message.find("Rank(s) 2 joined but never reported their local checks within 1500 ms"),
            std::string::npos)
      << g.message;
  f.missing = {3};
  EXPECT_EQ(world::gather(f).message, "All 3 joined rank(s) reported");
}

TEST(WorldChecks, SmokeAllreduceNamesTheBackendAndTheBadRanks) {
  WorldFacts f;
  f.jobBackend = f.transport = "gloo";
  f.smoke.expected = 3;
  f.smoke.timeUs = 41.6;
  auto ok = world::smokeAllreduce(f);
  EXPECT_EQ(ok.status, DiagStatus::kPass);
  EXPECT_EQ(ok.message, "allreduce(sum) of 1024 floats on gloo: 3 on every rank as expected, 42 us");
  f.jobBackend = "nccl";
  f.transportWhy = "rank 2: LOCAL_RANK 2 has no GPU of its own (2 visible; CUDA_VISIBLE_DEVICES decides)";
  f.smoke.errors = {"rank 1: got 2"};
  f.smoke.silent = {2, 3};
  auto bad = world::smokeAllreduce(f);
  EXPECT_EQ(bad.status, DiagStatus::kFail);
  EXPECT_NE(bad.message.find("on gloo (not on the job's nccl: rank 2: LOCAL_RANK 2 has no GPU of its own (2 "
                             "visible; CUDA_VISIBLE_DEVICES decides); run `dsbench world --backend nccl`"),
            std::string::npos)
      << bad.message;
  EXPECT_NE(bad.message.find("rank 1: got 2; rank(s) 2-3 sent no result"), std::string::npos) << bad.message;
}

TEST(WorldChecks, ClockExchangeErrorFails) {
  WorldFacts f;
  f.clock.error = "recv from rank 1 timed out";
  auto c = world::clockSkew(f);
  EXPECT_EQ(c.status, DiagStatus::kFail);
  EXPECT_EQ(c.message, "Clock exchange failed: recv from rank 1 timed out");
  f.clock = {{{1, 0.2, 0.1}}, "", ""};
  EXPECT_EQ(world::clockSkew(f).status, DiagStatus::kPass);
  // After a smoke that broke the group the exchange does not run: a skip that says so, not "one rank".
  f.clock = {{}, "", "the smoke allreduce left the process group unusable (world.smoke_allreduce says why)"};
  auto notRun = world::clockSkew(f);
  EXPECT_EQ(notRun.status, DiagStatus::kSkip);
  EXPECT_EQ(notRun.message,
            "Not run: the smoke allreduce left the process group unusable (world.smoke_allreduce says why)");
}

TEST(WorldChecks, FleetChecksReadTheJudgement) {
  auto fr = fleetOf(2);
  auto f = factsOn(fr, 2);
  EXPECT_EQ(world::hosts(f).message, "All 2 host(s) healthy");
  EXPECT_EQ(world::linkMatrix(f).status, DiagStatus::kSkip);
  EXPECT_EQ(world::reachability(f).message, "One host: no peer to probe");
  fr.judgement.hosts[1].state = ds::report::HostState::kSuspect;
  fr.judgement.hosts[1].evidence.push_back({"unreachable", "reach", "h0 cannot reach h1 on eth0", {0}, 0, 0});
  auto h = world::hosts(f);
  EXPECT_EQ(h.status, DiagStatus::kFail);
  EXPECT_NE(
      h.message.find("1 suspect(s), 0 host(s) with no result of 2: h1 (suspect): h0 cannot reach h1 on eth0"),
      std::string::npos)
      << h.message;
  auto r = world::reachability(f);
  EXPECT_EQ(r.status, DiagStatus::kFail);
  EXPECT_EQ(r.message, "h0 cannot reach h1 on eth0");
}

// Which backend the smoke allreduce runs on: the job's where every rank can run it.
TEST(WorldTransport, EachRankSaysWhetherItCanRunTheJobsBackend) {
  const std::vector<std::string> withNccl{"nccl", "gloo", "mpi", "shm"}, cpuOnly{"gloo", "mpi", "shm"};
  EXPECT_EQ(localTransport("nccl", withNccl, "").backend, "nccl");
  EXPECT_EQ(localTransport("nccl", withNccl, "").why, "");
  auto noGpu = localTransport("nccl", withNccl, "no usable CUDA device on this rank");
  EXPECT_EQ(noGpu.backend, "gloo");
  EXPECT_EQ(noGpu.why, "no usable CUDA device on this rank");
  auto unbuilt = localTransport("nccl", cpuOnly, "");
  EXPECT_EQ(unbuilt.backend, "gloo");
  EXPECT_EQ(unbuilt.why, "this dsdiag was built without the nccl backend");
  EXPECT_EQ(localTransport("shm", cpuOnly, "").backend, "shm");
  EXPECT_EQ(localTransport("mpi", {"gloo", "shm"}, "").backend, "gloo");
  EXPECT_EQ(localTransport("gloo", {"mpi", "shm"}, "").backend, "mpi");  // a build without gloo
}

TEST(WorldTransport, RankZeroPicksTheJobsBackendOnlyWhenEveryRankCan) {
  const std::vector<std::string> avail{"nccl", "gloo", "shm"};
  auto gpu = [](int r, const std::string& bus, const std::string& transport, const std::string& why = "") {
    RankReport rep{r, "node1", "0.1.0", {}, transport, why};
    DiagRecord d;
    d.id = "gpu.local_rank_device";
    d.rank = r;
    d.host = "node1";
    d.data = {{"device", {{"bus_id", bus}}}};
    rep.records.push_back(d);
    return rep;
  };
  auto all = agreedTransport("nccl", avail, {gpu(0, "0000:01:00.0", "nccl"), gpu(1, "0000:02:00.0", "nccl")});
  EXPECT_EQ(all.backend, "nccl");
  EXPECT_EQ(all.why, "");
  auto one = agreedTransport("nccl", avail,
                             {gpu(0, "0000:01:00.0", "nccl"), gpu(1, "", "gloo", "no usable CUDA device on this rank")});
  EXPECT_EQ(one.backend, "gloo");
  EXPECT_EQ(one.why, "rank 1: no usable CUDA device on this rank");
  // Two ranks on one GPU: NCCL would refuse them, so the smoke does not try.
  auto dup = agreedTransport("nccl", avail, {gpu(0, "0000:01:00.0", "nccl"), gpu(1, "0000:01:00.0", "nccl")});
  EXPECT_EQ(dup.backend, "gloo");
  EXPECT_NE(dup.why.find("Duplicate GPU detected: ranks 0-1 share GPU 0000:01:00.0"), std::string::npos) << dup.why;
  // A rank of an older dsdiag names no transport.
  auto old = agreedTransport("gloo", avail, {gpu(0, "", "gloo"), gpu(1, "", "")});
  EXPECT_EQ(old.backend, "gloo");
  EXPECT_EQ(old.why, "rank 1: its dsdiag named no backend (an older version?)");
  EXPECT_EQ(agreedTransport("shm", avail, {gpu(0, "", "shm"), gpu(1, "", "shm")}).backend, "shm");
}
