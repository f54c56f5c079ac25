#include "reports/history/tests/history_fixtures.h"

#include <fmt/format.h>

#include "reports/history/sqlite_db.h"
#include "reports/json_io.h"

namespace ds::report::history::testing {

std::int64_t countRows(const std::string& db, const std::string& sql) {
  Database d(db, Database::Mode::kExisting, 5000);
  return d.queryInt(sql);
}

std::string isoTime(int hours) {
  int day = 1 + hours / 24;
  // Days past January run into later months well enough for ordering: only lexical order matters.
  int month = 1 + (day - 1) / 28;
  day = 1 + (day - 1) % 28;
  return fmt::format("2026-{:02d}-{:02d}T{:02d}:00:00Z", month, day, hours % 24);
}

SweepRun makeSweep(const SweepSpec& spec) {
  SweepRun run;
  run.args.minBytes = spec.sizes.front();
  run.args.maxBytes = spec.sizes.back();
  run.args.stepFactor = 2;
  run.args.iters = 20;
  run.args.warmupIters = 5;
  run.args.check = 1;
  run.args.ops = {"sum"};
  run.args.dtypes = {"f32"};
  run.args.collectives = spec.collectives;
  run.args.backends = {spec.backend};
  run.metadata.commandLine = "dsbench coll -b 1M -e 256M";
  run.metadata.hosts = spec.hosts;
  if (!spec.gpuName.empty()) {
    for (const auto& h : spec.hosts) {
      hw::HostHardware hw;
      hw.host = h;
      hw.cpuModel = "Test CPU";
      hw.gpuName = spec.gpuName;
      hw.gpus = 8;
      hw.nics = {{"ib0", "infiniband", "15b3:1021", 400, true}};
      run.metadata.hardware.push_back(hw);
    }
  }
  run.metadata.worldSize = spec.worldSize;
  run.metadata.launcher = "dsrun";
  run.metadata.versions = {{"dsperf", "0.1.0"}, {"git_sha", "abc1234"}};
  run.metadata.startTime = spec.startTime;
  run.metadata.endTime = spec.startTime;
  run.metadata.label = spec.label;
  for (const auto& coll : spec.collectives) {
    for (std::size_t bytes : spec.sizes) {
      SweepMeasurement m;
      m.backend = spec.backend;
      m.collective = coll;
      m.dtype = "f32";
      m.op = "sum";
      m.worldSize = spec.worldSize;
      m.requestedBytes = m.bytes = bytes;
      m.count = bytes / 4;
      m.busFactor = 2.0 * (spec.worldSize - 1) / spec.worldSize;
      for (PlaceResult* p : {&m.outOfPlace, &m.inPlace}) {
        p->measured = true;
        p->iters = 20;
        p->busBw = p == &m.outOfPlace ? spec.busBw : 0.9 * spec.busBw;
        p->algBw = p->busBw / m.busFactor;
        p->timeUs = static_cast<double>(bytes) / (p->algBw * 1e3);
        p->wrong = 0;
        p->iter = computeIterStats({p->timeUs, p->timeUs * 1.01, p->timeUs * 0.99});
        p->slowestRank = 1;
        p->spreadPct = 1.5;
      }
      run.results.push_back(m);
    }
  }
  run.summary = summarize(run.results);
  return run;
}

std::string writeSweep(const std::string& path, const SweepSpec& spec) {
  writeJsonAtomic(path, sweepToJson(makeSweep(spec)));
  return path;
}

std::string writeTrain(const std::string& path, const TrainSpec& spec) {
  std::vector<TrainRunRecord> runs;
  for (double cap : spec.bucketCapsMb) {
    TrainRunRecord r;
    r.model = "mlp:1024x4";
    r.params = 4 * 1024 * 1024;
    r.worldSize = 2;
    r.backend = spec.backend;
    r.device = "cpu";
    r.perRankBatch = 32;
    r.steps = 20;
    r.warmup = 3;
    r.optimizer = "sgd";
    r.bucketCapMb = cap;
    r.commHook = "none";
    r.buckets = 3;
    r.stepMs = summarize(std::vector<double>{spec.stepMs * 0.98, spec.stepMs, spec.stepMs * 1.02});
    r.forwardMs = summarize(std::vector<double>{spec.stepMs * 0.3});
    r.samplesPerSec = 64 / (spec.stepMs / 1000.0);
    r.lossStart = 2.0;
    r.lossEnd = 1.0;
    runs.push_back(r);
  }
  nlohmann::json meta{{"command_line", "dsbench train"},
                      {"hosts", {"node-a"}},
                      {"start_time", spec.startTime},
                      {"end_time", spec.startTime},
                      {"versions", {{"dsperf", "0.1.0"}}}};
  if (!spec.label.empty()) meta["label"] = spec.label;
  writeJsonAtomic(path, trainToJson(runs, meta));
  return path;
}

DiagReport makeFleetDiag(const std::vector<std::string>& hosts, const std::string& slowHost,
                         double bandwidth) {
  DiagReport d;
  d.mode = "world";
  d.host = hosts.empty() ? "" : hosts.front();
  d.worldSize = static_cast<int>(hosts.size());
  d.toolVersion = "0.2.0";
  FleetReport f;
  const int n = static_cast<int>(hosts.size());
  f.input.worldSize = n;
  for (int i = 0; i < n; ++i) {
    FleetRank k;
    k.rank = i;
    k.host = hosts[static_cast<std::size_t>(i)];
    k.joined = k.reported = true;
    f.input.ranks.push_back(k);
    HostVerdict v;
    v.host = k.host;
    v.ranks = {i};
    v.state = k.host == slowHost ? HostState::kSuspect : HostState::kHealthy;
    f.judgement.hosts.push_back(v);
  }
  auto pair = [&](int a, int b, int round) {
    PairResult p;
    p.a = std::min(a, b);
    p.b = std::max(a, b);
    p.round = round;
    p.latencyUs = 40;
    p.bandwidthGBps = bandwidth;
    if (hosts[static_cast<std::size_t>(a)] == slowHost || hosts[static_cast<std::size_t>(b)] == slowHost)
      p.bandwidthGBps = bandwidth / 10;
    if (p.a == 0 && p.b == 1) {
      p.outcome = PairOutcome::kFailed;
      p.bandwidthGBps = 0;
      p.latencyUs = 0;
      p.error = "connection refused";
    }
    f.input.pairs.push_back(p);
  };
  for (int i = 0; i < n; ++i) pair(i, (i + 1) % n, 0);
  for (int i = 0; i < n; ++i) pair(i, (i + 2) % n, 1);
  f.judgement.medianBandwidthGBps = bandwidth;
  f.judgement.medianLatencyUs = 40;
  f.stats.rounds = 2;
  f.stats.pairs = 2 * n;
  d.fleet = f;
  return d;
}

std::string writeFleetDiag(const std::string& path, const std::vector<std::string>& hosts,
                           const std::string& slowHost) {
  writeJsonAtomic(path, diagToJson(makeFleetDiag(hosts, slowHost)));
  return path;
}

CheckReport makeCheck(const std::string& time, const std::vector<std::pair<std::string, CheckState>>& hosts) {
  CheckReport c;
  c.time = time;
  c.baselineId = "b0123456789abcdef";
  c.k = 1;
  c.n = 1;
  c.runIds = {"00112233445566ff"};
  for (const auto& [host, state] : hosts) {
    HostCheck h;
    h.host = host;
    h.sku = "cpu=Test CPU;gpu=8xH100;nic=1x400G infiniband";
    h.state = state;
    CheckFinding f;
    f.rule = "allreduce_1g_variance";
    f.kind = "variance";
    f.pattern = "busbw allreduce nccl f32 sum 1073741824 out w8";
    f.metric = "busbw";
    f.bytes = std::size_t{1} << 30;
    f.unit = "GB/s";
    f.expected = 24;
    f.threshold = 22.8;
    f.runs = 1;
    f.passed = state != CheckState::kUnhealthy && state != CheckState::kCannotJudge;
    f.measured = f.passed ? 24.1 : 12.0;
    f.failedRuns = state == CheckState::kUnhealthy ? 1 : 0;
    f.text = f.passed ? "busbw 24.1 GB/s at 1 GiB, expected >= 22.8 GB/s"
                      : "busbw 12 GB/s at 1 GiB, expected >= 22.8 GB/s";
    if (state == CheckState::kCannotJudge) {
      f.cannotJudge = true;
      f.threshold = 12;
      f.spread = 4;
      f.runsNeeded = 5;
      f.text = "busbw 12 GB/s at 1 GiB: cannot judge: 4 x the spread reaches past half the baseline";
    }
    if (state != CheckState::kNoBaseline && state != CheckState::kNoResult) h.findings.push_back(f);
    h.summary = state == CheckState::kHealthy     ? "Healthy"
                : state == CheckState::kUnhealthy ? "ERROR: allreduce_1g_variance: expected 22.8, measured 12"
                : state == CheckState::kNoResult  ? "ERROR: No results reported"
                : state == CheckState::kCannotJudge ? "CANNOT JUDGE: allreduce_1g_variance: " + f.text
                                                    : "No baseline yet";
    c.hosts.push_back(h);
  }
  return c;
}

std::string writeCheck(const std::string& path, const CheckReport& check) {
  writeJsonAtomic(path, checkToJson(check));
  return path;
}

}  // namespace ds::report::history::testing
