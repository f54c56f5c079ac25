#include "reports/export/tests/export_fixtures.h"

#include <fmt/format.h>
#include <unistd.h>

#include "engine/testing/paths.h"
#include "reports/diag/fleet_schema.h"
#include "reports/json_io.h"

namespace ds::report::testfix {

using ds::testing::RunResult;

SweepMeasurement row(const std::string& collective, std::size_t bytes, double busBw, int worldSize) {
  SweepMeasurement m;
  m.backend = "gloo";
  m.collective = collective;
  m.dtype = "f32";
  m.op = collective == "allgather" ? "none" : "sum";
  m.worldSize = worldSize;
  m.requestedBytes = m.bytes = bytes;
  m.count = bytes / 4;
  m.busFactor = 1;
  m.outOfPlace.measured = true;
  m.outOfPlace.iters = 3;
  m.outOfPlace.timeUs = static_cast<double>(bytes) / (busBw * 1e3);
  m.outOfPlace.algBw = busBw;
  m.outOfPlace.busBw = busBw;
  m.outOfPlace.wrong = 0;
  m.outOfPlace.iter = computeIterStats({4, 5, 6});
  return m;
}

SweepRun sweep(const std::vector<std::string>& hosts, const std::string& start,
               std::vector<SweepMeasurement> rows, const std::string& label) {
  SweepRun s;
  s.metadata.hosts = hosts;
  s.metadata.worldSize = rows.empty() ? 1 : rows.front().worldSize;
  for (std::size_t i = 0; i < hosts.size(); ++i)
    s.metadata.ranks.push_back(SweepRank{static_cast<int>(i), 0, static_cast<int>(i), hosts[i], 42, "cpu"});
  s.metadata.startTime = start;
  s.metadata.endTime = start;
  s.metadata.label = label;
  s.metadata.versions = {{"dsperf", "0.2.0"}, {"gloo", "0.0.0"}};
  s.args.collectives = {"allreduce"};
  s.args.backends = {"gloo"};
  s.results = std::move(rows);
  s.summary = summarize(s.results);
  return s;
}

DiagReport fleetDiag(const std::vector<std::string>& hosts, double gbps, double slowGbps) {
  DiagReport d;
  d.mode = "world";
  d.worldSize = static_cast<int>(hosts.size());
  d.host = hosts.front();
  d.toolVersion = "0.2.0";
  FleetReport f;
  f.input.worldSize = d.worldSize;
  const int last = d.worldSize - 1;
  for (int r = 0; r < d.worldSize; ++r) {
    FleetRank fr;
    fr.rank = r;
    fr.host = hosts[r];
    fr.joined = fr.reported = true;
    fr.lastStage = "done";
    f.input.ranks.push_back(fr);
    for (int p = r + 1; p < d.worldSize; ++p) {
      PairResult pr;
      pr.a = r;
      pr.b = p;
      pr.latencyUs = 20;
      pr.bandwidthGBps = p == last ? slowGbps : gbps;
      f.input.pairs.push_back(pr);
    }
  }
  for (int r = 0; r < d.worldSize; ++r) {
    HostVerdict v;
    v.host = hosts[r];
    v.ranks = {r};
    if (r == last) {
      v.state = HostState::kSuspect;
      v.evidence.push_back(Evidence{
          "link_slow",
          "links",
          fmt::format("bandwidth with {} (rank 0) {} GB/s, fleet median {} GB/s", hosts[0], slowGbps, gbps),
          {0},
          slowGbps,
          gbps});
    }
    f.judgement.hosts.push_back(v);
  }
  f.judgement.medianBandwidthGBps = gbps;
  d.fleet = f;
  DiagRecord rec{"world.hosts",
                 "world",
                 DiagStatus::kFail,
                 "1 host suspect",
                 "exclude it",
                 nlohmann::json::object(),
                 -1,
                 ""};
  d.checks.push_back(rec);
  return d;
}

DiagReport localDiag() {
  DiagReport d;
  d.mode = "local";
  d.host = kHostileHost;
  d.toolVersion = "0.2.0";
  auto rec = [&](const char* id, const char* family, DiagStatus st, std::string msg, std::string remedy,
                 nlohmann::json data = nlohmann::json::object()) {
    d.checks.push_back(
        DiagRecord{id, family, st, std::move(msg), std::move(remedy), std::move(data), 0, kHostileHost});
  };
  rec("net.master_port_free", "net", DiagStatus::kPass, "port 29500 is free", "");
  rec("system.shm_size", "system", DiagStatus::kWarn, "/dev/shm is 64 MiB", "mount a larger /dev/shm",
      {{"bytes", 67108864}});
  rec("nccl.version", "nccl", DiagStatus::kFail, "libnccl <missing> & \"broken\"\n]]> end", "install NCCL");
  rec("gpu.libcuda", "gpu", DiagStatus::kSkip, "no GPU on this host", "");
  rec("env.rank_range", "env", DiagStatus::kFail, "The check itself failed: stoi", "report it",
      {{"check_error", true}});
  rec("env.hostile", "env", DiagStatus::kWarn, "host " + kHostileHost, "rename " + kHostileHost);
  return d;
}

CheckReport checkReport() {
  CheckReport r;
  r.time = "2026-12-02T03:00:00.250Z";
  r.baselineId = "b1";
  r.k = 2;
  r.n = 3;
  r.runIds = {"r1", "r2", "r3"};
  auto finding = [](const char* rule, const char* kind, double measured, double expected, bool passed,
                    int failed) {
    CheckFinding f;
    f.rule = rule;
    f.kind = kind;
    f.pattern = "busbw allreduce nccl f32 sum 1073741824 out w16";
    f.metric = "busbw";
    f.bytes = 1073741824;
    f.unit = "GB/s";
    f.measured = measured;
    f.expected = expected;
    f.threshold = expected * 0.95;
    f.failedRuns = failed;
    f.runs = 3;
    f.passed = passed;
    f.text = fmt::format("busbw {} GB/s at 1 GiB, expected >= {} GB/s", measured, expected * 0.95);
    return f;
  };
  HostCheck healthy{"node01",
                    "sku-a",
                    CheckState::kHealthy,
                    {finding("allreduce_1g_variance", "variance", 24, 24, true, 1)},
                    "Healthy"};
  HostCheck bad{"node02",
                "sku-a",
                CheckState::kUnhealthy,
                {finding("allreduce_1g_variance", "variance", 12, 24, false, 3),
                 finding("allreduce_1g_floor", "floor", 12, 11, true, 0)},
                "ERROR: allreduce_1g_variance: expected 22.8, measured 12"};
  HostCheck fresh{"node03", "sku-new", CheckState::kNoBaseline, {}, "No baseline yet"};
  HostCheck silent{"node04", "sku-a", CheckState::kNoResult, {}, "ERROR: No results reported"};
  // The figure: within the capped limit of a noisy baseline, so neither healthy nor unhealthy.
  CheckFinding blindFinding = finding("allreduce_1g_variance", "variance", 3.822, 7.084, false, 0);
  blindFinding.cannotJudge = true;
  blindFinding.threshold = 3.542;
  blindFinding.spread = 1.015;
  blindFinding.runsNeeded = 3;
  blindFinding.runs = 1;
  blindFinding.text =
      "busbw 3.822 GB/s at 1 GiB: cannot judge: the baseline 7.084 GB/s has a run-to-run spread of "
      "1.015 GB/s, and 4 x that reaches past half the baseline";
  HostCheck noisy{"node05",
                  "sku-a",
                  CheckState::kCannotJudge,
                  {blindFinding},
                  "CANNOT JUDGE: allreduce_1g_variance: " + blindFinding.text};
  HostCheck hostile{
      kHostileHost, "sku-a", CheckState::kUnhealthy, {}, "ERROR: \"<script>\" & more\nsecond line"};
  r.hosts = {healthy, bad, fresh, silent, noisy, hostile};
  return r;
}

std::string writeDoc(const ds::testing::TempDir& dir, const std::string& name, const nlohmann::json& doc) {
  const std::string path = dir.file(name);
  writeJsonAtomic(path, doc);
  return path;
}

namespace {

std::string found(std::initializer_list<const char*> paths) {
  for (const char* p : paths)
    if (::access(p, X_OK) == 0) return p;
  return "";
}

}  // namespace

std::string xmllint() { return found({"/usr/bin/xmllint", "/usr/local/bin/xmllint"}); }
std::string promtool() { return found({"/usr/bin/promtool", "/usr/local/bin/promtool"}); }

std::string prometheusPython() {
  for (const char* py : {"/usr/bin/python3", "python3"}) {
    auto r =
        ds::testing::run({py, "-c", "import prometheus_client.parser, prometheus_client.openmetrics.parser"},
                         ds::testing::cleanOptions(std::chrono::seconds(30)));
    if (r.exitCode == 0) return py;
  }
  return "";
}

RunResult validateJunit(const std::string& file) {
  return ds::testing::run({xmllint(), "--noout", "--schema", std::string(DS_EXPORT_DIR) + "/junit.xsd", file},
                          ds::testing::cleanOptions(std::chrono::seconds(30)));
}

std::string xpath(const std::string& file, const std::string& expr) {
  auto r = ds::testing::run({xmllint(), "--xpath", expr, file},
                            ds::testing::cleanOptions(std::chrono::seconds(30)));
  if (r.exitCode != 0) return "<xmllint --xpath failed: " + r.err + ">";
  if (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();  // xmllint ends its answer with one
  return r.out;
}

}  // namespace ds::report::testfix
