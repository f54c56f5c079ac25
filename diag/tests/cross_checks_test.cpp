// The cross-rank checks on crafted per-rank reports.
#include <gtest/gtest.h>

#include "diag/world/cross_checks.h"

using namespace ds::diag;
using ds::report::DiagRecord;
using ds::report::DiagStatus;

namespace {

DiagRecord rec(const std::string& id, Json data) {
  DiagRecord r;
  r.id = id;
  r.family = id.substr(0, id.find('.'));
  r.data = std::move(data);
  return r;
}

RankReport rank(int r, const std::string& host, int localRank, const std::string& gpu = "", const std::string& nccl = "2.28.9",
                Json settings = Json::object()) {
  RankReport rep{r, host, "0.1.0", {}, "gloo", ""};
  rep.records.push_back(rec("env.world_info", {{"rank", r}, {"world_size", 2}, {"local_rank", localRank}}));
  rep.records.push_back(rec("system.host_identity", {{"hostname", host}, {"boot_id", "boot-" + host}}));
  rep.records.push_back(rec("nccl.version", {{"runtime", nccl}}));
  rep.records.push_back(rec("nccl.env", {{"settings", settings}}));
  if (!gpu.empty()) rep.records.push_back(rec("gpu.local_rank_device", {{"device", {{"bus_id", gpu}, {"uuid", ""}}}}));
  return rep;
}

const DiagRecord& find(const std::vector<DiagRecord>& v, const std::string& id) {
  for (const auto& r : v) {
    if (r.id == id) return r;
  }
  throw std::runtime_error("missing " + id);
}
// A reference into a temporary vector dangles at the end of the statement (ASan caught one).
const DiagRecord& find(std::vector<DiagRecord>&&, const std::string&) = delete;

}  // namespace

TEST(CrossChecks, HealthyWorldPasses) {
  auto out = crossRankChecks({rank(0, "a", 0, "0000:01:00.0"), rank(1, "a", 1, "0000:02:00.0")}, 2);
  for (const auto& r : out) EXPECT_NE(r.status, DiagStatus::kFail) << r.id << ": " << r.message;
  EXPECT_EQ(find(out, "world.gpu_unique").status, DiagStatus::kPass);
}

TEST(CrossChecks, DuplicateGpuDetectedNamesTheRanks) {
  auto out = crossRankChecks({rank(0, "a", 0, "0000:01:00.0"), rank(1, "a", 1, "0000:01:00.0")}, 2);
  const auto& g = find(out, "world.gpu_unique");
  EXPECT_EQ(g.status, DiagStatus::kFail);
  EXPECT_NE(g.message.find("Duplicate GPU detected: ranks 0-1 share GPU 0000:01:00.0"), std::string::npos) << g.message;
  // The same bus id on two different hosts is fine.
  out = crossRankChecks({rank(0, "a", 0, "0000:01:00.0"), rank(1, "b", 0, "0000:01:00.0")}, 2);
  EXPECT_EQ(find(out, "world.gpu_unique").status, DiagStatus::kPass);
}

TEST(CrossChecks, DuplicateGpuNamesTheBusIdBesideTheUuid) {
  std::vector<RankReport> reps{rank(0, "a", 0, "0000:19:00.0"), rank(1, "a", 0, "0000:19:00.0")};
  for (auto& rep : reps) rep.records.back().data["device"]["uuid"] = "GPU-8c4f2a51";
  const auto out = crossRankChecks(reps, 2);  // find() returns a reference into it
  const auto& g = find(out, "world.gpu_unique");
  EXPECT_EQ(g.status, DiagStatus::kFail);
  EXPECT_NE(g.message.find("ranks 0-1 share GPU 0000:19:00.0 (GPU-8c4f2a51)"), std::string::npos) << g.message;
}

TEST(CrossChecks, LocalRankClashAndMissingRank) {
  auto out = crossRankChecks({rank(0, "a", 0), rank(1, "a", 0)}, 3);
  EXPECT_EQ(find(out, "world.local_rank_unique").status, DiagStatus::kFail);
  const auto& u = find(out, "world.ranks_unique");
  EXPECT_EQ(u.status, DiagStatus::kFail);
  EXPECT_NE(u.message.find("rank(s) 2 missing"), std::string::npos) << u.message;
}

TEST(CrossChecks, VersionAndSettingDifferences) {
  auto out = crossRankChecks({rank(0, "a", 0, "", "2.28.9", {{"NCCL_IB_HCA", "mlx5"}}),
                              rank(1, "b", 0, "", "2.21.5", Json::object())},
                             2);
  const auto& v = find(out, "world.versions_equal");
  EXPECT_EQ(v.status, DiagStatus::kFail);
  EXPECT_NE(v.message.find("2.21.5 on rank(s) 1"), std::string::npos) << v.message;
  const auto& s = find(out, "world.nccl_settings_equal");
  EXPECT_EQ(s.status, DiagStatus::kWarn);
  EXPECT_NE(s.message.find("NCCL_IB_HCA"), std::string::npos);
}

TEST(CrossChecks, SameHostnameDifferentMachinesWarns) {
  auto a = rank(0, "node", 0), b = rank(1, "node", 0);
  b.records[1].data["boot_id"] = "other-boot";
  auto out = crossRankChecks({a, b}, 2);
  EXPECT_EQ(find(out, "world.hostnames").status, DiagStatus::kWarn);
  // Told apart by boot id, the two "node"s do not clash on LOCAL_RANK 0.
  EXPECT_EQ(find(out, "world.local_rank_unique").status, DiagStatus::kPass);
}

// The link stage's judgement moved to diag/fleet/localise (its tests: diag/fleet/tests).

TEST(ClockSkew, LargeOffsetWarnsNamingTheRank) {
  EXPECT_EQ(judgeClockSkew({{1, 0.4, 0.1}}).status, DiagStatus::kPass);
  EXPECT_NE(judgeClockSkew({{3, 0.0, 0.1}}).message.find("(rank 3)"), std::string::npos);
  auto f = judgeClockSkew({{1, 0.4, 0.1}, {2, -4500, 0.2}});
  EXPECT_EQ(f.status, DiagStatus::kWarn);
  EXPECT_NE(f.message.find("Rank 2"), std::string::npos);
}

namespace {
RankReport bound(int r, const std::string& host, std::vector<int> cpus, int online = 4) {
  RankReport rep = rank(r, host, r);
  rep.records.push_back(rec("system.cpu_affinity", {{"cpus", cpus}, {"online", online}}));
  return rep;
}
}  // namespace

TEST(CrossChecks, BoundRanksSharingACoreOnOneHostWarn) {
  auto out = crossRankChecks({bound(0, "a", {0}), bound(1, "a", {0})}, 2);  // taskset -c 0 for both
  const auto& c = find(out, "world.cores_disjoint");
  EXPECT_EQ(c.status, DiagStatus::kWarn);
  EXPECT_NE(c.message.find("ranks 0-1 share CPU 0 on host a"), std::string::npos) << c.message;
  EXPECT_EQ(c.message.find("boot-a"), std::string::npos) << c.message;  // the hostname, not the host key
  EXPECT_NE(c.remedy.find("--bind-to none"), std::string::npos);
  // Distinct cores, unbound ranks, or the same core on two hosts: no warning.
  out = crossRankChecks({bound(0, "a", {0}), bound(1, "a", {1})}, 2);
  EXPECT_EQ(find(out, "world.cores_disjoint").status, DiagStatus::kPass);
  out = crossRankChecks({bound(0, "a", {0, 1, 2, 3}), bound(1, "a", {0, 1, 2, 3})}, 2);
  EXPECT_EQ(find(out, "world.cores_disjoint").status, DiagStatus::kPass);
  out = crossRankChecks({bound(0, "a", {0}), bound(1, "b", {0})}, 2);
  EXPECT_EQ(find(out, "world.cores_disjoint").status, DiagStatus::kPass);
  out = crossRankChecks({rank(0, "a", 0), rank(1, "a", 1)}, 2);
  EXPECT_EQ(find(out, "world.cores_disjoint").status, DiagStatus::kSkip);
}
